import Foundation
import RippleSQLite

/// Decodes records from the current row of a stepped statement, reading each column directly
/// with SQLite's typed accessors.
///
/// Columns are matched by name, but not per row: the column of the n-th key a record decodes is
/// predicted from the previous row and confirmed by comparing the key's name with the predicted
/// one; only a miss looks the name up in the layout's dictionary. One decoder serves every row of
/// a query.
///
/// A stored value of the wrong type throws ``StoreError/Kind/decoding`` naming the column, the
/// expected type and what was found: `column "rank": expected Int, found text 'abc'`.
final class RowDecoder: Decoder {
    private struct Prediction {
        var name: String
        /// The column, or -1 when the row has no column of that name.
        var column: Int
    }

    let handle: OpaquePointer
    let layout: ColumnLayout
    private let recordType: Any.Type
    // The per-row state is marked `@exclusivity(unchecked)`: one coder serves one statement on one
    // thread and no access to it overlaps another, and the dynamic checks of a class's stored
    // properties (a runtime call per access, a dozen per row) cost more than the coding itself.
    @exclusivity(unchecked) private var predictions: [Prediction] = []
    @exclusivity(unchecked) private var keyNumber = 0
    @exclusivity(unchecked) private var nestedModes: [NestedMode]
    private lazy var valueDecoder = ColumnValueDecoder(row: self)
    @exclusivity(unchecked) private var cachedContainer: AnyObject?
    @exclusivity(unchecked) private var cachedKeyType: ObjectIdentifier?
    private lazy var jsonDecoder = RecordJSON.makeDecoder()

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// A decoder for the rows of `statement`, whose columns are `layout`.
    init(statement: Statement, layout: ColumnLayout, recordType: Any.Type) {
        self.handle = statement.handle
        self.layout = layout
        self.recordType = recordType
        self.nestedModes = Array(repeating: .unknown, count: layout.count)
    }

    /// A decoder for the rows of `statement`, matching its result columns by name.
    convenience init(statement: Statement, recordType: Any.Type) {
        self.init(statement: statement, layout: ColumnLayout((0..<statement.columnCount).map(statement.columnName)),
                  recordType: recordType)
    }

    /// Decodes the current row.
    func decode<R: Decodable>(_ type: R.Type) throws -> R {
        keyNumber = 0
        do {
            return try R(from: self)
        } catch let error as StoreError {
            throw error
        } catch let error as DatabaseError {
            throw error
        } catch {
            throw StoreError(.decoding, "cannot decode \(R.self): \(RecordDecodingFailure.describe(error))")
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        // One container per decoder, not one per row (each costs an allocation and generic
        // metadata lookups): every row asks for the same key type, checked by identity.
        if let holder = cachedContainer, cachedKeyType == ObjectIdentifier(Key.self) {
            return unsafeDowncast(holder, to: KeyedDecodingContainerHolder<Key>.self).container
        }
        let container = KeyedDecodingContainer(RowKeyedDecodingContainer<Key>(decoder: self))
        cachedContainer = KeyedDecodingContainerHolder(container)
        cachedKeyType = ObjectIdentifier(Key.self)
        return container
    }

    /// Drops the cached container. Call when done.
    func finish() {
        cachedContainer = nil
    }

    /// Decodes every remaining row of the statement.
    func decodeAll<R: Decodable>(_ type: R.Type, from statement: Statement) throws -> [R] {
        defer { finish() }
        // Records go into memory of our own and move into an array once: this code is generic
        // over R (not specialized for the caller's type), and every call of a generic type's
        // method here (`Array<R>.append`) would first look up that type's metadata.
        var base = UnsafeMutablePointer<R>.allocate(capacity: 64)
        var capacity = 64
        var count = 0
        defer {
            base.deinitialize(count: count)
            base.deallocate()
        }
        while try statement.step() {
            if count == capacity {
                let grown = UnsafeMutablePointer<R>.allocate(capacity: capacity * 2)
                grown.moveInitialize(from: base, count: count)
                base.deallocate()
                base = grown
                capacity *= 2
            }
            (base + count).initialize(to: try decode(R.self))
            count += 1
        }
        let moved = count
        count = 0
        // No empty array through `unsafeUninitializedCapacity`: the standard library then writes
        // its count into the shared empty-array storage, a data race with every other thread
        // doing the same (ThreadSanitizer reports it).
        guard moved > 0 else { return [] }
        return Array(unsafeUninitializedCapacity: moved) { array, initialized in
            if moved > 0 { array.baseAddress!.moveInitialize(from: base, count: moved) }
            initialized = moved
        }
    }

    /// Decodes the next row of the statement, if any.
    func decodeNext<R: Decodable>(_ type: R.Type, from statement: Statement) throws -> R? {
        defer { finish() }
        guard try statement.step() else { return nil }
        return try decode(R.self)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw StoreError(.decoding, "cannot decode \(recordType) from a row: it asks for an unkeyed container "
                         + "(a record decodes from a keyed container, one key per column)")
    }

    /// A single value reads the first column: `db.fetchAll(String.self, "SELECT title FROM todos")`.
    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard layout.count > 0 else { throw StoreError(.decoding, "cannot decode \(recordType) from a row without columns") }
        valueDecoder.column = 0
        valueDecoder.valueType = recordType
        return valueDecoder
    }

