import Foundation

/// How a record property is stored, which decides its column's declared type.
enum ColumnAffinity: Sendable {
    /// Integers and `Bool` (0/1).
    case integer
    /// `Double` and `Float`.
    case real
    /// `Date`: seconds since 1970, a REAL before 1970 and exact decimal text from 1970 on (see
    /// ``DateStorage``), in a column declared `ANY`, which keeps both forms as they are given
    /// and orders them as the dates. A `REAL` column (as earlier versions made) holds dates too,
    /// as REALs.
    case date
    /// `String`, `UUID` (canonical upper-case text), `URL` (absolute string), `Decimal` (its
    /// decimal text), and values that encode as one string (such as enums with `String` raw
    /// values).
    case text
    /// `Data` and `[UInt8]`.
    case blob
    /// Nested values (arrays, structs, dictionaries) as JSON text.
    case json

    /// The type declared in a `STRICT` table's `CREATE TABLE`.
    var declaredType: String { declaredType(strict: true) }

    /// The type to declare in a table that is `STRICT` or not: a date's column keeps its values
    /// as given with `ANY` in a `STRICT` table, and with no type in another (where `ANY` has
    /// NUMERIC affinity, which would turn the text of a date into a REAL).
    func declaredType(strict: Bool) -> String {
        switch self {
        case .integer: "INTEGER"
        case .real: "REAL"
        case .date: strict ? "ANY" : ""
        case .text, .json: "TEXT"
        case .blob: "BLOB"
        }
    }

    init(_ value: SQLValue) {
        switch value {
        case .integer: self = .integer
        case .real: self = .real
        case .text, .null: self = .text
        case .blob: self = .blob
        }
    }
}

/// The Foundation types that map to one column value rather than to JSON. Both the encoder and
/// the decoder recognise them by type identity (a pointer comparison), not by dynamic casts.
enum ColumnPrimitive {
    case date, uuid, url, data, bytes, decimal

    @inline(__always)
    init?<T>(_ type: T.Type) {
        if T.self == UUID.self { self = .uuid }
        else if T.self == Date.self { self = .date }
        else if T.self == Data.self { self = .data }
        else if T.self == URL.self { self = .url }
        else if T.self == [UInt8].self { self = .bytes }
        else if T.self == Decimal.self { self = .decimal }
        else { return nil }
    }

    var affinity: ColumnAffinity {
        switch self {
        case .date: .date
        case .uuid, .url, .decimal: .text
        case .data, .bytes: .blob
        }
    }

    /// A valid value of the type, for schema discovery.
    func placeholder<T>(as type: T.Type) -> T {
        switch self {
        case .date: reinterpret(Date(timeIntervalSince1970: 0), as: T.self)
        case .uuid: reinterpret(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), as: T.self)
        case .url: reinterpret(URL(string: "about:blank")!, as: T.self)
        case .data: reinterpret(Data(), as: T.self)
        case .bytes: reinterpret([UInt8](), as: T.self)
        case .decimal: reinterpret(Decimal.zero, as: T.self)
        }
    }

    /// The stored form of `value`, whose type is this primitive.
    ///
    /// - Throws: ``StoreError/Kind/encoding`` for a value without one (see ``DateStorage`` and
    ///   ``DecimalText``).
    func sqlValue<T>(of value: T) throws(StoreError) -> SQLValue {
        switch self {
        case .date: try DateStorage.sqlValue(reinterpret(value, as: Date.self))
        case .uuid: .text(reinterpret(value, as: UUID.self).uuidString)
        case .url: .text(reinterpret(value, as: URL.self).absoluteString)
        case .data: .blob([UInt8](reinterpret(value, as: Data.self)))
        case .bytes: .blob(reinterpret(value, as: [UInt8].self))
        case .decimal: .text(try DecimalText.text(of: reinterpret(value, as: Decimal.self)))
        }
    }

    /// Reads a stored value as this primitive, or `nil` when it does not convert.
    func value<T>(from sqlValue: SQLValue, as type: T.Type) -> T? {
        switch self {
        case .date: Date(sqlValue: sqlValue).map { reinterpret($0, as: T.self) }
        case .uuid: UUID(sqlValue: sqlValue).map { reinterpret($0, as: T.self) }
        case .url:
            if case .text(let text) = sqlValue, let url = URL(string: text) { reinterpret(url, as: T.self) } else { nil }
        case .data: Data(sqlValue: sqlValue).map { reinterpret($0, as: T.self) }
        case .bytes: [UInt8](sqlValue: sqlValue).map { reinterpret($0, as: T.self) }
        case .decimal: Decimal(sqlValue: sqlValue).map { reinterpret($0, as: T.self) }
        }
    }
}

