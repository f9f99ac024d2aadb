import Foundation
import RippleDiff

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

/// One subscription to one or more queries read together (a group is read in one transaction, so
/// all its results are at the same version).
///
/// Its phases follow ``ObserverState``, held under `condition` with everything shared between
/// threads; the refresh state (`snapshots`, versions) is only touched by the one refresh the state
/// machine allows at a time, handed from thread to thread through the lock.
final class LiveObserver<Element: Sendable, Event: Sendable>: ObservationTarget, @unchecked Sendable {   // shared state under `condition`; refresh state: see below
    // Refresh state is owned by the single refresh in flight (ObserverState admits one), handed
    // from thread to thread through the lock.
    private let store: Store
    private let sources: [QuerySource<Element>]
    private let delivery: Delivery
    private let sink: EventSink<Event>
    private let makeEvent: @Sendable ([LiveQueryEvent<Element>]) -> Event
    /// The error that ended the stream, shared with the ``Subscription``.
    private let endingError = Locked<(any Error)?>(nil)
    let observerID = ObservationCenter.makeObserverID()

    private let condition = NSCondition()
    private var state = ObserverState()
    private var ready: Event?
    private var failure: (any Error)?
    private var deliveringThread: Thread?
    /// Whether ``stopObserving()`` left the shared reads (guarded by `condition`).
    private var leftShares = false
    /// The tables each source reads, once known (guarded by `condition`).
    private var interest: Set<String>?
    /// The newest version the subscriber has seen the results at: read without a change, or
    /// read and handed to the handler (guarded by `condition`; see ``awaitDelivery(of:)``).
    private var settledVersion: Int64 = 0
    /// The version of the event ready to deliver (guarded by `condition`).
    private var readyVersion: Int64 = 0
    /// The newest commit routed to it (its own lock, taken under the store's routing lock and
    /// under `condition`, and never holding another).
    private let routedVersion = Locked<Int64>(0)
    /// A refresh waits for the end of a store call on the thread that asked for it (guarded by
    /// `condition`): nobody else may wait for it.
    private var refreshDeferred = false
    /// The pause before the next retry of a refresh that failed for a passing reason, in
    /// milliseconds (guarded by `condition`; reset by a refresh that succeeds).
    private var retryDelay = 0

    // Refresh state.
    private var snapshots: [Snapshot<Element>?]
    /// Per source, the index of each key of its snapshot, built when first needed.
    private var keyIndexes: [[RowKey: Int]?]
    /// Per source, the result it shares with live queries of the same query (see ``SharedRead``).
    private let shares: [SharedRead<Element>?]
    /// Per source that places rows by its order (``QuerySource/orderTerms``), that order, as the
    /// schema read by its last run of the query allows (`nil`: the query runs again instead).
    private var orders: [RowOrder?]
    private var tables: [Set<String>] = []
    private var logQueries: [String] = []
    private var checkedVersion: Int64?
    /// Whether the store knows the keys of the result as its own (told when it last became idle,
    /// see ``tellStoreIfIdle(_:)``): else, a read checks the commits since the last one against
    /// them (``ObservationCenter/told(_:through:after:holding:)``).
    private var storeHoldsKeys = false
    private var deliveredVersion: Int64?

    private init(store: Store, sources: [QuerySource<Element>], delivery: Delivery, sink: EventSink<Event>,
                 makeEvent: @escaping @Sendable ([LiveQueryEvent<Element>]) -> Event) {
        self.store = store
        self.sources = sources
        self.delivery = delivery
        self.sink = sink
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
        let interested = interest.map { !$0.isDisjoint(with: summary.tables) } ?? true
            || summary.tables.contains(ChangeLog.everyTable)
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
        routedVersion.withLock { $0 = max($0, version) }
    }

