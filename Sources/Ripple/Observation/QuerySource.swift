import Foundation
import RippleDiff
import RippleSQLite

/// The result of one query at one version, as a live query keeps it: the elements, and for each
/// one its identity (the key column's text, as the change log writes keys) and a fingerprint of
/// every column, to tell which elements and which columns changed.
struct Snapshot<Element: Sendable>: Sendable {
    var elements: [Element] = []
    /// Per element: identity and content fingerprint, what the diff compares.
    var items: [SnapshotItem] = []
    /// The result's column names.
    var columnNames: [String] = []
    /// Per element, one fingerprint per column (`items.count × columnNames.count`, row-major).
    var columnHashes: [UInt64] = []

    /// The columns whose values differ between element `old` of `self` and element `new` of `next`.
    func changedColumns(from old: Int, to new: Int, in next: Snapshot) -> Set<String> {
        let width = columnNames.count
        guard next.columnNames == columnNames else { return Set(next.columnNames) }
        var changed: Set<String> = []
        for column in 0..<width where columnHashes[old * width + column] != next.columnHashes[new * width + column] {
            changed.insert(columnNames[column])
        }
        return changed
    }

    /// Replaces element `index` with element `row` of `rows` (same columns).
    mutating func replace(_ index: Int, with row: Int, of rows: Snapshot) {
        let width = columnNames.count
        elements[index] = rows.elements[row]
        items[index] = rows.items[row]
        columnHashes.replaceSubrange(index * width ..< (index + 1) * width,
                                     with: rows.columnHashes[row * width ..< (row + 1) * width])
    }
}

/// One element of a snapshot as the diff sees it: identity = the key's text; content equal when
/// every column's value is.
struct SnapshotItem: Diffable, Hashable, Sendable {
    var key: String
    var content: UInt64

    var diffID: String { key }
    func isContentEqual(to other: SnapshotItem) -> Bool { content == other.content }
}

/// Reads the rows of a statement into a ``Snapshot``, decoding each with `decode`.
struct SnapshotReader {
    /// The column whose value identifies an element.
    let keyColumn: Int32

    func read<Element>(_ statement: Statement, decode: () throws -> Element) throws -> Snapshot<Element> {
        let handle = statement.handle
        let width = Int32(statement.columnCount)
        var snapshot = Snapshot<Element>()
        snapshot.columnNames = (0..<Int(width)).map(statement.columnName)
        while try statement.step() {
            // Fingerprints first: they read each column with the accessor of its own type, so no
            // value is converted before the decoder reads it.
            var row = Hasher()
            var key = ""
            for column in 0..<width {
                let hash = Self.fingerprint(handle, column)
                snapshot.columnHashes.append(hash)
                row.combine(hash)
                if column == keyColumn { key = Self.keyText(handle, column) }
            }
            snapshot.items.append(SnapshotItem(key: key, content: UInt64(bitPattern: Int64(row.finalize()))))
            snapshot.elements.append(try decode())
        }
        return snapshot
    }

    /// A fingerprint of one column's value and type.
    static func fingerprint(_ handle: OpaquePointer, _ column: Int32) -> UInt64 {
        var hasher = Hasher()
        let type = sqlite3_column_type(handle, column)
        hasher.combine(type)
        switch type {
        case SQLITE_INTEGER:
            hasher.combine(sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT:
            hasher.combine(sqlite3_column_double(handle, column).bitPattern)
        case SQLITE_TEXT:
            if let bytes = sqlite3_column_text(handle, column) {
                hasher.combine(bytes: UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))))
            }
        case SQLITE_BLOB:
            if let bytes = sqlite3_column_blob(handle, column) {
                hasher.combine(bytes: UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))))
            }
        default:
            break
        }
        return UInt64(bitPattern: Int64(hasher.finalize()))
    }

    /// The text of a key value, as the change log writes it (see `ChangeCapture.keyText`).
    static func keyText(_ handle: OpaquePointer, _ column: Int32) -> String {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER:
            return String(sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT:
            return String(sqlite3_column_double(handle, column))
        case SQLITE_TEXT:
            guard let bytes = sqlite3_column_text(handle, column) else { return "" }
            return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))),
                          as: UTF8.self)
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, column))
            guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return "" }
            return ChangeCapture.keyText(.blob([UInt8](UnsafeRawBufferPointer(start: bytes, count: count))))
        default:
            return "NULL"
        }
    }
}

