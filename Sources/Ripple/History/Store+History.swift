import Foundation
import RippleDiff
import RippleSQLite

/// One step of a query's history: the query's result as of `version`, and the changeset that
/// turns the previous step's result into it.
public struct HistoryStep<Element: Sendable>: Sendable {
    /// The version whose commit changed the result (for the first step: the range's start).
    public var version: Int64
    /// The result as of `version`.
    public var snapshot: [Element]
    /// From the previous step's snapshot to this one (the first step: from an empty result).
    public var changeset: Changeset
}

extension StoreError.Kind {
    /// A version asked of the history is outside what the change log can reconstruct: pruned by
    /// the retention policy, in the future, or across a schema change or an untracked write.
    public static let history = StoreError.Kind(name: "history")
}

extension Store {
    /// The result of `query` as it was right after `version` committed (time travel).
    ///
    /// Reconstructed exactly from the current rows and the change log's before-images, in one
    /// read transaction. The query's own table is rewound (a collection query reads no other).
    ///
    /// - Throws: ``StoreError`` of kind ``StoreError/Kind/history`` when `version` is older than
    ///   the change log's retention keeps, newer than the store, or before a schema change or a
    ///   write the log could not track (which cannot be undone).
    public func snapshot<Record>(of query: RecordQuery<Record>, at version: Int64) throws -> [Record] {
        guard let step = try history(of: query, from: version, to: version).first else { return [] }
        return step.snapshot
    }

    /// The history of `query` over `[from, to]`: the result as of `from`, then one step for each
    /// later version whose commit changed the result (its elements, their order or content),
    /// with the changeset from the step before, as a live subscriber would have received it.
    ///
    /// This collects every step; ``history(of:from:to:_:)`` hands them out one at a time, in
    /// memory bounded by a few snapshots whatever the number of versions.
    ///
    /// - Throws: ``StoreError`` of kind ``StoreError/Kind/history`` as ``snapshot(of:at:)``
    ///   does, for `from` (or when `from > to`).
    public func history<Record>(of query: RecordQuery<Record>, from: Int64, to: Int64) throws -> [HistoryStep<Record>] {
        var steps: [HistoryStep<Record>] = []
        try history(of: query, from: from, to: to) { steps.append($0) }
        return steps
    }

    /// The history of a raw SQL query over rows of `table` (see ``history(of:from:to:)``): only
    /// `table` is rewound, other tables the SQL reads are seen as they are now
    /// (``history(tables:sql:arguments:identity:from:to:)`` rewinds several). `identity` names
    /// the result column that identifies a row across snapshots. Arguments are bound.
    ///
    /// This collects every step; ``history(table:sql:arguments:identity:from:to:_:)`` hands them
    /// out one at a time.
    public func history(table: String, sql: String, arguments: [any SQLValueConvertible] = [], identity: String,
                        from: Int64, to: Int64) throws -> [HistoryStep<Row>] {
        try history(tables: [table], sql: sql, arguments: arguments, identity: identity, from: from, to: to)
    }

    /// The history of a raw SQL query over rows of several tables (a join, an `IN (SELECT …)` or
    /// `EXISTS` sub-query over another table), see ``history(of:from:to:)``: every table named in
    /// `tables` is rewound, all together, version by version, so that each step shows every one
    /// of them as it was right after that step's version committed; a table the SQL reads and
    /// `tables` does not name is seen as it is now. `identity` names the result column that
    /// identifies a row across snapshots. Arguments are bound.
    ///
    /// This collects every step; ``history(tables:sql:arguments:identity:from:to:_:)`` hands them
    /// out one at a time.
    ///
    /// - Throws: as ``history(tables:sql:arguments:identity:from:to:_:)``.
    public func history(tables: [String], sql: String, arguments: [any SQLValueConvertible] = [], identity: String,
                        from: Int64, to: Int64) throws -> [HistoryStep<Row>] {
        var steps: [HistoryStep<Row>] = []
        try history(tables: tables, sql: sql, arguments: arguments, identity: identity, from: from, to: to) { steps.append($0) }
        return steps
    }
}

