#if Sync
import Crypto
import Foundation
import JWTKit

/// Verification keys by `kid`, each with the one algorithm it verifies (the key decides, never
/// the token's header), read from secrets, PEM files and JWK Sets with jwt-kit.
struct JWTKeySet: Sendable {
    /// One key: its algorithm (`HS256`, `RS256`, `ES256` or `EdDSA`) and its material.
    struct Key: Sendable {
        var kid: String?
        var algorithm: String
        var material: Material

        /// A jwt-kit collection holding this key alone, which checks signatures.
        func verifier() async -> JWTKeyCollection {
            let collection = JWTKeyCollection()
            switch material {
            case .hmac(let key): await collection.add(hmac: key, digestAlgorithm: .sha256)
            case .rsa(let key): await collection.add(rsa: key, digestAlgorithm: .sha256)
            case .ecdsa(let key): await collection.add(ecdsa: key)
            case .eddsa(let key): await collection.add(eddsa: key)
            }
            return collection
        }
    }

    /// A key as jwt-kit reads it.
    enum Material: Sendable {
        case hmac(HMACKey)
        case rsa(JWTKit.Insecure.RSA.PublicKey)
        case ecdsa(ES256PublicKey)
        case eddsa(EdDSA.PublicKey)
    }

    /// The algorithms a node verifies.
    static let algorithms: Set<String> = ["HS256", "RS256", "ES256", "EdDSA"]

    private(set) var keys: [Key] = []

    /// Whether a key has `kid`.
    func contains(kid: String) -> Bool { keys.contains { $0.kid == kid } }

    /// The key for a token with header `kid` and `alg`: the key of that `kid`; without one, the
    /// key without a `kid`, or the only key of `alg`.
    func key(kid: String?, algorithm: String) -> Key? {
        if let kid { return keys.first { $0.kid == kid } }
        if let plain = keys.first(where: { $0.kid == nil }) { return plain }
        let ofAlgorithm = keys.filter { $0.algorithm == algorithm }
        return ofAlgorithm.count == 1 ? ofAlgorithm[0] : nil
    }

    mutating func add(_ key: Key) {
        if let kid = key.kid { keys.removeAll { $0.kid == kid } }
        keys.append(key)
    }

    /// Adds an HS256 secret.
    mutating func add(secret: [UInt8], kid: String?) throws {
        guard secret.count >= 32 else { throw JWTKeyError("an HS256 secret must be at least 32 bytes") }
        add(Key(kid: kid, algorithm: "HS256", material: .hmac(HMACKey(key: SymmetricKey(data: secret)))))
    }

    /// Adds a PEM public key (RSA, P-256 or Ed25519).
    mutating func add(pem: String, kid: String?) throws {
        if let rsa = try? JWTKit.Insecure.RSA.PublicKey(pem: pem) {
            add(Key(kid: kid, algorithm: "RS256", material: .rsa(rsa)))
        } else if let ec = try? ES256PublicKey(pem: pem) {
            add(Key(kid: kid, algorithm: "ES256", material: .ecdsa(ec)))
        } else if let ed = try? EdDSA.PublicKey(pem: pem) {
            add(Key(kid: kid, algorithm: "EdDSA", material: .eddsa(ed)))
        } else {
            throw JWTKeyError("the PEM file holds no RSA (2048 bits or more), P-256 or Ed25519 public key")
        }
    }

    /// Adds the keys of a JWK Set (`{"keys": [...]}`) or of a single JWK. Keys of an algorithm
    /// the node does not verify (RS384, PS256, RSA-OAEP…) and encryption keys (`"use": "enc"`)
    /// are skipped; a JWK without `alg` takes its type's: `RSA` RS256, `EC` P-256 ES256, `OKP`
    /// Ed25519 EdDSA, `oct` HS256.
    ///
    /// - Returns: how many keys were added.
    @discardableResult
    mutating func add(jwks data: Data) throws -> Int {
        let document: JWKSDocument
        do {
            document = try JSONDecoder().decode(JWKSDocument.self, from: data)
        } catch {
            throw JWTKeyError("not a JWK Set: \(error)")
        }
        var added = 0
        for jwk in document.keys where jwk.use != "enc" {
            guard let key = try Self.key(of: jwk) else { continue }
            add(key)
            added += 1
        }
        return added
    }

    private static func key(of jwk: JWKSDocument.JWK) throws -> Key? {
        // The key's kid in an error (" k1"), when it has one.
        let named = jwk.kid.map { " \($0)" } ?? ""
        switch (jwk.kty, jwk.alg) {
        case ("RSA", "RS256"?), ("RSA", nil):
            guard let n = jwk.n, let e = jwk.e else { throw JWTKeyError("the RSA key\(named) has no n or e") }
            return Key(kid: jwk.kid, algorithm: "RS256", material: .rsa(try JWTKit.Insecure.RSA.PublicKey(modulus: n, exponent: e)))
        case ("EC", let alg) where alg == "ES256" || alg == nil && jwk.crv == "P-256":
            guard let x = jwk.x, let y = jwk.y else { throw JWTKeyError("the EC key\(named) has no x or y") }
            return Key(kid: jwk.kid, algorithm: "ES256", material: .ecdsa(try ES256PublicKey(parameters: (x: x, y: y))))
        case ("OKP", let alg) where alg == "EdDSA" || alg == nil && jwk.crv == "Ed25519":
            guard let x = jwk.x else { throw JWTKeyError("the OKP key\(named) has no x") }
            return Key(kid: jwk.kid, algorithm: "EdDSA", material: .eddsa(try EdDSA.PublicKey(x: x, curve: .ed25519)))
        case ("oct", "HS256"?), ("oct", nil):
            guard let k = jwk.k, let secret = SyncToken.data(base64URL: k) else { throw JWTKeyError("the oct key\(named) has no k") }
            guard secret.count >= 32 else { throw JWTKeyError("the oct key\(named) is shorter than 32 bytes") }
            return Key(kid: jwk.kid, algorithm: "HS256", material: .hmac(HMACKey(key: SymmetricKey(data: secret))))
        default:
            return nil
        }
    }
}

/// A JWK Set, or one JWK, with the members the node reads.
private struct JWKSDocument: Decodable {
    struct JWK: Decodable {
        var kty: String
        var kid: String?
        var alg: String?
        var use: String?
        var crv: String?
        var n: String?
        var e: String?
        var x: String?
        var y: String?
        var k: String?
    }

    var keys: [JWK]

    enum CodingKeys: String, CodingKey { case keys }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if container.contains(.keys) {
            keys = try container.decode([JWK].self, forKey: .keys)
        } else {
            keys = [try JWK(from: decoder)]
        }
    }
}

/// A key that cannot be read, and why.
public struct JWTKeyError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
