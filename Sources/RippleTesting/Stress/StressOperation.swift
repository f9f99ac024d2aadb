/// One operation on a stress table, as the model applies it. How it was performed (collection
/// API or raw SQL) is in ``StressOperationRecord/via``; the model's semantics are the same.
enum StressOperation: Hashable, Sendable, Codable {
    /// Inserts the row unless its key exists (then nothing changes: a collection insert throws a
    /// constraint error; raw SQL says `ON CONFLICT DO NOTHING`).
    case insert(StressTable, StressRow)
    /// Inserts the row, or replaces the other columns of the row with its key.
    case upsert(StressTable, StressRow)
    /// Replaces the other columns of the row with its key, if there is one.
    case update(StressTable, StressRow)
    /// Deletes the row with this key, if there is one.
    case delete(StressTable, key: [StressValue])
    /// Inserts every row, or none when one key exists or repeats (a collection batch).
    case insertAll(StressTable, [StressRow])
    /// Upserts every row, in order.
    case upsertAll(StressTable, [StressRow])
    /// Updates every row, or none when one key is missing.
    case updateAll(StressTable, [StressRow])
    /// Deletes the rows with these keys.
    case deleteAll(StressTable, keys: [[StressValue]])
    /// `UPDATE t SET column = value WHERE predicate`.
    case updateWhere(StressTable, column: Int, value: StressValue, predicate: StressPredicate?)
    /// `DELETE FROM t WHERE predicate`.
    case deleteWhere(StressTable, predicate: StressPredicate)

    var table: StressTable {
        switch self {
        case .insert(let table, _), .upsert(let table, _), .update(let table, _), .delete(let table, _),
             .insertAll(let table, _), .upsertAll(let table, _), .updateAll(let table, _), .deleteAll(let table, _),
             .updateWhere(let table, _, _, _), .deleteWhere(let table, _):
            table
        }
    }

    /// Readably, for reports.
    var description: String {
        switch self {
        case .insert(let table, let row): "insert \(row.describe(in: table)) into \(table)"
        case .upsert(let table, let row): "upsert \(row.describe(in: table)) into \(table)"
        case .update(let table, let row): "update \(row.describe(in: table)) in \(table)"
        case .delete(let table, let key): "delete key \(key) from \(table)"
        case .insertAll(let table, let rows): "insert \(rows.count) rows into \(table)"
        case .upsertAll(let table, let rows): "upsert \(rows.count) rows into \(table)"
        case .updateAll(let table, let rows): "update \(rows.count) rows in \(table)"
        case .deleteAll(let table, let keys): "delete \(keys.count) keys from \(table)"
        case .updateWhere(let table, let column, let value, let predicate):
            "UPDATE \(table) SET \(table.columns[column].name) = \(value)"
                + (predicate.map { " WHERE " + $0.describe(in: table) } ?? "")
        case .deleteWhere(let table, let predicate): "DELETE FROM \(table) WHERE \(predicate.describe(in: table))"
        }
    }
}

/// How an operation reached the store.
enum StressVia: String, Hashable, Sendable, Codable {
    /// A collection method that opens its own write (`collection.insert(x)`).
    case collection
    /// A collection method inside a `store.write` closure (`collection.insert(x, in: db)`).
    case collectionInWrite
    /// `db.execute(sql, arguments)` inside a `store.write` closure.
    case rawSQL
    /// Raw SQL in `store.writeWithoutTransaction` (the statement commits on its own).
    case withoutTransaction
    /// Raw SQL in a migration of its own, applied by `store.migrate`.
    case migration
    /// Raw SQL on a connection of its own that is not Ripple's (as the `sqlite3` shell writes),
    /// then `store.noticeExternalWrites()`, which adopts it.
    case withoutRipple
}

/// An operation performed, and what the store said it changed: the number of rows (a batch
/// that failed, an insert of an existing key or an update of a missing one: 0).
struct StressOperationRecord: Hashable, Sendable, Codable {
    var operation: StressOperation
    var via: StressVia
    var changes: Int
}

/// A step of a write: an operation, or a savepoint (`db.transaction { … }` inside a write)
/// around steps, released or rolled back (its closure threw on purpose).
indirect enum StressStep: Hashable, Sendable, Codable {
    case operation(StressOperationRecord)
    case savepoint([StressStep], rolledBack: Bool)

    /// How many operations the step performed (rolled back or not).
    var operationCount: Int {
        switch self {
        case .operation: 1
        case .savepoint(let steps, _): steps.reduce(0) { $0 + $1.operationCount }
        }
    }
}

/// One write as a writer reports it to the model: the last committed version it saw inside its
/// transaction (so the write, if it changed a row, committed as `base + 1`), its steps with what
/// each changed, and whether it committed.
struct StressWriteRecord: Sendable, Codable {
    /// The writer: `p/t2` (this process, thread 2) or `c1/t0` (child process 1, thread 0).
    var source: String
    /// The writer's count of writes so far (reports of one writer come in this order).
    var sequence: Int
    /// `SELECT value FROM ripple_meta WHERE key = 'version'` read inside the write transaction,
    /// or, for a collection method that opens its own write, `store.currentVersion()` read just
    /// before it while no other writer could write (the exclusive write gate).
    var base: Int64
    /// For a collection method that opens its own write: `store.currentVersion()` read right
    /// after it, still under the exclusive gate.
    var after: Int64?
    var steps: [StressStep]
    /// `false` when the write's closure threw on purpose, rolling everything back.
    var committed: Bool

    var operationCount: Int { steps.reduce(0) { $0 + $1.operationCount } }

    /// Readably, for reports: one operation per line.
    var description: String {
        var lines = ["write \(source)#\(sequence) (base v\(base)\(after.map { ", after v\($0)" } ?? "")"
                     + (committed ? ")" : ", rolled back)")]
        func add(_ steps: [StressStep], indent: String) {
            for step in steps {
                switch step {
                case .operation(let record):
                    lines.append("\(indent)\(record.operation.description) via \(record.via.rawValue): \(record.changes) changed")
                case .savepoint(let inner, let rolledBack):
                    lines.append("\(indent)savepoint\(rolledBack ? " (rolled back)" : ""):")
                    add(inner, indent: indent + "  ")
                }
            }
        }
        add(steps, indent: "  ")
        return lines.joined(separator: "\n")
    }
}
