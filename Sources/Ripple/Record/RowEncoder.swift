import Foundation
import RippleSQLite

/// Encodes records straight into the parameters of a prepared statement whose parameter `n`
/// is column `n - 1` of a ``ColumnLayout`` (`INSERT … VALUES (?1, ?2, …)`,
/// `UPDATE … SET "b" = ?2 … WHERE "a" = ?1`).
///
/// No per-row dictionary: each `encode(_:forKey:)` binds its value at once. The column of the
/// n-th key encoded is predicted from the previous row (synthesized `Codable` encodes keys in the
/// same order every time) and confirmed by comparing the key's name to the predicted one; only a
/// miss looks the name up in the layout's dictionary. One encoder serves a whole batch.
final class RowEncoder: Encoder {
    /// The column predicted for the n-th key of a row, learnt from the previous row.
    private struct Prediction {
        var name: String
        var column: Int
    }

    let handle: OpaquePointer
    private let statement: Statement
    private let layout: ColumnLayout
    private let table: String
    private let recordType: Any.Type
    // The per-row state is marked `@exclusivity(unchecked)`: one coder serves one statement on one
    // thread and no access to it overlaps another, and the dynamic checks of a class's stored
    // properties (a runtime call per access, a dozen per row) cost more than the coding itself.
    @exclusivity(unchecked) private var predictions: [Prediction] = []
    @exclusivity(unchecked) private var keyNumber = 0
    /// `boundMarks[c] == generation` when column `c` was bound for the current row.
    @exclusivity(unchecked) private var boundMarks: [UInt32]
    @exclusivity(unchecked) private var generation: UInt32 = 0
    @exclusivity(unchecked) private var boundCount = 0
    @exclusivity(unchecked) private var nestedModes: [NestedMode]
    @exclusivity(unchecked) private var failure: StoreError?
    private lazy var valueEncoder = ColumnValueEncoder()
    @exclusivity(unchecked) private var cachedContainer: AnyObject?
    @exclusivity(unchecked) private var cachedKeyType: ObjectIdentifier?
    private lazy var jsonEncoder = RecordJSON.makeEncoder()
    @exclusivity(unchecked) private var jsonBuffer: [UInt8] = []
    /// Where the key text bound to parameter `keyParameter` is announced (see
    /// ``announceKeys(to:parameter:)``); parameter 0 is none.
    private var capture: ChangeCapture?
    private var keyParameter: Int32 = 0
    /// Per column, whether it is generated (empty when none is): its value is not written, and
    /// the statement may not even have its parameter (see ``CollectionSchema``).
    private let generated: [Bool]
    /// The column of the value being bound is generated: a parameter the statement does not
    /// have is no error (the value is dropped).
    @exclusivity(unchecked) private var dropsValue = false
    /// Per column, what its affinity would convert (see ``ColumnConversions``); empty when no
    /// column converts anything.
    private let conversions: [ColumnConversions]

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(statement: Statement, layout: ColumnLayout, table: String, recordType: Any.Type, generated: [Bool] = [],
         conversions: [ColumnConversions] = []) {
        self.statement = statement
        self.generated = generated
        self.conversions = conversions
        self.handle = statement.handle
        self.layout = layout
        self.table = table
        self.recordType = recordType
        self.boundMarks = Array(repeating: 0, count: layout.count)
        self.nestedModes = Array(repeating: .unknown, count: layout.count)
    }

    /// Announces the text bound to `parameter` (the key column of an insert) to `capture`, so
    /// that the change capture need not read each inserted row back (see
    /// ``ChangeCapture/expectKey(_:)``). The caller brackets the run with
    /// ``ChangeCapture/expectInserts(into:)`` and ``ChangeCapture/stopExpectingInserts()``.
    func announceKeys(to capture: ChangeCapture, parameter: Int32) {
        self.capture = capture
        keyParameter = parameter
    }

    /// Binds every parameter from `record`; columns the record does not encode are bound to NULL.
    func bind<R: Encodable>(_ record: R) throws {
        generation &+= 1
        if generation == 0 {   // wrapped: forget stale marks
            for index in boundMarks.indices { boundMarks[index] = 0 }
            generation = 1
        }
        boundCount = 0
        keyNumber = 0
        try record.encode(to: self)
        if let failure {
            self.failure = nil
            throw failure
        }
        dropsValue = false
        if boundCount < layout.count {
            for column in 0..<layout.count where boundMarks[column] != generation && (generated.isEmpty || !generated[column]) {
                try check(sqlite3_bind_null(handle, Int32(column + 1)))
            }
        }
    }

