import Foundation

/// Discovers the columns of a record type by decoding one instance from placeholder values: the
/// keys the type's `init(from:)` asks for, in order, are its columns, and the type asked for each
/// decides the column's declared type.
///
/// Nested values need a real instance to go on decoding: an enum that is `CaseIterable` gives its
/// first case; other types decode from placeholders (empty arrays and dictionaries, zeros, empty
/// strings); a plain-data type that rejects them (an enum with an `Int` raw value starting at 1)
/// is built from zeroed memory, which is its first case. A type that still fails is reported,
/// naming the property: create the table yourself, and ``Store/collection(_:of:primaryKey:)``
/// adopts it.
final class SchemaProbe: Decoder {
    struct Column {
        var name: String
        var affinity: ColumnAffinity
        /// Whether the type may leave the value out (an optional, or a key decoded with
        /// `decodeIfPresent`): the column takes NULL.
        var isOptional = false
        /// The property's Swift type, for messages.
        var typeName = ""
        /// The value a placeholder of the type stores (what a new column's default can be).
        var placeholder: SQLValue = .null
    }

    private(set) var columns: [Column] = []
    private var seen: Set<String> = []
    /// Set while a key is decoded with `decodeIfPresent`.
    var decodingOptional = false
    let recordType: Any.Type

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    private init(recordType: Any.Type) { self.recordType = recordType }

    /// The columns of `type`, in the order its decoding asks for them.
    static func columns<R: Decodable>(of type: R.Type) throws(StoreError) -> [Column] {
        let probe = SchemaProbe(recordType: R.self)
        do {
            _ = try R(from: probe)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.encoding, "cannot derive the columns of \(R.self) from its Decodable conformance: "
                             + RecordDecodingFailure.describe(error))
        }
        if probe.columns.isEmpty {
            throw StoreError(.encoding, "\(R.self) decodes no keys: a record needs at least one property")
        }
        return probe.columns
    }

    func record<T>(_ key: some CodingKey, _ affinity: ColumnAffinity, _ type: T.Type, placeholder: SQLValue,
                   optional: Bool = false) {
        let name = key.stringValue
        if seen.insert(name).inserted {
            columns.append(Column(name: name, affinity: affinity, isOptional: optional || decodingOptional,
                                  typeName: "\(T.self)", placeholder: placeholder))
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ProbeKeyedContainer<Key>(probe: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw StoreError(.encoding, "\(recordType) decodes from an unkeyed container; a record must be keyed (one key per column)")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw StoreError(.encoding, "\(recordType) decodes from a single value; a record must be keyed (one key per column)")
    }

    /// A valid instance of a property's type, and the affinity of its column.
    func placeholder<T: Decodable>(_ type: T.Type, for key: some CodingKey) throws -> T {
        if let primitive = ColumnPrimitive(T.self) {
            let value = primitive.placeholder(as: T.self)
            let stored = (try? primitive.sqlValue(of: value)) ?? .null
            record(key, primitive.affinity, T.self, placeholder: stored)
            return value
        }
        let value: T
        do {
            value = try Placeholder.make(T.self)
        } catch {
            throw StoreError(.encoding, "cannot derive the column \"\(key.stringValue)\" of \(recordType): its type \(T.self) "
                             + "does not decode from placeholder values (\(RecordDecodingFailure.describe(error))). "
                             + "Make it CaseIterable, or create the table yourself before opening the collection")
        }
        // The column's type is what the row encoder will store for this value.
        let affinity: ColumnAffinity
        var stored = SQLValue.null
        let encoder = ColumnValueEncoder()
        if let encodable = value as? any Encodable, let single = try? encoder.encode(value: encodable) {
            affinity = encoder.primitive?.affinity ?? ColumnAffinity(single)
            stored = single
        } else {
            affinity = .json
            if let encodable = value as? any Encodable, let json = try? JSONEncoder().encode(encodable) {
                stored = .text(String(decoding: json, as: UTF8.self))
            }
        }
        record(key, affinity, T.self, placeholder: stored, optional: T.self is any OptionalValue.Type)
        return value
    }
}

private struct ProbeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let probe: SchemaProbe
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }
    func contains(_ key: Key) -> Bool { true }

    func decodeNil(forKey key: Key) throws -> Bool { false }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        probe.record(key, .integer, type, placeholder: .integer(0))
        return false
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        probe.record(key, .text, type, placeholder: .text(""))
        return ""
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        probe.record(key, .real, type, placeholder: .real(0))
        return 0
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        probe.record(key, .real, type, placeholder: .real(0))
        return 0
    }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if let integer = T.self as? any (FixedWidthInteger & Decodable).Type {
            probe.record(key, .integer, type, placeholder: .integer(0))
            return integer.zero as! T
        }
        return try probe.placeholder(T.self, for: key)
    }

    // Every `decodeIfPresent` marks its column optional, then probes as `decode` does.
    private func optional<T>(_ decode: () throws -> T) rethrows -> T? {
        probe.decodingOptional = true
        defer { probe.decodingOptional = false }
        return try decode()
    }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try optional { try decode(type, forKey: key) } }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try optional { try decode(type, forKey: key) } }

    func nestedContainer<Nested: CodingKey>(keyedBy type: Nested.Type, forKey key: Key) throws -> KeyedDecodingContainer<Nested> {
        throw unsupported(key)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw unsupported(key) }
    func superDecoder() throws -> any Decoder {
        throw StoreError(.encoding, "\(probe.recordType) uses superDecoder(); records map each top-level key to a column")
    }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw unsupported(key) }

    private func unsupported(_ key: Key) -> StoreError {
        StoreError(.encoding, "\(probe.recordType) decodes key \"\(key.stringValue)\" through a nested container; "
                   + "records map each top-level key to a column (decode a nested Decodable value instead)")
    }
}