    func awaitDelivery(of version: Int64) {
        guard case .immediate = delivery, case .handler = sink else { return }
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
    private let isRowPrecise: Bool

    /// Under `condition`, after a change of phase to `action`: tells the store when a row-precise
    /// observer became idle, with its result's keys. Returns the action to take: a refresh when
    /// the store says a commit since its read changed a row that entered its result.
    private func tellStoreIfIdle(_ action: ObserverState.Action) -> ObserverState.Action {
        guard state.phase == .idle, isRowPrecise, let version = checkedVersion else { return action }
        let keys = snapshots[0]?.items.map(\.key) ?? []
        storeHoldsKeys = true
        guard store.observation.observerBecameIdle(observerID, keys: keys, version: version) else { return action }
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
                if case .queue = delivery, !ObservationThreads.background.isInside {
                    if let batch {
                        batch.add(RefreshBatch.Refresh(store: store, read: { db, seen in
                            // Inside the batch's read: reading again waits for its end (below).
                            self.perform(self.refreshed(Result { try self.refresh(db, seeing: seen) }))
                        }, fail: { error in
                            self.perform(self.refreshed(.failure(error)))
                        }))
                    } else {
                        Self.background.async { ObservationThreads.background.inside { self.perform(.refresh) } }
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
                    queue.async { self.perform(self.deliverToHandler()) }
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
        case .failure(let error) where Self.mayPass(error):
            guard state.refreshFailedForNow() else { return .none }
            retryDelay = min(max(retryDelay * 2, Self.firstRetryDelay), Self.longestRetryDelay)
            Self.background.asyncAfter(deadline: .now() + .milliseconds(retryDelay)) {
                ObservationThreads.background.inside { self.perform(self.withState { $0.retry() }) }
            }
            return .none
        case .failure(let error):
            failure = error
            return state.fail()
        }
    }

    /// Whether a refresh that failed with `error` may succeed later: a reader that could not be
    /// opened or read for a moment (descriptors exhausted, the file busy or locked beyond the
    /// timeout, an I/O error, memory). A moved file, a query that does not fit the schema or
    /// invalid SQL end the stream.
    static func mayPass(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [.cannotOpen, .busy, .locked, .ioError, .noMemory].contains(error.code)
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

    private static var background: DispatchQueue { DispatchQueue.global(qos: .userInitiated) }

    // MARK: Reading

    /// Reads what changed since the last refresh, in one read transaction at one version.
    /// Returns the event to deliver, or `nil` when no result changed.
    private func refresh(_ db: Database, seeing seen: ReadVersion? = nil) throws -> Event? {
        store.observation.diagnostics.withLock { $0.refreshes += 1 }
        // The version this read sees, and where the change log starts (read by the batch once
        // for all its refreshes).
        let seen = try seen ?? ReadVersion(db)
        let (version, oldest) = (seen.version, seen.oldest)
        // What the store told this observer of the commits up to this version (taken either way:
        // what this read covers is done with).
        let told = isRowPrecise
            ? store.observation.told(observerID, through: version, after: checkedVersion,
                                     holding: storeHoldsKeys ? nil : snapshots[0]?.items.map(\.key))
            : nil
        storeHoldsKeys = false
        let isInitial = checkedVersion == nil
        if !isInitial && version == checkedVersion { return nil }
        if isInitial {
            tables = try sources.map { try $0.tables(in: db) }
            logQueries = tables.map { ChangeLog.changedKeysSQL(of: $0, limit: Self.rowCheckLimit + 1) }
            let all = tables.reduce(into: Set<String>()) { $0.formUnion($1) }
            condition.lock()
            interest = all
            condition.unlock()
            store.observation.observer(observerID, reads: all)
        }
        var impacts = Array(repeating: Impact.everything, count: sources.count)
        if let since = checkedVersion {
            if oldest <= since {
                if let told {
                    impacts[0] = try impact(told: told, after: since, through: version, in: db)
                } else {
                    for index in sources.indices {
                        impacts[index] = try impact(on: index, after: since, through: version, in: db)
                    }
                }
            }
        }
        checkedVersion = version
        guard impacts.contains(where: { $0 != .none }) else { return nil }

        var members: [LiveQueryEvent<Element>] = []
        var changed = isInitial
        let previous = deliveredVersion
        for index in sources.indices {
            var member: LiveQueryEvent<Element>?
            if let old = snapshots[index] {
                switch impacts[index] {
                case .none:
                    member = LiveQueryEvent(version: version, previousVersion: previous, snapshot: old.elements,
                                            changeset: .unchanged(count: old.elements.count), updatedColumns: [],
                                            origin: seen.origin, tag: seen.tag)
                case .updated(let keys):
                    if let patched = try patch(index, old, keys: keys, in: db) {
                        member = LiveQueryEvent(version: version, previousVersion: previous, snapshot: patched.elements,
                                                changeset: patched.changeset, updatedColumns: patched.columns,
                                                origin: seen.origin, tag: seen.tag)
                    }
                case .everything:
                    break
                }
            }
            if member == nil {
                // Another live query of the same query may have read it at this version.
                let new: Snapshot<Element>
                if let shared = shares[index]?.snapshot(at: version) {
                    new = shared
                } else {
                    new = try sources[index].fetch(db)
                    store.observation.diagnostics.withLock { $0.fetches += 1 }
                    shares[index]?.keep(new, at: version)
                }
                let changeset: Changeset
                var columns: [Set<String>] = []
                if let old = snapshots[index] {
                    changeset = Changeset(from: old.items, to: new.items)
                    columns = changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) }
                } else {
                    changeset = .initial(count: new.elements.count)
                }
                snapshots[index] = new
                keyIndexes[index] = nil
                // A schema change re-runs the query: the order is read again with it.
                if !sources[index].orderTerms.isEmpty, let table = sources[index].rowCheck?.table {
                    orders[index] = RowOrder(terms: sources[index].orderTerms, table: table, in: db)
                }
                member = LiveQueryEvent(version: version, previousVersion: previous, snapshot: new.elements,
                                        changeset: changeset, updatedColumns: columns, origin: seen.origin, tag: seen.tag)
            }
            guard let member else { continue }
            changed = changed || !member.changeset.isEmpty
            members.append(member)
        }
        guard changed else { return nil }
        deliveredVersion = version
        return makeEvent(members)
    }

    /// The index of each key in source `index`'s snapshot (built once per fetched snapshot:
    /// patching in place keeps keys where they are).
    private func keyIndex(_ index: Int) -> [RowKey: Int] {
        if let built = keyIndexes[index] { return built }
        var built: [RowKey: Int] = [:]
        if let snapshot = snapshots[index] {
            built.reserveCapacity(snapshot.items.count)
            for (position, item) in snapshot.items.enumerated() where built[item.key] == nil { built[item.key] = position }
        }
        keyIndexes[index] = built
        return built
    }

    /// The positions of `keys` in source `index`'s snapshot (those it holds): from its key index
    /// when built, else by one pass over the snapshot — a few changed rows do not pay for
    /// indexing every row, which patching would then make stale.
    private func positions(of keys: Set<RowKey>, in index: Int) -> [RowKey: Int] {
        if let built = keyIndexes[index] { return built }
        if keys.count > Self.scanLimit { return keyIndex(index) }
        var found: [RowKey: Int] = [:]
        guard let items = snapshots[index]?.items else { return found }
        for (position, item) in items.enumerated() where keys.contains(item.key) && found[item.key] == nil {
            found[item.key] = position
            if found.count == keys.count { break }
        }
        return found
    }

    /// Up to this many changed keys are looked for by a pass over the snapshot.
    private static var scanLimit: Int { 8 }

    /// How logged changes may affect a source's result.
    private enum Impact: Equatable {
        /// They cannot: the result stands.
        case none
        /// Only the rows with these keys changed: they are read again and replaced, removed or
        /// placed in the result (see ``patch(_:_:keys:in:)``).
        case updated(Set<RowKey>)
        /// Re-run the query.
        case everything
    }

    /// What the logged changes in `(after, through]` do to source `index`'s result.
    private func impact(on index: Int, after: Int64, through: Int64, in db: Database) throws -> Impact {
        guard let (keys, updatesOnly) = try loggedKeys(of: index, after: after, through: through, in: db) else {
            return .everything
        }
        return try impact(of: keys, updatesOnly: updatesOnly, on: index, in: db)
    }

    /// What the commits in `(after, through]` do to a row-precise observer's result, from what
    /// the store told it: the keys of the commits it was told of, and the change log for those
    /// not routed yet when this read began. The commits it was not told of cannot change its
    /// result (the store's filter index ruled them out), and are not read.
    private func impact(told: ObservationCenter.Told, after since: Int64, through version: Int64,
                        in db: Database) throws -> Impact {
        // Too many commits were told to keep: the change log says what they changed.
        if told.lostThrough > since { return try impact(on: 0, after: since, through: version, in: db) }
        var keys: [RowKey] = []
        var updatesOnly = true
        var matched = false
        for commit in told.commits where commit.version > since {
            // A commit whose changed rows were not told (another connection's, too many rows), or
            // one that stands for several, not all of them in this read.
            guard let changed = commit.keys, commit.version <= version else {
                return try impact(on: 0, after: since, through: version, in: db)
            }
            keys += changed
            updatesOnly = updatesOnly && commit.updatesOnly
            matched = matched || commit.matched
            if keys.count > Self.rowCheckLimit { return .everything }
        }
        let logged = max(since, min(told.routedThrough, version))
        if logged < version {
            guard let (more, moreUpdatesOnly) = try loggedKeys(of: 0, after: logged, through: version, in: db) else {
                return .everything
            }
            keys += more
            updatesOnly = updatesOnly && moreUpdatesOnly
        }
        return try impact(of: keys, updatesOnly: updatesOnly, knownToMatch: matched, on: 0, in: db)
    }

    /// The keys of the rows the change log says changed in `(after, through]` in source
    /// `index`'s tables, and whether they were all updates; `nil` when they cannot be known
    /// row by row (re-run the query).
    private func loggedKeys(of index: Int, after: Int64, through: Int64, in db: Database) throws
        -> (keys: [RowKey], updatesOnly: Bool)? {
        let entries = try db.fetchAll(logQueries[index], [after, through])
        guard !entries.isEmpty else { return ([], true) }
        guard let check = sources[index].rowCheck, snapshots[index] != nil, entries.count <= Self.rowCheckLimit else {
            return nil
        }
        var keys: [RowKey] = []
        var updatesOnly = true
        for entry in entries {
            // Keys exactly as stored; an entry without them (logged by an older Ripple, or a
            // change of unknown extent) re-runs the query.
            guard entry.values.count == 3, case .text(let table) = entry.values[0], table == check.table,
                  case .text(let operation) = entry.values[1], case .blob(let list) = entry.values[2],
                  let parsed = RowKey.list(list) else { return nil }
            updatesOnly = updatesOnly && operation == ChangeLogEntry.Operation.update.rawValue
            keys += parsed
            if keys.count > Self.rowCheckLimit { return nil }
        }
        return (keys, updatesOnly)
    }

    /// What changes to the rows of `keys` do to source `index`'s result; `knownToMatch` when the
    /// commit found that one of them matched the filter (then the filter is not checked again).
    private func impact(of keys: [RowKey], updatesOnly: Bool, knownToMatch: Bool = false, on index: Int,
                        in db: Database) throws -> Impact {
        guard !keys.isEmpty else { return .none }
        guard let check = sources[index].rowCheck, snapshots[index] != nil else { return .everything }
        // Rows placed by the order: whatever the changes, the changed rows are read alone.
        if orders[index] != nil, sources[index].fetchRows != nil {
            let changed = Set(keys)
            if changed.count <= Self.patchLimit { return .updated(changed) }
        }
        let positions = keyIndex(index)
        let inResult = keys.filter { positions[$0] != nil }
        if updatesOnly, sources[index].fetchRows != nil, keys.count <= Self.patchLimit,
           !inResult.isEmpty, inResult.count == keys.count {
            return .updated(Set(keys))
        }
        if !inResult.isEmpty || knownToMatch { return .everything }
        return try check.anyMatches(keys, in: db) ? .everything : .none
    }

    /// The result of source `index` with the rows of `keys` read again: replaced in place, or
    /// for a source that places rows by its order, also removed, moved and inserted; `nil`
    /// when the query must run again instead (a row left a window or changed an ordering
    /// column, and the order cannot place it).
    private func patch(_ index: Int, _ old: Snapshot<Element>, keys: Set<RowKey>, in db: Database) throws
        -> (elements: [Element], changeset: Changeset, columns: [Set<String>])? {
        let positions = self.positions(of: keys, in: index)
        guard let fetchRows = sources[index].fetchRows else { return nil }
        if let order = orders[index] {
            let rows = try fetchRows(db, Array(keys))
            guard rows.columnNames == old.columnNames, rows.sortWidth == old.sortWidth else { return nil }
            return place(index, old, rows: rows, keys: keys, positions: positions, order: order)
        }
        guard keys.allSatisfy({ positions[$0] != nil }) else { return nil }
        let rows = try fetchRows(db, Array(keys))
        // A row that no longer matches leaves the result; with a window (LIMIT), another row
        // would take its place: the query re-runs.
        let left = rows.items.count < keys.count
        guard !left || !sources[index].isWindowed, rows.columnNames == old.columnNames else { return nil }
        let width = old.columnNames.count
        var new = old
        var updated: [(index: Int, columns: Set<String>)] = []
        for row in rows.items.indices {
            guard let position = positions[rows.items[row].key] else { return nil }
            for column in sources[index].orderColumns
            where old.columnHashes[position * width + column] != rows.columnHashes[row * width + column] {
                return nil
            }
            if old.items[position].content != rows.items[row].content {
                updated.append((position, old.changedColumns(from: position, to: row, in: rows)))
                new.replace(position, with: row, of: rows)
            }
        }
        if left {
            let kept = Set(rows.items.map(\.key))
            for position in keys.filter({ !kept.contains($0) }).compactMap({ positions[$0] }).sorted(by: >) {
                new.remove(at: position)
            }
            snapshots[index] = new
            keyIndexes[index] = nil
            let changeset = Changeset(from: old.items, to: new.items)
            return (new.elements, changeset, changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) })
        }
        updated.sort { $0.index < $1.index }
        snapshots[index] = new
        return (new.elements, .updating(updated.map(\.index), count: new.elements.count), updated.map(\.columns))
    }

    /// Source `index`'s result with the changed rows of `keys` (`rows`: those that match now)
    /// put where they belong: a row that no longer matches leaves; one whose ORDER BY values
    /// kept their values is replaced where it stands; any other is placed by `order`.
    ///
    /// - Complexity: O(n + k log n) for n rows in the result and k changed rows, plus O(n) per
    ///   row that left, entered or moved, and the minimal moves (O(n log n)).
    private func place(_ index: Int, _ old: Snapshot<Element>, rows: Snapshot<Element>, keys: Set<RowKey>,
                       positions: [RowKey: Int], order: RowOrder) -> (elements: [Element], changeset: Changeset, columns: [Set<String>]) {
        var fetched: [RowKey: Int] = [:]
        for (row, item) in rows.items.enumerated() { fetched[item.key] = row }
        var new = old
        var updated: [(index: Int, columns: Set<String>)] = []
        var leaving: [Int] = []
        var entering: [Int] = []
        // The rows that left their place for another: their old positions.
        var moving: [Int: Int] = [:]
        for key in keys {
            switch (positions[key], fetched[key]) {
            case (nil, nil):
                continue
            case (let position?, nil):
                leaving.append(position)
            case (nil, let row?):
                entering.append(row)
            case (let position?, let row?):
                if old.sortValues(of: position) == rows.sortValues(of: row) {
                    if old.items[position].content != rows.items[row].content {
                        updated.append((position, old.changedColumns(from: position, to: row, in: rows)))
                        new.replace(position, with: row, of: rows)
                    }
                } else {
                    leaving.append(position)
                    entering.append(row)
                    moving[row] = position
                }
            }
        }
        if leaving.isEmpty && entering.isEmpty {
            updated.sort { $0.index < $1.index }
            snapshots[index] = new
            return (new.elements, .updating(updated.map(\.index), count: new.elements.count), updated.map(\.columns))
        }
        // Where each row of the new result was in the old one (nil: it entered), kept beside it:
        // the changeset follows without a diff.
        var origin: [Int?] = Array(old.items.indices)
        for position in leaving.sorted(by: >) {
            new.remove(at: position)
            origin.remove(at: position)
        }
        for row in entering.sorted() {
            let position = order.insertionIndex(of: rows.sortValues(of: row), in: new)
            new.insert(row, of: rows, at: position)
            origin.insert(moving[row], at: position)
        }
        // Changed content: the rows replaced in place, and the moved ones whose content changed.
        var changed = Set(updated.map(\.index))
        for (row, position) in moving where old.items[position].content != rows.items[row].content { changed.insert(position) }
        let changeset = Changeset(oldCount: old.items.count, newToOld: origin,
                                  updated: origin.indices.filter { origin[$0].map(changed.contains) ?? false })
        snapshots[index] = new
        keyIndexes[index] = nil
        return (new.elements, changeset, changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) })
    }

    /// At most this many changed rows are patched in place.
    private static var patchLimit: Int { 32 }

    /// Beyond this many changed rows, re-running the query is cheaper than checking each.
    private static var rowCheckLimit: Int { 256 }
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
