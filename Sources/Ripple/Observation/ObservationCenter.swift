import Foundation

/// A store's registry of live observers: told of every commit (the store's own, and other
/// processes' when noticed), it tells the observers whose tables changed.
///
/// While observers are registered and the store is a file, a watch on the file (``FileWatch``,
/// filtered by ``OwnCommitFilter``) or, when it cannot be watched, a timer every `pollInterval`
/// makes the store look for other connections' commits (see ``Store/noticeExternalWrites()``);
/// another store of this process on the same file tells it directly after each commit.
final class ObservationCenter: Sendable {
    /// An observer's identity for the store's lifetime: drawn from a counter, never reused (an
    /// object's address is, once it is freed, and with it a stale compiled filter).
    typealias ObserverID = UInt64

    private static let nextID = Locked<ObserverID>(0)

    /// A new observer identity.
    static func makeObserverID() -> ObserverID {
        nextID.withLock { id in
            id += 1
            return id
        }
    }

    /// A registered observer, as commits are routed to it.
    private struct Registered {
        /// Strong: an observer lives while its ``Subscription`` does, and the subscription's
        /// release cancels it, which unregisters it.
        let target: any ObservationTarget
        /// A row-precise observer's table (its filter is in ``filters``).
        let rowTable: String?
        /// Not row-precise: the tables it reads, once known.
        var tables: Set<String>?
        /// Row-precise: the keys of its result when it last became idle.
        var heldKeys: [RowKey] = []
        /// Row-precise: the version of the commit evaluated last when it registered. That commit
        /// may commit after the observer's first read without having evaluated its filter: the
        /// observer hears every commit until it has read at least that version.
        var registeredDuring: Int64 = 0
        /// Row-precise: the commits it was told of and has not read yet (see ``told(_:through:)``).
        var told: [ToldCommit] = []
        /// Row-precise: past ``toldLimit`` commits, the list is dropped: what it told is unknown up
        /// to this version (0: nothing lost).
        var lostThrough: Int64 = 0
    }

    /// A commit a row-precise observer was told of: its version, and the keys of its table's
    /// changed rows (`nil`: unknown, read the change log).
    struct ToldCommit: Sendable {
        var version: Int64
        /// The oldest version it stands for (``CommitSummary/coveredFrom``; else `version`).
        var coveredFrom: Int64
        var keys: Set<RowKey>?
        var updatesOnly: Bool
        /// Whether its filter matched one of the changed rows (evaluated in the commit).
        var matched: Bool

        /// `summary`'s commit, as told to a row-precise observer of `table`.
        init(_ summary: CommitSummary, table: String, keys: Set<RowKey>?, matched: Bool) {
            version = summary.version
            coveredFrom = summary.coveredFrom ?? summary.version
            self.keys = keys
            updatesOnly = !summary.insertedOrDeleted.contains(table)
            self.matched = matched
        }
    }

    /// What a row-precise observer about to read needs to know of the commits since its last read.
    struct Told: Sendable {
        /// The commits it was told of, in version order.
        var commits: [ToldCommit]
        /// Every commit up to this version was routed: one it was not told of cannot change its
        /// result. Commits after it must be read from the change log.
        var routedThrough: Int64
        /// What it was told of commits up to this version was dropped (too many): those after its
        /// last read must be read from the change log. 0: nothing was.
        var lostThrough: Int64
    }

    /// Who a commit concerns, decided under the writer's lock (see ``route(_:)``).
    struct Routing {
        let summary: CommitSummary
        let targets: [any ObservationTarget]
    }

    /// At most this many told commits are kept per observer; past it, it reads the change log.
    private static var toldLimit: Int { 256 }

