import Foundation
import RippleSQLite

/// Captures every row change made on the writer connection — through collections or raw SQL —
/// with SQLite's pre-update hook, so that a write transaction can log them before it commits.
///
/// Per change it keeps the table, the operation and the row's primary key, exactly as SQLite
/// stores it (a ``RowKey``: type and bytes per key column; the rowid for tables without a
/// declared key); the change log also writes each key as text (a composite key as a JSON array). The primary-key columns of
/// each table are read from the schema before the transaction's statements run and re-read when
/// the schema changes; a change to a table created in the same transaction keeps the whole row
/// until the key columns are known.
///
/// Tables whose names start with `ripple_` or `sqlite_`, and tables outside `main`, are not logged.
///
/// The hook runs once per changed row, so it allocates nothing per row: the keys' encodings go
/// one after the other into one buffer (text copied from SQLite's value), and each change is a
/// fixed-size entry naming its (table, operation) group and where its key ends. Strings are only
/// made when the log is written: ``groups()`` builds one JSON array of key texts (and one list
/// of exact keys) per group; ``changes`` hands changes out one by one.
final class ChangeCapture {
    enum Operation: String, Sendable {
        case insert, update, delete
    }

    /// One captured change, as ``changes`` hands it out.
    struct Change: Equatable {
        var table: String
        var operation: Operation
        /// The key exactly as stored.
        var rowKey: RowKey
        /// The key as the change log's text writes it.
        var key: String { rowKey.text }
    }

    /// The changes of one table by one operation, as the change log stores them.
    struct Group: Equatable {
        var table: String
        var operation: Operation
        /// How many rows changed.
        var count: Int
        /// The rows' keys, in the order the rows changed, as a JSON array of strings (see ``JSONText``).
        var keysJSON: String
        /// The same keys exactly, as a list of ``RowKey`` encodings (see ``RowKey/list(_:)``).
        var keys: [UInt8]
        /// Whether `keysJSON` tells every key exactly: the table is keyed by its rowid, or every
        /// key is one UTF-8 text value. (Not a blob, text that is not UTF-8, a real, NULL, a
        /// composite key, nor an integer in a column that may also hold text.)
        var keysJSONIsExact = false
    }

    /// A captured change: its group (an index in `groupNames`) and where its key ends in
    /// `keyBytes` (it starts where the previous entry's key ends).
    struct Entry {
        var keyEnd: Int
        var group: Int
    }

    /// How to find a table's key: the rowid, or these columns of the row.
    private enum KeyColumns {
        case rowid
        case columns([Int32], withoutRowid: Bool)
    }

    private struct PendingRow {
        var table: String
        var operation: Operation
        var rowid: Int64
        var values: [SQLValue]
    }

    /// The table of the previous change, and its groups in this transaction.
    private struct CurrentTable {
        var name = ""
        var logged = false
        /// `nil` for a table created in this transaction, whose key columns are not known yet.
        var key: KeyColumns?
        /// The key is one column that stores text as it is given (TEXT or BLOB affinity).
        var keyTakesText = false
        /// The group of each operation on the table (by ``Operation/index``), -1 until looked up.
        var groups: (Int, Int, Int) = (-1, -1, -1)
    }

