#if Sync
import Foundation
import Ripple
import RippleSync

/// What a frame wrote to a synced table: the keys of the rows it wrote or deleted (a
/// snapshot's too: the table also holds rows no subscription holds, a pending insert's).
struct TouchedRows {
    var keys: [[SQLValue]]
}

/// Keeps the local store equal to the server's rows plus the mutations still pending, in the same
/// local write as each frame (or each settled result): the app's live queries see one change.
///
/// Incremental: only the rows a frame wrote that pending mutations also touched, and the rows of
/// the mutations that leave the outbox, are put back to the server's state (kept in the table's
/// `ripple_sync_base:` shadow) and have the pending operations on them applied again, in
/// order, each mutation in a savepoint. The work is proportional to those rows and their
/// operations, never to the outbox's length squared.
///
/// A pending mutation that no longer applies locally (a patch of a row the server deleted, a
/// constraint) is left out of the local rows with its reason, and stays in the outbox: the
/// server decides, and its result comes back like any other.
enum Rebase {
    /// A key of a row of a synced table.
    private struct RowRef: Hashable {
        var table: String
        var key: [SQLValue]
    }

    /// One pending operation, with the values the local write stored.
    private struct PendingOp {
        var seq: Int64
        var mutation: Int64
        var table: String
        var kind: MutationOp.Kind
        var changed: Int64?
        var values: Row
    }

    /// Rebases after a frame wrote `touched` rows and `settled` mutations leave the outbox.
    /// Returns the mutations that stopped applying locally, with why.
    static func run(touched: [String: TouchedRows], settled: [Int64], in db: Database) throws -> [(mutation: Int64, reason: String)] {
        if settled.isEmpty {
            // Nothing pending: the frame's rows are the local rows.
            guard !touched.isEmpty, try Outbox.count(db) > 0 else { return [] }
        }
        var shapes: [String: Outbox.TableShape] = [:]
        func shape(_ table: String) throws -> Outbox.TableShape? {
            if let known = shapes[table] { return known }
            let found = try Outbox.shapeOf(table, in: db)
            shapes[table] = found
            return found
        }

        var rows = Set<RowRef>()
        // Rows the frame wrote that pending mutations also touched: their server state is what
        // the table holds now.
        for (table, written) in touched {
            guard let shape = try shape(table) else { continue }
            let keyNames = shape.keyColumns.map(SQLIdentifier.quoted)
            let base = Outbox.baseTable(table)
            let refs = try written.keys.filter { key in
                try db.fetchValue("SELECT 1 FROM \(base) WHERE \(condition(keyNames))", key, as: Int.self) != nil
            }
            for key in refs {
                try keepServerRow(key, of: shape, in: db)
                rows.insert(RowRef(table: table, key: key))
            }
        }
        // The settled mutations' rows: what they did is now in the server's rows, or nothing.
        for table in try tables(of: settled, in: db) {
            guard let shape = try shape(table) else { continue }
            for key in try keys(of: settled, in: table, shape: shape, in: db) { rows.insert(RowRef(table: table, key: key)) }
        }
        try forget(settled, in: db)

        // Put the rows back to the server's state and apply what is pending on them again; a
        // mutation that fails is left out, and its other rows are done again without it.
        var skipped: [Int64: String] = [:]
        // The pending operations on each row, as the last pass read them.
        var opsByRow: [RowRef: [PendingOp]] = [:]
        while true {
            for row in rows { if let shape = try shape(row.table) { try restore(row.key, of: shape, in: db) } }
            opsByRow = [:]
            for row in rows {
                guard let shape = try shape(row.table) else { continue }
                opsByRow[row] = try pendingOps(on: row.key, of: shape, in: db)
            }
            var ops = opsByRow.values.flatMap { $0 }
            ops.sort { $0.seq < $1.seq }
            var failed: (Int64, String)?
            var index = 0
            while index < ops.count, failed == nil {
                let mutation = ops[index].mutation
                var end = index
                while end < ops.count && ops[end].mutation == mutation { end += 1 }
                if skipped[mutation] == nil {
                    do {
                        try db.savepoint {
                            for op in ops[index..<end] { try apply(op, shape: try shape(op.table)!, in: db) }
                        }
                    } catch {
                        failed = (mutation, "\(error)")
                    }
                }
                index = end
            }
            guard let (mutation, reason) = failed else { break }
            skipped[mutation] = reason
            for table in try tables(of: [mutation], in: db) {
                guard let shape = try shape(table) else { continue }
                for key in try keys(of: [mutation], in: table, shape: shape, in: db) { rows.insert(RowRef(table: table, key: key)) }
            }
        }
        // A row no pending operation touches any more is the server's: its base is dropped.
        for (row, ops) in opsByRow where ops.isEmpty {
            guard let shape = try shape(row.table) else { continue }
            try db.execute("DELETE FROM \(Outbox.baseTable(row.table)) WHERE \(condition(shape.keyColumns.map(SQLIdentifier.quoted)))", row.key)
        }
        // Mutations that apply again lose their mark; the newly skipped ones are reported once.
        var reported: [(mutation: Int64, reason: String)] = []
        for (mutation, reason) in skipped.sorted(by: { $0.key < $1.key }) {
            let before = try db.fetchValue("SELECT conflict FROM ripple_sync_mutations WHERE id = ?", [mutation], as: String.self)
            try db.execute("UPDATE ripple_sync_mutations SET conflict = ? WHERE id = ?", [reason, mutation])
            if before == nil { reported.append((mutation, reason)) }
        }
        let reapplied = Set(opsByRow.values.flatMap { $0.map(\.mutation) }).subtracting(skipped.keys)
        for mutation in reapplied {
            try db.execute("UPDATE ripple_sync_mutations SET conflict = NULL WHERE id = ? AND conflict IS NOT NULL", [mutation])
        }
        return reported
    }

