import Foundation
import RippleDiff

/// One subscription to one or more queries read together (a group is read in one transaction, so
/// all its results are at the same version).
///
/// Its phases follow ``ObserverState``, held under `condition` with everything shared between
/// threads; the refresh state (`snapshots`, versions) is only touched by the one refresh the state
/// machine allows at a time, handed from thread to thread through the lock.
///
/// This file holds its phases: being told of commits, running the state machine's actions, and
/// delivering. What a refresh reads is in `LiveObserver+Reading.swift`, how a result is patched
/// in place in `LiveObserver+Patching.swift` (they use the refresh state, which is internal for
/// them and touched by nothing else).
final class LiveObserver<Element: Sendable, Event: Sendable>: ObservationTarget, @unchecked Sendable {   // shared state under `condition`; refresh state: see below
    // Refresh state is owned by the single refresh in flight (ObserverState admits one), handed
    // from thread to thread through the lock.
    let store: Store
    let sources: [QuerySource<Element>]
    private let delivery: Delivery
    private let sink: EventSink<Event>
    let makeEvent: @Sendable ([LiveQueryEvent<Element>]) -> Event
    /// The error that ended the stream, shared with the ``Subscription``.
    private let endingError = Locked<(any Error)?>(nil)
    let observerID = ObservationCenter.makeObserverID()

    let condition = NSCondition()
    private var state = ObserverState()
    private var ready: Event?
    private var failure: (any Error)?
    private var deliveringThread: Thread?
    /// Whether ``stopObserving()`` left the shared reads (guarded by `condition`).
    private var leftShares = false
    /// The tables each source reads, once known (guarded by `condition`); `nil` hears every
    /// commit.
    var interest: Set<String>?
    /// The version of the last commit of unknown extent it heard of (a schema change, a write
    /// made without Ripple; guarded by `condition`): it may have changed the tables the sources
    /// read, so it hears every commit until a read at that version or later knows them again.
    var interestUnknownSince: Int64 = 0
    /// The newest version the subscriber has seen the results at: read without a change, or
    /// read and handed to the handler (guarded by `condition`; see ``awaitDelivery(of:)``).
    private var settledVersion: Int64 = 0
    /// The version of the event ready to deliver (guarded by `condition`).
    private var readyVersion: Int64 = 0
    /// The newest commit routed to it (its own lock, taken under the store's routing lock and
    /// under `condition`, and never holding another).
    private let routedVersion = Locked<Int64>(0)
    /// Whether writes wait for its deliveries (an immediate handler; see ``awaitDelivery(of:)``).
    private let isAwaitable: Bool
    /// A refresh waits for the end of a store call on the thread that asked for it (guarded by
    /// `condition`): nobody else may wait for it.
    private var refreshDeferred = false
    /// The pause before the next retry of a refresh that failed for a passing reason, in
    /// milliseconds (guarded by `condition`; reset by a refresh that succeeds).
    private var retryDelay = 0

    // Refresh state.
    var snapshots: [Snapshot<Element>?]
    /// Per source, the index of each key of its snapshot, built when first needed.
    var keyIndexes: [[RowKey: Int]?]
    /// Per source, the result it shares with live queries of the same query (see ``SharedRead``).
    let shares: [SharedRead<Element>?]
    /// Per source that places rows by its order (``QuerySource/orderTerms``), that order, as the
    /// schema read by its last run of the query allows (`nil`: the query runs again instead).
    var orders: [RowOrder?]
    var tables: [Set<String>] = []
    var logQueries: [String] = []
    /// The schema's version (`PRAGMA schema_version`) at the last read: when it moves, the
    /// tables are found again and every result is read again.
    var schemaVersion: Int64?
    var checkedVersion: Int64?
    /// Whether the store knows the keys of the result as its own (told when it last became idle,
    /// see ``tellStoreIfIdle(_:)``): else, a read checks the commits since the last one against
    /// them (``ObservationCenter/told(_:through:after:holding:holdingDependencies:)``).
    var storeHoldsKeys = false
    var deliveredVersion: Int64?
    /// For a row-precise source with dependencies: how to read the keys of the rows each selects
    /// (found again with the tables, after a schema change), and the keys its last run of the
    /// query read, per table (see ``DependencyRead``).
    var dependencyReads: [DependencyRead] = []
    var dependencyKeys: [String: [RowKey]] = [:]
    /// For a row-precise source with value terms: how to read each term's values (found again
    /// with the tables), and the values its last run of the query read, per term (see
    /// ``ValueTermRead``); `nil` until read.
    var valueTermReads: [ValueTermRead] = []
    var termValues: [Set<IndexedValue>]?
    /// The last refresh failed after it took what the store told it of the commits it covered:
    /// the next one reads every result again.
    var rereadsEverything = false

