import Foundation
import RippleSQLite

/// `SQLITE_TRANSIENT`: SQLite copies the bound bytes before the call returns. (Computed: a
/// global constant would be initialized lazily, checked on every bind.)
var sqliteTransient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

/// A prepared SQL statement on one connection. Only valid inside the closure that received its
/// ``Database``; cached statements are reset and cleared after each use.
public final class Statement {
    let handle: OpaquePointer
    /// The statement's SQL.
    public let sql: String
    unowned let database: Database
    /// The arguments last given to ``bind(_:)``, for error reports.
    private var arguments: [SQLValue] = []

    init(database: Database, sql: String, persistent: Bool) throws(DatabaseError) {
        var handle: OpaquePointer?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        // The tail points into the C string, which only lives inside `withCString`: read it there.
        let (code, hasMoreSQL) = sql.withCString { text -> (Int32, Bool) in
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v3(database.handle, text, -1, flags, &handle, &tail)
            let rest = tail.map { String(cString: $0) } ?? ""
            return (code, !rest.allSatisfy { $0.isWhitespace || $0 == ";" })
        }
        guard code == SQLITE_OK, let handle else {
            if code == SQLITE_AUTH, let refusal = database.refusal(sql: sql) { throw refusal }
            throw DatabaseError.fromConnection(database.handle, code: code, sql: sql)
        }
        if hasMoreSQL {
            sqlite3_finalize(handle)
            throw DatabaseError(code: .misuse, message: "a statement may hold one SQL command; "
                                + "use executeScript(_:) for several", sql: sql)
        }
        self.handle = handle
        self.sql = sql
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// The number of `?` parameters.
    public var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }

    /// The number of result columns.
    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// The name of result column `index`.
    public func columnName(_ index: Int) -> String { String(cString: sqlite3_column_name(handle, Int32(index))) }

    /// Whether the statement only reads.
    public var isReadOnly: Bool { sqlite3_stmt_readonly(handle) != 0 }

    // MARK: Binding

    /// Binds `arguments` to the parameters, in order. The count must match.
    public func bind(_ arguments: [any SQLValueConvertible]) throws(DatabaseError) {
        guard arguments.count == parameterCount else {
            throw DatabaseError(code: .range, message: "the statement has \(parameterCount) parameters, "
                                + "\(arguments.count) arguments were given", sql: sql)
        }
        self.arguments = arguments.map(\.sqlValue)
        for (offset, argument) in self.arguments.enumerated() {
            try bind(argument, at: Int32(offset + 1))
        }
    }

    /// Binds one value to parameter `index` (1-based).
    @inline(__always)
    public func bind(_ value: SQLValue, at index: Int32) throws(DatabaseError) {
        let code: Int32
        switch value {
        case .null: code = sqlite3_bind_null(handle, index)
        case .integer(let value): code = sqlite3_bind_int64(handle, index, value)
        case .real(let value): code = sqlite3_bind_double(handle, index, value)
        case .text(let value): code = bindText(value, at: index)
        case .blob(let bytes):
            code = bytes.withUnsafeBytes { sqlite3_bind_blob64(handle, index, $0.baseAddress, UInt64($0.count), sqliteTransient) }
        }
        try check(code)
    }

    @inline(__always)
    func bindInteger(_ value: Int64, at index: Int32) throws(DatabaseError) {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    @inline(__always)
    func bindReal(_ value: Double, at index: Int32) throws(DatabaseError) {
        try check(sqlite3_bind_double(handle, index, value))
    }

    @inline(__always)
    func bindNull(at index: Int32) throws(DatabaseError) {
        try check(sqlite3_bind_null(handle, index))
    }

    @inline(__always)
    func bindTextValue(_ value: String, at index: Int32) throws(DatabaseError) {
        try check(bindText(value, at: index))
    }

    /// Binds text given as its UTF-8 bytes, exactly as they are (even when not valid UTF-8).
    /// `copying: false` spares SQLite's copy of the bytes: the caller keeps them valid until the
    /// statement is stepped and ``reset()`` (which clears the bindings).
    func bindRawText(_ bytes: UnsafeRawBufferPointer, at index: Int32, copying: Bool = true) throws(DatabaseError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            // An empty text, not NULL (which a null pointer would bind).
            return try check(sqlite3_bind_text64(handle, index, "", 0, sqliteTransient, UInt8(SQLITE_UTF8)))
        }
        try check(sqlite3_bind_text64(handle, index, base.assumingMemoryBound(to: CChar.self), UInt64(bytes.count),
                                      copying ? sqliteTransient : nil, UInt8(SQLITE_UTF8)))
    }

