#if Sync
import Foundation
import RippleSync

/// Verifies the tokens sockets present (at `hello` and in `auth` renewals): the node's own
/// `v1.` tokens (signed with ``SyncServerConfiguration/secret``, for the demo and tests) and
/// JSON Web Tokens from an identity provider (``SyncServerConfiguration/jwt``). Both may be
/// configured at once; a token starting with `v1.` is the node's own.
public struct SyncAuthenticator: Sendable {
    /// The `v1.` tokens' secret (`nil`: such tokens are refused).
    public let secret: [UInt8]?
    /// The JSON Web Token verifier (`nil`: such tokens are refused).
    public let jwt: JWTVerifier?

    /// An authenticator of `v1.` tokens signed with `secret` and of JSON Web Tokens `jwt`
    /// verifies.
    public init(secret: [UInt8]?, jwt: JWTVerifier?) { (self.secret, self.jwt) = (secret, jwt) }

    /// The identity `token` proves at `now`.
    ///
    /// - Throws: ``TokenRefusal``.
    public func verify(_ token: String, now: Date = Date()) async throws(TokenRefusal) -> SyncIdentity {
        if token.hasPrefix("v1.") {
            guard let secret else { throw TokenRefusal(.unauthorized, "this node takes no v1. tokens: present your identity provider's token") }
            do {
                let claims = try SyncToken.verify(token, secret: secret, now: now)
                return SyncIdentity(user: claims.user, expires: claims.expires)
            } catch SyncToken.Failure.expired {
                throw TokenRefusal(.tokenExpired, "the token expired")
            } catch {
                throw TokenRefusal(.unauthorized, "\(error)")
            }
        }
        guard let jwt else {
            throw TokenRefusal(.unauthorized, "this node takes only its own v1. tokens")
        }
        return try await jwt.verify(token, now: now)
    }
}
#endif
