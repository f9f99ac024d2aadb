import Foundation

/// How a record property is stored, which decides its column's declared type.
enum ColumnAffinity: Sendable {
    /// Integers and `Bool` (0/1).
    case integer
    /// `Double`, `Float` and `Date` (seconds since 1970).
    case real
    /// `String`, `UUID` (canonical upper-case text), `URL` (absolute string), and values that
    /// encode as one string (such as enums with `String` raw values).
    case text
    /// `Data` and `[UInt8]`.
    case blob
    /// Nested values (arrays, structs, dictionaries) as JSON text.
    case json

    /// The type declared in `CREATE TABLE`.
    var declaredType: String {
        switch self {
        case .integer: "INTEGER"
        case .real: "REAL"
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
    case date, uuid, url, data, bytes

    @inline(__always)
    init?<T>(_ type: T.Type) {
        if T.self == UUID.self { self = .uuid }
        else if T.self == Date.self { self = .date }
        else if T.self == Data.self { self = .data }
        else if T.self == URL.self { self = .url }
        else if T.self == [UInt8].self { self = .bytes }
        else { return nil }
    }

    var affinity: ColumnAffinity {
        switch self {
        case .date: .real
        case .uuid, .url: .text
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
        }
    }

    /// The stored form of `value`, whose type is this primitive.
    func sqlValue<T>(of value: T) -> SQLValue {
        switch self {
        case .date: .real(reinterpret(value, as: Date.self).timeIntervalSince1970)
        case .uuid: .text(reinterpret(value, as: UUID.self).uuidString)
        case .url: .text(reinterpret(value, as: URL.self).absoluteString)
        case .data: .blob([UInt8](reinterpret(value, as: Data.self)))
        case .bytes: .blob(reinterpret(value, as: [UInt8].self))
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
        }
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