/// Builds a valid instance of a nested type without stored data.
enum Placeholder {
    static func make<T: Decodable>(_ type: T.Type) throws -> T {
        if let primitive = ColumnPrimitive(T.self) { return primitive.placeholder(as: T.self) }
        if let iterable = T.self as? any CaseIterable.Type, let first = firstCase(of: iterable) as? T { return first }
        do {
            return try T(from: PlaceholderDecoder())
        } catch {
            // Plain data (no references): all-zero memory is a valid value — the first case of an
            // enum, zeros and `false` in a struct.
            guard _isPOD(T.self) else { throw error }
            return withUnsafeTemporaryAllocation(of: T.self, capacity: 1) { buffer in
                UnsafeMutableRawBufferPointer(buffer).initializeMemory(as: UInt8.self, repeating: 0)
                return buffer.baseAddress!.move()
            }
        }
    }

    private static func firstCase<C: CaseIterable>(of type: C.Type) -> Any? { type.allCases.first }
}

/// Decodes any value from placeholders: empty collections, zeros, empty strings, nil optionals.
private struct PlaceholderDecoder: Decoder, SingleValueDecodingContainer {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(PlaceholderKeyedContainer<Key>())
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { PlaceholderUnkeyedContainer() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { false }
    func decode(_ type: Bool.Type) throws -> Bool { false }
    func decode(_ type: String.Type) throws -> String { "" }
    func decode(_ type: Double.Type) throws -> Double { 0 }
    func decode(_ type: Float.Type) throws -> Float { 0 }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if let integer = T.self as? any (FixedWidthInteger & Decodable).Type { return integer.zero as! T }
        return try Placeholder.make(T.self)
    }

}

/// An empty array: always at its end.
private struct PlaceholderUnkeyedContainer: UnkeyedDecodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int? { 0 }
    var isAtEnd: Bool { true }
    var currentIndex: Int { 0 }
    mutating func decodeNil() throws -> Bool { false }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try PlaceholderDecoder().decode(T.self) }
    mutating func nestedContainer<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(PlaceholderKeyedContainer<Key>())
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { self }
    mutating func superDecoder() throws -> any Decoder { PlaceholderDecoder() }
}

private struct PlaceholderKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }
    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { true }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { false }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { "" }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { 0 }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { 0 }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try PlaceholderDecoder().decode(T.self) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { nil }
    func nestedContainer<Nested: CodingKey>(keyedBy type: Nested.Type, forKey key: Key) throws -> KeyedDecodingContainer<Nested> {
        KeyedDecodingContainer(PlaceholderKeyedContainer<Nested>())
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { PlaceholderUnkeyedContainer() }
    func superDecoder() throws -> any Decoder { PlaceholderDecoder() }
    func superDecoder(forKey key: Key) throws -> any Decoder { PlaceholderDecoder() }
}

/// Tells an `Optional` type apart from others at run time (a property decoded with `decode(T?.self)`).
protocol OptionalValue {}
extension Optional: OptionalValue {}
