#if Sync
import RippleSync

/// Why a token is refused: the code of the `error` frame the socket gets (a `token_…` code,
/// `unauthorized` or `token_expired`), and what was wrong in words (never the token itself).
public struct TokenRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    /// The `error` frame's code.
    public var code: SyncErrorCode
    /// What was wrong.
    public var message: String

    /// A refusal with `code`, saying `message`.
    public init(_ code: SyncErrorCode, _ message: String) { (self.code, self.message) = (code, message) }

    public var description: String { "\(code.rawValue): \(message)" }
}
#endif