/// A copy of one table, in the connection's `temp` schema under the same name (so that a query's
/// SQL reads it instead of the table), rewound version by version with the change log's
/// before-images. Lives inside one read transaction; history rewinds several tables with one
/// rewinder each, in the same transaction.
struct TableRewinder {
    private let db: Database
    private let table: String
    private let quotedTable: String
    private let columns: [String]
    /// `nil`: the key is the rowid; otherwise the key columns (declared primary key).
    private let keyColumns: [String]?
    /// The table's columns, key and rowid name (which may not be `rowid`: a column may take it).
    let shape: TableShape
    /// The log of the table, newest version first. Before-images are `beforeImages` (binary, see
    /// ``BeforeImage``) or, for entries logged before those, `oldRows` (JSON, see ``OldRowParser``).
    private var log: [ChangeLog.TableEntry]
    private var position = 0
    private let queryOnly: Bool
    private var open = true

    init(_ db: Database, table: String, back from: Int64, to: Int64) throws {
        self.db = db
        self.table = table
        quotedTable = SQLIdentifier.quoted(table)
        guard from <= to else { throw StoreError(.history, "the range \(from)…\(to) is empty") }
        let (current, oldest) = try ChangeLog.bounds(in: db)
        if to > current { throw StoreError(.history, "version \(to) is in the future (the store is at version \(current))") }
        if from < oldest {
            throw StoreError(.history, "version \(from) is older than the change log keeps (history starts at version \(oldest))")
        }
        if let barrier = try ChangeLog.firstChangeOfUnknownExtent(in: db, after: from, through: current) {
            throw StoreError(.history, "history of \(table) can start at version \(barrier) at the earliest, not \(from): "
                             + "version \(barrier) changed the schema (or was a write made without Ripple), which history "
                             + "cannot undo")
        }
        shape = try TableShape(db, table: table)
        columns = shape.columns
        keyColumns = shape.keyColumns
        log = try ChangeLog.entries(of: shape.table, in: db, after: from)
        // Readers are query-only; the copy lives in `temp`, never in the store's file.
        queryOnly = try db.fetchValue("PRAGMA query_only", as: Int.self) == 1
        if queryOnly { try db.execute("PRAGMA query_only = OFF") }
        do {
            try db.execute("CREATE TEMP TABLE " + shape.sql.dropFirst("CREATE TABLE ".count))
            for index in try db.fetchAll("SELECT sql FROM main.sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql NOT NULL",
                                         [shape.table]) {
                // Same indexes, so that a query without ORDER BY scans in the same order.
                let text = try index.value("sql", as: String.self)
                for prefix in ["CREATE INDEX ", "CREATE UNIQUE INDEX "] where text.hasPrefix(prefix) {
                    try db.execute(prefix + "temp." + text.dropFirst(prefix.count))
                }
            }
            let list = columns.map(SQLIdentifier.quoted).joined(separator: ", ")
            let rowid = shape.separateRowid.map { "\($0), " } ?? ""
            try db.execute("INSERT INTO temp.\(quotedTable)(\(rowid)\(list)) SELECT \(rowid)\(list) FROM main.\(quotedTable)")
        } catch {
            close()
            throw error
        }
    }

    /// The versions in `range` that changed the table, oldest first.
    func versions(in range: ClosedRange<Int64>) -> [Int64] {
        var found: [Int64] = []
        for entry in log.reversed() where range.contains(entry.version) && found.last != entry.version {
            found.append(entry.version)
        }
        return found
    }

    /// Undoes every version newer than `version`.
    mutating func rewind(after version: Int64) throws {
        while position < log.count && log[position].version > version { try undo(log[position].version) }
    }