    /// `k1 = ? AND k2 = ?` for the quoted key columns.
    static func condition(_ keys: [String]) -> String {
        keys.map { "\($0) = ?" }.joined(separator: " AND ")
    }

    /// The base of row `key` becomes what the table holds now (the frame's row, or none).
    private static func keepServerRow(_ key: [SQLValue], of shape: Outbox.TableShape, in db: Database) throws {
        let names = shape.columns.map(SQLIdentifier.quoted)
        let keyNames = shape.keyColumns.map(SQLIdentifier.quoted)
        let base = Outbox.baseTable(shape.name)
        try db.execute("DELETE FROM \(base) WHERE \(condition(keyNames))", key)
        try db.execute("""
            INSERT INTO \(base) (ripple_present, \(names.joined(separator: ", ")))
            SELECT 1, \(names.joined(separator: ", ")) FROM \(SQLIdentifier.quoted(shape.name)) WHERE \(condition(keyNames))
            """, key)
        if db.changedRowCount == 0 {
            try db.execute("INSERT INTO \(base) (ripple_present, \(keyNames.joined(separator: ", "))) VALUES (0, \(placeholders(key.count)))", key)
        }
    }

    /// Puts row `key` back to its base: the server's row, or no row.
    private static func restore(_ key: [SQLValue], of shape: Outbox.TableShape, in db: Database) throws {
        let names = shape.columns.map(SQLIdentifier.quoted)
        let keyNames = shape.keyColumns.map(SQLIdentifier.quoted)
        guard let base = try db.fetchOne("SELECT * FROM \(Outbox.baseTable(shape.name)) WHERE \(condition(keyNames))", key) else { return }
        let table = SQLIdentifier.quoted(shape.name)
        if base["ripple_present"] == .integer(1) {
            try upsert(shape.columns.map { base[$0] ?? .null }, names: names, keyNames: keyNames, into: table, in: db)
        } else {
            try db.execute("DELETE FROM \(table) WHERE \(condition(keyNames))", key)
        }
    }

    private static func upsert(_ values: [SQLValue], names: [String], keyNames: [String], into table: String, in db: Database) throws {
        let others = names.filter { !keyNames.contains($0) }
        var sql = "INSERT INTO \(table) (\(names.joined(separator: ", "))) VALUES (\(placeholders(names.count))) "
            + "ON CONFLICT (\(keyNames.joined(separator: ", "))) DO "
        sql += others.isEmpty ? "NOTHING" : "UPDATE SET " + others.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        try db.execute(sql, values)
    }