    /// Runs the bound statement once (an insert, update or delete) and makes it ready for the
    /// next row, keeping the bindings (every row rebinds every parameter).
    @inline(__always)
    func run() throws(DatabaseError) {
        let code = statement.database.step(handle)
        capture?.forgetExpectedKey()
        sqlite3_reset(handle)
        if code != SQLITE_DONE && code != SQLITE_ROW {
            throw DatabaseError.fromConnection(statement.database.handle, code: code, sql: statement.sql)
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // One container per encoder, not one per row (see RowDecoder).
        if let holder = cachedContainer, cachedKeyType == ObjectIdentifier(Key.self) {
            return unsafeDowncast(holder, to: KeyedEncodingContainerHolder<Key>.self).container
        }
        let container = KeyedEncodingContainer(RowKeyedEncodingContainer<Key>(encoder: self))
        cachedContainer = KeyedEncodingContainerHolder(container)
        cachedKeyType = ObjectIdentifier(Key.self)
        return container
    }

    /// Drops the cached container (which refers back to this encoder). Call when done.
    func finish() {
        cachedContainer = nil
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        fail(StoreError(.encoding, "\(recordType) must encode as a keyed container (one key per column), not as an array"))
        return DiscardingUnkeyedContainer()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        fail(StoreError(.encoding, "\(recordType) must encode as a keyed container (one key per column), not as a single value"))
        return DiscardingUnkeyedContainer()
    }

    /// Records the first failure met in a method that cannot throw; ``bind(_:)`` throws it.
    func fail(_ error: StoreError) {
        if failure == nil { failure = error }
    }

    // MARK: Columns

    /// The parameter index of the column for `key`, marked as bound for this row.
    @inline(__always)
    func parameter(for key: some CodingKey) throws(StoreError) -> Int32 {
        let name = key.stringValue
        let number = keyNumber
        keyNumber &+= 1
        let column: Int
        if number < predictions.count && predictions[number].name == name {
            column = predictions[number].column
        } else {
            column = layout.indexByName[name] ?? -1
            if number < predictions.count {
                predictions[number] = Prediction(name: name, column: column)
            } else {
                predictions.append(Prediction(name: name, column: column))
            }
        }
        guard column >= 0 else {
            throw StoreError(.encoding, "\(recordType) has a property \"\(name)\" but table \"\(table)\" has no such column "
                             + "(columns: \(layout.listed))")
        }
        if boundMarks[column] != generation {
            boundMarks[column] = generation
            boundCount += 1
        }
        dropsValue = !generated.isEmpty && generated[column]
        return Int32(column + 1)
    }

    func columnName(_ parameter: Int32) -> String { layout.names[Int(parameter) - 1] }

    // MARK: Binding

    @inline(__always)
    func check(_ code: Int32) throws(DatabaseError) {
        if code != SQLITE_OK && !(dropsValue && code == SQLITE_RANGE) {
            throw DatabaseError.fromConnection(statement.database.handle, code: code, sql: statement.sql)
        }
    }

    @inline(__always)
    func bindNull(_ parameter: Int32) throws(DatabaseError) {
        try check(sqlite3_bind_null(handle, parameter))
    }

    @inline(__always)
    func bindInteger(_ value: Int64, _ parameter: Int32) throws(DatabaseError) {
        if !conversions.isEmpty { refuseConverted(.integers, "\(value)", parameter) }
        try check(sqlite3_bind_int64(handle, parameter, value))
    }

    @inline(__always)
    func bindInteger<I: BinaryInteger>(_ value: I, _ parameter: Int32) throws {
        guard let exact = Int64(exactly: value) else {
            throw StoreError(.encoding, "column \"\(columnName(parameter))\": \(value) (\(I.self)) does not fit in SQLite's 64-bit integers")
        }
        if !conversions.isEmpty { refuseConverted(.integers, "\(value)", parameter) }
        try check(sqlite3_bind_int64(handle, parameter, exact))
    }

    @inline(__always)
    func bindReal(_ value: Double, _ parameter: Int32) throws {
        if value.isNaN {
            throw StoreError(.encoding, "column \"\(columnName(parameter))\": NaN cannot be stored (SQLite stores it as NULL)")
        }
        if !conversions.isEmpty { refuseConverted(.reals, "\(value)", parameter) }
        try check(sqlite3_bind_double(handle, parameter, value))
    }

    /// Refuses (see ``fail(_:)``) a value that column `parameter`'s affinity would store
    /// changed (see ``ColumnConversions``): it would read back as another value, or not at all.
    private func refuseConverted(_ kind: ColumnConversions, _ value: @autoclosure () -> String, _ parameter: Int32) {
        let column = Int(parameter) - 1
        guard conversions.indices.contains(column), conversions[column].contains(kind), !dropsValue else { return }
        let what = kind == .numericText ? "the text \(String(reflecting: value()))" : "the number \(value())"
        fail(StoreError(.encoding, "column \"\(columnName(parameter))\": \(what) would be stored changed: the column's "
                        + "affinity (its declared type\(conversions[column].contains(.inLooseTable) ? ", in a table that is not STRICT" : "")) "
                        + "converts it, and it would not read back as written. Declare the column with the type the property "
                        + "stores (see StoredValues)"))
    }

    @inline(__always)
    func bindText(_ value: String, _ parameter: Int32) throws(DatabaseError) {
        // A native string's bytes are read in place (no copy of the string, so no retain and
        // release of its storage); a bridged one goes through a copy.
        if let code = value.utf8.withContiguousStorageIfAvailable({ utf8 in bindTextBytes(utf8, parameter) }) {
            return try check(code)
        }
        var value = value
        let code = value.withUTF8 { utf8 in bindTextBytes(utf8, parameter) }
        try check(code)
    }

    /// Binds text. `checked`: refused when the column would make a number of it (a date's text
    /// is not checked: a `REAL` date column converts it, as documented).
    @inline(__always)
    private func bindTextBytes(_ utf8: UnsafeBufferPointer<UInt8>, _ parameter: Int32, checked: Bool = true) -> Int32 {
        if parameter == keyParameter { capture?.expectKey(utf8) }
        if checked && !conversions.isEmpty && NumericText.isNumber(utf8) {
            refuseConverted(.numericText, String(decoding: utf8, as: UTF8.self), parameter)
        }
        guard let base = utf8.baseAddress, utf8.count > 0 else {
            return sqlite3_bind_text(handle, parameter, "", 0, sqliteTransient)
        }
        return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
            sqlite3_bind_text64(handle, parameter, $0, UInt64(utf8.count), sqliteTransient, UInt8(SQLITE_UTF8))
        }
    }