    // The hook's state is only touched on the writer connection, under the writer's lock, and no
    // access overlaps another (the hook calls nothing that re-enters the capture): the dynamic
    // exclusivity checks would cost more than the hook's own work.
    @exclusivity(unchecked) private var entries: [Entry] = []
    @exclusivity(unchecked) private var keyBytes: [UInt8] = []
    /// Before-images of updated and deleted rows (see ``oldRow(of:)``), one after the other, and
    /// for each the change it belongs to (an index in `entries`) and where it ends in `oldBytes`.
    /// Inserts keep none, so they cost nothing more.
    @exclusivity(unchecked) private var oldBytes: [UInt8] = []
    @exclusivity(unchecked) private var oldRows: [(entry: Int, end: Int)] = []
    @exclusivity(unchecked) private var groupNames: [(table: String, operation: Operation)] = []
    @exclusivity(unchecked) private var table = CurrentTable()
    /// A copy of the current table's name (SQLite's pointer may not outlive a schema change).
    @exclusivity(unchecked) private var tableName: UnsafeMutablePointer<CChar>?
    /// The key (its encoding) a collection's insert bound for the row its statement inserts next
    /// (see ``expectInserts(into:)``), valid while `hasExpectedKey`.
    @exclusivity(unchecked) private var expectedKey: [UInt8] = []
    @exclusivity(unchecked) private var hasExpectedKey = false
    @exclusivity(unchecked) private var expectedTable: String?
    private var pending: [PendingRow] = []
    private var keyColumns: [String: KeyColumns] = [:]
    /// Tables whose key is one column that stores text as given.
    private var textKeyTables: Set<String> = []
    /// `PRAGMA schema_version` when the key columns were last read (current after ``refreshSchemaIfNeeded(_:)``).
    private(set) var schemaVersion: Int64 = -1
    /// Whether the database stores text as UTF-8 (the default; `PRAGMA encoding` can choose UTF-16).
    private var textIsUTF8 = true

    deinit { free(tableName) }

    /// Every change captured since the last ``reset()``, in the order the rows changed (changes to
    /// tables created in this transaction come last, after ``resolvePending(_:)``).
    var changes: ChangeList { ChangeList(entries: entries, keyBytes: keyBytes, groupNames: groupNames) }

    /// Whether any update or delete kept a before-image since the last ``reset()``.
    var hasOldRows: Bool { !oldRows.isEmpty }

    /// Whether any change was captured since the last ``reset()``.
    var isEmpty: Bool { entries.isEmpty && pending.isEmpty }

    /// A position to roll back to (a savepoint's start).
    var mark: (changes: Int, pending: Int) { (entries.count, pending.count) }

    /// Forgets changes captured after `mark` (their savepoint rolled back).
    func rollback(to mark: (changes: Int, pending: Int)) {
        if mark.changes < entries.count {
            entries.removeSubrange(mark.changes...)
            keyBytes.removeSubrange((entries.last?.keyEnd ?? 0)...)
            if let kept = oldRows.lastIndex(where: { $0.entry < mark.changes }) {
                oldRows.removeSubrange((kept + 1)...)
                oldBytes.removeSubrange(oldRows[kept].end...)
            } else {
                oldRows.removeAll()
                oldBytes.removeAll()
            }
        }
        pending.removeSubrange(min(mark.pending, pending.count)...)
    }

    /// Forgets every captured change (a new transaction starts, or one rolled back).
    func reset() {
        // Keep the buffers of ordinary transactions; give back those of a bulk import.
        entries.removeAll(keepingCapacity: entries.capacity <= 1 << 16)
        keyBytes.removeAll(keepingCapacity: keyBytes.capacity <= 1 << 20)
        oldRows.removeAll(keepingCapacity: oldRows.capacity <= 1 << 16)
        oldBytes.removeAll(keepingCapacity: oldBytes.capacity <= 1 << 20)
        groupNames.removeAll(keepingCapacity: true)
        table.groups = (-1, -1, -1)
        pending.removeAll()
    }