    /// Undoes `version`, which must be the newest not yet undone (if it changed the table): the
    /// rows its entries name are deleted, and the rows as they were before it inserted back.
    mutating func undo(_ version: Int64) throws {
        let first = position
        while position < log.count && log[position].version == version { position += 1 }
        let entries = log[first..<position]
        // The rows to insert back, each as ``RowKey`` encodings: its rowid, then every column.
        // An image of the columns an update changed is completed with the row as it is now,
        // before any key of the version is deleted.
        var restore: [[UInt8]] = []
        for entry in entries where entry.operation != "insert" {
            if let images = entry.beforeImages {
                try restoredRows(images, keys: entry.exactKeys, version: version, into: &restore)
            } else if let oldRows = entry.oldRows {
                var parser = OldRowParser(text: oldRows)
                for row in try parser.rows() {
                    guard let row else { continue }
                    var encoded: [UInt8] = []
                    for value in row {
                        // The JSON format wrote text through a Swift string: bytes that were not
                        // UTF-8 became U+FFFD, which cannot be told from a U+FFFD that was stored.
                        // Refuse rather than restore other bytes than were there.
                        if case .text(let text) = value, text.unicodeScalars.contains("\u{FFFD}") {
                            throw StoreError(.history, "version \(version) of \(table) was logged in the JSON format of "
                                             + "before-images, which may have replaced text that was not UTF-8 by U+FFFD: "
                                             + "it cannot be undone exactly")
                        }
                        RowKey.append(value, to: &encoded)
                    }
                    restore.append(encoded)
                }
            } else {
                throw StoreError(.history, "version \(version) of \(table) was logged without before-images and cannot be "
                                 + "undone: it was written before history was recorded, or this SQLite cannot read the "
                                 + "table's old rows whole (an INTEGER PRIMARY KEY after a VIRTUAL generated column)")
            }
        }
        for entry in entries {
            if let exactKeys = entry.exactKeys {
                for key in exactKeys { try delete(exactKey: key) }
            } else {
                // Logged before keys were kept exactly: by their text.
                guard let text = entry.keys, let keys = JSONText.strings(text) else {
                    throw StoreError(.decoding, "malformed change log keys at version \(version)")
                }
                for key in keys { try delete(key: key) }
            }
        }
        // A copy names the rowid only when it is not a column (the first value of a row image);
        // otherwise the columns carry it, or there is none to keep.
        let namesRowid = shape.separateRowid != nil
        let values = namesRowid ? "?, " : ""
        let rowid = shape.separateRowid.map { "\($0), " } ?? ""
        let statement = try db.cachedStatement(
            "INSERT INTO temp.\(quotedTable)(\(rowid)\(columns.map(SQLIdentifier.quoted).joined(separator: ", "))) "
                + "VALUES (\(values)\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))")
        for row in restore {
            try row.withUnsafeBufferPointer { bytes in
                guard let values = BeforeImage.values(of: bytes), values.count == columns.count + 1,
                      !namesRowid || bytes[values[0].lowerBound] == RowKey.Tag.integer else {
                    throw StoreError(.history, "a before-image of version \(version) does not fit the table \(table)")
                }
                defer { statement.reset() }
                // Without a separate rowid, the first value is not bound.
                try RowKey.bindValues(UnsafeBufferPointer(rebasing: bytes[(namesRowid ? 0 : values[1].lowerBound)...]),
                                      to: statement, at: 1)
                _ = try statement.step()
            }
        }
    }

    /// Appends to `restore` the rows the before-images of one entry (binary, see
    /// ``BeforeImage``) restore. `keys`: the entry's exact keys, which find the rows an image of
    /// changed columns completes.
    private func restoredRows(_ list: [UInt8], keys: [RowKey]?, version: Int64, into restore: inout [[UInt8]]) throws {
        try list.withUnsafeBufferPointer { bytes in
            guard let images = BeforeImage.list(bytes), keys == nil || keys?.count == images.count else {
                throw StoreError(.decoding, "malformed before-images in the change log at version \(version)")
            }
            for (index, range) in images.enumerated() {
                guard let range else { continue }
                guard let image = BeforeImage.View(bytes, range) else {
                    throw StoreError(.decoding, "malformed before-image in the change log at version \(version)")
                }
                var current: [UInt8]?
                if !image.isRow {
                    guard let key = keys?[index] else {
                        throw StoreError(.decoding, "a before-image of changed columns at version \(version) has no exact key")
                    }
                    guard let row = try currentRow(key) else {
                        throw StoreError(.history, "a before-image of version \(version) names a row of \(table) that "
                                         + "the later versions do not hold")
                    }
                    current = row
                }
                let row = if let current {
                    current.withUnsafeBufferPointer { BeforeImage.restoredRow(image, of: bytes, width: columns.count, current: $0) }
                } else {
                    BeforeImage.restoredRow(image, of: bytes, width: columns.count, current: nil)
                }
                guard let row else {
                    throw StoreError(.history, "a before-image of version \(version) does not fit the table \(table)")
                }
                restore.append(row)
            }
        }
    }

