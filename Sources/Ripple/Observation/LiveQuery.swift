import Foundation
import RippleDiff

/// A query whose subscribers hear of every change to its result: after each commit that changes
/// it, the new snapshot and a `Changeset` from the snapshot the subscriber last received.
///
/// Make one from a collection query (``RecordQuery/live()``) or from raw SQL
/// (``Store/liveQuery(sql:arguments:identity:)``), then subscribe with a handler or iterate
/// ``events()``:
///
/// ```swift
/// let open = todos.filter(Column("done") == false).order(by: Column("rank")).live()
/// let subscription = open.subscribe(on: .queue(.main)) { event in
///     // event.snapshot: the records at event.version
///     // event.changeset: deletes, inserts, updates, moves from the previous event's snapshot
/// }
/// ```
///
/// What a subscriber can rely on:
/// * the first event is the initial snapshot (every element an insert);
/// * versions strictly increase, and nothing is delivered once ``Subscription/cancel()`` returns;
/// * each changeset is relative to the snapshot this subscriber last received: a slow subscriber
///   gets one combined changeset to the newest snapshot, never a queue of stale ones, and holds at
///   most two snapshots in memory;
/// * a commit that cannot change the result does not re-run the query, and an event comes only
///   when the result changed;
/// * each snapshot is read at one version, in one read transaction, never a mix of two commits;
/// * an error (the query fails, its table is dropped) ends the stream with that error.
public struct LiveQuery<Element: Sendable>: Sendable {
    /// The store the query reads.
    public let store: Store
    let source: QuerySource<Element>

    init(store: Store, source: QuerySource<Element>) {
        self.store = store
        self.source = source
    }

    /// The query, readably.
    public var description: String { source.description }

    /// Starts delivering events to `onEvent` (on `delivery`) until the subscription is cancelled
    /// or released, or the query fails (then `onError` hears why, and nothing more comes).
    ///
    /// A handler that throws ends its own subscription: `onError` receives the error.
    ///
    /// A stream never ends silently: without `onError`, the error goes to the store's
    /// ``Store/Configuration/unhandledLiveQueryError`` (standard error by default), and
    /// ``Subscription/error`` holds it either way.
    ///
    /// With ``Delivery/immediate``, the initial event is delivered before `subscribe` returns, and
    /// every commit's event before the committing `write` returns — what a test needs.
    public func subscribe(on delivery: Delivery = .immediate,
                          onError: (@Sendable (any Error) -> Void)? = nil,
                          _ onEvent: @escaping @Sendable (LiveQueryEvent<Element>) throws -> Void) -> Subscription {
        LiveObserver<Element, LiveQueryEvent<Element>>.start(
            store: store, sources: [source], delivery: delivery,
            sink: .handler(onEvent: onEvent, onError: store.errorHandler(onError, query: description)),
            makeEvent: { $0[0] })
    }

    /// The events as an asynchronous sequence. The iterator owns the subscription: it starts when
    /// iteration begins and is cancelled when the iterator is dropped or its task is cancelled.
    ///
    /// An event is "received" when the loop takes it; commits meanwhile coalesce into the next one.
    ///
    /// ```swift
    /// for try await event in todos.all.live().events() {
    ///     render(event.snapshot)
    /// }
    /// ```
    public func events() -> LiveQueryEvents<LiveQueryEvent<Element>> {
        LiveQueryEvents { channel in
            LiveObserver<Element, LiveQueryEvent<Element>>.start(
                store: store, sources: [source], delivery: .background,
                sink: .channel(channel), makeEvent: { $0[0] })
        }
    }
}

/// What a live query's subscriber receives after a commit changed the result.
public struct LiveQueryEvent<Element: Sendable>: Sendable {
    /// The version the snapshot was read at.
    public let version: Int64
    /// The version of the snapshot this subscriber received before, `nil` for the first event.
    public let previousVersion: Int64?
    /// The query's result at ``version``.
    public let snapshot: [Element]
    /// From the previous event's snapshot to this one (all inserts for the first event).
    public let changeset: Changeset
    /// For each of the changeset's `updates`, in the same order, the columns whose values changed:
    /// a list cell can be reconfigured rather than reloaded.
    public let updatedColumns: [Set<String>]
    /// Where the commit of ``version`` came from (see ``CommitOrigin``); `nil` for a version
    /// committed before Ripple recorded origins. An event that covers several commits (a
    /// subscriber that was busy gets one changeset to the newest snapshot) shows the newest's;
    /// the change feed (``Store/commits(after:)``) has each.
    public let origin: CommitOrigin?
    /// The tag the caller gave the commit of ``version`` (see ``Store/write(tag:_:)``), if any.
    public let tag: String?

    /// Whether this is the first event (the initial snapshot).
    public var isInitial: Bool { previousVersion == nil }

    /// The columns that changed for the element now at `newIndex`, or `nil` when it is not an
    /// update (inserted, or unchanged).
    public func changedColumns(atNewIndex newIndex: Int) -> Set<String>? {
        changeset.updates.firstIndex { $0.new == newIndex }.map { updatedColumns[$0] }
    }
}

/// Where a subscriber's handler runs.
public enum Delivery: Sendable {
    /// On the thread that noticed the change, before that call returns: the initial event inside
    /// `subscribe`, later ones inside the committing `write`. Deterministic: use it in tests.
    case immediate
    /// Asynchronously on `queue` (such as `.main`); the query re-runs on a background thread.
    case queue(DispatchQueue)

    /// On a background thread (what the async sequence uses).
    static var background: Delivery { .queue(DispatchQueue.global(qos: .userInitiated)) }

    var isImmediate: Bool {
        if case .immediate = self { return true }
        return false
    }
}

/// A running subscription to a live query. Keep it as long as you want events: it is cancelled
/// when released.
public final class Subscription: Sendable {
    /// What cancels the observer; `nil` once cancelled, so that a cancelled subscription that is
    /// still referenced no longer keeps the observer, its handler and its snapshots alive.
    private let cancellation: Locked<(@Sendable () -> Void)?>
    /// The error that ended the stream, set by the observer (which does not own the subscription).
    private let endingError: Locked<(any Error)?>

    init(endingError: Locked<(any Error)?>, cancel: @escaping @Sendable () -> Void) {
        self.endingError = endingError
        self.cancellation = Locked(cancel)
    }

    /// The error that ended the stream (the query failed, its table was dropped, the handler
    /// threw), or `nil` while it runs or after a plain ``cancel()``.
    public var error: (any Error)? { endingError.withLock { $0 } }

    /// Whether the stream ended: cancelled, or ended by an error. Nothing more is delivered.
    public var isFinished: Bool { isCancelled || error != nil }

    /// Stops the deliveries. Once `cancel()` returns, no handler of this subscription starts, and
    /// none is running — unless `cancel()` is called from inside a handler, which then finishes.
    public func cancel() {
        let cancel = cancellation.withLock { cancellation in
            defer { cancellation = nil }
            return cancellation
        }
        cancel?()
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { cancellation.withLock { $0 == nil } }

    deinit { cancel() }
}

extension Store {
    /// `onError`, or the configuration's handler of errors nobody handles.
    func errorHandler(_ onError: (@Sendable (any Error) -> Void)?, query: String) -> @Sendable (any Error) -> Void {
        if let onError { return onError }
        let report = configuration.unhandledLiveQueryError
        return { error in report(error, query) }
    }
}
