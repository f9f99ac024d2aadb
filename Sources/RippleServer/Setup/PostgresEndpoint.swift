#if Sync
import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// A PostgreSQL server as a `postgres://user[:password]@host[:port]/database[?sslmode=…]` URL
/// names it, the way libpq reads such a URL: the connection pool's configuration, and one
/// connection's, for ``probe(timeout:logger:)`` to say at once why Postgres cannot be used.
///
/// `sslmode` is `disable` (the default: plain TCP), `prefer` (TLS when the server offers it),
/// `require` (TLS, the server's certificate not checked, as libpq's `require`), `verify-ca` (its
/// certificate checked against the trusted roots) or `verify-full` (and its host name);
/// `sslrootcert=FILE` names the roots (a PEM file: a managed service's CA bundle), otherwise the
/// system's are used. A password is taken from the URL only (not `PGPASSWORD`, not `.pgpass`).
public struct PostgresEndpoint: Sendable {
    /// The server's host name or address.
    public let host: String
    /// Its port (5432 when the URL names none).
    public let port: Int
    /// The role to log in as.
    public let username: String
    /// The role's password, if the URL gives one.
    public let password: String?
    /// The database (`nil`: the role's own name, as Postgres takes it).
    public let database: String?
    /// The URL's `sslmode` (`disable` when it names none).
    public let sslMode: String
    private let tls: TLSConfiguration?

    /// The modes of `sslmode` taken.
    public static let sslModes = ["disable", "prefer", "require", "verify-ca", "verify-full"]

    /// The server `url` names.
    ///
    /// - Throws: ``SyncServerError`` when the URL is not one, or names an `sslmode` not taken, or
    ///   an `sslrootcert` file that cannot be read.
    public init(url: String) throws {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
              let host = components.host, !host.isEmpty, let user = components.user else {
            throw SyncServerError("\(url.redactingPassword) is not a postgres://user[:password]@host[:port]/database URL")
        }
        let parameters = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let mode = parameters["sslmode"] ?? "disable"
        guard Self.sslModes.contains(mode) else {
            throw SyncServerError("sslmode=\(mode) is not one of \(Self.sslModes.joined(separator: ", "))")
        }
        let unknown = parameters.keys.filter { !["sslmode", "sslrootcert"].contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw SyncServerError("the Postgres URL's parameter \(unknown.joined(separator: ", ")) is not taken (sslmode and sslrootcert are)")
        }
        var tls: TLSConfiguration?
        if mode != "disable" {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = switch mode {
            case "verify-full": .fullVerification
            case "verify-ca": .noHostnameVerification
            default: .none
            }
            if let file = parameters["sslrootcert"] {
                do {
                    configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
                } catch {
                    throw SyncServerError("sslrootcert \(file) cannot be read as PEM certificates: \(error)")
                }
            }
            tls = configuration
        }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user
        self.password = components.password
        let database = String(components.path.drop(while: { $0 == "/" }))
        self.database = database.isEmpty ? nil : database
        self.sslMode = mode
        self.tls = tls
    }

    /// The connection pool's configuration (what the node and the commands run).
    public var clientConfiguration: PostgresClient.Configuration {
        let mode: PostgresClient.Configuration.TLS = switch (sslMode, tls) {
        case ("prefer", let tls?): .prefer(tls)
        case (_, let tls?): .require(tls)
        default: .disable
        }
        return PostgresClient.Configuration(host: host, port: port, username: username, password: password,
                                            database: database, tls: mode)
    }

