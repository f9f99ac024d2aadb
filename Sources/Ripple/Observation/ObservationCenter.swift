import Foundation

/// A store's registry of live observers: told of every commit (the store's own, and other
/// processes' when noticed), it tells the observers whose tables changed.
///
/// While observers are registered, its ``CommitDetector`` makes the store look for other
/// connections' commits (see ``Store/noticeExternalWrites()``): the center starts it with the
/// first observer and stops it after the last.
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
        /// Whether it changed rows of a dependency (``RowInterest/dependencies``) that may change
        /// the result: the query runs again.
        var rerun: Bool

        /// `summary`'s commit, as told to a row-precise observer of `table`.
        init(_ summary: CommitSummary, table: String, keys: Set<RowKey>?, matched: Bool, rerun: Bool = false) {
            version = summary.version
            coveredFrom = summary.coveredFrom ?? summary.version
            self.keys = keys
            updatesOnly = !summary.insertedOrDeleted.contains(table)
            self.matched = matched
            self.rerun = rerun
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

    /// Who a commit concerns, decided under the writer's lock (see ``route(_:_:)``).
    struct Routing {
        let summary: CommitSummary
        let targets: [any ObservationTarget]
    }

    private struct State {
        /// The registered observers. Strong: an observer lives while its ``Subscription`` does,
        /// and the subscription's release cancels it, which unregisters it.
        var targets: [ObserverID: any ObservationTarget] = [:]
        /// Who each commit concerns (the decision, as a value).
        var router = CommitRouter()
    }

    private let state = Locked(State())
    /// The row-precise observers' filters, grouped and indexed (evaluated under the writer's lock).
    private let filters = Locked(FilterRegistry())
    /// Notices other connections' commits while observers are registered (started and stopped
    /// under the lock of `state`, after it: the lock order).
    private let detector: CommitDetector
    /// Where the watch's and other stores' calls to look for commits run, one at a time.
    ///
    /// It targets the global queue, whose threads are shared and few. A serial queue's default
    /// target (on Linux) starts a thread for each queue with work when no thread is idle: a
    /// thousand stores released together, each queue cancelling its watch and timer, started
    /// a hundred and more threads at once.
    let noticeQueue: DispatchQueue
    /// For tests: runs in each live query's refresh before it reads each of its results (after it
    /// read the version and took what it was told of the commits), and may throw to simulate a
    /// read that fails there.
    let readFault = Locked<(@Sendable () throws -> Void)?>(nil)
    /// Tells the watch's wake-ups for the store's own commits from others' (`nil` unwatched).
    var ownCommits: OwnCommitFilter? { detector.ownCommits }
    /// The results live queries of the same query share.
    let sharedReads = SharedReads()
    /// What the tests of invalidation count (see ``ObservationDiagnostics``).
    let diagnostics: Locked<ObservationDiagnostics>
    /// The origins and tags of the newest commits routed (see ``RecentOrigins``).
    let recentOrigins = RecentOrigins()

    init(pollInterval: TimeInterval?, watchedFile: String?) {
        noticeQueue = DispatchQueue(label: "ripple.observation.notice", qos: .userInitiated, target: .global(qos: .userInitiated))
        diagnostics = Locked(ObservationDiagnostics())
        detector = CommitDetector(pollInterval: pollInterval, watchedFile: watchedFile, queue: noticeQueue, diagnostics: diagnostics)
    }

    /// The number of registered observers.
    var count: Int { state.withLock { $0.targets.count } }

    /// The registered observers.
    var targets: [any ObservationTarget] { state.withLock { Array($0.targets.values) } }

    /// Every commit up to this version was routed.
    var routedThrough: Int64 { state.withLock { $0.router.routedThrough } }

    /// What the router finds wrong in its indexes (empty: nothing; for the stress checker and tests).
    var routingInvariantViolations: [String] { state.withLock { $0.router.invariantViolations() } }

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
            state.targets[id] = target
            if let interest {
                state.router.registerRowPrecise(id, table: interest.table, dependencies: Set(interest.dependencies.map(\.table)),
                                                hasValueTerms: !interest.valueTerms.isEmpty, registeredDuring: registeredDuring)
            } else {
                state.router.registerByTable(id)
            }
            detector.start(for: store)
        }
    }

    func unregister(_ target: any ObservationTarget) {
        let id = target.observerID
        let wasRowPrecise = state.withLock { state -> Bool in
            guard state.targets.removeValue(forKey: id) != nil else { return false }
            let wasRowPrecise = state.router.unregister(id)
            if state.targets.isEmpty { detector.stop() }
            return wasRowPrecise
        }
        if wasRowPrecise { filters.withLock { $0.remove(id) } }
    }

    /// An observer that is not row-precise learned which tables it reads: from now on it hears
    /// only of commits to them.
    /// `version`: the version of the read that found them (see ``CommitRouter/observer(_:reads:at:)``).
    func observer(_ id: ObserverID, reads tables: Set<String>, at version: Int64) {
        state.withLock { $0.router.observer(id, reads: tables, at: version) }
    }

    /// A row-precise observer became idle (called under its own lock) with a result of `keys` as
    /// of `version`, its dependencies selecting `dependencyKeys`; returns whether it must read
    /// again (see ``CommitRouter/observerBecameIdle(_:keys:dependencyKeys:valuesChangedDuring:version:)``).
    ///
    /// `values`: with value terms, the values each selected at that read (registered in the
    /// filter index first, in place, see ``FilterRegistry/setValues(_:_:)``).
    func observerBecameIdle(_ id: ObserverID, keys: [RowKey], dependencyKeys: [String: [RowKey]] = [:],
                            values: [Set<IndexedValue>]? = nil, version: Int64) -> Bool {
        // The values first: a commit evaluated from now on uses them, and one evaluated before
        // is the version returned.
        let changedDuring = values.flatMap { values in filters.withLock { $0.setValues(id, values) } }
        return state.withLock {
            $0.router.observerBecameIdle(id, keys: keys, dependencyKeys: dependencyKeys, valuesChangedDuring: changedDuring,
                                         version: version)
        }
    }

    /// How many times the filter index of `table` was built (for tests).
    func filterBuilds(of table: String) -> Int { filters.withLock { $0.buildCount(of: table) } }

    /// Evaluates, inside a write transaction about to commit, the filters of the row-precise
    /// observers of the changed tables on the changed rows (see ``FilterRegistry``): who matched.
    /// An observer whose filter matches none of the changed rows, and whose result holds none of
    /// them, knows the commit cannot change its result: it is not told of it. This never fails
    /// the write: an observer whose filter could not be evaluated is told.
    func evaluateFilters(of summary: CommitSummary, in db: Database) -> FilterMatches {
        filters.withLock { $0.evaluate(summary, in: db) }
    }

    /// How many distinct filters the row-precise observers of `table` have (for tests).
    func filterGroups(of table: String) -> Int { filters.withLock { $0.groupCount(of: table) } }

    /// How many times a row-precise observer of a changed table was not told of a commit, and so
    /// read nothing (for tests of invalidation).
    var skipCount: Int { state.withLock { $0.router.skipped } }

    /// Whether the file is watched (for tests: only while observers are registered).
    var isWatching: Bool { detector.isWatching }

    /// Whether observers are registered (and so whether other stores should tell this one of
    /// their commits).
    var isObserving: Bool { state.withLock { !$0.targets.isEmpty } }

    /// Decides who a commit concerns (see ``CommitRouter/route(_:_:)``) and tells each observer
    /// the version was routed to it. Call it under the writer's lock, right after the commit, so
    /// that commits are routed in version order.
    func route(_ summary: CommitSummary, _ matches: FilterMatches) -> Routing {
        if summary.version > 0, let origin = summary.origin { recentOrigins.record(summary.version, origin: origin, tag: summary.tag) }
        let targets = state.withLock { state -> [any ObservationTarget] in
            let told = state.router.route(summary, matches)
            return told.compactMap { id in
                guard let target = state.targets[id] else { return nil }
                if summary.version > 0 { target.routed(summary.version) }
                return target
            }
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

    /// For a row-precise observer reading at `version`: what it was told of the commits since
    /// its last read (see ``CommitRouter/told(_:through:after:holding:holdingDependencies:)``).
    func told(_ id: ObserverID, through version: Int64, after since: Int64? = nil, holding keys: [RowKey]? = nil,
              holdingDependencies dependencyKeys: [String: [RowKey]]? = nil) -> Told {
        state.withLock {
            $0.router.told(id, through: version, after: since, holding: keys, holdingDependencies: dependencyKeys)
        }
    }
}

/// What the store's observation did, counted for the tests of invalidation (one value, kept apart
/// from the state the decisions use).
struct ObservationDiagnostics: Sendable {
    /// How many times live queries ran their SQL.
    var fetches = 0
    /// How many times live queries read what changed.
    var refreshes = 0
    /// How many times the store looked for other connections' commits on the writer.
    var looks = 0
    /// How many read transactions batches of refreshes took (see ``RefreshBatch``).
    var batchReads = 0
    /// How many times the file watch woke.
    var watchWakes = 0
}

/// What a row-precise observer's filter is, for ``ObservationCenter/evaluateFilters(of:in:)``.
struct RowInterest: Sendable {
    /// The table's name folded as SQLite folds names (see ``SQLIdentifier/folded(_:)``): how
    /// commits name it when they are routed.
    let table: String
    let quotedTable: String
    let quotedKey: String
    /// The filter's SQL with `?` parameters (empty: every row matches), and its arguments.
    let filterSQL: String
    let filterArguments: [SQLValue]
    /// The filter itself (`nil`: every row), for the index.
    let filter: Filter?
    /// The other tables the query reads in sub-queries, each with the filter of the rows that can
    /// change its result (see ``RowDependency``); their `quotedKey` is empty (the index finds how
    /// the change log names their rows).
    var dependencies: [RowInterest] = []
    /// Terms whose values a dependency selects (see ``RowValueTerm``), indexed per observer.
    var valueTerms: [ValueTerm] = []

    /// A ``RowValueTerm`` as the filter index keeps it.
    struct ValueTerm: Hashable, Sendable {
        /// The column of the observer's table.
        let column: String
        /// The index of the dependency in ``RowInterest/dependencies``.
        let dependency: Int
        /// The dependency's table, folded.
        let dependencyTable: String
        /// The column of the dependency's table the sub-query selects.
        let selectedColumn: String
    }
}
