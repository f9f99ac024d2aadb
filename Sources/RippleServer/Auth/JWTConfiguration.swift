#if Sync
import Foundation

/// How a node verifies JSON Web Tokens from an app's identity provider (see
/// <doc:AuthenticatingWithYourIdentityProvider>): the keys, what the claims must say, and the
/// leeway on times.
///
/// ```swift
/// var jwt = JWTConfiguration(keys: [.jwksURL(URL(string: "https://idp.example.com/.well-known/jwks.json")!)])
/// jwt.issuer = "https://idp.example.com/"
/// jwt.audience = "ripple"
/// configuration.jwt = jwt
/// ```
public struct JWTConfiguration: Sendable {
    /// Where verification keys come from.
    public enum KeySource: Sendable {
        /// An HS256 shared secret (at least 32 bytes), under `kid` (`nil`: for tokens that name
        /// no key).
        case secret([UInt8], kid: String? = nil)
        /// A PEM public key: RSA (RS256, 2048 bits or more), P-256 (ES256) or Ed25519 (EdDSA).
        case pem(String, kid: String? = nil)
        /// A JWK Set document (or a single JWK), as a file holds it.
        case jwks(Data)
        /// A JWK Set fetched over HTTP(S): cached, refreshed after its `Cache-Control: max-age`
        /// (or ``JWTConfiguration/refreshInterval``), and fetched again when a token names a key
        /// it lacks (at most once per ``JWTConfiguration/minimumRefetchInterval``).
        case jwksURL(URL)
    }

    /// The keys tokens may be signed with. The key a token names (`kid`) decides its algorithm;
    /// a token that names none is verified with the key that has no `kid`, or with the only key
    /// of its algorithm.
    public var keys: [KeySource]
    /// The `iss` every token must carry (`nil`: not checked).
    public var issuer: String?
    /// The audience every token's `aud` must name (`nil`: not checked).
    public var audience: String?
    /// The claim that holds the user id (`sub`).
    public var userClaim = "sub"
    /// How far `exp` and `nbf` may be off, for clocks that disagree: 60 s.
    public var leeway: Duration = .seconds(60)
    /// The least time between two fetches of a JWKS URL caused by tokens naming keys it lacks:
    /// 30 s. A flood of tokens with made-up `kid`s costs the identity provider one request per
    /// this interval; within it, such tokens are refused with `token_unknown_key`.
    public var minimumRefetchInterval: Duration = .seconds(30)
    /// How long a fetched JWKS is kept when its response has no `Cache-Control: max-age`: 1 hour
    /// (a `max-age` is taken within 1 minute … 1 day).
    public var refreshInterval: Duration = .seconds(3600)

    /// A configuration verifying tokens signed with `keys`.
    public init(keys: [KeySource]) { self.keys = keys }
}
#endif