    /// The row of the copy with `key`, as ``RowKey`` encodings: its rowid (NULL without one),
    /// then every column; `nil` when there is none.
    private func currentRow(_ key: RowKey) throws -> [UInt8]? {
        let list = columns.map(SQLIdentifier.quoted).joined(separator: ", ")
        let statement = try db.cachedStatement(
            "SELECT \(shape.rowid ?? "NULL"), \(list) FROM temp.\(quotedTable) WHERE \(keyCondition)")
        defer { statement.reset() }
        guard try key.bind(to: statement, at: 1) == Int32(statement.parameterCount) else {
            throw StoreError(.decoding, "a logged key of \(table) does not fit its key columns")
        }
        guard try statement.step() else { return nil }
        var row: [UInt8] = []
        for column in 0...Int32(columns.count) {
            // Text as UTF-8 whatever the database's encoding, as the capture logged it.
            RowKey.append(sqlite3_column_value(statement.handle, column), textIsUTF8: false, to: &row)
        }
        return row
    }

    /// The condition that finds a row by its exact key (see ``RowKey/bind(to:at:)``).
    private var keyCondition: String {
        keyColumns.map { $0.map { "\(SQLIdentifier.quoted($0)) = ?" }.joined(separator: " AND ") } ?? "\(shape.rowid ?? "rowid") = ?"
    }

    /// Deletes the row with `key` (logged exactly: type and bytes) from the copy.
    private func delete(exactKey key: RowKey) throws {
        let statement = try db.cachedStatement("DELETE FROM temp.\(quotedTable) WHERE \(keyCondition)")
        defer { statement.reset() }
        guard try key.bind(to: statement, at: 1) == Int32(statement.parameterCount) else {
            throw StoreError(.decoding, "a logged key of \(table) does not fit its key columns")
        }
        _ = try statement.step()
    }

    /// Deletes the row with `key` (a logged key text) from the copy.
    private func delete(key: String) throws {
        guard let keyColumns else {
            guard let rowid = Int64(key) else { throw StoreError(.decoding, "malformed rowid \(key) in the change log") }
            try db.execute("DELETE FROM temp.\(quotedTable) WHERE \(shape.rowid ?? "rowid") = ?", [rowid])
            return
        }
        var parts = [key]
        if keyColumns.count > 1 {
            guard let array = JSONText.strings(key),
                  array.count == keyColumns.count else {
                throw StoreError(.decoding, "malformed composite key \(key) in the change log")
            }
            parts = array
        }
        // Exact first (uses the key's index); then as the capture formats keys, for values
        // stored without the column's type (blobs in hex, integers in untyped columns).
        let exact = keyColumns.map { "\(SQLIdentifier.quoted($0)) = ?" }.joined(separator: " AND ")
        try db.execute("DELETE FROM temp.\(quotedTable) WHERE \(exact)", parts)
        if try db.fetchValue("SELECT changes()", as: Int.self) == 0 {
            let loose = keyColumns.map { column in
                let quoted = SQLIdentifier.quoted(column)
                return "(CASE typeof(\(quoted)) WHEN 'blob' THEN lower(hex(\(quoted))) WHEN 'null' THEN 'NULL' "
                    + "ELSE CAST(\(quoted) AS TEXT) END) = ?"
            }.joined(separator: " AND ")
            try db.execute("DELETE FROM temp.\(quotedTable) WHERE \(loose)", parts)
        }
    }

    /// Drops the copy (the query's SQL reads the store's table again).
    mutating func close() {
        guard open else { return }
        open = false
        try? db.execute("DROP TABLE IF EXISTS temp.\(quotedTable)")
        if queryOnly { try? db.execute("PRAGMA query_only = ON") }
    }
}