/// What a live query reads and what can change it.
struct QuerySource<Element: Sendable>: Sendable {
    /// The query, readably (errors and recorded transcripts show it).
    let description: String
    /// The SQL text and arguments of the query.
    let sql: String
    let arguments: [SQLValue]
    /// The tables the query reads, when known in advance (a collection); otherwise found by
    /// preparing the SQL under an authorizer.
    let knownTables: Set<String>?
    /// For a single-table filter without offset: how to tell that changed rows cannot affect the
    /// result (row-precise invalidation). `nil`: any change to the tables re-runs the query.
    let rowCheck: RowCheck?
    /// Reads the result.
    let fetch: @Sendable (Database) throws -> Snapshot<Element>
    /// For row-precise sources with an order: reads the rows with these keys that match the
    /// filter now (in no particular order), to patch the result in place when only their
    /// non-ordering columns changed.
    var fetchRows: (@Sendable (Database, [String]) throws -> Snapshot<Element>)? = nil
    /// The result columns of the ORDER BY terms.
    var orderColumns: [Int] = []

    /// The tables the query reads, found by SQLite's authorizer while preparing it.
    func tables(in db: Database) throws -> Set<String> {
        if let knownTables { return knownTables }
        return try db.tablesRead(by: sql)
    }
}

/// Row-precise invalidation of a single-table query: changed rows that are not in the current
/// result and do not match the filter now cannot change the result (the window has no offset).
struct RowCheck: Sendable {
    /// The table queried.
    let table: String
    /// `SELECT 1 FROM table WHERE key IN (` — the keys follow, then `) AND (filter) LIMIT 1`.
    let prefix: String
    /// The filter's SQL (with its `?`s) and arguments; empty SQL for no filter.
    let filterSQL: String
    let filterArguments: [SQLValue]
    /// The same, for the store's in-transaction evaluation.
    let interest: RowInterest

    /// Whether any of `keys` is a row that matches the filter now.
    func anyMatches(_ keys: [String], in db: Database) throws -> Bool {
        guard !keys.isEmpty else { return false }
        var sql = prefix + Array(repeating: "?", count: keys.count).joined(separator: ", ") + ")"
        if !filterSQL.isEmpty { sql += " AND (" + filterSQL + ")" }
        sql += " LIMIT 1"
        let arguments: [any SQLValueConvertible] = keys.map { SQLValue.text($0) } + filterArguments
        // Keys of a few sizes recur (one row, a handful): cache those statements only.
        return try keys.count <= 4 ? db.fetchOne(sql, arguments) != nil : db.fetchOneUncached(sql, arguments) != nil
    }
}

extension Database {
    /// The names of the tables `sql` reads, as SQLite's authorizer reports them while preparing.
    func tablesRead(by sql: String) throws -> Set<String> {
        final class Collector { var tables: Set<String> = [] }
        let collector = Collector()
        let context = Unmanaged.passUnretained(collector).toOpaque()
        sqlite3_set_authorizer(handle, { context, action, table, _, _, _ in
            if action == SQLITE_READ, let context, let table {
                let name = String(cString: table)
                if !name.hasPrefix("sqlite_") {
                    Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue().tables.insert(name)
                }
            }
            return SQLITE_OK
        }, context)
        defer { sqlite3_set_authorizer(handle, nil, nil) }
        _ = try withExtendedLifetime(collector) { try makeStatement(sql) }
        return collector.tables
    }

    /// The first row of a query prepared for this one call.
    func fetchOneUncached(_ sql: String, _ arguments: [any SQLValueConvertible]) throws -> Row? {
        let statement = try makeStatement(sql)
        try statement.bind(arguments)
        guard try statement.step() else { return nil }
        return Row(columns: Row.Columns((0..<statement.columnCount).map(statement.columnName)),
                   values: (0..<Int32(statement.columnCount)).map(statement.value(at:)))
    }
}
