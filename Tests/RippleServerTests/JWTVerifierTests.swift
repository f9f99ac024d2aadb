#if Sync
import Foundation
@testable import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// The JSON Web Token verifier alone (no node): each algorithm accepted, each refusal with its
/// documented code, a JWKS served over HTTP on 127.0.0.1 fetched, cached, fetched again for an
/// unknown key within its rate limit.
@Suite(.timeLimit(.minutes(5))) struct JWTVerifierTests {
    static let now = Date()

    static func claims(_ user: String = "alice", _ extra: [String: Any] = [:]) -> [String: Any] {
        var claims: [String: Any] = ["sub": user, "exp": Int(now.timeIntervalSince1970) + 600, "iss": "https://idp.test/", "aud": "ripple"]
        claims.merge(extra) { $1 }
        return claims
    }

    static func verifier(_ keys: [JWTConfiguration.KeySource], adjust: (inout JWTConfiguration) -> Void = { _ in }) throws -> JWTVerifier {
        var configuration = JWTConfiguration(keys: keys)
        configuration.issuer = "https://idp.test/"
        configuration.audience = "ripple"
        adjust(&configuration)
        return try JWTVerifier(configuration)
    }

    /// The code `token` is refused with (`nil`: accepted).
    static func refusal(_ verifier: JWTVerifier, _ token: String) async -> SyncErrorCode? {
        do {
            _ = try await verifier.verify(token, now: now)
            return nil
        } catch {
            return error.code
        }
    }

    @Test(arguments: ["HS256", "RS256", "ES256", "EdDSA"])
    func eachAlgorithmIsAccepted(algorithm: String) async throws {
        let key: TestSigningKey = switch algorithm {
        case "HS256": .hs256()
        case "RS256": try .rs256()
        case "ES256": .es256()
        default: .eddsa(kid: "ed")
        }
        let verifier = try Self.verifier([key.source])
        let identity = try await verifier.verify(try key.token(Self.claims("alice", ["org_id": "acme", "orgs": ["a", "b"], "level": 3])),
                                                 now: Self.now)
        #expect(identity.user == "alice")
        #expect(identity.claims["org_id"] == .string("acme"))
        #expect(identity.claims["orgs"] == .array([.string("a"), .string("b")]))
        #expect(identity.claims["level"] == .integer(3))
        // Tampered: another user under the same signature.
        let token = try key.token(Self.claims())
        let parts = token.split(separator: ".")
        let forged = parts[0] + "." + TestSigningKey.base64URL(Data(#"{"sub":"mallory","exp":9999999999}"#.utf8)) + "." + parts[2]
        #expect(await Self.refusal(verifier, String(forged)) == .tokenBadSignature)
    }

    @Test func eachRefusalHasItsCode() async throws {
        let key = TestSigningKey.es256(kid: "k1")
        let other = TestSigningKey.es256(kid: "k1")
        let verifier = try Self.verifier([.jwks(Data(TestSigningKey.jwks([key]).utf8))])
        let seconds = Int(Self.now.timeIntervalSince1970)
        let cases: [(String, String, SyncErrorCode)] = [
            ("a key the node lacks", try TestSigningKey.es256(kid: "k9").token(Self.claims()), .tokenUnknownKey),
            ("another key under the same kid", try other.token(Self.claims()), .tokenBadSignature),
            ("the wrong audience", try key.token(Self.claims("alice", ["aud": "someone-else"])), .tokenWrongAudience),
            ("no audience", try key.token(Self.claims("alice", ["aud": NSNull()])), .tokenWrongAudience),
            ("the wrong issuer", try key.token(Self.claims("alice", ["iss": "https://evil.test/"])), .tokenWrongIssuer),
            ("expired beyond the leeway", try key.token(Self.claims("alice", ["exp": seconds - 61])), .tokenExpired),
            ("not yet valid beyond the leeway", try key.token(Self.claims("alice", ["nbf": seconds + 61])), .tokenNotYetValid),
            ("alg none", Self.unsigned(Self.claims(), header: ["alg": "none", "kid": "k1"]), .tokenUnsupportedAlgorithm),
            ("alg HS512", try key.token(Self.claims(), header: ["alg": "HS512"]), .tokenUnsupportedAlgorithm),
            ("HS256 under an ES256 key (algorithm confusion)", try key.token(Self.claims(), header: ["alg": "HS256"]), .tokenUnsupportedAlgorithm),
            ("two parts", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0", .tokenMalformed),
            ("a header that is not JSON", "bm90IGpzb24.eyJzdWIiOiJhIn0.c2ln", .tokenMalformed),
            ("no exp", try key.token(["sub": "alice", "iss": "https://idp.test/", "aud": "ripple", "exp": "soon"]), .tokenMalformed),
            ("no user", try key.token(Self.claims("", [:])), .tokenMalformed),
        ]
        for (what, token, code) in cases {
            #expect(await Self.refusal(verifier, token) == code, "\(what)")
        }
        // Within the leeway (60 s): accepted.
        #expect(await Self.refusal(verifier, try key.token(Self.claims("alice", ["exp": seconds - 30, "nbf": seconds + 30]))) == nil)
        // An audience among several.
        #expect(await Self.refusal(verifier, try key.token(Self.claims("alice", ["aud": ["web", "ripple"]]))) == nil)
    }

    /// A refusal for a bad signature names the key the token was checked with, also when the
    /// token names none (its header has no kid): the node's key it fell to.
    @Test func aBadSignatureNamesTheKeyItWasCheckedWith() async throws {
        func message(_ verifier: JWTVerifier, _ token: String) async -> String? {
            do {
                _ = try await verifier.verify(token, now: Self.now)
                return nil
            } catch {
                return error.code == .tokenBadSignature ? error.message : "\(error)"
            }
        }
        let foreign = TestSigningKey.hs256()
        #expect(await message(try Self.verifier([TestSigningKey.hs256().source]), try foreign.token(Self.claims()))
                == "the token's signature does not match the node's key (the token names no kid)")
        #expect(await message(try Self.verifier([TestSigningKey.hs256(kid: "k1").source]), try foreign.token(Self.claims()))
                == "the token's signature does not match the node's key k1 (the token names no kid)")
        #expect(await message(try Self.verifier([TestSigningKey.hs256(kid: "k1").source]),
                              try TestSigningKey.hs256(kid: "k1").token(Self.claims()))
                == "the token's signature does not match its key k1")
    }

    /// An HS256 token whose secret is an RSA key's public PEM, the classic confusion: refused,
    /// the key (RS256) decides.
    @Test func aPublicKeyIsNeverUsedAsAnHMACSecret() async throws {
        let rsa = try TestSigningKey.rs256()
        guard case .pem(let pem, _) = rsa.source else { return }
        let confused = TestSigningKey(kid: nil, material: .hs256(Array(pem.utf8)))
        let verifier = try Self.verifier([rsa.source])
        #expect(await Self.refusal(verifier, try confused.token(Self.claims())) == .tokenUnsupportedAlgorithm)
    }

    @Test func theUserComesFromTheConfiguredClaim() async throws {
        let key = TestSigningKey.hs256()
        let verifier = try Self.verifier([key.source]) { $0.userClaim = "email" }
        let identity = try await verifier.verify(try key.token(Self.claims("ignored", ["email": "alice@example.com"])), now: Self.now)
        #expect(identity.user == "alice@example.com")
    }

    @Test func aJWKSURLIsFetchedCachedAndFetchedAgainForAnUnknownKidAtMostOncePerInterval() async throws {
        let first = TestSigningKey.es256(kid: "k1")
        let second = TestSigningKey.eddsa(kid: "k2")
        try await TestJWKSServer.with([first]) { server in
            let verifier = try Self.verifier([.jwksURL(server.url)]) { $0.minimumRefetchInterval = .seconds(3600) }
            #expect(try await verifier.verify(try first.token(Self.claims()), now: Self.now).user == "alice")
            #expect(try await verifier.verify(try first.token(Self.claims("bob")), now: Self.now).user == "bob")
            #expect(server.fetches == 1, "cached")
            // Rotated; the rate limit (an hour) holds since the first fetch: no fetch, refused.
            server.serve([second])
            #expect(await Self.refusal(verifier, try second.token(Self.claims())) == .tokenUnknownKey)
            #expect(await Self.refusal(verifier, try TestSigningKey.es256(kid: "bogus").token(Self.claims())) == .tokenUnknownKey)
            #expect(server.fetches == 1)
        }
        try await TestJWKSServer.with([first]) { server in
            let verifier = try Self.verifier([.jwksURL(server.url)]) { $0.minimumRefetchInterval = .zero }
            _ = try await verifier.verify(try first.token(Self.claims()), now: Self.now)
            server.serve([first, second])
            #expect(try await verifier.verify(try second.token(Self.claims()), now: Self.now).user == "alice")
            #expect(server.fetches == 2, "fetched again for k2")
            // A kid the JWKS lacks even after fetching again.
            #expect(await Self.refusal(verifier, try TestSigningKey.es256(kid: "k9").token(Self.claims())) == .tokenUnknownKey)
            #expect(server.fetches == 3)
        }
    }

    @Test func aJWKSIsKeptForItsMaxAge() {
        #expect(JWTVerifier.maxAge("public, max-age=300, must-revalidate") == .seconds(300))
        #expect(JWTVerifier.maxAge("no-store") == nil)
    }

    @Test func bothTokenKindsAtOnce() async throws {
        let secret = Array("a test secret of at least thirty-two bytes".utf8)
        let key = TestSigningKey.hs256(kid: "idp")
        let authenticator = SyncAuthenticator(secret: secret, jwt: try Self.verifier([key.source]))
        let v1 = try SyncToken.sign(user: "demo", expires: Date().addingTimeInterval(60), secret: secret)
        #expect(try await authenticator.verify(v1).user == "demo")
        #expect(try await authenticator.verify(try key.token(Self.claims())).user == "alice")
        let jwtOnly = SyncAuthenticator(secret: nil, jwt: try Self.verifier([key.source]))
        await #expect(throws: TokenRefusal.self) { try await jwtOnly.verify(v1) }
    }

    static func unsigned(_ claims: [String: Any], header: [String: Any]) -> String {
        TestSigningKey.base64URL(try! JSONSerialization.data(withJSONObject: header)) + "."
            + TestSigningKey.base64URL(try! JSONSerialization.data(withJSONObject: claims)) + "."
    }
}
#endif