/// Parses a before-image array (`Migrations/0002_history.sql`): `[row or null, …]`, each row an
/// array of JSON scalars, `{"$real":"inf"}` or `{"$blob":"hex"}`.
struct OldRowParser {
    private let bytes: [UInt8]
    private var index = 0

    init(text: String) { bytes = Array(text.utf8) }

    mutating func rows() throws -> [[SQLValue]?] {
        var rows: [[SQLValue]?] = []
        try expect(UInt8(ascii: "["))
        if peek() == UInt8(ascii: "]") { index += 1; return rows }
        repeat {
            if peek() == UInt8(ascii: "n") {
                try literal("null")
                rows.append(nil)
            } else {
                var row: [SQLValue] = []
                try expect(UInt8(ascii: "["))
                if peek() != UInt8(ascii: "]") {
                    repeat { row.append(try value()) } while try separator()
                } else {
                    index += 1
                }
                rows.append(row)
            }
        } while try separator()
        return rows
    }

    /// After an element: `true` after a `,`, `false` after the closing `]`.
    private mutating func separator() throws -> Bool {
        switch next() {
        case UInt8(ascii: ","): return true
        case UInt8(ascii: "]"): return false
        default: throw malformed()
        }
    }

    private mutating func value() throws -> SQLValue {
        switch peek() {
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "\""):
            return .text(try string())
        case UInt8(ascii: "{"):
            index += 1
            let tag = try string()
            try expect(UInt8(ascii: ":"))
            let text = try string()
            try expect(UInt8(ascii: "}"))
            switch tag {
            case "$real":
                guard let real = Double(text) else { throw malformed() }
                return .real(real)
            case "$blob":
                let digits = Array(text.utf8)
                guard digits.count % 2 == 0 else { throw malformed() }
                var blob: [UInt8] = []
                blob.reserveCapacity(digits.count / 2)
                var at = 0
                while at < digits.count {
                    guard let byte = UInt8(String(decoding: digits[at..<at + 2], as: UTF8.self), radix: 16) else {
                        throw malformed()
                    }
                    blob.append(byte)
                    at += 2
                }
                return .blob(blob)
            default:
                throw malformed()
            }
        default:
            let start = index
            while let byte = peek(), byte != UInt8(ascii: ","), byte != UInt8(ascii: "]") { index += 1 }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                guard let real = Double(text) else { throw malformed() }
                return .real(real)
            }
            guard let integer = Int64(text) else { throw malformed() }
            return .integer(integer)
        }
    }

    private mutating func string() throws -> String {
        try expect(UInt8(ascii: "\""))
        var utf8: [UInt8] = []
        var pendingHigh: UInt16?
        while true {
            guard let byte = next() else { throw malformed() }
            if byte == UInt8(ascii: "\"") { break }
            guard byte == UInt8(ascii: "\\") else {
                utf8.append(byte)
                continue
            }
            guard let escape = next() else { throw malformed() }
            switch escape {
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "u"):
                guard index + 4 <= bytes.count,
                      let unit = UInt16(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) else {
                    throw malformed()
                }
                index += 4
                if let high = pendingHigh, (0xDC00...0xDFFF).contains(unit) {
                    pendingHigh = nil
                    let scalar = 0x10000 + (UInt32(high - 0xD800) << 10) + UInt32(unit - 0xDC00)
                    utf8 += Array(String(Character(Unicode.Scalar(scalar)!)).utf8)
                } else if (0xD800...0xDBFF).contains(unit) {
                    pendingHigh = unit
                } else {
                    utf8 += Array(String(Character(Unicode.Scalar(unit) ?? "\u{FFFD}")).utf8)
                }
            default: utf8.append(escape)
            }
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    private mutating func literal(_ word: String) throws {
        for byte in word.utf8 { try expect(byte) }
    }

    private mutating func expect(_ byte: UInt8) throws {
        guard next() == byte else { throw malformed() }
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func next() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    private func malformed() -> StoreError {
        StoreError(.decoding, "malformed before-image in the change log at byte \(index)")
    }
}