    /// The captured changes grouped as the change log stores them: one ``Group`` per table and
    /// operation that changed rows, in the order of each group's first change.
    ///
    /// - Complexity: O(n) in the keys' total length; one string per group.
    func groups() -> [Group] {
        guard !entries.isEmpty else { return [] }
        var counts = [Int](repeating: 0, count: groupNames.count)
        var sizes = [Int](repeating: 2, count: groupNames.count)
        var start = 0
        for entry in entries {
            counts[entry.group] += 1
            sizes[entry.group] += entry.keyEnd - start + 3
            start = entry.keyEnd
        }
        return keyBytes.withUnsafeBufferPointer { keys in
            var texts = sizes.map { size -> [UInt8] in
                var bytes: [UInt8] = []
                bytes.reserveCapacity(size + size / 2)
                bytes.append(UInt8(ascii: "["))
                return bytes
            }
            var lists = sizes.map { size -> [UInt8] in
                var bytes: [UInt8] = []
                bytes.reserveCapacity(size)
                return bytes
            }
            let rowidKeyed = groupNames.map { group -> Bool in
                if case .rowid? = keyColumns[group.table] { return true }
                return false
            }
            var exact = [Bool](repeating: true, count: groupNames.count)
            var start = 0
            for entry in entries {
                let key = UnsafeBufferPointer(rebasing: keys[start..<entry.keyEnd])
                if texts[entry.group].count > 1 { texts[entry.group].append(UInt8(ascii: ",")) }
                RowKey.appendQuotedText(of: key, to: &texts[entry.group])
                RowKey.appendToList(key, to: &lists[entry.group])
                if !rowidKeyed[entry.group] && exact[entry.group] && !RowKey.isUTF8Text(key) { exact[entry.group] = false }
                start = entry.keyEnd
            }
            return groupNames.indices.compactMap { index in
                guard counts[index] > 0 else { return nil }
                texts[index].append(UInt8(ascii: "]"))
                return Group(table: groupNames[index].table, operation: groupNames[index].operation, count: counts[index],
                             keysJSON: String(decoding: texts[index], as: UTF8.self), keys: lists[index],
                             keysJSONIsExact: exact[index])
            }
        }
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
        var textKeys: Set<String> = []
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
                columns[name] = .columns(key.map(\.column), withoutRowid: withoutRowid)
                if key.count == 1 && Self.storesTextAsGiven(declaredType: key[0].type) { textKeys.insert(name) }
            }
        }
        keyColumns = columns
        textKeyTables = textKeys
        schemaVersion = version
        textIsUTF8 = try db.fetchValue("PRAGMA encoding", as: String.self) == "UTF-8"
        forgetCurrentTable()
    }

    /// Turns rows of tables created in this transaction into changes, now that their keys are known.
    func resolvePending(_ db: Database) throws {
        guard !pending.isEmpty else { return }
        try refreshSchemaIfNeeded(db)
        for row in pending {
            switch keyColumns[row.table] {
            case .columns(let columns, _)?:
                for column in columns { RowKey.append(row.values[Int(column)], to: &keyBytes) }
            default:
                RowKey.appendInteger(row.rowid, to: &keyBytes)
            }
            entries.append(Entry(keyEnd: keyBytes.count, group: group(table: row.table, row.operation)))
        }
        pending.removeAll()
    }

    // MARK: Keys known in advance

    /// Until ``stopExpectingInserts()``, the rows that statements insert into `table` may have
    /// their key announced with ``expectKey(_:)``, which spares the hook reading the new row
    /// (an unpacked copy of the whole record per row). A collection's batch insert does this.
    func expectInserts(into table: String) {
        expectedTable = table
        hasExpectedKey = false
    }

    /// The key, as the text bound to the key column, of the row the next step of the running
    /// statement inserts. Used only for that row (a row inserted by the statement itself, not
    /// by a trigger) when the key column stores text as given; forgotten after the step (see
    /// ``forgetExpectedKey()``).
    @inline(__always)
    func expectKey(_ key: UnsafeBufferPointer<UInt8>) {
        expectedKey.removeAll(keepingCapacity: true)
        RowKey.appendBytes(UnsafeRawBufferPointer(key), tag: RowKey.Tag.text, to: &expectedKey)
        hasExpectedKey = true
    }

    /// Forgets the announced key (its statement stepped, whether or not it inserted the row).
    @inline(__always)
    func forgetExpectedKey() {
        hasExpectedKey = false
    }

    /// Ends ``expectInserts(into:)``.
    func stopExpectingInserts() {
        expectedTable = nil
        hasExpectedKey = false
    }

    /// Whether a column of this declared type keeps a text value as it is given: TEXT affinity
    /// (the type contains `CHAR`, `CLOB` or `TEXT`) or BLOB affinity (no type, or `BLOB`), by
    /// SQLite's rules, which check `INT` first. Other affinities may turn `'007'` into `7`.
    static func storesTextAsGiven(declaredType: String) -> Bool {
        let type = declaredType.uppercased()
        if type.contains("INT") { return false }
        if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") { return true }
        return type.isEmpty || type.contains("BLOB")
    }

    // MARK: The hook

    private func capture(_ connection: OpaquePointer, _ operation: Int32, _ database: UnsafePointer<CChar>,
                         _ name: UnsafePointer<CChar>, _ key1: Int64, _ key2: Int64) {
        guard strcmp(database, "main") == 0 else { return }
        if tableName == nil || strcmp(tableName!, name) != 0 { switchTable(to: name) }
        guard table.logged else { return }

        switch table.key {
        case .rowid?:
            switch operation {
            case SQLITE_INSERT: appendRowid(key2, .insert)
            case SQLITE_DELETE:
                appendRowid(key1, .delete)
                appendOldRow(connection, rowid: key1, entry: entries.count - 1)
            default:
                if key1 == key2 {
                    appendRowid(key1, .update)
                    appendOldRow(connection, rowid: key1, entry: entries.count - 1)
                } else {
                    appendRowid(key1, .delete)
                    appendOldRow(connection, rowid: key1, entry: entries.count - 1)
                    appendRowid(key2, .insert)
                }
            }
        case .columns(let columns, let withoutRowid)?:
            switch operation {
            case SQLITE_INSERT:
                if hasExpectedKey && table.keyTakesText && textIsUTF8 && sqlite3_preupdate_depth(connection) == 0
                    && table.name == expectedTable {
                    // The row the collection's insert statement itself inserts (triggers run
                    // deeper): its key is the text just bound, stored as given.
                    hasExpectedKey = false
                    keyBytes.append(contentsOf: expectedKey)
                } else {
                    appendKey(connection, columns, new: true)
                }
                endEntry(.insert)
            case SQLITE_DELETE:
                appendKey(connection, columns, new: false)
                endEntry(.delete)
                appendOldRow(connection, rowid: withoutRowid ? nil : key1, entry: entries.count - 1)
            default:
                let start = keyBytes.count
                appendKey(connection, columns, new: false)
                let oldEnd = keyBytes.count
                appendKey(connection, columns, new: true)
                let sameKey = keyBytes.withUnsafeBufferPointer { bytes in
                    oldEnd - start == bytes.count - oldEnd
                        && memcmp(bytes.baseAddress! + start, bytes.baseAddress! + oldEnd, oldEnd - start) == 0
                }
                if sameKey {
                    keyBytes.removeSubrange(oldEnd...)
                    endEntry(.update)
                } else {
                    entries.append(Entry(keyEnd: oldEnd, group: group(.delete)))
                    endEntry(.insert)
                }
                appendOldRow(connection, rowid: withoutRowid ? nil : key1, entry: entries.count - (sameKey ? 1 : 2))
            }
        case nil:
            // A table created in this transaction: keep the whole row until its key is known.
            let useNew = operation != SQLITE_DELETE
            let count = sqlite3_preupdate_count(connection)
            let values = (0..<count).map { Self.sqlValue(Self.preupdateValue(connection, $0, new: useNew)) }
            let kind: Operation = operation == SQLITE_INSERT ? .insert : operation == SQLITE_DELETE ? .delete : .update
            pending.append(PendingRow(table: table.name, operation: kind, rowid: useNew ? key2 : key1, values: values))
        }
    }

    private func switchTable(to name: UnsafePointer<CChar>) {
        free(tableName)
        tableName = strdup(name)
        let text = String(cString: name)
        // Case-insensitive, as SQLite's names (and the schema query's LIKE) are.
        let lowered = text.lowercased()
        let logged = !lowered.hasPrefix("ripple_") && !lowered.hasPrefix("sqlite_")
        table = CurrentTable(name: text, logged: logged, key: logged ? keyColumns[text] : nil,
                             keyTakesText: textKeyTables.contains(text))
    }

    private func forgetCurrentTable() {
        free(tableName)
        tableName = nil
        table = CurrentTable()
    }

    /// The group of `operation` on the current table.
    @inline(__always)
    private func group(_ operation: Operation) -> Int {
        let cached = switch operation {
        case .insert: table.groups.0
        case .update: table.groups.1
        case .delete: table.groups.2
        }
        if cached >= 0 { return cached }
        let found = group(table: table.name, operation)
        switch operation {
        case .insert: table.groups.0 = found
        case .update: table.groups.1 = found
        case .delete: table.groups.2 = found
        }
        return found
    }

    /// The group of `operation` on `table`, created when new.
    private func group(table: String, _ operation: Operation) -> Int {
        if let index = groupNames.firstIndex(where: { $0.operation == operation && $0.table == table }) { return index }
        groupNames.append((table, operation))
        return groupNames.count - 1
    }

    /// Ends the entry whose key was just appended.
    @inline(__always)
    private func endEntry(_ operation: Operation) {
        entries.append(Entry(keyEnd: keyBytes.count, group: group(operation)))
    }

    @inline(__always)
    private func appendRowid(_ rowid: Int64, _ operation: Operation) {
        RowKey.appendInteger(rowid, to: &keyBytes)
        endEntry(operation)
    }

    // MARK: Before-images

    /// The before-image captured with change `index` (an update or a delete), as JSON text: an
    /// array of the rowid (`null` for a `WITHOUT ROWID` table) and every column's old value (see
    /// `Migrations/0002_history.sql`). `nil` for inserts and for rows of tables created in the
    /// transaction. `cursor` walks the before-images in order: pass the same variable, starting
    /// at 0, for increasing indices.
    func oldRow(of index: Int, cursor: inout Int) -> String? {
        while cursor < oldRows.count && oldRows[cursor].entry < index { cursor += 1 }
        guard cursor < oldRows.count, oldRows[cursor].entry == index else { return nil }
        let start = cursor == 0 ? 0 : oldRows[cursor - 1].end
        return oldBytes.withUnsafeBufferPointer { bytes in
            String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<oldRows[cursor].end]), as: UTF8.self)
        }
    }

    /// Appends the before-image of the row the hook reports (its old values) for change `entry`.
    private func appendOldRow(_ connection: OpaquePointer, rowid: Int64?, entry: Int) {
        oldBytes.append(UInt8(ascii: "["))
        if let rowid { Self.appendDecimal(rowid, to: &oldBytes) } else { Self.appendJSONNull(to: &oldBytes) }
        let count = sqlite3_preupdate_count(connection)
        for column in 0..<count {
            oldBytes.append(UInt8(ascii: ","))
            appendJSONValue(Self.preupdateValue(connection, column, new: false))
        }
        oldBytes.append(UInt8(ascii: "]"))
        oldRows.append((entry, oldBytes.count))
    }

    /// Appends one value as JSON: integers as they are, reals always with a `.` or an exponent
    /// (infinities as `{"$real":"inf"}`), text as a string, blobs as `{"$blob":"hex"}`.
    private func appendJSONValue(_ value: OpaquePointer?) {
        guard let value else { return Self.appendJSONNull(to: &oldBytes) }
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER:
            Self.appendDecimal(sqlite3_value_int64(value), to: &oldBytes)
        case SQLITE_FLOAT:
            let real = sqlite3_value_double(value)
            if real.isFinite {
                oldBytes.append(contentsOf: String(real).utf8)
            } else {
                oldBytes.append(contentsOf: (real < 0 ? #"{"$real":"-inf"}"# : #"{"$real":"inf"}"#).utf8)
            }
        case SQLITE_TEXT:
            let bytes = textIsUTF8 ? sqlite3_value_blob(value)?.assumingMemoryBound(to: UInt8.self) : sqlite3_value_text(value)
            let count = Int(sqlite3_value_bytes(value))
            JSONText.appendQuoted(UnsafeBufferPointer(start: count > 0 ? bytes : nil, count: bytes == nil ? 0 : count),
                                  escaping: true, to: &oldBytes)
        case SQLITE_BLOB:
            oldBytes.append(contentsOf: #"{"$blob":""#.utf8)
            let count = Int(sqlite3_value_bytes(value))
            if count > 0, let bytes = sqlite3_value_blob(value) {
                Self.appendHex(UnsafeRawBufferPointer(start: bytes, count: count), to: &oldBytes)
            }
            oldBytes.append(contentsOf: #""}"#.utf8)
        default:
            Self.appendJSONNull(to: &oldBytes)
        }
    }

    private static func appendJSONNull(to bytes: inout [UInt8]) {
        bytes.append(contentsOf: [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")])
    }

    /// Appends the key of the row's `columns` (old or new values), exactly as stored.
    @inline(__always)
    private func appendKey(_ connection: OpaquePointer, _ columns: [Int32], new: Bool) {
        for column in columns {
            RowKey.append(Self.preupdateValue(connection, column, new: new), textIsUTF8: textIsUTF8, to: &keyBytes)
        }
    }

    @inline(__always)
    private static func preupdateValue(_ connection: OpaquePointer, _ column: Int32, new: Bool) -> OpaquePointer? {
        var pointer: OpaquePointer?
        let code = new ? sqlite3_preupdate_new(connection, column, &pointer) : sqlite3_preupdate_old(connection, column, &pointer)
        return code == SQLITE_OK ? pointer : nil
    }

    private static func sqlValue(_ value: OpaquePointer?) -> SQLValue {
        guard let value else { return .null }
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let bytes = sqlite3_value_text(value) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_value_bytes(value))), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            guard count > 0, let bytes = sqlite3_value_blob(value) else { return .blob([]) }
            return .blob([UInt8](UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    // MARK: Numbers and bytes as text

    /// Appends `value` in decimal, without going through a `String`.
    @inline(__always)
    static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        var magnitude = value.magnitude
        if magnitude < 10 && value >= 0 {
            bytes.append(UInt8(truncatingIfNeeded: magnitude) &+ UInt8(ascii: "0"))
            return
        }
        // At most 20 bytes: 19 digits and a sign.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var index = 24
            repeat {
                index -= 1
                buffer[index] = UInt8(truncatingIfNeeded: magnitude % 10) &+ UInt8(ascii: "0")
                magnitude /= 10
            } while magnitude != 0
            if value < 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "-")
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]))
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `blob` in lower-case hex (as the log writes blobs, in keys and before-images).
    static func appendHex(_ blob: UnsafeRawBufferPointer, to bytes: inout [UInt8]) {
        bytes.reserveCapacity(bytes.count + 2 * blob.count)
        for byte in blob {
            bytes.append(hexDigits[Int(byte >> 4)])
            bytes.append(hexDigits[Int(byte & 0xF)])
        }
    }
}

/// The changes of a ``ChangeCapture``, one by one: each key becomes a ``RowKey`` when read.
struct ChangeList: RandomAccessCollection {
    fileprivate let entries: [ChangeCapture.Entry]
    fileprivate let keyBytes: [UInt8]
    fileprivate let groupNames: [(table: String, operation: ChangeCapture.Operation)]

    var startIndex: Int { 0 }
    var endIndex: Int { entries.count }

    subscript(position: Int) -> ChangeCapture.Change {
        let entry = entries[position]
        let start = position == 0 ? 0 : entries[position - 1].keyEnd
        let key = keyBytes.withUnsafeBufferPointer { bytes in RowKey(encoded: UnsafeBufferPointer(rebasing: bytes[start..<entry.keyEnd])) }
        let group = groupNames[entry.group]
        return ChangeCapture.Change(table: group.table, operation: group.operation, rowKey: key)
    }
}