/// The stored form of a `Decimal`: its decimal text (`-12.5`, `0.001`, `100000`), every digit of
/// its value and nothing else. Equal decimals have the same text (`Decimal` keeps its value in
/// lowest terms), so `=` in SQL is `==` on the values; but text orders by its characters, not
/// by value (`'10' < '9'`).
enum DecimalText {
    /// The text of `value`.
    ///
    /// - Throws: ``StoreError/Kind/encoding`` for NaN (refused as `Double`'s NaN is).
    static func text(of value: Decimal) throws(StoreError) -> String {
        if value.isNaN { throw StoreError(.encoding, "a Decimal NaN cannot be stored") }
        return value.description
    }

    /// The decimal of a stored text: a decimal number (an optional sign, digits with an optional
    /// point, an optional exponent); `nil` for anything else, which `Decimal(string:)` would
    /// read in part.
    static func decimal(_ text: String) -> Decimal? {
        var bytes = text.utf8[...]
        func skipDigits() -> Int {
            let count = bytes.prefix(while: { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }).count
            bytes = bytes.dropFirst(count)
            return count
        }
        if bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") { bytes = bytes.dropFirst() }
        var digits = skipDigits()
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            digits += skipDigits()
        }
        guard digits > 0 else { return nil }
        if bytes.first == UInt8(ascii: "e") || bytes.first == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") { bytes = bytes.dropFirst() }
            guard skipDigits() > 0 else { return nil }
        }
        guard bytes.isEmpty else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")).flatMap { $0.isNaN ? nil : $0 }
    }
}

/// `value` as `U`, when `T` and `U` are the same type (checked by the caller with `T.self == U.self`).
/// A copy through a rebound pointer: no dynamic cast, no boxing.
@inline(__always)
func reinterpret<T, U>(_ value: T, as type: U.Type) -> U {
    assert(T.self == U.self, "reinterpret of \(T.self) as \(U.self)")
    return withUnsafePointer(to: value) { $0.withMemoryRebound(to: U.self, capacity: 1) { $0.pointee } }
}

// MARK: - UUID text without Foundation's formatter

enum UUIDText {
    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Calls `body` with `uuid`'s canonical upper-case text (36 bytes, as `uuidString`), formatted
    /// on the stack.
    @inline(__always)
    static func withText<R>(_ uuid: UUID, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { buffer in
            var bytes = uuid.uuid
            withUnsafeBytes(of: &bytes) { raw in
                var out = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 { buffer[out] = UInt8(ascii: "-"); out += 1 }
                    let byte = raw[index]
                    buffer[out] = hexDigits[Int(byte >> 4)]
                    buffer[out + 1] = hexDigits[Int(byte & 0x0F)]
                    out += 2
                }
            }
            return try body(UnsafeBufferPointer(buffer))
        }
    }

    /// Parses 36 bytes of UUID text (either case), or returns `nil`.
    @inline(__always)
    static func parse(_ text: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard text.count == 36 else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let valid = withUnsafeMutableBytes(of: &bytes) { out -> Bool in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    guard text[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = nibble(text[position]), let low = nibble(text[position + 1]) else { return false }
                out[index] = high << 4 | low
                position += 2
            }
            return true
        }
        return valid ? UUID(uuid: bytes) : nil
    }

    @inline(__always)
    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        default: nil
        }
    }
}