    private struct State {
        var observers: [ObserverID: Registered] = [:]
        /// Observers that are not row-precise, by the tables they read (told of every commit to them).
        var byTable: [String: Set<ObserverID>] = [:]
        /// Observers whose tables are not known yet (told of every commit).
        var untabled: Set<ObserverID> = []
        /// Row-precise observers, by table.
        var rowPrecise: [String: Set<ObserverID>] = [:]
        /// Row-precise observers whose first read may not see a commit that was evaluated before
        /// their filter was registered (see ``Registered/registeredDuring``): told of every
        /// commit to their table until they read past it.
        var busy: Set<ObserverID> = []
        /// The last commits routed row by row: what an observer checks the rows that entered its
        /// result against (see ``RecentCommits``).
        var recent = RecentCommits()
        /// Per table, the row-precise observers whose result holds each key (as of when they last
        /// became idle): told of every commit that changes the row.
        var holders: [String: [RowKey: [ObserverID]]] = [:]
        /// Every commit with a version up to this one was routed (routing happens in version
        /// order, under the writer's lock).
        var routedThrough: Int64 = 0
        var poller: (any DispatchSourceTimer)?
        var watch: FileWatch?
    }

    private let state = Locked(State())
    /// The row-precise observers' filters, grouped and indexed (evaluated under the writer's lock).
    private let filters = Locked(FilterRegistry())
    private let pollInterval: TimeInterval?
    /// The database file to watch while observers are registered (`nil` in memory).
    private let watchedFile: String?
    /// Where the watch's and other stores' calls to look for commits run, one at a time.
    let noticeQueue = DispatchQueue(label: "ripple.observation.notice", qos: .userInitiated)
    /// Tells the watch's wake-ups for the store's own commits from others' (`nil` unwatched).
    let ownCommits: OwnCommitFilter?
    /// How many times live queries of this store ran their SQL (for tests of invalidation).
    let fetchCount = Locked(0)
    /// How many times live queries of this store read what changed (for tests of invalidation).
    let refreshCount = Locked(0)
    /// The results live queries of the same query share.
    let sharedReads = SharedReads()
    /// How many commits observers skipped without reading anything (for tests of invalidation).
    let skipCount = Locked(0)
    /// How many times the store looked for other connections' commits on the writer (for tests).
    let looks = Locked(0)
    /// How many read transactions batches of refreshes took (for tests, see ``RefreshBatch``).
    let batchReads = Locked(0)
    /// How many times the file watch woke (for tests).
    let watchWakes = Locked(0)

    init(pollInterval: TimeInterval?, watchedFile: String?) {
        self.pollInterval = pollInterval
        self.watchedFile = watchedFile
        self.ownCommits = watchedFile == nil ? nil : OwnCommitFilter(queue: noticeQueue)
    }

    deinit {
        state.withLock {
            $0.poller?.cancel()
            $0.watch?.cancel()
        }
        // Never again read the writer's mapping of the wal-index (the connection is closing).
        ownCommits?.deactivate()
    }

    /// The number of registered observers.
    var count: Int { state.withLock { $0.observers.count } }

    /// The registered observers.
    var targets: [any ObservationTarget] { state.withLock { $0.observers.values.map(\.target) } }

    /// Every commit up to this version was routed.
    var routedThrough: Int64 { state.withLock { $0.routedThrough } }

    /// Registers `target`; with `interest`, it is row-precise: its filter is evaluated on the
    /// rows each commit changes, inside the commit's transaction (see
    /// ``evaluateFilters(of:in:)``), and it is told only of the commits that change a row of its
    /// result or matching its filter. Until its first read has seen every commit evaluated
    /// before its filter was added, it is told of every commit to its table (see
    /// ``observerBecameIdle(_:keys:version:)``).
    ///
    /// - Complexity: O(1) amortized (a new distinct filter rebuilds its table's index at the next
    ///   commit to the table).
    func register(_ target: any ObservationTarget, store: Store, interest: RowInterest? = nil) {
        let id = target.observerID
        // The filter first: a commit evaluated from now on sees it, and one evaluated before is
        // the version returned.
        let registeredDuring = interest.map { interest in filters.withLock { $0.add(id, interest) } } ?? 0
        state.withLock { state in
            if let interest {
                state.observers[id] = Registered(target: target, rowTable: interest.table, tables: nil,
                                                 registeredDuring: registeredDuring)
                state.rowPrecise[interest.table, default: []].insert(id)
                state.busy.insert(id)
            } else {
                state.observers[id] = Registered(target: target, rowTable: nil, tables: nil)
                state.untabled.insert(id)
            }
            if state.watch == nil, state.poller == nil {
                state.watch = watchedFile.flatMap { startWatch(of: $0, store: store) }
                if state.watch == nil, let pollInterval, pollInterval > 0 {
                    // The fallback: the file cannot be watched, or the watch is off.
                    let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
                    timer.schedule(deadline: .now() + pollInterval, repeating: pollInterval, leeway: .milliseconds(10))
                    timer.setEventHandler { [weak store] in
                        // A failure (the file busy, say) is retried at the next tick.
                        try? store?.noticeCommits()
                    }
                    timer.resume()
                    state.poller = timer
                }
            }
        }
    }

