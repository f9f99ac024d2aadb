#if Sync
import Foundation
import Ripple
import RippleSync

/// The client's durable outbox: every local write to a synced table becomes row operations kept
/// in the same local transaction, and each transaction's operations one numbered mutation.
///
/// How a write is captured, all inside the app's own transaction:
/// * Triggers on each synced table (made by ``describe(_:in:)``) append an operation to
///   `ripple_sync_ops` — `put` for an insert, `patch` with a mask of the changed columns for an
///   update, `delete` for a delete; an update of the key is a `delete` and a `put` — and the
///   row's values, exactly as stored, to the table's own `ripple_sync_values:<table>` (no JSON:
///   it cannot hold a BLOB, and SQLite prints reals to 15 digits).
/// * The first local write of a row keeps the row as the server sent it (or that it was absent)
///   in `ripple_sync_base:<table>`: a rebase puts the row back to it before re-applying what is
///   still pending.
/// * A commit participant (see ``seal(_:)``) gives the transaction's operations the next
///   mutation id, so a crash keeps both the write and its mutation, or neither.
///
/// The triggers skip the client's own writes (`ripple_origin()` is `'sync'` in them), and they
/// call a function only Ripple's connections define: a program that writes the table without
/// Ripple (the `sqlite3` shell) fails with `no such function: ripple_origin` and changes nothing
/// — a write that could not become a mutation is refused, never erased at the next rebase.
enum Outbox {
    /// Creates the outbox's own tables when missing.
    static func prepare(_ db: Database) throws {
        try db.executeScript("""
            CREATE TABLE IF NOT EXISTS ripple_sync_state(name TEXT PRIMARY KEY, value) WITHOUT ROWID;
            INSERT OR IGNORE INTO ripple_sync_state VALUES ('last_assigned', 0);
            CREATE TABLE IF NOT EXISTS ripple_sync_tables(
                table_name TEXT PRIMARY KEY, columns TEXT NOT NULL, types TEXT NOT NULL, key TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ripple_sync_ops(
                seq INTEGER PRIMARY KEY AUTOINCREMENT, mutation INTEGER, table_name TEXT NOT NULL,
                op TEXT NOT NULL, changed INTEGER);
            CREATE INDEX IF NOT EXISTS ripple_sync_ops_by_mutation ON ripple_sync_ops(mutation);
            CREATE TABLE IF NOT EXISTS ripple_sync_mutations(
                id INTEGER PRIMARY KEY, status TEXT, code TEXT, constraint_name TEXT, message TEXT, lsn TEXT,
                conflict TEXT);
            """)
    }

    // MARK: Synced tables

    /// A synced table as the server describes it: its columns, their wire types, its key.
    struct TableShape: Equatable {
        var name: String
        var columns: [String]
        var types: [String]
        var key: [Int]

        var keyColumns: [String] { key.map { columns[$0] } }
    }

    /// Records `shape` and (re)makes the table's capture when it is new or its columns changed.
    static func describe(_ shape: TableShape, in db: Database) throws {
        if let known = try shapeOf(shape.name, in: db), known == shape { return }
        try db.execute("INSERT OR REPLACE INTO ripple_sync_tables VALUES (?, ?, ?, ?)",
                       [shape.name, jsonArray(shape.columns), jsonArray(shape.types), jsonArray(shape.key.map(String.init))])
        try installCapture(shape, in: db)
    }

    /// Makes the capture of every recorded table again (when the client starts: a store written
    /// by an older client gets the current triggers and indexes).
    static func refreshCaptures(_ db: Database) throws {
        let tables = try db.fetchAll("SELECT table_name FROM ripple_sync_tables").map { try $0.value("table_name", as: String.self) }
        for table in tables {
            if let shape = try shapeOf(table, in: db) { try installCapture(shape, in: db) }
        }
    }

    /// The shape recorded for `table` (`nil`: not a synced table).
    static func shapeOf(_ table: String, in db: Database) throws -> TableShape? {
        guard let row = try db.fetchOne("SELECT columns, types, key FROM ripple_sync_tables WHERE table_name = ?", [table]) else {
            return nil
        }
        return TableShape(name: table, columns: try strings(row.value("columns", as: String.self)),
                          types: try strings(row.value("types", as: String.self)),
                          key: try strings(row.value("key", as: String.self)).compactMap { Int($0) })
    }

    static func valuesTable(_ table: String) -> String { SQLIdentifier.quoted("ripple_sync_values:" + table) }
    static func baseTable(_ table: String) -> String { SQLIdentifier.quoted("ripple_sync_base:" + table) }

