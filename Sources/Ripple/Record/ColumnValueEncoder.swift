import Foundation

/// Encodes one property value that is not a column primitive. A value that encodes as a single
/// primitive through a single-value container (an enum with a raw value, a wrapper around a
/// string or a date) becomes that primitive; a value that asks for a keyed or unkeyed container
/// (arrays, structs, dictionaries, enums with payloads) must be stored as JSON.
final class ColumnValueEncoder: Encoder, SingleValueEncodingContainer {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    private var value: SQLValue = .null
    private var needsJSON = false
    /// The Foundation primitive the last value encoded as, if any (a wrapper of a `Date` is
    /// stored as a date).
    private(set) var primitive: ColumnPrimitive?

    /// The stored form of `value`, or `nil` when it must be stored as JSON.
    func encode<T: Encodable>(value: T) throws -> SQLValue? {
        self.value = .null
        needsJSON = false
        primitive = nil
        try value.encode(to: self)
        return needsJSON ? nil : self.value
    }

    /// The stored form of `value`: a primitive, or JSON text.
    static func sqlValue<T: Encodable>(of value: T) throws -> SQLValue {
        if let primitive = ColumnPrimitive(T.self) { return try primitive.sqlValue(of: value) }
        if let single = try ColumnValueEncoder().encode(value: value) { return single }
        let data = try RecordJSON.makeEncoder().encode(value)
        return .text(String(decoding: data, as: UTF8.self))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        needsJSON = true
        return KeyedEncodingContainer(DiscardingKeyedContainer<Key>())
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        needsJSON = true
        return DiscardingUnkeyedContainer()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() { value = .null }
    func encode(_ value: Bool) { self.value = .integer(value ? 1 : 0) }
    func encode(_ value: String) { self.value = .text(value) }
    func encode(_ value: Double) throws { self.value = .real(try RecordValueCheck.storable(value)) }
    func encode(_ value: Float) throws { self.value = .real(try RecordValueCheck.storable(Double(value))) }
    func encode<I: BinaryInteger & Encodable>(_ value: I) throws { self.value = .integer(try RecordValueCheck.int64(value)) }
    func encode<T: Encodable>(_ value: T) throws {
        if let primitive = ColumnPrimitive(T.self) {
            self.value = try primitive.sqlValue(of: value)
            self.primitive = primitive
        } else {
            try value.encode(to: self)
        }
    }
}

/// Checks shared by the encoders: values SQLite cannot hold faithfully are refused.
enum RecordValueCheck {
    /// `value` as an `Int64`, or an encoding error when it does not fit (a `UInt64` above `Int64.max`).
    @inline(__always)
    static func int64<I: BinaryInteger>(_ value: I) throws(StoreError) -> Int64 {
        guard let exact = Int64(exactly: value) else {
            throw StoreError(.encoding, "\(value) (\(I.self)) does not fit in SQLite's 64-bit integers")
        }
        return exact
    }

    /// `value`, or an encoding error for NaN (which SQLite would store as NULL).
    @inline(__always)
    static func storable(_ value: Double) throws(StoreError) -> Double {
        if value.isNaN { throw StoreError(.encoding, "NaN cannot be stored (SQLite stores it as NULL)") }
        return value
    }
}

/// A keyed container that accepts and forgets everything (the value goes to JSON instead).
struct DiscardingKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) {}
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) {}
    mutating func nestedContainer<Nested: CodingKey>(keyedBy keyType: Nested.Type,
                                                     forKey key: Key) -> KeyedEncodingContainer<Nested> {
        KeyedEncodingContainer(DiscardingKeyedContainer<Nested>())
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { DiscardingUnkeyedContainer() }
    mutating func superEncoder() -> any Encoder { DiscardingEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { DiscardingEncoder() }
}

/// An unkeyed container that accepts and forgets everything.
struct DiscardingUnkeyedContainer: UnkeyedEncodingContainer, SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() {}
    mutating func encode<T: Encodable>(_ value: T) {}
    mutating func nestedContainer<Nested: CodingKey>(keyedBy keyType: Nested.Type) -> KeyedEncodingContainer<Nested> {
        KeyedEncodingContainer(DiscardingKeyedContainer<Nested>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingUnkeyedContainer() }
    mutating func superEncoder() -> any Encoder { DiscardingEncoder() }
}

/// An encoder that accepts and forgets everything.
struct DiscardingEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(DiscardingKeyedContainer<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingUnkeyedContainer() }
    func singleValueContainer() -> any SingleValueEncodingContainer { DiscardingUnkeyedContainer() }
}

/// The JSON form of nested values: sorted keys (stable text, comparable in SQL), unescaped
/// slashes, dates in the forms of date columns (a number of seconds since 1970 before 1970, the
/// exact decimal text from 1970 on, see ``DateStorage``; numbers, as earlier versions wrote
/// every date, read too), and the Doubles JSON has no number for as strings: `"Infinity"`,
/// `"-Infinity"`, `"NaN"`.
enum RecordJSON {
    static let nonConformingFloats = (positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")

    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom(DateStorage.encodeJSON)
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: nonConformingFloats.positiveInfinity, negativeInfinity: nonConformingFloats.negativeInfinity,
            nan: nonConformingFloats.nan)
        return encoder
    }

    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom(DateStorage.decodeJSON)
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: nonConformingFloats.positiveInfinity, negativeInfinity: nonConformingFloats.negativeInfinity,
            nan: nonConformingFloats.nan)
        return decoder
    }
}
