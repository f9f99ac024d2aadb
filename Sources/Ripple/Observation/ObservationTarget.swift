import Foundation

/// Where an observer's events go.
enum EventSink<Event: Sendable>: Sendable {
    /// A subscriber's handlers.
    case handler(onEvent: @Sendable (Event) throws -> Void, onError: @Sendable (any Error) -> Void)
    /// An async sequence's channel.
    case channel(EventChannel<Event>)
}

/// Something the store tells of commits.
protocol ObservationTarget: AnyObject, Sendable {
    /// The observer's identity, never reused by another.
    var observerID: ObservationCenter.ObserverID { get }
    /// A commit changed rows of `summary.tables` (``ChangeLog/everyTable`` for unknown tables).
    /// A refresh this starts in the background joins `batch` (started once every observer the
    /// commit concerns was told).
    func storeDidCommit(_ summary: CommitSummary, batch: RefreshBatch)
    /// The commit of `version` was routed to it (called under the writer's lock, by routing,
    /// before ``storeDidCommit(_:batch:)``).
    func routed(_ version: Int64)
    /// Returns once the observer's events up to `version` (of the commits routed to it) were
    /// delivered, where its delivery is ``Delivery/immediate`` and another thread delivers them;
    /// at once otherwise (see ``Store/commit(_:origin:tag:_:)``).
    func awaitDelivery(of version: Int64)
}

/// What a thread running observation work is inside of.
enum ObservationThreads {
    /// Ripple's background refreshes (a refresh queued from one runs there at once instead of
    /// being queued again).
    static let background = ThreadCounter()
    /// A subscriber's handler, so that `cancel()` called from inside one does not wait for
    /// another handler (which could be waiting for this one).
    static let handlers = ThreadCounter()
}