    /// The shadow tables and triggers that capture the writes of `shape`'s table.
    private static func installCapture(_ shape: TableShape, in db: Database) throws {
        let table = SQLIdentifier.quoted(shape.name)
        let names = shape.columns.map(SQLIdentifier.quoted)
        let keys = shape.keyColumns.map(SQLIdentifier.quoted)
        // Untyped columns keep each value exactly as it was stored.
        try db.execute("CREATE TABLE IF NOT EXISTS \(valuesTable(shape.name)) (ripple_seq INTEGER PRIMARY KEY, \(names.joined(separator: ", ")))")
        try db.execute("""
            CREATE TABLE IF NOT EXISTS \(baseTable(shape.name)) (ripple_present INTEGER NOT NULL, \(names.joined(separator: ", ")),
                PRIMARY KEY (\(keys.joined(separator: ", "))))
            """)
        // A rebase finds the pending operations on a row by its key.
        try db.execute("CREATE INDEX IF NOT EXISTS \(SQLIdentifier.quoted("ripple_sync_values_by_key:" + shape.name)) "
                       + "ON \(valuesTable(shape.name)) (\(keys.joined(separator: ", ")))")
        for shadow in [valuesTable(shape.name), baseTable(shape.name)] {
            let existing = Set(try db.fetchAll("SELECT name FROM pragma_table_info(?)", [unquoted(shadow)])
                .map { try $0.value("name", as: String.self) })
            for name in shape.columns where !existing.contains(name) {
                try db.execute("ALTER TABLE \(shadow) ADD COLUMN \(SQLIdentifier.quoted(name))")
            }
        }
        func trigger(_ event: String) -> String { SQLIdentifier.quoted("ripple_sync_\(event):" + shape.name) }
        for event in ["insert", "update", "rekey", "delete"] { try db.execute("DROP TRIGGER IF EXISTS \(trigger(event))") }

        let tableName = "'" + shape.name.replacingOccurrences(of: "'", with: "''") + "'"
        func list(_ prefix: String, _ columns: [String]) -> String { columns.map { "\(prefix).\($0)" }.joined(separator: ", ") }
        let sameKey = keys.map { "NEW.\($0) IS OLD.\($0)" }.joined(separator: " AND ")
        // Which columns an update changed, one bit each (a table wider than 62 columns sends
        // its updates as whole rows).
        let mask = names.count <= 62
            ? names.enumerated().map { "((NEW.\($1) IS NOT OLD.\($1)) << \($0))" }.joined(separator: " | ")
            : "NULL"
        let own = "ripple_origin() IS NOT 'sync'"
        func op(_ kind: String, _ changed: String, _ image: String) -> String {
            """
            INSERT INTO ripple_sync_ops(table_name, op, changed) VALUES (\(tableName), '\(kind)', \(changed));
                INSERT INTO \(valuesTable(shape.name)) (ripple_seq, \(names.joined(separator: ", "))) VALUES (last_insert_rowid(), \(list(image, names)));
            """
        }
        let keepAbsent = "INSERT OR IGNORE INTO \(baseTable(shape.name)) (ripple_present, \(keys.joined(separator: ", "))) VALUES (0, \(list("NEW", keys)));"
        let keepOld = "INSERT OR IGNORE INTO \(baseTable(shape.name)) (ripple_present, \(names.joined(separator: ", "))) VALUES (1, \(list("OLD", names)));"
        try db.executeScript("""
            CREATE TRIGGER \(trigger("insert")) AFTER INSERT ON \(table) WHEN \(own) BEGIN
                \(keepAbsent)
                \(op("put", "NULL", "NEW"))
            END;
            CREATE TRIGGER \(trigger("update")) AFTER UPDATE ON \(table) WHEN \(own) AND \(sameKey) BEGIN
                \(keepOld)
                \(op(names.count <= 62 ? "patch" : "put", mask, "NEW"))
            END;
            CREATE TRIGGER \(trigger("rekey")) AFTER UPDATE ON \(table) WHEN \(own) AND NOT (\(sameKey)) BEGIN
                \(keepOld)
                \(keepAbsent)
                \(op("delete", "NULL", "OLD"))
                \(op("put", "NULL", "NEW"))
            END;
            CREATE TRIGGER \(trigger("delete")) AFTER DELETE ON \(table) WHEN \(own) BEGIN
                \(keepOld)
                \(op("delete", "NULL", "OLD"))
            END;
            """)
    }

    // MARK: Mutations