    /// Opens one connection, asks `SELECT 1` and closes it, within `timeout`.
    ///
    /// - Throws: ``PostgresEndpointError``, in plain words: Postgres refused (a wrong password,
    ///   a database that does not exist — with Postgres's own message and SQLSTATE), or could not
    ///   be reached (nothing listens, TLS refused, no answer in time).
    public func probe(timeout: Duration = .seconds(10), logger: Logger = Logger(label: "ripple.postgres")) async throws {
        let connectionTLS: PostgresConnection.Configuration.TLS
        do {
            connectionTLS = switch (sslMode, tls) {
            case ("prefer", let tls?): .prefer(try NIOSSLContext(configuration: tls))
            case (_, let tls?): .require(try NIOSSLContext(configuration: tls))
            default: .disable
            }
        } catch {
            throw PostgresEndpointError(endpoint: self, reason: .unreachable("its TLS cannot be set up: \(error)"))
        }
        var configuration = PostgresConnection.Configuration(host: host, port: port, username: username, password: password,
                                                             database: database, tls: connectionTLS)
        configuration.options.connectTimeout = TimeAmount.nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000
                                                                      + timeout.components.attoseconds / 1_000_000_000)
        var quiet = logger
        quiet.logLevel = .critical
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: quiet)
            defer { Task { try? await connection.close() } }
            _ = try await connection.query("SELECT 1", logger: quiet).get()
        } catch {
            throw PostgresEndpointError(endpoint: self, error)
        }
    }

    /// ``probe(timeout:logger:)`` until it succeeds: a refusal throws at once; a server that
    /// does not answer is tried again every second (a warning each time: a node started beside
    /// its database waits for it) for `patience`, then throws.
    public func reach(patience: Duration = .seconds(60), logger: Logger) async throws {
        let deadline = ContinuousClock.now + patience
        while true {
            do {
                return try await probe(logger: logger)
            } catch let error as PostgresEndpointError where !error.isRefusal && ContinuousClock.now + .seconds(1) < deadline {
                logger.warning("\(error); trying again in 1 s")
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// `host:port` as the messages say it.
    var address: String { "\(host):\(port)" }
}

/// Why a Postgres server cannot be used, in plain words (see ``PostgresEndpoint/probe(timeout:logger:)``).
public struct PostgresEndpointError: Error, CustomStringConvertible {
    /// Refused, or not reached.
    public enum Reason: Sendable {
        /// Postgres answered and refused: its message and SQLSTATE (`28P01`: a wrong password).
        case refused(message: String, sqlState: String)
        /// Nothing answered as Postgres: why.
        case unreachable(String)
    }

    /// Why.
    public let reason: Reason
    private let user: String
    private let address: String

    init(endpoint: PostgresEndpoint, reason: Reason) {
        (self.reason, user, address) = (reason, endpoint.username, endpoint.address)
    }

    init(endpoint: PostgresEndpoint, _ error: any Error) {
        if let error = error as? PSQLError, let message = error.serverInfo?[.message] {
            self.init(endpoint: endpoint, reason: .refused(message: message, sqlState: error.serverInfo?[.sqlState] ?? "?"))
        } else if let error = error as? PSQLError {
            let why: String = switch error.code {
            case .sslUnsupported: "it does not offer TLS, which sslmode asks for (sslmode=disable or prefer connects without)"
            case .authMechanismRequiresPassword: "it asks for a password, and the URL gives none (postgres://USER:PASSWORD@HOST/DB)"
            default: error.underlying.map { "\($0)" } ?? "\(error.code)"
            }
            self.init(endpoint: endpoint, reason: .unreachable(why))
        } else {
            self.init(endpoint: endpoint, reason: .unreachable("\(error)"))
        }
    }

    /// Whether Postgres answered and refused (trying again will not help), rather than not
    /// answering (it may be starting).
    public var isRefusal: Bool {
        if case .refused = reason { return true }
        return false
    }

    /// The reason in plain words, with what to check.
    public var description: String {
        switch reason {
        case .refused(let message, let sqlState):
            let hint = switch sqlState {
            case "28P01", "28000": " (check the user and password in the URL: postgres://USER:PASSWORD@HOST/DB; PGPASSWORD and .pgpass are not read)"
            case "3D000": " (the URL's path names the database)"
            default: ""
            }
            return "Postgres at \(address) refused \(user): \(message) (SQLSTATE \(sqlState))\(hint)"
        case .unreachable(let why):
            return "cannot reach Postgres at \(address): \(why)"
        }
    }
}

extension String {
    /// A URL with its password (if any) shown as `***`, for messages.
    var redactingPassword: String {
        guard var components = URLComponents(string: self), components.password != nil else { return self }
        components.password = "***"
        return components.string ?? self
    }
}
#endif