    @inline(__always)
    func bindBlob(_ bytes: UnsafeRawBufferPointer, _ parameter: Int32) throws(DatabaseError) {
        if let base = bytes.baseAddress, bytes.count > 0 {
            try check(sqlite3_bind_blob64(handle, parameter, base, UInt64(bytes.count), sqliteTransient))
        } else {
            try check(sqlite3_bind_zeroblob(handle, parameter, 0))   // an empty blob, not NULL
        }
    }

    /// Binds a date's stored form (see ``DateStorage``): a REAL before 1970, text from 1970 on.
    @inline(__always)
    func bindDate(_ date: Date, _ parameter: Int32) throws {
        let code: Int32
        do {
            code = try DateStorage.withForm(date) { form in
                switch form {
                case .real(let seconds): sqlite3_bind_double(handle, parameter, seconds)
                case .text(let text): bindTextBytes(text, parameter, checked: false)
                }
            }
        } catch let error as StoreError {
            throw StoreError(.encoding, "column \"\(columnName(parameter))\": \(error.message)")
        }
        try check(code)
    }

    func bindValue(_ value: SQLValue, _ parameter: Int32) throws {
        switch value {
        case .null: try bindNull(parameter)
        case .integer(let value): try bindInteger(value, parameter)
        case .real(let value): try bindReal(value, parameter)
        case .text(let value): try bindText(value, parameter)
        case .blob(let bytes): try bytes.withUnsafeBytes { bytes in try bindBlob(bytes, parameter) }
        }
    }