    /// Gives the operations captured since the last mutation the next mutation id (run inside
    /// every local commit but the client's own, and once when the client starts, for what other
    /// stores on the file captured). Returns the id, or `nil` when nothing was captured.
    @discardableResult
    static func seal(_ db: Database) throws -> Int64? {
        // One statement when the commit captured nothing (most commits of an app's other tables).
        try db.execute("UPDATE ripple_sync_ops SET mutation = (SELECT value + 1 FROM ripple_sync_state WHERE name = 'last_assigned') "
                       + "WHERE mutation IS NULL")
        guard db.changedRowCount > 0 else { return nil }
        try db.execute("UPDATE ripple_sync_state SET value = value + 1 WHERE name = 'last_assigned'")
        try db.execute("INSERT INTO ripple_sync_mutations(id) SELECT value FROM ripple_sync_state WHERE name = 'last_assigned'")
        return db.lastInsertedRowID
    }

    /// The newest mutation id given (0: none yet).
    static func lastAssigned(_ db: Database) throws -> Int64 {
        try db.fetchValue("SELECT value FROM ripple_sync_state WHERE name = 'last_assigned'", as: Int64.self) ?? 0
    }

    /// The client id the server gave this device, if any.
    static func clientID(_ db: Database) throws -> String? {
        try db.fetchValue("SELECT value FROM ripple_sync_state WHERE name = 'client_id'", as: String.self)
    }

    /// Takes `id` (from `welcome`) as the device's client id, the server having applied its
    /// mutations through `lastApplied`. A new id (the server did not know the old one, or the
    /// device was restored from a backup) numbers the pending mutations again from
    /// `lastApplied + 1`, in their order.
    static func adopt(clientID id: String, lastApplied: Int64, in db: Database) throws {
        guard try clientID(db) != id else { return }
        try db.execute("INSERT OR REPLACE INTO ripple_sync_state VALUES ('client_id', ?)", [id])
        let pending = try db.fetchAll("SELECT id FROM ripple_sync_mutations ORDER BY id").map { try $0.value("id", as: Int64.self) }
        // Out of the way first (negative), then to their new numbers: no two ever collide.
        try db.execute("UPDATE ripple_sync_ops SET mutation = -mutation WHERE mutation > 0")
        try db.execute("UPDATE ripple_sync_mutations SET id = -id, status = NULL, code = NULL, constraint_name = NULL, message = NULL, lsn = NULL")
        for (offset, old) in pending.enumerated() {
            let new = lastApplied + 1 + Int64(offset)
            try db.execute("UPDATE ripple_sync_ops SET mutation = ? WHERE mutation = ?", [new, -old])
            try db.execute("UPDATE ripple_sync_mutations SET id = ? WHERE id = ?", [new, -old])
        }
        try db.execute("UPDATE ripple_sync_state SET value = ? WHERE name = 'last_assigned'", [lastApplied + Int64(pending.count)])
    }

    /// The mutations whose result has not arrived, in order, as the wire sends them; a
    /// mutation whose table's types are not known yet (no snapshot of it arrived) stops the list
    /// there, as every later one must wait for it.
    static func pending(after id: Int64, limit: Int, in db: Database) throws -> [Mutation] {
        let rows = try db.fetchAll("""
            SELECT o.seq, o.mutation, o.table_name, o.op, o.changed FROM ripple_sync_ops AS o
            JOIN ripple_sync_mutations AS m ON m.id = o.mutation
            WHERE m.status IS NULL AND o.mutation > ? AND o.mutation <= (
                SELECT coalesce(max(id), 0) FROM (SELECT id FROM ripple_sync_mutations WHERE status IS NULL AND id > ? ORDER BY id LIMIT ?))
            ORDER BY o.seq
            """, [id, id, limit])
        var shapes: [String: TableShape] = [:]
        var mutations: [Mutation] = []
        for row in rows {
            let mutation = try row.value("mutation", as: Int64.self)
            let table = try row.value("table_name", as: String.self)
            if shapes[table] == nil {
                guard let shape = try shapeOf(table, in: db) else { break }
                shapes[table] = shape
            }
            let shape = shapes[table]!
            guard let values = try db.fetchOne("SELECT * FROM \(valuesTable(table)) WHERE ripple_seq = ?",
                                               [try row.value("seq", as: Int64.self)]) else { continue }
            let kind = MutationOp.Kind(rawValue: try row.value("op", as: String.self)) ?? .put
            let changed = try row.value("changed", as: Int64?.self)
            var sent: [String: WireValue] = [:]
            for (index, column) in shape.columns.enumerated() {
                let isKey = shape.key.contains(index)
                switch kind {
                case .delete where !isKey: continue
                case .patch where !isKey && (changed ?? -1) & (1 << Int64(index)) == 0: continue
                default: break
                }
                sent[column] = wireValue(values[column] ?? .null, type: shape.types[index])
            }
            // An update that changed nothing sends nothing.
            if kind == .patch && sent.count == shape.key.count {
                if mutations.last?.id != mutation { mutations.append(Mutation(id: mutation, ops: [])) }
                continue
            }
            let op = MutationOp(kind, table: table, values: sent)
            if mutations.last?.id == mutation { mutations[mutations.count - 1].ops.append(op) } else {
                mutations.append(Mutation(id: mutation, ops: [op]))
            }
        }
        return mutations
    }

