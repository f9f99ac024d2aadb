#if Sync
import Crypto
import Foundation

/// The signed token a client opens its socket with: who the user is, and until when.
///
/// Form: `v1.` + base64url(JSON `{"sub": user, "exp": seconds since 1970}`) + `.` +
/// base64url(HMAC-SHA256(secret, everything before the last dot)). The secret comes from the
/// server's configuration (at least 32 bytes); the server checks the expiry when the socket
/// opens and again while it stays open.
///
/// ```swift
/// let token = try SyncToken.sign(user: "alice", expires: Date().addingTimeInterval(3600), secret: secret)
/// let claims = try SyncToken.verify(token, secret: secret)   // claims.user == "alice"
/// ```
public enum SyncToken {
    /// What a valid token says.
    public struct Claims: Equatable, Sendable {
        public var user: String
        public var expires: Date
    }

    /// Why a token is refused (the message never repeats the token).
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case malformed(String)
        case badSignature
        case expired(Date)
        case weakSecret

        public var description: String {
            switch self {
            case .malformed(let why): "the token is malformed: \(why)"
            case .badSignature: "the token's signature does not match"
            case .expired(let date): "the token expired at \(ISO8601DateFormatter().string(from: date))"
            case .weakSecret: "the signing secret must be at least 32 bytes"
            }
        }
    }

    private static let version = "v1"

    /// A token for `user`, valid until `expires`.
    public static func sign(user: String, expires: Date, secret: [UInt8]) throws -> String {
        guard secret.count >= 32 else { throw Failure.weakSecret }
        let payload = try JSONSerialization.data(withJSONObject: ["sub": user, "exp": Int64(expires.timeIntervalSince1970.rounded(.down))],
                                                 options: [.sortedKeys])
        let signed = version + "." + base64URL(payload)
        let code = HMAC<SHA256>.authenticationCode(for: Data(signed.utf8), using: SymmetricKey(data: secret))
        return signed + "." + base64URL(Data(code))
    }

    /// The claims of `token`, when its signature is `secret`'s and it has not expired at `now`.
    public static func verify(_ token: String, secret: [UInt8], now: Date = Date()) throws -> Claims {
        guard secret.count >= 32 else { throw Failure.weakSecret }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == version else { throw Failure.malformed("not v1.<payload>.<signature>") }
        guard let signature = data(base64URL: String(parts[2])) else { throw Failure.malformed("the signature is not base64url") }
        let signed = Data((parts[0] + "." + parts[1]).utf8)
        // Compared in constant time.
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: SymmetricKey(data: secret)) else {
            throw Failure.badSignature
        }
        guard let payload = data(base64URL: String(parts[1])),
              let object = try? JSONSerialization.jsonObject(with: payload) as? [String: Any],
              let user = object["sub"] as? String, !user.isEmpty, let seconds = (object["exp"] as? NSNumber)?.int64Value else {
            throw Failure.malformed("the payload has no user or expiry")
        }
        let expires = Date(timeIntervalSince1970: TimeInterval(seconds))
        guard now < expires else { throw Failure.expired(expires) }
        return Claims(user: user, expires: expires)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func data(base64URL text: String) -> Data? {
        guard text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
#endif
