#if Sync
import Foundation
import Ripple
import RippleSync

/// One subscription's change in one frame, as the local store takes it.
struct LocalChange {
    var subscription: String
    var table: String
    var columns: [String]
    var types: [String]
    var key: [Int]
    var old: [[WireValue]]
    var new: [[WireValue]]
    /// New indices of the rows to write (inserted or updated); `nil`: every row (a snapshot).
    var written: [Int]?
    /// The subscription's first result in this process: the rows it held before are read from
    /// the store's holds instead of `old`.
    var isFirst: Bool
}

/// The rows of a client's subscriptions in its local store: a synced table of the same name and
/// columns as on the server (values as ``WireTypes`` says), and `ripple_sync_holds`, which
/// subscription holds which row — a row stays while any subscription holds it.
enum LocalRows {
    static func prepare(_ db: Database) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS ripple_sync_holds(
                table_name TEXT NOT NULL, row_key TEXT NOT NULL, subscription TEXT NOT NULL,
                PRIMARY KEY (table_name, row_key, subscription)) WITHOUT ROWID
            """)
        try db.execute("CREATE INDEX IF NOT EXISTS ripple_sync_holds_by_subscription ON ripple_sync_holds(subscription)")
    }

    /// Applies `changes` in `db` (one write: the app's live queries see one change).
    /// Returns the rows written, per table (for the rebase: see ``Rebase``).
    @discardableResult
    static func apply(_ changes: [LocalChange], in db: Database) throws -> [String: TouchedRows] {
        var touched: [String: TouchedRows] = [:]
        for change in changes {
            touched[change.table, default: TouchedRows(keys: [])].keys += try apply(change, in: db).keys
        }
        return touched
    }

    /// What separates a subscription's id from an include's path in the holds of that
    /// include's rows (U+001F, the unit separator): `"<id>\u{1F}<path>"`. A subscription's id
    /// cannot contain it (``SyncClient/subscribe(_:_:)`` refuses one), so no id's holds are
    /// taken for another's includes.
    static let partSeparator: Character = "\u{1F}"

    /// The holder of subscription `id`'s rows of the include at `path`.
    static func partKey(_ id: String, _ path: String) -> String { id + String(partSeparator) + path }

    /// Forgets subscription `id`'s holds, those of its root rows and of every include's rows,
    /// deleting the rows nothing else holds.
    static func release(_ id: String, in db: Database) throws {
        try releaseParts(of: id, except: [], in: db)
        try release(holdsWhere: "subscription = ?", [id], in: db)
    }

    /// Forgets the holds of subscription `id`'s includes other than `kept` (holder keys, see
    /// ``partKey(_:_:)``), deleting the rows nothing else holds: after a snapshot of the tree,
    /// the includes it does not have (the subscription's query changed across launches).
    static func releaseParts(of id: String, except kept: Set<String>, in db: Database) throws {
        // The holders `id` + U+001F + path are those from `id` + U+001F up to `id` + U+0020 (text
        // compares by bytes): one range of the holds' index by subscription.
        try release(holdsWhere: "subscription >= ? AND subscription < ? AND subscription NOT IN (SELECT value FROM json_each(?))",
                    [id + "\u{1F}", id + "\u{20}", Outbox.jsonArray(kept.sorted())], in: db)
    }

    /// Forgets the holds `condition` selects, deleting the rows no other holds keep.
    private static func release(holdsWhere condition: String, _ arguments: [any SQLValueConvertible], in db: Database) throws {
        let held = try db.fetchAll("SELECT table_name, row_key FROM ripple_sync_holds WHERE \(condition)", arguments)
        guard !held.isEmpty else { return }
        try db.execute("DELETE FROM ripple_sync_holds WHERE \(condition)", arguments)
        var keys: [String: TableKey] = [:]
        for row in held {
            let table = try row.value("table_name", as: String.self)
            let key = try row.value("row_key", as: String.self)
            if keys[table] == nil { keys[table] = try TableKey(of: table, in: db) }
            try deleteIfUnheld(key, of: keys[table]!, in: db)
        }
    }

    private static func apply(_ change: LocalChange, in db: Database) throws -> TouchedRows {
        try ensureTable(change, in: db)
        try describe(change, in: db)
        var touchedKeys: [[SQLValue]] = []
        let table = SQLIdentifier.quoted(change.table)
        let keyNames = change.key.map { change.columns[$0] }
        func keyText(_ row: [WireValue]) -> String {
            var out = JSONBytes()
            out.row(change.key.map { row[$0] })
            return String(decoding: out.bytes, as: UTF8.self)
        }
        let newKeys = change.new.map(keyText)
        let newSet = Set(newKeys)
        let oldSet: Set<String> = if change.isFirst {
            Set(try db.fetchAll("SELECT row_key FROM ripple_sync_holds WHERE subscription = ? AND table_name = ?",
                                [change.subscription, change.table]).map { try $0.value("row_key", as: String.self) })
        } else {
            Set(change.old.map(keyText))
        }
        // The holds change in bulk, each list bound as one JSON array that SQLite walks
        // (json_each), in key order (the index grows at its end): one statement per list, not
        // one per row.
        let left = oldSet.subtracting(newSet).sorted()
        let entered = newSet.subtracting(oldSet).sorted()
        if !left.isEmpty {
            let list = Outbox.jsonArray(left)
            try db.execute("""
                DELETE FROM ripple_sync_holds WHERE table_name = ? AND subscription = ?
                    AND row_key IN (SELECT value FROM json_each(?))
                """, [change.table, change.subscription, list])
            // Rows this subscription no longer holds: gone when no other subscription holds them.
            let unheld = try db.fetchAll("""
                SELECT value FROM json_each(?) AS k
                WHERE NOT EXISTS (SELECT 1 FROM ripple_sync_holds WHERE table_name = ? AND row_key = k.value)
                """, [list, change.table]).map { try $0.value("value", as: String.self) }
            if !unheld.isEmpty {
                let tableKey = try TableKey(of: change.table, in: db)
                for key in unheld { touchedKeys.append(try delete(key, of: tableKey, in: db)) }
            }
        }
        if !entered.isEmpty {
            try db.execute("INSERT OR IGNORE INTO ripple_sync_holds SELECT ?, value, ? FROM json_each(?)",
                           [change.table, change.subscription, Outbox.jsonArray(entered)])
        }
        // Written rows: inserted, or updated where a value differs (an unchanged row is not
        // touched, so the app's live queries do not see it change).
        let names = change.columns.map(SQLIdentifier.quoted)
        let keys = keyNames.map(SQLIdentifier.quoted).joined(separator: ", ")
        let others = change.columns.indices.filter { !change.key.contains($0) }
        var sql = "INSERT INTO \(table) (\(names.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))"
        if others.isEmpty {
            sql += " ON CONFLICT (\(keys)) DO NOTHING"
        } else {
            let set = others.map { "\(names[$0]) = excluded.\(names[$0])" }.joined(separator: ", ")
            let differs = others.map { "\(names[$0]) IS NOT excluded.\(names[$0])" }.joined(separator: " OR ")
            sql += " ON CONFLICT (\(keys)) DO UPDATE SET \(set) WHERE \(differs)"
        }
        // One statement, its values bound one by one (no list of arguments per row).
        let kinds = change.types.map(WireTypes.Kind.init)
        let statement = try db.cachedStatement(sql)
        defer { statement.reset() }
        func write(_ row: [WireValue]) throws {
            guard row.count == kinds.count else {
                throw SyncClientError("a row of \(change.table) has \(row.count) values for \(kinds.count) columns")
            }
            for (column, value) in row.enumerated() {
                try statement.bind(try WireTypes.localValue(value, kind: kinds[column]), at: Int32(column + 1))
            }
            while try statement.step() {}
            statement.reset()
        }
        // A snapshot writes each of its rows; what it wrote is those rows (and the ones it
        // deleted), never "the whole table": rows of the table that no subscription holds (a
        // pending insert outside every window) are not the server's.
        for index in change.written ?? Array(change.new.indices) {
            let row = change.new[index]
            try write(row)
            touchedKeys.append(try change.key.map { try WireTypes.localValue(row[$0], kind: kinds[$0]) })
        }
        return TouchedRows(keys: touchedKeys)
    }

    /// Records the synced table's shape for the outbox (its capture of local writes): the
    /// columns every subscription of it brought, with their wire types, and its key.
    private static func describe(_ change: LocalChange, in db: Database) throws {
        var shape = try Outbox.shapeOf(change.table, in: db)
            ?? Outbox.TableShape(name: change.table, columns: [], types: [], key: [])
        for (column, type) in zip(change.columns, change.types) where !shape.columns.contains(column) {
            shape.columns.append(column)
            shape.types.append(type)
        }
        shape.key = change.key.compactMap { shape.columns.firstIndex(of: change.columns[$0]) }
        try Outbox.describe(shape, in: db)
    }

    /// A local table's key, read once for the rows one change deletes: the DELETE by key, and
    /// the wire type each key column was made for (its declared type names it; see WireTypes).
    private struct TableKey {
        let table: String
        let delete: String
        let types: [String]

        init(of table: String, in db: Database) throws {
            let layout = try db.fetchAll("SELECT name, type FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", [table])
            let names = try layout.map { try $0.value("name", as: String.self) }
            self.table = table
            delete = "DELETE FROM \(SQLIdentifier.quoted(table)) WHERE "
                + names.map { "\(SQLIdentifier.quoted($0)) = ?" }.joined(separator: " AND ")
            types = try layout.map { column in
                switch try column.value("type", as: String.self) {
                case "INTEGER": "int8"
                case "REAL": "float8"
                case "BLOB": "bytea"
                default: "text"
                }
            }
        }
    }

    private static func deleteIfUnheld(_ key: String, of table: TableKey, in db: Database) throws {
        guard try db.fetchValue("SELECT 1 FROM ripple_sync_holds WHERE table_name = ? AND row_key = ? LIMIT 1",
                                [table.table, key], as: Int.self) == nil else { return }
        try delete(key, of: table, in: db)
    }

    /// Deletes the row whose key is `key` (its key values as a JSON array) from `table`.
    @discardableResult
    private static func delete(_ key: String, of table: TableKey, in db: Database) throws -> [SQLValue] {
        var text = key
        let values: [WireValue]
        do {
            values = try text.withUTF8 { bytes throws(SyncFrameError) in try FrameReader.values(in: bytes) }
        } catch {
            throw SyncClientError("the held key \(key) is not a list of values: \(error)")
        }
        guard table.types.count == values.count else { throw SyncClientError("the key \(key) does not fit table \(table.table)") }
        let local = try zip(values, table.types).map { value, type in try WireTypes.localValue(value, type: type) }
        try db.execute(table.delete, local)
        return local
    }

    /// Creates the synced table, or adds the columns a subscription brings that it lacks.
    private static func ensureTable(_ change: LocalChange, in db: Database) throws {
        let existing = try db.fetchAll("SELECT name FROM pragma_table_info(?)", [change.table]).map { try $0.value("name", as: String.self) }
        let table = SQLIdentifier.quoted(change.table)
        if existing.isEmpty {
            let columns = zip(change.columns, change.types).map { "\(SQLIdentifier.quoted($0)) \(WireTypes.columnType(of: $1))" }
            let key = change.key.map { SQLIdentifier.quoted(change.columns[$0]) }.joined(separator: ", ")
            try db.execute("CREATE TABLE \(table) (\(columns.joined(separator: ", ")), PRIMARY KEY (\(key)))")
            return
        }
        for (name, type) in zip(change.columns, change.types) where !existing.contains(name) {
            try db.execute("ALTER TABLE \(table) ADD COLUMN \(SQLIdentifier.quoted(name)) \(WireTypes.columnType(of: type))")
        }
    }
}
#endif