    /// Applies one pending operation to the table again.
    private static func apply(_ op: PendingOp, shape: Outbox.TableShape, in db: Database) throws {
        let names = shape.columns.map(SQLIdentifier.quoted)
        let keyNames = shape.keyColumns.map(SQLIdentifier.quoted)
        let table = SQLIdentifier.quoted(shape.name)
        let key = shape.keyColumns.map { op.values[$0] ?? .null }
        switch op.kind {
        case .put:
            try upsert(shape.columns.map { op.values[$0] ?? .null }, names: names, keyNames: keyNames, into: table, in: db)
        case .patch:
            let columns = shape.columns.indices.filter { index in
                !shape.key.contains(index) && (op.changed.map { $0 & (1 << Int64(index)) != 0 } ?? true)
            }
            guard !columns.isEmpty else { return }
            try db.execute("UPDATE \(table) SET \(columns.map { "\(names[$0]) = ?" }.joined(separator: ", ")) WHERE \(condition(keyNames))",
                           columns.map { op.values[shape.columns[$0]] ?? .null } + key)
            if db.changedRowCount == 0 {
                throw SyncClientError("the row of \(shape.name) it changes is gone")
            }
        case .delete:
            try db.execute("DELETE FROM \(table) WHERE \(condition(keyNames))", key)
        }
    }

    /// The pending operations on row `key` of `shape`'s table, in order.
    private static func pendingOps(on key: [SQLValue], of shape: Outbox.TableShape, in db: Database) throws -> [PendingOp] {
        let keyNames = shape.keyColumns.map { "v." + SQLIdentifier.quoted($0) }
        return try db.fetchAll("""
            SELECT o.seq AS ripple_seq_, o.mutation AS ripple_mutation_, o.op AS ripple_op_, o.changed AS ripple_changed_, v.*
            FROM ripple_sync_ops AS o JOIN \(Outbox.valuesTable(shape.name)) AS v ON v.ripple_seq = o.seq
            WHERE o.table_name = ? AND o.mutation IS NOT NULL AND \(condition(keyNames))
            ORDER BY o.seq
            """, [SQLValue.text(shape.name)] + key).map { row in
            PendingOp(seq: try row.value("ripple_seq_", as: Int64.self), mutation: try row.value("ripple_mutation_", as: Int64.self),
                      table: shape.name, kind: MutationOp.Kind(rawValue: try row.value("ripple_op_", as: String.self)) ?? .put,
                      changed: try row.value("ripple_changed_", as: Int64?.self), values: row)
        }
    }

    /// The tables `mutations` wrote.
    private static func tables(of mutations: [Int64], in db: Database) throws -> [String] {
        guard !mutations.isEmpty else { return [] }
        return try db.fetchAll("""
            SELECT DISTINCT table_name FROM ripple_sync_ops WHERE mutation IN (SELECT value FROM json_each(?))
            """, [Outbox.jsonIntegers(mutations)]).map { try $0.value("table_name", as: String.self) }
    }

    /// The keys of the rows of `table` that `mutations` wrote.
    private static func keys(of mutations: [Int64], in table: String, shape: Outbox.TableShape, in db: Database) throws -> [[SQLValue]] {
        let keyNames = shape.keyColumns.map { "v." + SQLIdentifier.quoted($0) }
        return try db.fetchAll("""
            SELECT DISTINCT \(keyNames.joined(separator: ", ")) FROM ripple_sync_ops AS o
            JOIN \(Outbox.valuesTable(table)) AS v ON v.ripple_seq = o.seq
            WHERE o.table_name = ? AND o.mutation IN (SELECT value FROM json_each(?))
            """, [table, Outbox.jsonIntegers(mutations)]).map(\.values)
    }

    /// Removes `mutations` and their operations from the outbox.
    private static func forget(_ mutations: [Int64], in db: Database) throws {
        guard !mutations.isEmpty else { return }
        let list = Outbox.jsonIntegers(mutations)
        for table in try tables(of: mutations, in: db) {
            try db.execute("""
                DELETE FROM \(Outbox.valuesTable(table)) WHERE ripple_seq IN (
                    SELECT seq FROM ripple_sync_ops WHERE table_name = ? AND mutation IN (SELECT value FROM json_each(?)))
                """, [table, list])
        }
        try db.execute("DELETE FROM ripple_sync_ops WHERE mutation IN (SELECT value FROM json_each(?))", [list])
        try db.execute("DELETE FROM ripple_sync_mutations WHERE id IN (SELECT value FROM json_each(?))", [list])
    }

    private static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }
}
#endif