    /// The wire form of a local value of a column of wire type `type` (the reverse of
    /// ``WireTypes/localValue(_:type:)``).
    static func wireValue(_ value: SQLValue, type: String) -> WireValue {
        switch (WireTypes.Kind(type), value) {
        case (_, .null): return .null
        case (.bool, .integer(let integer)): return .bool(integer != 0)
        case (.integer, .integer(let integer)): return .integer(integer)
        case (.float, .real(let real)):
            if real.isNaN { return .text("NaN") }
            if real.isInfinite { return .text(real < 0 ? "-Infinity" : "Infinity") }
            return .real(real)
        case (.float, .integer(let integer)): return .real(Double(integer))
        case (.bytea, .blob(let bytes)): return .text(Hex.text(of: bytes))
        case (.bytea, .text(let text)): return .text(Hex.text(of: Array(text.utf8)))
        case (_, .integer(let integer)): return .integer(integer)
        case (_, .real(let real)): return .real(real)
        case (_, .text(let text)): return .text(text)
        case (_, .blob(let bytes)): return .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// Keeps `results` (from `pushed`): each mutation keeps its result until the client's
    /// position reaches the result's position (see ``settled(through:in:)``).
    static func record(_ results: [MutationResult], in db: Database) throws {
        for result in results {
            try db.execute("""
                UPDATE ripple_sync_mutations SET status = ?, code = ?, constraint_name = ?, message = ?, lsn = ?
                WHERE id = ? AND status IS NULL
                """, [result.status.rawValue, result.code, result.constraint, result.message, result.lsn, result.id])
        }
    }

    /// The mutations whose result stands at or before `position`: the rows the client has now
    /// contain what they did (or, rejected, that they did nothing).
    static func settled(through position: SyncPosition, in db: Database) throws -> [MutationResult] {
        try db.fetchAll("SELECT id, status, code, constraint_name, message, lsn FROM ripple_sync_mutations WHERE status IS NOT NULL ORDER BY id")
            .compactMap { row -> MutationResult? in
                guard let lsn = try row.value("lsn", as: String?.self), let at = SyncPosition(lsn), at <= position else { return nil }
                return MutationResult(id: try row.value("id", as: Int64.self),
                                      status: MutationResult.Status(rawValue: try row.value("status", as: String.self)) ?? .applied,
                                      code: try row.value("code", as: String?.self),
                                      constraint: try row.value("constraint_name", as: String?.self),
                                      message: try row.value("message", as: String?.self), lsn: lsn)
            }
    }

    /// Whether results are kept that wait for the rows that contain them.
    static func hasResultsWaiting(_ db: Database) throws -> Bool {
        try db.fetchValue("SELECT 1 FROM ripple_sync_mutations WHERE status IS NOT NULL LIMIT 1", as: Int.self) != nil
    }

    /// How many mutations are kept (pending, or waiting for the rows that contain them).
    static func count(_ db: Database) throws -> Int {
        try db.fetchValue("SELECT count(*) FROM ripple_sync_mutations", as: Int.self) ?? 0
    }

    // MARK: Helpers

    /// `list` as a JSON array of strings.
    static func jsonArray(_ list: [String]) -> String {
        var out = JSONBytes()
        out.strings(list)
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// `list` as a JSON array of numbers (compared as integers by SQLite's `json_each`).
    static func jsonIntegers(_ list: [Int64]) -> String {
        "[" + list.map(String.init).joined(separator: ",") + "]"
    }

    static func strings(_ json: String) throws -> [String] {
        guard let list = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String] else {
            throw SyncClientError("the outbox's record of a table is not a list: \(json)")
        }
        return list
    }

    private static func unquoted(_ quoted: String) -> String {
        String(quoted.dropFirst().dropLast()).replacingOccurrences(of: "\"\"", with: "\"")
    }
}

/// A Postgres position (`X/Y`, two hexadecimal halves), ordered.
struct SyncPosition: Comparable, Hashable, Sendable {
    let value: UInt64

    init?(_ text: String) {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let high = UInt64(parts[0], radix: 16), let low = UInt64(parts[1], radix: 16),
              high <= UInt64(UInt32.max), low <= UInt64(UInt32.max) else { return nil }
        value = high << 32 | low
    }

    static func < (lhs: SyncPosition, rhs: SyncPosition) -> Bool { lhs.value < rhs.value }
}
#endif