    private init(store: Store, sources: [QuerySource<Element>], delivery: Delivery, sink: EventSink<Event>,
                 makeEvent: @escaping @Sendable ([LiveQueryEvent<Element>]) -> Event) {
        self.store = store
        self.sources = sources
        self.delivery = delivery
        self.sink = sink
        isAwaitable = if case .immediate = delivery, case .handler = sink { true } else { false }
        self.makeEvent = makeEvent
        self.snapshots = Array(repeating: nil, count: sources.count)
        self.keyIndexes = Array(repeating: nil, count: sources.count)
        self.orders = Array(repeating: nil, count: sources.count)
        self.isRowPrecise = sources.count == 1 && sources[0].rowCheck != nil
        self.shares = sources.map { source in
            source.shareKey.map { store.observation.sharedReads.join($0, as: Element.self) }
        }
    }

    /// Leaves the store's observers (and the shared reads): the stream ended.
    private func stopObserving() {
        store.observation.unregister(self)
        condition.lock()
        let left = !leftShares
        leftShares = true
        condition.unlock()
        guard left else { return }
        for (source, share) in zip(sources, shares) {
            if let key = source.shareKey, let share { store.observation.sharedReads.leave(key, share) }
        }
    }

    /// Registers an observer and starts its first refresh; returns its subscription.
    static func start(store: Store, sources: [QuerySource<Element>], delivery: Delivery, sink: EventSink<Event>,
                      makeEvent: @escaping @Sendable ([LiveQueryEvent<Element>]) -> Event) -> Subscription {
        let observer = LiveObserver(store: store, sources: sources, delivery: delivery, sink: sink, makeEvent: makeEvent)
        // Registered before the first read, so that no commit after that read goes unnoticed.
        let interest = sources.count == 1 ? sources[0].rowCheck?.interest : nil
        store.observation.register(observer, store: store, interest: interest)
        let action = observer.withState { $0.start() }
        observer.perform(action)
        return Subscription(endingError: observer.endingError) { [observer] in observer.cancel() }
    }

    /// Its phase now (for tests that must stand at one).
    var phase: ObserverState.Phase { withState { $0.phase } }

    private func withState<T>(_ body: (inout ObserverState) -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body(&state)
    }

    // MARK: Notifications

    func storeDidCommit(_ summary: CommitSummary, batch: RefreshBatch) {
        condition.lock()
        // The store tells a row-precise observer only of the commits that may change its result
        // (see ObservationCenter.route); the others, of the commits to the tables they read.
        let unknownExtent = summary.tables.contains(ChangeLog.everyTable)
        let interested = interest.map { !$0.isDisjoint(with: summary.tables) } ?? true || unknownExtent
        if unknownExtent {
            interest = nil
            interestUnknownSince = max(interestUnknownSince, summary.version)
        }
        let action = interested ? state.invalidate() : .none
        if !interested {
            // Nothing to read: its result at this version is the one it has.
            settledVersion = max(settledVersion, summary.version)
            condition.broadcast()
        }
        condition.unlock()
        perform(action, batch: batch)
    }