    /// Binds a value of any `Encodable` type: Foundation primitives directly, values that encode
    /// as one primitive as that primitive, everything else as JSON text.
    @inline(__always)
    func bindEncodable<T: Encodable>(_ value: T, _ parameter: Int32) throws {
        if let primitive = ColumnPrimitive(T.self) {
            switch primitive {
            case .uuid:
                let code = UUIDText.withText(reinterpret(value, as: UUID.self)) { bindTextBytes($0, parameter) }
                try check(code)
            case .date:
                try bindDate(reinterpret(value, as: Date.self), parameter)
            case .data:
                try reinterpret(value, as: Data.self).withUnsafeBytes { bytes in try bindBlob(bytes, parameter) }
            case .bytes:
                try reinterpret(value, as: [UInt8].self).withUnsafeBytes { bytes in try bindBlob(bytes, parameter) }
            case .url:
                try bindText(reinterpret(value, as: URL.self).absoluteString, parameter)
            case .decimal:
                do {
                    try bindText(try DecimalText.text(of: reinterpret(value, as: Decimal.self)), parameter)
                } catch let error as StoreError {
                    throw StoreError(.encoding, "column \"\(columnName(parameter))\": \(error.message)")
                }
            }
            return
        }
        if T.self == [String].self {
            RecordJSON.writeStringArray(reinterpret(value, as: [String].self), into: &jsonBuffer)
            let code = jsonBuffer.withUnsafeBufferPointer { bindTextBytes($0, parameter) }
            try check(code)
            return
        }
        let column = Int(parameter) - 1
        if nestedModes[column] != .json {
            let single: SQLValue?
            do {
                single = try valueEncoder.encode(value: value)
            } catch let error as StoreError {
                throw StoreError(.encoding, "column \"\(columnName(parameter))\": \(error.message)")
            }
            if let single {
                nestedModes[column] = .single
                return try bindValue(single, parameter)
            }
            nestedModes[column] = .json
        }
        let data: Data
        do {
            data = try jsonEncoder.encode(value)
        } catch {
            throw StoreError(.encoding, "column \"\(columnName(parameter))\": cannot encode \(T.self) as JSON: \(error)")
        }
        let code = data.withUnsafeBytes { bindTextBytes($0.bindMemory(to: UInt8.self), parameter) }
        try check(code)
    }
}

/// How the values of a column that is not a primitive are stored, learnt from the first value.
enum NestedMode: Equatable {
    case unknown
    /// As the one primitive the value encodes to (an enum with a raw value).
    case single
    /// As JSON text.
    case json
}

/// The keyed container of ``RowEncoder``: every call binds one parameter.
struct RowKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    /// Strong: the encoder's cached container refers back to it until ``RowEncoder/finish()``.
    let encoder: RowEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { try encoder.bindNull(encoder.parameter(for: key)) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try encoder.bindInteger(value ? 1 : 0, encoder.parameter(for: key)) }
    mutating func encode(_ value: String, forKey key: Key) throws { try encoder.bindText(value, encoder.parameter(for: key)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try encoder.bindReal(value, encoder.parameter(for: key)) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try encoder.bindReal(Double(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try encoder.bindInteger(Int64(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try encoder.bindInteger(Int64(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try encoder.bindInteger(Int64(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try encoder.bindInteger(Int64(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try encoder.bindInteger(value, encoder.parameter(for: key)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try encoder.bindInteger(value, encoder.parameter(for: key)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try encoder.bindInteger(Int64(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try encoder.bindInteger(Int64(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try encoder.bindInteger(Int64(value), encoder.parameter(for: key)) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try encoder.bindInteger(value, encoder.parameter(for: key)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try encoder.bindEncodable(value, encoder.parameter(for: key)) }

    // A nil optional binds NULL (rather than skipping the key), so that the key order stays the
    // same on every row and the column prediction keeps hitting.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    mutating func nestedContainer<Nested: CodingKey>(keyedBy keyType: Nested.Type,
                                                     forKey key: Key) -> KeyedEncodingContainer<Nested> {
        encoder.fail(unsupported("a nested keyed container", key))
        return KeyedEncodingContainer(DiscardingKeyedContainer<Nested>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        encoder.fail(unsupported("a nested unkeyed container", key))
        return DiscardingUnkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        encoder.fail(StoreError(.encoding, "records cannot use superEncoder(); encode the superclass's properties as keys"))
        return DiscardingEncoder()
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        encoder.fail(unsupported("superEncoder(forKey:)", key))
        return DiscardingEncoder()
    }

    private func unsupported(_ what: String, _ key: Key) -> StoreError {
        StoreError(.encoding, "key \"\(key.stringValue)\" uses \(what); records map each top-level key to a column — "
                   + "encode a nested Codable value instead (stored as JSON)")
    }
}
