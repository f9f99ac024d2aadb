import Foundation
import RippleSQLite

/// Captures every row change made on the writer connection — through collections or raw SQL —
/// with SQLite's pre-update hook, so that a write transaction can log them before it commits.
///
/// Per change it keeps the table, the operation and the row's primary key (as text; a composite
/// key as a JSON array; the rowid for tables without a declared key). The primary-key columns of
/// each table are read from the schema before the transaction's statements run and re-read when
/// the schema changes; a change to a table created in the same transaction keeps the whole row
/// until the key columns are known.
///
/// Tables whose names start with `ripple_` or `sqlite_`, and tables outside `main`, are not logged.
final class ChangeCapture {
    enum Operation: String, Sendable {
        case insert, update, delete
    }

    struct Change: Equatable {
        var table: String
        var operation: Operation
        var key: String
    }

    /// How to find a table's key: the rowid, or these columns of the row.
    private enum KeyColumns {
        case rowid
        case columns([Int32])
    }

    private struct PendingRow {
        var table: String
        var operation: Operation
        var rowid: Int64
        var values: [SQLValue]
    }

    private(set) var changes: [Change] = []
    private var pending: [PendingRow] = []
    private var keyColumns: [String: KeyColumns] = [:]
    private var schemaVersion: Int64 = -1
    private var lastTableName: UnsafePointer<CChar>?
    private var lastTable: (name: String, key: KeyColumns?, logged: Bool)?

    /// Whether any change was captured since the last ``reset()``.
    var isEmpty: Bool { changes.isEmpty && pending.isEmpty }

    /// A position to roll back to (a savepoint's start).
    var mark: (changes: Int, pending: Int) { (changes.count, pending.count) }

    /// Forgets changes captured after `mark` (their savepoint rolled back).
    func rollback(to mark: (changes: Int, pending: Int)) {
        changes.removeSubrange(min(mark.changes, changes.count)...)
        pending.removeSubrange(min(mark.pending, pending.count)...)
    }

    /// Forgets every captured change (a new transaction starts, or one rolled back).
    func reset() {
        changes.removeAll(keepingCapacity: true)
        pending.removeAll()
    }

