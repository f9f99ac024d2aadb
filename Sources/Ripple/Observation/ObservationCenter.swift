import Foundation

/// A store's registry of live observers: told of every commit (the store's own, and other
/// processes' when noticed), it tells the observers whose tables changed.
///
/// While observers are registered and the store is a file, a timer looks for other processes'
/// commits every `pollInterval` (see ``Store/noticeExternalWrites()``).
final class ObservationCenter: Sendable {
    private struct State {
        /// Strong references: an observer lives while its ``Subscription`` does, and the
        /// subscription's release cancels it, which unregisters it.
        var targets: [ObjectIdentifier: any ObservationTarget] = [:]
        /// `targets.values`, kept for commits (rebuilt when an observer comes or goes).
        var list: [any ObservationTarget] = []
        var interests: [ObjectIdentifier: RowInterest] = [:]
        var poller: (any DispatchSourceTimer)?
    }

    /// The statement evaluating the filters of one table's row-precise observers, on the writer.
    private struct FilterCheck {
        var members: [ObjectIdentifier]
        var sql: String
        var statement: Statement
    }

    private let state = Locked(State())
    /// Per table (writer-only, used under the writer's lock).
    private let filterChecks = Locked<[String: FilterCheck]>([:])
    private let pollInterval: TimeInterval?
    /// How many times live queries of this store ran their SQL (for tests of invalidation).
    let fetchCount = Locked(0)
    /// How many commits observers skipped without reading anything (for tests of invalidation).
    let skipCount = Locked(0)

    init(pollInterval: TimeInterval?) {
        self.pollInterval = pollInterval
    }

    deinit {
        state.withLock { $0.poller?.cancel() }
    }

    /// The number of registered observers.
    var count: Int { state.withLock { $0.targets.count } }

    /// Registers `target`; with `interest`, its filter is evaluated on the rows each commit
    /// changes, inside the commit's transaction (see ``evaluateFilters(of:in:)``).
    func register(_ target: any ObservationTarget, store: Store, interest: RowInterest? = nil) {
        state.withLock { state in
            state.targets[ObjectIdentifier(target)] = target
            state.list = Array(state.targets.values)
            state.interests[ObjectIdentifier(target)] = interest
            if state.poller == nil, let pollInterval, pollInterval > 0 {
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

    func unregister(_ target: any ObservationTarget) {
        state.withLock { state in
            guard state.targets.removeValue(forKey: ObjectIdentifier(target)) != nil else { return }
            state.list = Array(state.targets.values)
            state.interests[ObjectIdentifier(target)] = nil
            if state.targets.isEmpty {
                state.poller?.cancel()
                state.poller = nil
            }
        }
    }

    /// Evaluates, inside a write transaction about to commit, the filter of every row-precise
    /// observer of a changed table on the changed rows — one statement per table for all its
    /// observers — and records in `summary` who was evaluated and who matched. An observer whose
    /// filter matches none of the changed rows, and whose result holds none of them, knows the
    /// commit cannot change its result without reading anything.
    func evaluateFilters(of summary: inout CommitSummary, in db: Database) throws {
        guard let rowKeys = summary.rowKeys else { return }
        let interests = state.withLock { $0.interests }
        guard !interests.isEmpty else { return }
        for (table, keys) in rowKeys {
            let members = interests.filter { $0.value.table == table }.sorted { $0.key < $1.key }
            guard let first = members.first?.value else { continue }
            let arguments: [SQLValue] = members.flatMap(\.value.filterArguments) + [.text(JSONText.array(Array(keys)))]
            guard arguments.count < 30_000 else { continue }   // beyond SQLite's parameter limit
            let ids = members.map(\.key)
            let statement = try filterChecks.withLock { checks -> Statement in
                if let check = checks[table], check.members == ids { return check.statement }
                let conditions = members.map { member in
                    "max(" + (member.value.filterSQL.isEmpty ? "1" : "(" + member.value.filterSQL + ")") + ")"
                }
                let sql = "SELECT " + conditions.joined(separator: ", ") + " FROM " + first.quotedTable
                    + " WHERE " + first.quotedKey + " IN (SELECT value FROM json_each(?))"
                let statement = try db.makeStatement(sql)
                checks[table] = FilterCheck(members: ids, sql: sql, statement: statement)
                return statement
            }
            defer { statement.reset() }
            try statement.bind(arguments)
            guard try statement.step() else { continue }
            for (column, id) in ids.enumerated() {
                summary.evaluated.insert(id)
                if !statement.isNull(at: Int32(column)) && statement.integer(at: Int32(column)) != 0 {
                    summary.matching.insert(id)
                }
            }
        }
    }

    /// Tells the observers whose tables `summary` names (all, for ``ChangeLog/everyTable``).
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
