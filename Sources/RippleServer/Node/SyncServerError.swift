#if Sync
/// The node could not start or go on, and why: for a part of the node that stopped (the feed
/// from Postgres, the HTTP listener, …), ``part`` names it and ``underlying`` is what it threw.
public struct SyncServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, in a sentence.
    public let description: String
    /// The part of the node that failed, when one did: "the feed from Postgres",
    /// "the HTTP listener", "the heartbeats", "the Postgres connection pool".
    public let part: String?
    /// What the part threw.
    public let underlying: (any Error)?

    /// An error that says `description`.
    public init(_ description: String) {
        (self.description, part, underlying) = (description, nil, nil)
    }

    /// `part` stopped because of `error`: "the feed from Postgres stopped: …".
    public init(part: String, stoppedBy error: any Error) {
        (description, self.part, underlying) = ("\(part) stopped: \(error)", part, error)
    }
}
#endif