    /// Binds a blob given as its bytes (an empty one is a zero-length blob, not NULL).
    /// `copying`: as ``bindRawText(_:at:copying:)``.
    func bindRawBlob(_ bytes: UnsafeRawBufferPointer, at index: Int32, copying: Bool = true) throws(DatabaseError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return try check(sqlite3_bind_zeroblob(handle, index, 0)) }
        // A nil destructor is SQLITE_STATIC: SQLite reads the bytes where they are.
        try check(sqlite3_bind_blob64(handle, index, base, UInt64(bytes.count), copying ? sqliteTransient : nil))
    }

    @inline(__always)
    private func bindText(_ value: String, at index: Int32) -> Int32 {
        var value = value
        return value.withUTF8 { utf8 in
            sqlite3_bind_text64(handle, index, UnsafeRawPointer(utf8.baseAddress!).assumingMemoryBound(to: CChar.self),
                                UInt64(utf8.count), sqliteTransient, UInt8(SQLITE_UTF8))
        }
    }

    @inline(__always)
    private func check(_ code: Int32) throws(DatabaseError) {
        if code != SQLITE_OK { throw DatabaseError.fromConnection(database.handle, code: code, sql: sql) }
    }

    // MARK: Stepping

    /// Advances to the next row: `true` when a row is available, `false` when done.
    @inline(__always)
    public func step() throws(DatabaseError) -> Bool {
        let code = database.step(handle)
        if code == SQLITE_ROW { return true }
        if code == SQLITE_DONE { return false }
        // Refused by the commit hook: SQLite ended the transaction the statement belonged to.
        if database.transactionEndedBySQLite { throw database.endedTransactionError(sql: sql) }
        if code == SQLITE_AUTH, let refusal = database.refusal(sql: sql) { throw refusal }
        throw DatabaseError.fromConnection(database.handle, code: code, sql: sql,
                                           arguments: arguments,
                                           showsArguments: database.configuration.publicStatementArguments)
    }

    /// Resets the statement so it can run again, and clears its bindings.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        arguments.removeAll(keepingCapacity: true)
    }

    // MARK: Reading columns

    /// Whether column `index` of the current row is NULL.
    @inline(__always)
    public func isNull(at index: Int32) -> Bool { sqlite3_column_type(handle, index) == SQLITE_NULL }

    /// The storage class of column `index` (`SQLITE_INTEGER`, …).
    @inline(__always)
    func columnType(at index: Int32) -> Int32 { sqlite3_column_type(handle, index) }

    /// Column `index` as an integer.
    @inline(__always)
    public func integer(at index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }

    /// Column `index` as a real.
    @inline(__always)
    public func real(at index: Int32) -> Double { sqlite3_column_double(handle, index) }

    /// Column `index` as text.
    @inline(__always)
    public func text(at index: Int32) -> String {
        guard let bytes = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// Column `index` as bytes.
    public func blob(at index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, index))
        guard count > 0, let bytes = sqlite3_column_blob(handle, index) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// Column `index` as a ``SQLValue``.
    public func value(at index: Int32) -> SQLValue {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: .integer(integer(at: index))
        case SQLITE_FLOAT: .real(real(at: index))
        case SQLITE_TEXT: .text(text(at: index))
        case SQLITE_BLOB: .blob(blob(at: index))
        default: .null
        }
    }
}