    /// Watches the database file for other connections' commits; `nil` when it cannot.
    private func startWatch(of path: String, store: Store) -> FileWatch? {
        guard let ownCommits else { return nil }
        // A failure to look (the file busy, say) is retried at the next change.
        let look: @Sendable () -> Void = { [weak store] in try? store?.noticeCommits() }
        ownCommits.activate(look: look)
        let watch = FileWatch(database: path, queue: noticeQueue) { [ownCommits, watchWakes] onlyWrites in
            watchWakes.withLock { $0 += 1 }
            // The WAL is written by every commit, the store's own too, and the database file by
            // checkpoints: the filter tells others' commits apart. A file removed or replaced
            // is rare: look.
            if onlyWrites { ownCommits.wake() } else { look() }
        }
        if let watch { ownCommits.attach(watch) } else { ownCommits.deactivate() }
        return watch
    }

    func unregister(_ target: any ObservationTarget) {
        let id = target.observerID
        let wasRowPrecise = state.withLock { state -> Bool in
            guard let observer = state.observers.removeValue(forKey: id) else { return false }
            if let table = observer.rowTable {
                state.rowPrecise[table]?.remove(id)
                state.busy.remove(id)
                Self.release(observer.heldKeys, of: id, in: table, from: &state.holders)
            } else if let tables = observer.tables {
                for table in tables { state.byTable[table]?.remove(id) }
            } else {
                state.untabled.remove(id)
            }
            if state.observers.isEmpty {
                state.poller?.cancel()
                state.poller = nil
                if state.watch != nil { ownCommits?.deactivate() }
                state.watch?.cancel()
                state.watch = nil
            }
            return observer.rowTable != nil
        }
        if wasRowPrecise { filters.withLock { $0.remove(id) } }
    }

    /// An observer that is not row-precise learned which tables it reads: from now on it hears
    /// only of commits to them.
    func observer(_ id: ObserverID, reads tables: Set<String>) {
        state.withLock { state in
            guard var observer = state.observers[id], observer.rowTable == nil, observer.tables == nil else { return }
            observer.tables = tables
            state.observers[id] = observer
            state.untabled.remove(id)
            for table in tables { state.byTable[table, default: []].insert(id) }
        }
    }

    /// A row-precise observer became idle (called under its own lock) with a result of `keys` as
    /// of `version`: from now on it hears only of commits that change one of them or a row
    /// matching its filter. Returns whether it must read again.
    ///
    /// While it read and delivered, it was told only of the commits that change a row it held
    /// before, or a row matching its filter; a commit after `version` may also have changed a
    /// row that entered its result in this read. It is told of those now (from the recent
    /// commits; of everything since `version`, when they are older than what is kept), and
    /// must read again.
    ///
    /// - Complexity: O(keys) (the keys that left or joined its result are re-indexed), plus
    ///   O(changed keys) of the commits routed since `version`.
    func observerBecameIdle(_ id: ObserverID, keys: [RowKey], version: Int64) -> Bool {
        state.withLock { state in
            // In place (a copy of the record would share its lists, and changing them would copy them).
            guard let slot = state.observers.index(forKey: id), let table = state.observers.values[slot].rowTable else {
                return false
            }
            let held = state.observers.values[slot].heldKeys
            var entered: Set<RowKey> = []
            if held != keys {
                let kept = Set(keys)
                let old = Set(held)
                Self.release(held.filter { !kept.contains($0) }, of: id, in: table, from: &state.holders)
                for key in keys where !old.contains(key) {
                    state.holders[table, default: [:]][key, default: []].append(id)
                    entered.insert(key)
                }
                state.observers.values[slot].heldKeys = keys
            }
            if version >= state.observers.values[slot].registeredDuring { state.busy.remove(id) }
            // The keys it held before were routed by; only those that entered need a look.
            guard !entered.isEmpty, state.recent.newestVersion > version else { return false }
            guard let missed = state.recent.commits(to: table, after: version, changingAnyOf: entered,
                                                    besides: state.observers.values[slot].told) else {
                state.observers.values[slot].lostThrough = max(state.observers.values[slot].lostThrough, state.routedThrough)
                return true
            }
            state.observers.values[slot].told += missed
            return !missed.isEmpty
        }
    }

