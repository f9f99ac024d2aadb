#if Sync
import CryptoExtras
import Crypto
import Foundation
import Hummingbird
import Logging
import Ripple
import NIOCore
import RippleServer
import RippleTesting

/// A signing key of a test's identity provider: makes tokens (signed with swift-crypto, not
/// with the library the node verifies with) and its public JWK.
package struct TestSigningKey: Sendable {
    package enum Material: Sendable {
        case hs256([UInt8])
        case rs256(_RSA.Signing.PrivateKey)
        case es256(P256.Signing.PrivateKey)
        case eddsa(Curve25519.Signing.PrivateKey)
    }

    package var kid: String?
    package var material: Material

    package init(kid: String?, material: Material) {
        self.kid = kid
        self.material = material
    }

    package static func hs256(kid: String? = nil) -> Self {
        Self(kid: kid, material: .hs256((0..<48).map { _ in UInt8.random(in: 0...255) }))
    }
    package static func rs256(kid: String? = nil) throws -> Self { Self(kid: kid, material: .rs256(try _RSA.Signing.PrivateKey(keySize: .bits2048))) }
    package static func es256(kid: String? = nil) -> Self { Self(kid: kid, material: .es256(P256.Signing.PrivateKey())) }
    package static func eddsa(kid: String? = nil) -> Self { Self(kid: kid, material: .eddsa(Curve25519.Signing.PrivateKey())) }

    package var algorithm: String {
        switch material {
        case .hs256: "HS256"
        case .rs256: "RS256"
        case .es256: "ES256"
        case .eddsa: "EdDSA"
        }
    }

    /// The key as the node is configured with it (a secret, a PEM public key, or a JWK Set).
    package var source: JWTConfiguration.KeySource {
        switch material {
        case .hs256(let secret): .secret(secret, kid: kid)
        case .rs256(let key): .pem(key.publicKey.pemRepresentation, kid: kid)
        case .es256(let key): .pem(key.publicKey.pemRepresentation, kid: kid)
        case .eddsa: .jwks(Data(Self.jwks([self]).utf8))
        }
    }

    /// The public JWK (`oct` for HS256, with its secret).
    package var jwk: [String: String] {
        var jwk: [String: String] = ["alg": algorithm]
        if let kid { jwk["kid"] = kid }
        switch material {
        case .hs256(let secret): (jwk["kty"], jwk["k"]) = ("oct", Self.base64URL(Data(secret)))
        case .rs256(let key):
            let primitives = try! key.publicKey.getKeyPrimitives()
            (jwk["kty"], jwk["n"], jwk["e"]) = ("RSA", Self.base64URL(primitives.modulus), Self.base64URL(primitives.publicExponent))
        case .es256(let key):
            let raw = key.publicKey.rawRepresentation
            (jwk["kty"], jwk["crv"], jwk["x"], jwk["y"]) = ("EC", "P-256", Self.base64URL(raw.prefix(32)), Self.base64URL(raw.suffix(32)))
        case .eddsa(let key):
            (jwk["kty"], jwk["crv"], jwk["x"]) = ("OKP", "Ed25519", Self.base64URL(key.publicKey.rawRepresentation))
        }
        return jwk
    }

    /// A JWK Set of `keys`.
    package static func jwks(_ keys: [TestSigningKey]) -> String {
        let data = try! JSONSerialization.data(withJSONObject: ["keys": keys.map(\.jwk)], options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// A token of `claims` (a JSON object's members), expiring in an hour unless `claims` says
    /// `exp`; `header` members replace the usual ones (`alg`, `kid`, `typ`).
    package func token(_ claims: [String: Any], header: [String: Any] = [:]) throws -> String {
        var claims = claims
        if claims["exp"] == nil { claims["exp"] = Int(Date().timeIntervalSince1970) + 3600 }
        var head: [String: Any] = ["alg": algorithm, "typ": "JWT"]
        if let kid { head["kid"] = kid }
        head.merge(header) { $1 }
        let signingInput = Self.base64URL(try JSONSerialization.data(withJSONObject: head, options: [.sortedKeys])) + "."
            + Self.base64URL(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        let input = Data(signingInput.utf8)
        let signature: Data = switch material {
        case .hs256(let secret): Data(HMAC<Crypto.SHA256>.authenticationCode(for: input, using: SymmetricKey(data: secret)))
        case .rs256(let key): try key.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation
        case .es256(let key): try key.signature(for: input).rawRepresentation
        case .eddsa(let key): try key.signature(for: input)
        }
        return signingInput + "." + Self.base64URL(signature)
    }

    package static func base64URL(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A JWKS served over HTTP on 127.0.0.1 (a small Hummingbird app on a free port), whose keys
/// a test changes while it runs; it counts the fetches.
package final class TestJWKSServer: Sendable {
    private let state = Locked<(jwks: String, cacheControl: String?, fetches: Int)>(("{\"keys\": []}", nil, 0))
    package let port: Int

    private init(port: Int) { self.port = port }

    package var url: URL { URL(string: "http://127.0.0.1:\(port)/.well-known/jwks.json")! }

    /// Serves `keys` from now on.
    package func serve(_ keys: [TestSigningKey], cacheControl: String? = nil) {
        state.withLock { ($0.jwks, $0.cacheControl) = (TestSigningKey.jwks(keys), cacheControl) }
    }

    package var fetches: Int { state.withLock { $0.fetches } }

    /// Runs `body` with a JWKS server serving `keys`, and stops the server before returning
    /// (when `body` returns and when it throws), waiting until it ended.
    package static func with<Result>(_ keys: [TestSigningKey], isolation: isolated (any Actor)? = #isolation,
                             _ body: (TestJWKSServer) async throws -> Result) async throws -> Result {
        let state = Locked<(jwks: String, cacheControl: String?, fetches: Int)>((TestSigningKey.jwks(keys), nil, 0))
        let router = Router()
        let listening = Locked<Int?>(nil)
        let served = Locked<TestJWKSServer?>(nil)
        router.get(".well-known/jwks.json") { _, _ -> Response in
            guard let server = served.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let (jwks, cacheControl) = server.state.withLock { state -> (String, String?) in
                state.fetches += 1
                return (state.jwks, state.cacheControl)
            }
            var headers: HTTPFields = [.contentType: "application/json"]
            if let cacheControl { headers[.cacheControl] = cacheControl }
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: jwks)))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { channel in listening.withLock { $0 = channel.localAddress?.port } },
                              logger: Logger(label: "jwks", factory: { _ in SwiftLogNoOpLogHandler() }))
        let task = Task { try await app.runService() }
        func stop() async throws {
            task.cancel()
            _ = try await Wait.value("the JWKS server to stop") { () async -> Swift.Result<Void, any Error> in await task.result }
        }
        let server: TestJWKSServer
        do {
            try await Wait.until("the JWKS server to listen") { listening.withLock { $0 } != nil }
            let port = listening.withLock { $0 } ?? 0
            server = TestJWKSServer(port: port)
            let initial = state.withLock { $0 }
            server.state.withLock { $0 = initial }
            served.withLock { $0 = server }
        } catch {
            try await stop()
            throw error
        }
        do {
            let result = try await body(server)
            try await stop()
            return result
        } catch {
            try? await stop()
            throw error
        }
    }
}
#endif