    // MARK: Columns

    /// The column for `key`, or -1 when the row has none of that name.
    @inline(__always)
    func column(for key: some CodingKey) -> Int {
        let name = key.stringValue
        let number = keyNumber
        keyNumber &+= 1
        if number < predictions.count {
            if predictions[number].name == name { return predictions[number].column }
            let column = layout.indexByName[name] ?? -1
            predictions[number] = Prediction(name: name, column: column)
            return column
        }
        let column = layout.indexByName[name] ?? -1
        predictions.append(Prediction(name: name, column: column))
        return column
    }

    /// The column for `key`; throws when the row has no column of that name.
    @inline(__always)
    func requiredColumn(for key: some CodingKey) throws(StoreError) -> Int {
        let column = column(for: key)
        if column < 0 {
            throw StoreError(.decoding, "cannot decode \(recordType): no column \"\(key.stringValue)\" in the row "
                             + "(columns: \(layout.listed))")
        }
        return column
    }

    func hasColumn(named name: String) -> Bool { layout.indexByName[name] != nil }

    // MARK: Reading values

    @inline(__always)
    func isNull(_ column: Int) -> Bool { sqlite3_column_type(handle, Int32(column)) == SQLITE_NULL }

    func mismatch(_ column: Int, expected: Any.Type, note: String = "") -> StoreError {
        StoreError(.decoding, "cannot decode \(recordType): column \"\(layout.names[column])\": expected \(expected), "
                   + "found \(foundDescription(column))\(note)")
    }

    /// The stored value of `column`, described for an error message (text shortened).
    func foundDescription(_ column: Int) -> String {
        switch sqlite3_column_type(handle, Int32(column)) {
        case SQLITE_NULL: return "NULL"
        case SQLITE_INTEGER: return "integer \(sqlite3_column_int64(handle, Int32(column)))"
        case SQLITE_FLOAT: return "real \(sqlite3_column_double(handle, Int32(column)))"
        case SQLITE_TEXT:
            let text = readText(column)
            return "text '\(text.count > 60 ? text.prefix(60) + "…" : text)'"
        default: return "blob of \(sqlite3_column_bytes(handle, Int32(column))) bytes"
        }
    }

    /// Column `column`'s value in the current row. Reading it with `sqlite3_value_*` costs one
    /// lookup of the column per value, where each `sqlite3_column_*` call repeats it. (An
    /// unprotected value, which is fine: a connection is used by one thread at a time.)
    @inline(__always)
    private func value(_ column: Int) -> OpaquePointer {
        sqlite3_column_value(handle, Int32(column))
    }

