/// A frame that is not a message of the protocol: not JSON (or not UTF-8), or JSON that is not
/// one of the server's messages (see ``ServerMessage/init(json:)``).
///
/// ```
/// the frame is not a server message: at byte 31, expected a string for `lsn`, found a number
/// ```
public struct SyncFrameError: Error, Hashable, CustomStringConvertible, Sendable {
    /// Where in the frame the reader stopped: the offset of the byte, from 0.
    public let offset: Int
    /// What was wrong there: what was expected and what was found, or what is missing.
    public let reason: String

    /// An error at `offset` in the frame, for `reason`.
    package init(offset: Int, reason: String) { (self.offset, self.reason) = (offset, reason) }

    /// The error in a sentence: where, and what was wrong there.
    public var description: String { "the frame is not a server message: at byte \(offset), \(reason)" }
}