    func routed(_ version: Int64) {
        // Only an immediate handler is waited for (see awaitDelivery): the others skip the lock,
        // which routing would otherwise take for every observer a commit concerns.
        guard isAwaitable else { return }
        routedVersion.withLock { $0 = max($0, version) }
    }

    func awaitDelivery(of version: Int64) {
        guard isAwaitable else { return }
        condition.lock()
        defer { condition.unlock() }
        // Waits for the commits routed to it, up to `version`, while it is not finished, its
        // refresh is not deferred to the end of a store call on another thread, nor backing off
        // (either may be long), and this thread is not the one delivering.
        while settledVersion < min(version, routedVersion.withLock { $0 }),
              state.phase != .finished, state.phase != .backingOff, !refreshDeferred, deliveringThread !== Thread.current {
            condition.wait()
        }
    }

    /// Whether the store evaluates this observer's filter in each commit (a single
    /// row-precise source).
    let isRowPrecise: Bool

    /// Under `condition`, after a change of phase to `action`: tells the store when a row-precise
    /// observer became idle, with its result's keys. Returns the action to take: a refresh when
    /// the store says a commit since its read changed a row that entered its result.
    private func tellStoreIfIdle(_ action: ObserverState.Action) -> ObserverState.Action {
        guard state.phase == .idle, isRowPrecise, let version = checkedVersion else { return action }
        let keys = snapshots[0]?.items.map(\.key) ?? []
        storeHoldsKeys = true
        guard store.observation.observerBecameIdle(observerID, keys: keys, dependencyKeys: dependencyKeys, values: termValues,
                                                   version: version)
        else { return action }
        return state.invalidate()
    }

    // MARK: Running the actions

    /// Runs `first` and the actions that follow it; a refresh to run in the background joins
    /// `batch` when there is one.
    private func perform(_ first: ObserverState.Action, batch: RefreshBatch? = nil) {
        var action = first
        while true {
            switch action {
            case .none:
                return
            case .refresh:
                // Work queued for later holds the observer weakly (here and below): while it is
                // registered the store's observation center holds it, and once it is cancelled
                // the work has nothing to do. A strong hold would keep a released subscription's
                // store — its connections, file watch and timers — until the work ran, which on a
                // queue that does not run (suspended, a main queue nobody drains) is never.
                if case .queue = delivery, !ObservationThreads.background.isInside {
                    if let batch {
                        batch.add(RefreshBatch.Refresh(store: store, read: { [weak self] db, seen in
                            guard let self else { return }
                            // Inside the batch's read: reading again waits for its end (below).
                            self.perform(self.refreshed(Result { try self.refresh(db, seeing: seen) }))
                        }, fail: { [weak self] error in
                            guard let self else { return }
                            self.perform(self.refreshed(.failure(error)))
                        }))
                    } else {
                        Self.background.async { [weak self] in
                            ObservationThreads.background.inside { self?.perform(.refresh) }
                        }
                    }
                    return
                }
                // This thread is inside a write or a read of the store (a subscription made there):
                // it holds a connection that cannot read the committed state now, and may not wait
                // for another. The refresh runs when that call ends.
                if store.pool.whenAccessEnds({
                    self.condition.lock()
                    self.refreshDeferred = false
                    self.condition.unlock()
                    self.perform(.refresh)
                }) {
                    condition.lock()
                    refreshDeferred = true
                    condition.unlock()
                    return
                }
                action = refresh()
            case .deliver:
                switch (delivery, sink) {
                case (_, .channel(let channel)):
                    offer(to: channel)
                    return
                case (.immediate, _):
                    action = deliverToHandler()
                case (.queue(let queue), _):
                    queue.async { [weak self] in
                        guard let self else { return }
                        self.perform(self.deliverToHandler())
                    }
                    return
                }
            case .deliverError:
                switch (delivery, sink) {
                case (_, .channel(let channel)):
                    channel.finish(throwing: takeFailure())
                case (.immediate, .handler(_, let onError)):
                    if let error = takeFailure() { onError(error) }
                case (.queue(let queue), .handler(_, let onError)):
                    let error = takeFailure()
                    queue.async { if let error { onError(error) } }
                }
                stopObserving()
                return
            }
        }
    }