    private static func release(_ keys: [RowKey], of id: ObserverID, in table: String,
                                from holders: inout [String: [RowKey: [ObserverID]]]) {
        for key in keys {
            guard var list = holders[table]?[key] else { continue }
            list.removeAll { $0 == id }
            holders[table]![key] = list.isEmpty ? nil : list
        }
    }

    /// Evaluates, inside a write transaction about to commit, the filters of the row-precise
    /// observers of the changed tables on the changed rows (see ``FilterRegistry``): who matched. An observer whose filter matches none of the changed rows, and
    /// whose result holds none of them, knows the commit cannot change its result: it is not
    /// told of it. This never fails the write: an observer whose filter could not be evaluated
    /// is told.
    func evaluateFilters(of summary: CommitSummary, in db: Database) -> FilterMatches {
        filters.withLock { $0.evaluate(summary, in: db) }
    }

    /// How many distinct filters the row-precise observers of `table` have (for tests).
    func filterGroups(of table: String) -> Int { filters.withLock { $0.groupCount(of: table) } }

    /// Whether the file is watched (for tests: only while observers are registered).
    var isWatching: Bool { state.withLock { $0.watch != nil } }

    /// Whether observers are registered (and so whether other stores should tell this one of
    /// their commits).
    var isObserving: Bool { state.withLock { !$0.observers.isEmpty } }

    /// Decides who a commit concerns: for a table whose changed rows are known and whose filters
    /// were evaluated, the row-precise observers that matched, hold a changed row (as of when
    /// they last became idle), have just registered, or could not be evaluated; every other
    /// observer of a changed table; every observer for ``ChangeLog/everyTable``. A row-precise
    /// observer told of it keeps its changed keys until it reads. Such a commit is kept among
    /// the recent ones (``RecentCommits``): one that changed a row that entered a result in a
    /// read still under way is told when that observer becomes idle.
    ///
    /// Call it under the writer's lock, right after the commit, so that commits are routed in
    /// version order (an observer then skips, unread, the commits it was not told of).
    ///
    /// - Complexity: O(changed rows + observers told), not O(observers).
    func route(_ summary: CommitSummary, _ matches: FilterMatches) -> Routing {
        let targets = state.withLock { state -> [any ObservationTarget] in
            var told: Set<ObserverID>
            if summary.tables.contains(ChangeLog.everyTable) {
                told = Set(state.observers.keys)
            } else {
                told = state.untabled
                for table in summary.tables {
                    told.formUnion(state.byTable[table] ?? [])
                    guard let rowPrecise = state.rowPrecise[table], !rowPrecise.isEmpty else { continue }
                    guard let keys = summary.rowKeys?[table], matches.evaluatedTables.contains(table) else {
                        told.formUnion(rowPrecise)
                        continue
                    }
                    var concerned = matches.matching.union(matches.unevaluated)
                    if let holders = state.holders[table] {
                        for key in keys { concerned.formUnion(holders[key] ?? []) }
                    }
                    concerned.formUnion(state.busy)
                    if summary.version > 0 {
                        state.recent.append(ToldCommit(summary, table: table, keys: keys, matched: false), to: table)
                    }
                    concerned.formIntersection(rowPrecise)
                    told.formUnion(concerned)
                    let skipped = rowPrecise.count - concerned.count
                    if skipped > 0 { skipCount.withLock { $0 += skipped } }
                }
            }
            var targets: [any ObservationTarget] = []
            targets.reserveCapacity(told.count)
            for id in told {
                // In place: a copy of the record would share its told list, and the append below
                // would copy that.
                guard let slot = state.observers.index(forKey: id) else { continue }
                targets.append(state.observers.values[slot].target)
                if summary.version > 0 { state.observers.values[slot].target.routed(summary.version) }
                guard let table = state.observers.values[slot].rowTable, summary.version > 0 else { continue }
                let keys = matches.evaluatedTables.contains(table) ? summary.rowKeys?[table] : nil
                let commit = ToldCommit(summary, table: table, keys: keys, matched: keys != nil && matches.matching.contains(id))
                if state.observers.values[slot].told.count < Self.toldLimit {
                    state.observers.values[slot].told.append(commit)
                } else {
                    state.observers.values[slot].told = []
                    state.observers.values[slot].lostThrough = summary.version
                }
            }
            state.routedThrough = max(state.routedThrough, summary.version)
            return targets
        }
        return Routing(summary: summary, targets: targets)
    }