    @inline(__always)
    func readInt64(_ column: Int, expected: Any.Type) throws(StoreError) -> Int64 {
        let value = value(column)
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER:
            return sqlite3_value_int64(value)
        case SQLITE_FLOAT:
            let real = sqlite3_value_double(value)
            if real.rounded() == real, let exact = Int64(exactly: real) { return exact }
            throw mismatch(column, expected: expected)
        default:
            throw mismatch(column, expected: expected)
        }
    }

    @inline(__always)
    func readInteger<I: FixedWidthInteger>(_ column: Int, as type: I.Type) throws(StoreError) -> I {
        let value = try readInt64(column, expected: I.self)
        guard let exact = I(exactly: value) else { throw mismatch(column, expected: I.self, note: " (out of range)") }
        return exact
    }

    @inline(__always)
    func readBool(_ column: Int) throws(StoreError) -> Bool {
        let value = value(column)
        guard sqlite3_value_type(value) == SQLITE_INTEGER else { throw mismatch(column, expected: Bool.self) }
        return sqlite3_value_int64(value) != 0
    }

    @inline(__always)
    func readDouble(_ column: Int, expected: Any.Type = Double.self) throws(StoreError) -> Double {
        let value = value(column)
        switch sqlite3_value_type(value) {
        case SQLITE_FLOAT, SQLITE_INTEGER: return sqlite3_value_double(value)
        default: throw mismatch(column, expected: expected)
        }
    }

    @inline(__always)
    func readString(_ column: Int) throws(StoreError) -> String {
        let value = value(column)
        guard sqlite3_value_type(value) == SQLITE_TEXT else { throw mismatch(column, expected: String.self) }
        guard let bytes = sqlite3_value_text(value) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_value_bytes(value))), as: UTF8.self)
    }

    @inline(__always)
    private func readText(_ column: Int) -> String {
        withTextBytes(column) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the bytes of text `column` (valid only during the call).
    @inline(__always)
    private func withTextBytes<R>(_ column: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        let value = value(column)
        guard let bytes = sqlite3_value_text(value) else { return try body(UnsafeBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeBufferPointer(start: bytes, count: Int(sqlite3_value_bytes(value))))
    }

    @inline(__always)
    private func withBlobBytes<R>(_ column: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let index = Int32(column)
        let count = Int(sqlite3_column_bytes(handle, index))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? sqlite3_column_blob(handle, index) : nil, count: count))
    }

    @inline(__always)
    func readPrimitive<T>(_ primitive: ColumnPrimitive, _ column: Int, as type: T.Type) throws(StoreError) -> T {
        let index = Int32(column)
        let storage = sqlite3_column_type(handle, index)
        switch primitive {
        case .uuid:
            if storage == SQLITE_TEXT, let uuid = withTextBytes(column, UUIDText.parse) { return reinterpret(uuid, as: T.self) }
        case .date:
            if storage == SQLITE_TEXT, let date = withTextBytes(column, DateStorage.date(text:)) { return reinterpret(date, as: T.self) }
            if storage == SQLITE_FLOAT || storage == SQLITE_INTEGER {
                return reinterpret(DateStorage.date(seconds: sqlite3_column_double(handle, index)), as: T.self)
            }
        case .data:
            if storage == SQLITE_BLOB { return reinterpret(withBlobBytes(column) { Data($0) }, as: T.self) }
        case .bytes:
            if storage == SQLITE_BLOB { return reinterpret(withBlobBytes(column) { [UInt8]($0) }, as: T.self) }
        case .url:
            if storage == SQLITE_TEXT, let url = URL(string: readText(column)) { return reinterpret(url, as: T.self) }
        case .decimal:
            if storage == SQLITE_TEXT, let decimal = DecimalText.decimal(readText(column)) { return reinterpret(decimal, as: T.self) }
        }
        // Slower forms (a UUID as a 16-byte blob, as lower-case text…), else a mismatch.
        if let value = primitive.value(from: sqliteValue(column), as: T.self) { return value }
        throw mismatch(column, expected: T.self)
    }

    private func sqliteValue(_ column: Int) -> SQLValue {
        let index = Int32(column)
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, index))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, index))
        case SQLITE_TEXT: return .text(readText(column))
        case SQLITE_BLOB: return .blob(withBlobBytes(column) { [UInt8]($0) })
        default: return .null
        }
    }

    /// Decodes a value of any `Decodable` type from `column`: Foundation primitives directly,
    /// types that decode from one value (enums with raw values) from that value, everything else
    /// from JSON text.
    @inline(__always)
    func decodeValue<T: Decodable>(_ type: T.Type, _ column: Int) throws -> T {
        if let primitive = ColumnPrimitive(T.self) { return try readPrimitive(primitive, column, as: T.self) }
        if T.self == [String].self, sqlite3_column_type(handle, Int32(column)) == SQLITE_TEXT,
           let strings = withTextBytes(column, RecordJSON.parseStringArray) {
            return reinterpret(strings, as: T.self)
        }
        if nestedModes[column] != .json {
            valueDecoder.column = column
            valueDecoder.valueType = T.self
            do {
                let value = try T(from: valueDecoder)
                nestedModes[column] = .single
                return value
            } catch is NeedsJSON {
                nestedModes[column] = .json
            } catch let error as StoreError {
                throw error
            } catch {
                throw mismatch(column, expected: T.self, note: ": \(RecordDecodingFailure.describe(error))")
            }
        }
        return try decodeJSON(T.self, column)
    }

    private func decodeJSON<T: Decodable>(_ type: T.Type, _ column: Int) throws -> T {
        let storage = sqlite3_column_type(handle, Int32(column))
        guard storage == SQLITE_TEXT || storage == SQLITE_BLOB else {
            throw mismatch(column, expected: T.self, note: " (JSON text)")
        }
        let data = withBlobBytes(column) { Data($0) }
        do {
            return try jsonDecoder.decode(T.self, from: data)
        } catch {
            throw mismatch(column, expected: T.self, note: ": invalid JSON for \(T.self): \(RecordDecodingFailure.describe(error))")
        }
    }
}