    private func refresh() -> ObserverState.Action {
        refreshed(Result { try store.read(waitingForReaders: false) { db in try refresh(db) } })
    }

    /// The action after a read that gave `outcome`.
    private func refreshed(_ outcome: Result<Event?, any Error>) -> ObserverState.Action {
        condition.lock()
        defer { condition.unlock() }
        defer { condition.broadcast() }
        switch outcome {
        case .success(let event):
            retryDelay = 0
            let action = state.refreshed(hasEvent: event != nil)
            if action == .deliver {
                ready = event   // cancelled meanwhile: dropped at once
                readyVersion = checkedVersion ?? 0
            } else {
                settledVersion = max(settledVersion, checkedVersion ?? 0)
            }
            return tellStoreIfIdle(action)
        case .failure(let error) where ConnectionPool.mayPass(error):
            guard state.refreshFailedForNow() else { return .none }
            retryDelay = min(max(retryDelay * 2, Self.firstRetryDelay), Self.longestRetryDelay)
            Self.background.asyncAfter(deadline: .now() + .milliseconds(retryDelay)) { [weak self] in
                guard let self else { return }
                ObservationThreads.background.inside { self.perform(self.withState { $0.retry() }) }
            }
            return .none
        case .failure(let error):
            failure = error
            return state.fail()
        }
    }

    /// The first and the longest pause before a failed refresh is tried again, in milliseconds
    /// (doubling in between).
    private static var firstRetryDelay: Int { 5 }
    private static var longestRetryDelay: Int { 1_000 }

    /// The error that ended the stream, handed out once (and kept on the subscription).
    private func takeFailure() -> (any Error)? {
        condition.lock()
        defer { condition.unlock() }
        defer { failure = nil }
        if let failure { endingError.withLock { $0 = failure } }
        return failure
    }

    private func deliverToHandler() -> ObserverState.Action {
        guard case .handler(let onEvent, let onError) = sink else { return .none }
        condition.lock()
        guard state.phase == .delivering, let event = ready else {
            condition.unlock()
            return .none
        }
        ready = nil
        deliveringThread = Thread.current
        condition.unlock()

        var thrown: (any Error)?
        ObservationThreads.handlers.inside {
            do { try onEvent(event) } catch { thrown = error }
        }

        condition.lock()
        deliveringThread = nil
        settledVersion = max(settledVersion, readyVersion)
        condition.broadcast()
        let action: ObserverState.Action
        if let thrown {
            action = state.fail()
            if action == .deliverError { failure = thrown }
        } else {
            action = tellStoreIfIdle(state.delivered())
        }
        condition.unlock()
        if action == .deliverError {
            // The handler's own error: report it where the handler ran.
            if let error = takeFailure() { onError(error) }
            stopObserving()
            return .none
        }
        return action
    }

    private func offer(to channel: EventChannel<Event>) {
        condition.lock()
        let event = ready
        ready = nil
        condition.unlock()
        guard let event else { return }
        channel.offer(event) { [self] in
            condition.lock()
            let action = tellStoreIfIdle(state.delivered())
            condition.unlock()
            perform(action)
        }
    }

    private func cancel() {
        condition.lock()
        state.cancel()
        ready = nil
        condition.broadcast()   // for those awaiting its delivery
        // Wait for a handler running on another thread, unless this thread is itself inside a
        // handler (it might be the one that handler waits for).
        while let thread = deliveringThread, thread !== Thread.current, !ObservationThreads.handlers.isInside {
            condition.wait()
        }
        condition.unlock()
        stopObserving()
        if case .channel(let channel) = sink { channel.finish(throwing: nil) }
    }

    // MARK: Background work

    static var background: DispatchQueue { DispatchQueue.global(qos: .userInitiated) }
}
