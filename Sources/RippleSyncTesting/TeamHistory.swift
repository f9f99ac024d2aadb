#if Sync
import RippleServer
import RippleSync
import RippleTesting

/// Postgres's own account of the ``TeamFixture`` tables, transaction by transaction: what each
/// user could read at every position, to check each frame a client received against the
/// rules **at that frame's position** (a query on Postgres can only answer for now).
///
/// It reads a logical replication slot of its own (`pgoutput`, on a publication of its own) with
/// `pg_logical_slot_get_binary_changes`, as the node reads its slot, and applies each
/// transaction to a model of the tables: the state at position `P` is every transaction whose
/// commit record stands at or before `P` (a node's frames carry the commit's position; a copy's
/// snapshot, the slot's consistent point, which follows the commits it holds). Start it
/// (``start(_:name:)``) on empty tables, before any row is written: the model begins empty.
/// Read again (``catchUp()``) whenever the checks need the newest transactions; a transaction
/// delivered twice (Postgres restarting before the slot saved its progress) is applied once.
package final class TeamHistory: @unchecked Sendable {   // used by one task at a time
    /// The rows of a table by key (`id`'s text), each as column name → text (psql's text form:
    /// `t`/`f` for booleans; `nil` for NULL).
    package typealias Rows = [String: [String: String?]]

    /// The tables at one position.
    package struct State: Sendable {
        package var todos: Rows = [:]
        package var members: Rows = [:]
        package var projects: Rows = [:]

        /// The projects `user` is a member of.
        package func memberships(of user: String) -> Set<String> {
            Set(members.values.filter { $0["user_id"] == user }.compactMap { $0["project_id"] ?? nil })
        }

        /// The todos `user` may read (the fixture's rule: owned, or in one of their projects), by id, as psql writes their rows (`columns` in order).
        package func readableTodos(of user: String, columns: [String]) -> [[String]] {
            let projects = memberships(of: user)
            return todos.values
                .filter { $0["owner"] == user || ($0["project_id"].flatMap { $0 }.map(projects.contains) ?? false) }
                .sorted { Int64(($0["id"] ?? "") ?? "") ?? 0 < Int64(($1["id"] ?? "") ?? "") ?? 0 }
                .map { row in columns.map { (row[$0] ?? nil) ?? "" } }
        }
    }

    let postgres: ThrowawayPostgres
    let slot: String
    /// Relation OID → its description (pgoutput sends it before a relation's first change in
    /// each read).
    private var relations: [UInt32: PGOutput.Relation] = [:]
    /// The states after each transaction, by commit position, oldest first.
    package private(set) var commits: [(lsn: PGOutput.LSN, state: State)] = []
    private var current = State()
    private var pending = State()

    private init(postgres: ThrowawayPostgres, slot: String) {
        (self.postgres, self.slot) = (postgres, slot)
    }

    /// Makes the publication and the slot `name` (on the fixture's tables, which must exist and
    /// be empty) and returns the history, empty.
    package static func start(_ postgres: ThrowawayPostgres, name: String = "ripple_team_history") async throws -> TeamHistory {
        try await postgres.psql("CREATE PUBLICATION \(name) FOR TABLE projects, members, todos")
        try await postgres.psql("SELECT pg_create_logical_replication_slot('\(name)', 'pgoutput')")
        return TeamHistory(postgres: postgres, slot: name)
    }

    /// Reads the transactions committed since the last read.
    ///
    /// - Throws: when Postgres cannot be reached, or a message cannot be read.
    package func catchUp() async throws {
        let text = try await postgres.psql("""
            SELECT encode(data, 'hex') FROM pg_logical_slot_get_binary_changes('\(slot)', NULL, NULL,
                'proto_version', '1', 'publication_names', '\(slot)')
            """)
        for line in text.split(separator: "\n") where !line.isEmpty {
            guard let bytes = Hex.bytes(of: "\\x" + line) else { throw SyncClientTestError("the history's slot gave \(line.prefix(40))…, not hex") }
            try take(try PGOutput.Message(bytes))
        }
    }

    private func take(_ message: PGOutput.Message) throws {
        switch message {
        case .relation(let relation):
            relations[relation.oid] = relation
        case .begin:
            pending = current
        case .insert(let insert):
            try put(insert.relation, insert.new, old: nil)
        case .update(let update):
            try put(update.relation, update.new, old: update.old)
        case .delete(let delete):
            let (table, row) = try decode(delete.relation, delete.old)
            if let key = row["id"] ?? nil { modify(table) { $0[key] = nil } }
        case .commit(let commit):
            // A transaction delivered again (the slot's progress is saved at checkpoints) is
            // applied once.
            guard commits.last.map({ $0.lsn < commit.commitLSN }) ?? true else { return }
            current = pending
            commits.append((commit.commitLSN, current))
        case .truncate, .message, .other:
            break
        }
    }

    private func put(_ relation: UInt32, _ values: [PGOutput.Value], old: [PGOutput.Value]?) throws {
        let (table, row) = try decode(relation, values)
        if let old, let oldKey = try decode(relation, old).1["id"] ?? nil { modify(table) { $0[oldKey] = nil } }
        guard let key = row["id"] ?? nil else { return }
        // An unchanged TOASTed value (left out of `row`) keeps the one the row had.
        modify(table) { $0[key] = ($0[key] ?? [:]).merging(row) { $1 } }
    }

    private func modify(_ table: String, _ change: (inout Rows) -> Void) {
        switch table {
        case "todos": change(&pending.todos)
        case "members": change(&pending.members)
        case "projects": change(&pending.projects)
        default: break
        }
    }

    private func decode(_ relation: UInt32, _ values: [PGOutput.Value]) throws -> (String, [String: String?]) {
        guard let description = relations[relation] else { throw SyncClientTestError("the history's slot sent a change of relation \(relation) before describing it") }
        var row: [String: String?] = [:]
        for (column, value) in zip(description.columns, values) {
            switch value {
            case .null: row[column.name] = .some(nil)
            case .unchanged: break
            case .text(let text): row[column.name] = text
            case .binary(let bytes): row[column.name] = String(decoding: bytes, as: UTF8.self)
            }
        }
        return (description.name, row)
    }

    /// The tables at `position`: every transaction read so far that committed at or before it
    /// (read the newest first: ``catchUp()``); `nil` when the text is not a position.
    package func state(at position: String) -> State? {
        guard let lsn = PGOutput.LSN(position) else { return nil }
        // The newest commit at or before `lsn` (binary search over ascending positions).
        var (low, high) = (0, commits.count)
        while low < high {
            let middle = (low + high) / 2
            if commits[middle].lsn <= lsn { low = middle + 1 } else { high = middle }
        }
        return low == 0 ? State() : commits[low - 1].state
    }

    /// The newest position read.
    package var newest: PGOutput.LSN? { commits.last?.lsn }
}
#endif