/// A class box for a cached keyed decoding container.
final class KeyedDecodingContainerHolder<Key: CodingKey> {
    let container: KeyedDecodingContainer<Key>
    init(_ container: KeyedDecodingContainer<Key>) { self.container = container }
}

/// A class box for a cached keyed encoding container.
final class KeyedEncodingContainerHolder<Key: CodingKey> {
    let container: KeyedEncodingContainer<Key>
    init(_ container: KeyedEncodingContainer<Key>) { self.container = container }
}

/// Thrown by ``ColumnValueDecoder`` when a value asks for a keyed or unkeyed container: the
/// column holds JSON.
struct NeedsJSON: Error {}

/// Decodes a value that is not a column primitive from one column, as a single value (enums with
/// raw values, wrappers). Asking for a keyed or unkeyed container throws ``NeedsJSON``.
final class ColumnValueDecoder: Decoder, SingleValueDecodingContainer {
    unowned let row: RowDecoder
    var column = 0
    /// The type being decoded, for error messages.
    var valueType: Any.Type = Any.self

    init(row: RowDecoder) { self.row = row }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> { throw NeedsJSON() }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw NeedsJSON() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { row.isNull(column) }
    func decode(_ type: Bool.Type) throws -> Bool { try row.readBool(column) }
    func decode(_ type: String.Type) throws -> String { try row.readString(column) }
    func decode(_ type: Double.Type) throws -> Double { try row.readDouble(column) }
    func decode(_ type: Float.Type) throws -> Float { Float(try row.readDouble(column, expected: Float.self)) }
    func decode(_ type: Int.Type) throws -> Int { try row.readInteger(column, as: Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try row.readInteger(column, as: Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try row.readInteger(column, as: Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try row.readInteger(column, as: Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try row.readInteger(column, as: Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try row.readInteger(column, as: UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try row.readInteger(column, as: UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try row.readInteger(column, as: UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try row.readInteger(column, as: UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try row.readInteger(column, as: UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if let primitive = ColumnPrimitive(T.self) { return try row.readPrimitive(primitive, column, as: T.self) }
        return try T(from: self)
    }
}

/// Short descriptions of Foundation's decoding errors.
enum RecordDecodingFailure {
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c): context = c
        @unknown default: return "\(error)"
        }
        let path = context.codingPath.map(\.stringValue).joined(separator: ".")
        return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
    }
}

/// The keyed container of ``RowDecoder``: every call reads one column of the current row.
struct RowKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    /// Not retained, so that the container is a plain value: the standard library's box copies
    /// the container for every value it decodes, and a strong reference would cost a retain and
    /// a release through value witnesses each time (and one more pair around each use). Like the
    /// decoder itself, which reads its statement's handle, a container is only valid while the
    /// record decodes; the decoder outlives every call.
    private let reference: Unmanaged<RowDecoder>
    var codingPath: [any CodingKey] { [] }

    init(decoder: RowDecoder) { reference = .passUnretained(decoder) }

    /// Calls `body` with the decoder, without retaining it.
    @inline(__always)
    private func with<R>(_ body: (RowDecoder) throws -> R) rethrows -> R {
        try reference._withUnsafeGuaranteedRef(body)
    }

    var allKeys: [Key] { with { $0.layout.names.compactMap { Key(stringValue: $0) } } }
    func contains(_ key: Key) -> Bool { with { $0.hasColumn(named: key.stringValue) } }

    func decodeNil(forKey key: Key) throws -> Bool { try with { $0.isNull(try $0.requiredColumn(for: key)) } }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try with { try $0.readBool($0.requiredColumn(for: key)) } }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try with { try $0.readString($0.requiredColumn(for: key)) } }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try with { try $0.readDouble($0.requiredColumn(for: key)) } }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        try with { Float(try $0.readDouble($0.requiredColumn(for: key), expected: Float.self)) }
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(key) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try with { try $0.decodeValue(T.self, $0.requiredColumn(for: key)) }
    }

    @inline(__always)
    private func integer<I: FixedWidthInteger>(_ key: Key) throws -> I {
        try with { try $0.readInteger($0.requiredColumn(for: key), as: I.self) }
    }

    // Optionals: a missing column or NULL is nil; one lookup per key.
    @inline(__always)
    private func present<R>(_ key: Key, _ read: (RowDecoder, Int) throws -> R) rethrows -> R? {
        try with { decoder in
            let column = decoder.column(for: key)
            return column < 0 || decoder.isNull(column) ? nil : try read(decoder, column)
        }
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key) { try $0.readBool($1) } }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(key) { try $0.readString($1) } }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key) { try $0.readDouble($1) } }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        try present(key) { Float(try $0.readDouble($1, expected: Float.self)) }
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try integerIfPresent(key) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try present(key) { try $0.decodeValue(T.self, $1) }
    }

    @inline(__always)
    private func integerIfPresent<I: FixedWidthInteger>(_ key: Key) throws -> I? {
        try present(key) { try $0.readInteger($1, as: I.self) }
    }

    func nestedContainer<Nested: CodingKey>(keyedBy type: Nested.Type, forKey key: Key) throws -> KeyedDecodingContainer<Nested> {
        throw unsupported("a nested keyed container", key)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw unsupported("a nested unkeyed container", key)
    }

    func superDecoder() throws -> any Decoder {
        throw StoreError(.decoding, "records cannot use superDecoder(); decode the superclass's properties as keys")
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { throw unsupported("superDecoder(forKey:)", key) }

    private func unsupported(_ what: String, _ key: Key) -> StoreError {
        StoreError(.decoding, "key \"\(key.stringValue)\" uses \(what); records map each top-level key to a column — "
                   + "decode a nested Decodable value instead (stored as JSON)")
    }
}