    /// Tells the routed observers (outside the writer's lock: a handler may run now).
    func deliver(_ routing: Routing) {
        let batch = RefreshBatch()
        for target in routing.targets {
            target.storeDidCommit(routing.summary, batch: batch)
        }
        batch.start(on: DispatchQueue.global(qos: .userInitiated))
    }

    /// For a row-precise observer reading at `version`: the commits up to it that it was told of
    /// since it last read (those after stay for its next read), and how far routing went.
    ///
    /// A told commit that stands for several (other connections' commits taken in or noticed
    /// together) and that this read sees only part of is in both: this read must read what its
    /// part changed (from the change log), and the next one the rest. Routing went past this
    /// read's version, so left out, its part would count as routed and not concerning.
    ///
    /// `keys` is its result as of its last read, at `since`, when it has not become idle with it
    /// (it is reading again at once): the commits after `since` that changed a row that entered
    /// it then were not routed to it, and are told now (from the recent commits; when they are
    /// older than what is kept, the whole range is lost: read from the change log).
    func told(_ id: ObserverID, through version: Int64, after since: Int64? = nil, holding keys: [RowKey]? = nil) -> Told {
        state.withLock { state in
            guard let slot = state.observers.index(forKey: id) else { return Told(commits: [], routedThrough: 0, lostThrough: 0) }
            var commits = state.observers.values[slot].told.filter { $0.coveredFrom <= version }
            state.observers.values[slot].told.removeAll { $0.version <= version }
            var lost = state.observers.values[slot].lostThrough
            if version >= lost { state.observers.values[slot].lostThrough = 0 }   // this read covers what was lost
            if let since, let keys, let table = state.observers.values[slot].rowTable, state.recent.newestVersion > since {
                let held = Set(state.observers.values[slot].heldKeys)
                let entered = Set(keys.filter { !held.contains($0) })
                if !entered.isEmpty {
                    if let missed = state.recent.commits(to: table, after: since, changingAnyOf: entered, besides: commits) {
                        commits += missed.filter { $0.coveredFrom <= version }
                    } else {
                        lost = max(lost, version)
                    }
                }
            }
            return Told(commits: commits.sorted { $0.version < $1.version }, routedThrough: state.routedThrough,
                        lostThrough: lost)
        }
    }
}

/// What a row-precise observer's filter is, for ``ObservationCenter/evaluateFilters(of:in:)``.
struct RowInterest: Sendable {
    let table: String
    let quotedTable: String
    let quotedKey: String
    /// The filter's SQL with `?` parameters (empty: every row matches), and its arguments.
    let filterSQL: String
    let filterArguments: [SQLValue]
    /// The filter itself (`nil`: every row), for the index.
    let filter: Filter?
}