    /// Installs the hook on `db`. The capture must outlive the connection's use.
    func install(on db: Database) {
        sqlite3_preupdate_hook(db.handle, { context, connection, operation, database, table, key1, key2 in
            guard let context, let connection, let database, let table else { return }
            let capture = Unmanaged<ChangeCapture>.fromOpaque(context).takeUnretainedValue()
            capture.capture(connection, operation, database, table, key1, key2)
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Re-reads the key columns of every table when the schema changed since the last read.
    func refreshSchemaIfNeeded(_ db: Database) throws {
        let version = try db.fetchValue("PRAGMA schema_version", as: Int64.self) ?? 0
        guard version != schemaVersion else { return }
        var columns: [String: KeyColumns] = [:]
        let tables = try db.fetchAll("""
            SELECT name, sql LIKE '%WITHOUT ROWID%' AS without_rowid FROM sqlite_schema
            WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'ripple\\_%' ESCAPE '\\'
            """)
        for table in tables {
            guard case .text(let name) = table["name"] else { continue }
            let withoutRowid = table["without_rowid"] == .integer(1)
            let info = try db.fetchAll("SELECT cid, type, pk FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", [name])
            let key: [(column: Int32, type: String)] = info.compactMap { row in
                guard let cid = try? row.value("cid", as: Int32.self) else { return nil }
                return (cid, (try? row.value("type", as: String.self)) ?? "")
            }
            if key.isEmpty || (!withoutRowid && key.count == 1 && key[0].type.uppercased() == "INTEGER") {
                columns[name] = .rowid   // no declared key, or INTEGER PRIMARY KEY: an alias of the rowid
            } else {
                columns[name] = .columns(key.map(\.column))
            }
        }
        keyColumns = columns
        schemaVersion = version
        lastTableName = nil
        lastTable = nil
    }

    /// Turns rows of tables created in this transaction into changes, now that their keys are known.
    func resolvePending(_ db: Database) throws {
        guard !pending.isEmpty else { return }
        try refreshSchemaIfNeeded(db)
        for row in pending {
            switch keyColumns[row.table] {
            case .columns(let columns)?:
                changes.append(Change(table: row.table, operation: row.operation,
                                      key: Self.key(columns.map { row.values[Int($0)] })))
            default:
                changes.append(Change(table: row.table, operation: row.operation, key: String(row.rowid)))
            }
        }
        pending.removeAll()
    }

    // MARK: The hook

    private func capture(_ connection: OpaquePointer, _ operation: Int32, _ database: UnsafePointer<CChar>,
                         _ tableName: UnsafePointer<CChar>, _ key1: Int64, _ key2: Int64) {
        guard strcmp(database, "main") == 0 else { return }
        let table: (name: String, key: KeyColumns?, logged: Bool)
        if let last = lastTable, let lastName = lastTableName, lastName == tableName || strcmp(lastName, tableName) == 0 {
            table = last
        } else {
            let name = String(cString: tableName)
            let logged = !name.hasPrefix("ripple_") && !name.hasPrefix("sqlite_")
            table = (name, keyColumns[name], logged)
            lastTable = table
            lastTableName = tableName
        }
        guard table.logged else { return }

        switch table.key {
        case .rowid?:
            switch operation {
            case SQLITE_INSERT: changes.append(Change(table: table.name, operation: .insert, key: String(key2)))
            case SQLITE_DELETE: changes.append(Change(table: table.name, operation: .delete, key: String(key1)))
            default:
                if key1 == key2 {
                    changes.append(Change(table: table.name, operation: .update, key: String(key1)))
                } else {
                    changes.append(Change(table: table.name, operation: .delete, key: String(key1)))
                    changes.append(Change(table: table.name, operation: .insert, key: String(key2)))
                }
            }
        case .columns(let columns)?:
            switch operation {
            case SQLITE_INSERT:
                changes.append(Change(table: table.name, operation: .insert, key: key(connection, columns, new: true)))
            case SQLITE_DELETE:
                changes.append(Change(table: table.name, operation: .delete, key: key(connection, columns, new: false)))
            default:
                let old = key(connection, columns, new: false)
                let new = key(connection, columns, new: true)
                if old == new {
                    changes.append(Change(table: table.name, operation: .update, key: new))
                } else {
                    changes.append(Change(table: table.name, operation: .delete, key: old))
                    changes.append(Change(table: table.name, operation: .insert, key: new))
                }
            }
        case nil:
            // A table created in this transaction: keep the whole row until its key is known.
            let useNew = operation != SQLITE_DELETE
            let count = sqlite3_preupdate_count(connection)
            let values = (0..<count).map { value(connection, $0, new: useNew) }
            let kind: Operation = operation == SQLITE_INSERT ? .insert : operation == SQLITE_DELETE ? .delete : .update
            pending.append(PendingRow(table: table.name, operation: kind, rowid: useNew ? key2 : key1, values: values))
        }
    }

    private func key(_ connection: OpaquePointer, _ columns: [Int32], new: Bool) -> String {
        if columns.count == 1 { return Self.keyText(value(connection, columns[0], new: new)) }
        return Self.key(columns.map { value(connection, $0, new: new) })
    }

    private func value(_ connection: OpaquePointer, _ column: Int32, new: Bool) -> SQLValue {
        var pointer: OpaquePointer?
        let code = new ? sqlite3_preupdate_new(connection, column, &pointer) : sqlite3_preupdate_old(connection, column, &pointer)
        guard code == SQLITE_OK, let pointer else { return .null }
        switch sqlite3_value_type(pointer) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(pointer))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(pointer))
        case SQLITE_TEXT:
            let count = Int(sqlite3_value_bytes(pointer))
            guard let bytes = sqlite3_value_text(pointer) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(pointer))
            guard count > 0, let bytes = sqlite3_value_blob(pointer) else { return .blob([]) }
            return .blob([UInt8](UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    /// The logged text of a one-column key: integers and reals in decimal, text as is, blobs in hex.
    static func keyText(_ value: SQLValue) -> String {
        switch value {
        case .null: "NULL"
        case .integer(let value): String(value)
        case .real(let value): String(value)
        case .text(let value): value
        case .blob(let bytes): bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        }
    }

    /// The logged text of a composite key: a JSON array of the columns' key texts.
    static func key(_ values: [SQLValue]) -> String {
        if values.count == 1 { return keyText(values[0]) }
        return JSONText.array(values.map(keyText))
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
