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

    private struct State {
        /// Strong references: an observer lives while its ``Subscription`` does, and the
        /// subscription's release cancels it, which unregisters it.
        var targets: [ObserverID: any ObservationTarget] = [:]
        /// `targets.values`, kept for commits (rebuilt when an observer comes or goes).
        var list: [any ObservationTarget] = []
        var interests: [ObserverID: RowInterest] = [:]
        var poller: (any DispatchSourceTimer)?
        var watch: FileWatch?
    }

    /// The statement evaluating the filters of some of one table's row-precise observers on a
    /// number of changed keys, on the writer.
    private struct FilterCheck {
        var members: [ObserverID]
        var keySlots: Int
        var statement: Statement
    }

    private let state = Locked(State())
    /// Per table and batch of observers (writer-only, used under the writer's lock).
    private let filterChecks = Locked<[FilterCheckKey: FilterCheck]>([:])
    private let pollInterval: TimeInterval?
    /// The database file to watch while observers are registered (`nil` in memory).
    private let watchedFile: String?
    /// Where the watch's and other stores' calls to look for commits run, one at a time.
    let noticeQueue = DispatchQueue(label: "ripple.observation.notice", qos: .userInitiated)
    /// Tells the watch's wake-ups for the store's own commits from others' (`nil` unwatched).
    let ownCommits: OwnCommitFilter?
    /// How many times live queries of this store ran their SQL (for tests of invalidation).
    let fetchCount = Locked(0)
    /// How many commits observers skipped without reading anything (for tests of invalidation).
    let skipCount = Locked(0)
    /// How many times the store looked for other connections' commits on the writer (for tests).
    let looks = Locked(0)

    private struct FilterCheckKey: Hashable {
        var table: String
        var batch: Int
    }

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
    }

    /// The number of registered observers.
    var count: Int { state.withLock { $0.targets.count } }

    /// Registers `target`; with `interest`, its filter is evaluated on the rows each commit
    /// changes, inside the commit's transaction (see ``evaluateFilters(of:in:)``).
    func register(_ target: any ObservationTarget, store: Store, interest: RowInterest? = nil) {
        state.withLock { state in
            state.targets[target.observerID] = target
            state.list = Array(state.targets.values)
            state.interests[target.observerID] = interest
            if state.watch == nil, state.poller == nil {
                state.watch = watchedFile.flatMap { startWatch(of: $0, store: store) }
                if state.watch == nil, let pollInterval, pollInterval > 0 {
                    // The fallback: the file cannot be watched, or the watch is off.
                    let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
                    timer.schedule(deadline: .now() + pollInterval, repeating: pollInterval, leeway: .milliseconds(10))
                    timer.setEventHandler { [weak store] in
                        // A failure (the file busy, say) is retried at the next tick.
                        try? store?.noticeExternalWrites()
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
        let look: @Sendable () -> Void = { [weak store] in try? store?.noticeExternalWrites() }
        ownCommits.activate(look: look)
        let watch = FileWatch(database: path, queue: noticeQueue) { [ownCommits] onlyWAL in
            // The WAL changes with every commit, the store's own too: the filter tells them apart.
            // Anything else (a checkpoint, the file replaced) is rare: look.
            if onlyWAL { ownCommits.wake() } else { look() }
        }
        if watch == nil { ownCommits.deactivate() }
        return watch
    }

    func unregister(_ target: any ObservationTarget) {
        state.withLock { state in
            guard state.targets.removeValue(forKey: target.observerID) != nil else { return }
            state.list = Array(state.targets.values)
            state.interests[target.observerID] = nil
            if state.targets.isEmpty {
                state.poller?.cancel()
                state.poller = nil
                if state.watch != nil { ownCommits?.deactivate() }
                state.watch?.cancel()
                state.watch = nil
            }
        }
    }

    /// Observers whose filters one statement evaluates at most (SQLite allows 2,000 result columns).
    private static var batchSize: Int { 256 }

    /// Evaluates, inside a write transaction about to commit, the filter of every row-precise
    /// observer of a changed table on the changed rows — one statement per table and batch of
    /// observers — and records in `summary` who was evaluated and who matched. An observer whose
    /// filter matches none of the changed rows, and whose result holds none of them, knows the
    /// commit cannot change its result without reading anything.
    ///
    /// The changed keys are bound exactly as stored (type and bytes). This never fails the
    /// write: an observer whose filter could not be evaluated is left out of `evaluated`, and
    /// reads for itself.
    func evaluateFilters(of summary: inout CommitSummary, in db: Database) {
        guard let rowKeys = summary.rowKeys else { return }
        let interests = state.withLock { $0.interests }
        guard !interests.isEmpty else { return }
        for (table, keys) in rowKeys {
            let members = interests.filter { $0.value.table == table }.sorted { $0.key < $1.key }
            guard !members.isEmpty else { continue }
            let keys = Array(keys)
            // Statements are cached per count of key slots: powers of two, padded with NULL.
            var keySlots = 4
            while keySlots < keys.count { keySlots *= 2 }
            var batch = 0
            var start = members.startIndex
            while start < members.endIndex {
                let end = min(start + Self.batchSize, members.endIndex)
                let chunk = members[start..<end]
                let arguments = chunk.reduce(0) { $0 + $1.value.filterArguments.count }
                if arguments + keySlots < 30_000 {   // SQLite's parameter limit
                    let matched = try? evaluate(chunk, table: table, batch: batch, keys: keys, keySlots: keySlots, in: db)
                    if let matched {
                        for (id, _) in chunk { summary.evaluated.insert(id) }
                        summary.matching.formUnion(matched)
                    }
                }
                start = end
                batch += 1
            }
        }
    }

    /// Evaluates the filters of `members` on the rows of `keys`: the members matching any.
    private func evaluate(_ members: ArraySlice<(key: ObserverID, value: RowInterest)>, table: String, batch: Int,
                          keys: [RowKey], keySlots: Int, in db: Database) throws -> [ObserverID] {
        let ids = members.map(\.key)
        let statement = try filterChecks.withLock { checks -> Statement in
            let checkKey = FilterCheckKey(table: table, batch: batch)
            if let check = checks[checkKey], check.members == ids, check.keySlots == keySlots { return check.statement }
            let first = members[members.startIndex].value
            let conditions = members.map { member in
                "max(" + (member.value.filterSQL.isEmpty ? "1" : "(" + member.value.filterSQL + ")") + ")"
            }
            let sql = "SELECT " + conditions.joined(separator: ", ") + " FROM " + first.quotedTable
                + " WHERE " + first.quotedKey + " IN (" + Array(repeating: "?", count: keySlots).joined(separator: ", ") + ")"
            let statement = try db.makeStatement(sql)
            checks[checkKey] = FilterCheck(members: ids, keySlots: keySlots, statement: statement)
            return statement
        }
        defer { statement.reset() }
        var index: Int32 = 1
        for member in members {
            for argument in member.value.filterArguments {
                try statement.bind(argument, at: index)
                index += 1
            }
        }
        for key in keys { index += try key.bind(to: statement, at: index) }
        while index <= Int32(statement.parameterCount) {
            try statement.bindNull(at: index)
            index += 1
        }
        guard try statement.step() else { return [] }
        var matched: [ObserverID] = []
        for (column, id) in ids.enumerated()
        where !statement.isNull(at: Int32(column)) && statement.integer(at: Int32(column)) != 0 {
            matched.append(id)
        }
        return matched
    }

    /// Tells the observers whose tables `summary` names (all, for ``ChangeLog/everyTable``).
    /// Whether the file is watched (for tests: only while observers are registered).
    var isWatching: Bool { state.withLock { $0.watch != nil } }

    /// Whether observers are registered (and so whether other stores should tell this one of
    /// their commits).
    var isObserving: Bool { state.withLock { !$0.targets.isEmpty } }

    func didCommit(_ summary: CommitSummary) {
        let targets = state.withLock { $0.list }
        for target in targets {
            target.storeDidCommit(summary)
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
}
