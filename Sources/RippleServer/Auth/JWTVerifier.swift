#if Sync
import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore
import RippleSync

/// Verifies JSON Web Tokens against a ``JWTConfiguration``'s keys: the signature with jwt-kit,
/// by the key the token names (whose algorithm decides: `alg: none` and a header naming
/// another algorithm than its key's are refused), then `exp`, `nbf`, `iss` and `aud` within the
/// configured leeway. A JWKS URL is fetched with AsyncHTTPClient when first needed, kept for its
/// `Cache-Control: max-age`, and fetched again when a token names a key it lacks (at most once
/// per ``JWTConfiguration/minimumRefetchInterval``).
public actor JWTVerifier {
    /// The keys, the expected claims and the leeway.
    public let configuration: JWTConfiguration
    private let logger: Logger
    /// The keys from configuration (secrets, PEM keys, JWKS files).
    private var fixed = JWTKeySet()
    /// The keys of the JWKS URLs, as last fetched.
    private var fetched = JWTKeySet()
    private var urls: [URL] = []
    /// When the fetched keys are stale (`nil`: never fetched).
    private var freshUntil: ContinuousClock.Instant?
    /// When the URLs were last fetched (for the rate limit of fetches on unknown keys).
    private var lastFetch: ContinuousClock.Instant?
    /// The fetch under way, which concurrent verifications wait for.
    private var fetching: Task<Void, Never>?
    /// Why the last fetch failed (said in refusals while no key is known).
    private var fetchFailure: String?
    /// How many times the JWKS URLs were fetched.
    public private(set) var fetches = 0

    /// A verifier of `configuration`'s keys, logging its JWKS fetches to `logger` (by default,
    /// nowhere).
    ///
    /// - Throws: ``JWTKeyError`` when a configured key cannot be read.
    public init(_ configuration: JWTConfiguration,
                logger: Logger = Logger(label: "ripple.jwt", factory: { _ in SwiftLogNoOpLogHandler() })) throws {
        self.configuration = configuration
        self.logger = logger
        var fixed = JWTKeySet()
        var urls: [URL] = []
        for source in configuration.keys {
            switch source {
            case .secret(let secret, let kid): try fixed.add(secret: secret, kid: kid)
            case .pem(let pem, let kid): try fixed.add(pem: pem, kid: kid)
            case .jwks(let data):
                guard try fixed.add(jwks: data) > 0 else { throw JWTKeyError("the JWK Set holds no key the node can verify with") }
            case .jwksURL(let url): urls.append(url)
            }
        }
        (self.fixed, self.urls) = (fixed, urls)
    }

    /// The identity `token` proves at `now`.
    ///
    /// - Throws: ``TokenRefusal`` with the code that says why it is refused.
    public func verify(_ token: String, now: Date = Date()) async throws(TokenRefusal) -> SyncIdentity {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw TokenRefusal(.tokenMalformed, "a JSON Web Token has three parts separated by dots") }
        guard let headerData = SyncToken.data(base64URL: String(parts[0])),
              let header = try? JSONDecoder().decode([String: SyncClaim].self, from: headerData) else {
            throw TokenRefusal(.tokenMalformed, "the token's header is not a base64url JSON object")
        }
        guard case .string(let algorithm)? = header["alg"] else { throw TokenRefusal(.tokenMalformed, "the token's header has no alg") }
        guard JWTKeySet.algorithms.contains(algorithm) else {
            throw TokenRefusal(.tokenUnsupportedAlgorithm, "the token's alg \(algorithm) is not one the node verifies (HS256, RS256, ES256, EdDSA)")
        }
        let kid: String?
        switch header["kid"] {
        case nil: kid = nil
        case .string(let named)?: kid = named
        default: throw TokenRefusal(.tokenMalformed, "the token's kid is not a string")
        }
        let found = try await key(kid: kid, algorithm: algorithm)
        guard found.algorithm == algorithm else {
            throw TokenRefusal(.tokenUnsupportedAlgorithm, "the token says \(algorithm), but \(Self.name(of: found, named: kid)) verifies \(found.algorithm)")
        }
        do {
            _ = try await found.verifier().verify(token, as: UncheckedPayload.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw TokenRefusal(.tokenBadSignature, "the token's signature does not match \(Self.name(of: found, named: kid))")
        } catch {
            throw TokenRefusal(.tokenMalformed, "the token cannot be read: \(error)")
        }
        guard let payloadData = SyncToken.data(base64URL: String(parts[1])),
              let claims = try? JSONDecoder().decode([String: SyncClaim].self, from: payloadData) else {
            throw TokenRefusal(.tokenMalformed, "the token's payload is not a JSON object")
        }
        return try check(claims, now: now)
    }

    /// The key a token was checked with, in a refusal's words: "its key k1" when the token
    /// names it (`kid`); otherwise the node's key the token fell to ("the node's key k1", or
    /// "the node's key" when it has no `kid` either), saying the token names none.
    static func name(of key: JWTKeySet.Key, named kid: String?) -> String {
        if let kid { return "its key \(kid)" }
        return (key.kid.map { "the node's key \($0)" } ?? "the node's key") + " (the token names no kid)"
    }

    /// The identity of verified `claims`: `exp`, `nbf`, `iss`, `aud` checked.
    private func check(_ claims: [String: SyncClaim], now: Date) throws(TokenRefusal) -> SyncIdentity {
        let leeway = Double(configuration.leeway.components.seconds)
        guard let exp = claims["exp"]?.seconds else { throw TokenRefusal(.tokenMalformed, "the token has no exp (a number)") }
        let expires = Date(timeIntervalSince1970: exp)
        guard now.timeIntervalSince1970 < exp + leeway else {
            throw TokenRefusal(.tokenExpired, "the token expired at \(ISO8601DateFormatter().string(from: expires))")
        }
        if let nbf = claims["nbf"] {
            guard let seconds = nbf.seconds else { throw TokenRefusal(.tokenMalformed, "the token's nbf is not a number") }
            guard now.timeIntervalSince1970 + leeway >= seconds else {
                throw TokenRefusal(.tokenNotYetValid, "the token is valid from \(ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds)))")
            }
        }
        if let issuer = configuration.issuer {
            guard claims["iss"] == .string(issuer) else { throw TokenRefusal(.tokenWrongIssuer, "the token's iss is not \(issuer)") }
        }
        if let audience = configuration.audience {
            let named: [SyncClaim] = switch claims["aud"] {
            case .array(let values)?: values
            case let value?: [value]
            case nil: []
            }
            guard named.contains(.string(audience)) else { throw TokenRefusal(.tokenWrongAudience, "the token's aud does not name \(audience)") }
        }
        let user: String
        switch claims[configuration.userClaim] {
        case .string(let string)? where !string.isEmpty: user = string
        case .integer(let integer)?: user = String(integer)
        default: throw TokenRefusal(.tokenMalformed, "the token has no user claim \(configuration.userClaim) (a non-empty string)")
        }
        // The expiry the socket keeps is `exp` itself plus the leeway (the node closes it then).
        return SyncIdentity(user: user, expires: expires.addingTimeInterval(leeway), claims: claims)
    }

    /// The key for `kid` and `algorithm`: from configuration, or from the JWKS URLs (fetched
    /// when stale, or when `kid` is unknown and the last fetch is older than the rate limit).
    private func key(kid: String?, algorithm: String) async throws(TokenRefusal) -> JWTKeySet.Key {
        if let key = fixed.key(kid: kid, algorithm: algorithm) { return key }
        guard !urls.isEmpty else {
            throw TokenRefusal(.tokenUnknownKey, kid.map { "the node has no key \($0)" } ?? "the token names no key (kid) and no key fits it")
        }
        if freshUntil.map({ ContinuousClock.now >= $0 }) ?? true { await fetch() }
        if let key = fetched.key(kid: kid, algorithm: algorithm) { return key }
        if let kid, !fetched.contains(kid: kid),
           lastFetch.map({ ContinuousClock.now - $0 >= configuration.minimumRefetchInterval }) ?? true {
            logger.info("a token names key \(kid), which the JWKS lacks: fetching it again")
            await fetch()
            if let key = fetched.key(kid: kid, algorithm: algorithm) { return key }
        }
        var message = kid.map { "the node has no key \($0), even after fetching its JWKS" } ?? "the token names no key (kid) and no key fits it"
        if let fetchFailure { message += " (the last fetch failed: \(fetchFailure))" }
        throw TokenRefusal(.tokenUnknownKey, message)
    }

    /// Fetches the JWKS URLs (one fetch at a time; concurrent callers wait for it). Keys of a URL
    /// that fails are kept as they were.
    private func fetch() async {
        if let fetching { await fetching.value; return }
        let task = Task { await self.fetchNow() }
        fetching = task
        await task.value
        fetching = nil
    }

    private func fetchNow() async {
        lastFetch = .now
        fetches += 1
        var keys = JWTKeySet()
        var maxAge: Duration?
        var failure: String?
        for url in urls {
            do {
                var request = HTTPClientRequest(url: url.absoluteString)
                request.headers.add(name: "Accept", value: "application/json")
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                guard response.status == .ok else { throw JWTKeyError("HTTP \(response.status.code)") }
                let body = try await response.body.collect(upTo: 1 << 20)
                try keys.add(jwks: Data(body.readableBytesView))
                if let age = Self.maxAge(response.headers["Cache-Control"].joined(separator: ",")) {
                    maxAge = min(maxAge ?? age, age)
                }
            } catch {
                failure = "\(url): \(error)"
                logger.warning("the JWKS at \(url) could not be fetched: \(error)")
                for key in fetched.keys where !keys.keys.contains(where: { $0.kid == key.kid }) { keys.add(key) }
            }
        }
        fetched = keys
        fetchFailure = failure
        let keep = min(max(maxAge ?? configuration.refreshInterval, .seconds(60)), .seconds(86_400))
        // A failed fetch is tried again after the rate limit, not after a whole max-age.
        freshUntil = .now + (failure == nil ? keep : configuration.minimumRefetchInterval)
    }

    /// The `max-age` of a `Cache-Control` header.
    static func maxAge(_ header: String) -> Duration? {
        for directive in header.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2, parts[0].lowercased() == "max-age", let seconds = Int64(parts[1]), seconds >= 0 {
                return .seconds(seconds)
            }
        }
        return nil
    }
}

/// A payload jwt-kit reads without checking anything: the verifier checks the claims itself,
/// with its leeway, and reads them as JSON values.
private struct UncheckedPayload: JWTPayload {
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
#endif
