#if Sync
import Foundation
import PostgresNIO
import RippleServer
import RippleSyncTesting
import RippleTesting
import Testing

/// The node's Postgres URL, read as libpq reads it (`sslmode`, `sslrootcert`), and what it says
/// when Postgres cannot be used: Postgres's own refusal at once (a wrong password, a missing
/// database), or that nothing answers — never the connection pool's minute of silence followed
/// by "circuit breaker tripped".
@Suite(.timeLimit(.minutes(3)))
struct PostgresEndpointTests {
    @Test func aURLIsReadAsLibpqReadsItAndBadOnesAreRefusedWithoutTheirPassword() throws {
        let plain = try PostgresEndpoint(url: "postgres://node:s3cret@db.internal:6543/app")
        #expect((plain.host, plain.port, plain.username, plain.password, plain.database, plain.sslMode)
                == ("db.internal", 6543, "node", "s3cret", "app", "disable"))
        let defaults = try PostgresEndpoint(url: "postgresql://node@db.internal?sslmode=verify-full")
        #expect((defaults.port, defaults.password, defaults.database, defaults.sslMode) == (5432, nil, nil, "verify-full"))
        for mode in PostgresEndpoint.sslModes {
            #expect(try PostgresEndpoint(url: "postgres://node@db/app?sslmode=\(mode)").sslMode == mode)
        }
        #expect(throws: SyncServerError.self) { try PostgresEndpoint(url: "postgres://node@db/app?sslmode=always") }
        #expect(throws: SyncServerError.self) { try PostgresEndpoint(url: "postgres://node@db/app?ssl=true") }
        #expect(throws: SyncServerError.self) { try PostgresEndpoint(url: "postgres://node@db/app?sslmode=require&sslrootcert=/nonexistent.pem") }
        do {
            _ = try PostgresEndpoint(url: "mysql://node:s3cret@db/app")
            Issue.record("a mysql:// URL was taken")
        } catch {
            #expect(!"\(error)".contains("s3cret"), "the message shows the password: \(error)")
        }
    }

    @Test func postgresRefusingTheUserOrNotAnsweringIsSaidAtOnce() async throws {
        try await withThrowawayPostgres { postgres in
            try await PostgresEndpoint(url: postgres.nodeURL).probe()
            try await PostgresEndpoint(url: postgres.nodeURL + "?sslmode=prefer").probe()
            // A database that does not exist: Postgres's refusal, with its SQLSTATE.
            let missing = postgres.nodeURL.replacingOccurrences(of: "/postgres", with: "/nosuchdb")
            await #expect {
                try await PostgresEndpoint(url: missing).probe()
            } throws: { error in
                guard let error = error as? PostgresEndpointError, error.isRefusal else { return false }
                return "\(error)".contains("database \"nosuchdb\" does not exist") && "\(error)".contains("3D000")
            }
            // TLS asked of a server that offers none.
            await #expect {
                try await PostgresEndpoint(url: postgres.nodeURL + "?sslmode=require").probe()
            } throws: { error in
                guard let error = error as? PostgresEndpointError, !error.isRefusal else { return false }
                return "\(error)".contains("does not offer TLS")
            }
        }
        // Nothing listens.
        let closed = try closedPort()
        let started = ContinuousClock.now
        await #expect {
            try await PostgresEndpoint(url: "postgres://node@127.0.0.1:\(closed)/app").probe()
        } throws: { error in
            guard let error = error as? PostgresEndpointError, !error.isRefusal else { return false }
            return "\(error)".hasPrefix("cannot reach Postgres at 127.0.0.1:\(closed)")
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    /// `check` and `serve` say Postgres's refusal within seconds and exit 1 (the pool alone
    /// said "connectionCreationCircuitBreakerTripped" after about 70 s).
    @Test func theCommandsSayPostgresRefusalAtOnce() async throws {
        let executable = try #require(NodeDescriptorTests.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            let directory = try TemporaryDirectory()
            try NodeLifecycleTests.rules.write(toFile: directory.path("rules.json"), atomically: true, encoding: .utf8)
            try "a test secret of at least thirty-two bytes, for the node".write(toFile: directory.path("secret"), atomically: true, encoding: .utf8)
            let missing = postgres.nodeURL.replacingOccurrences(of: "/postgres", with: "/nosuchdb")
            let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RIPPLE_") }
            for arguments in [["check", "--postgres", missing, "--tables", "items"],
                              ["serve", "--postgres", missing, "--tables", "items", "--rules", directory.path("rules.json"),
                               "--replica", directory.path("replica.sqlite"), "--port", "0",
                               "--secret-file", directory.path("secret")]] {
                let started = ContinuousClock.now
                let (process, output) = try launchServer(executable, arguments, directory: directory, environment: environment)
                let printed = try await onOwnThread("ripple-server \(arguments[0])") {
                    try Wait.exit(of: process, "ripple-server \(arguments[0]) to exit", within: .seconds(60)) {
                        String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                    }
                }
                let log = (try? String(contentsOfFile: directory.path("node.err"), encoding: .utf8)) ?? ""
                #expect(process.terminationStatus == 1, "\(arguments[0]): \(printed) \(log)")
                #expect(log.contains("refused ripple_node: database \"nosuchdb\" does not exist (SQLSTATE 3D000)"),
                        "\(arguments[0]): \(log)")
                #expect(ContinuousClock.now - started < .seconds(20), "\(arguments[0]) took \(ContinuousClock.now - started)")
            }
        }
    }

    /// A port nothing listens on.
    func closedPort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw SyncServerError("no port to take") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
#endif
