import Ripple

/// A value as SQLite stores it, kept the way SQLite compares it: text is the bytes stored (which
/// need not be valid UTF-8), never a Swift `String`, whose `==` folds canonically equivalent
/// text (`"e\u{301}" == "\u{e9}"` in Swift; two different keys in SQLite).
///
/// The stress test's model holds every row as these values, and its reference evaluator orders
/// and compares them with ``sqliteOrder(_:_:)``.
public enum StressValue: Hashable, Sendable, CustomStringConvertible {
    /// SQL NULL.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// A real: only ever an operand of a filter (the stress tables store no reals).
    case real(Double)
    /// Text, as its stored bytes (UTF-8 when valid; any bytes when written with `CAST(x'…' AS TEXT)`).
    case text([UInt8])
    /// A blob, as its bytes.
    case blob([UInt8])

    /// The text of `string`, as its UTF-8 bytes (exactly the scalars given: no normalization).
    public static func string(_ string: String) -> StressValue { .text(Array(string.utf8)) }

    /// The value of an `SQLValue` read from or bound to SQLite.
    public init(_ value: SQLValue) {
        switch value {
        case .null: self = .null
        case .integer(let number): self = .integer(number)
        case .real(let number): self = .real(number)
        case .text(let text): self = .string(text)
        case .blob(let bytes): self = .blob(bytes)
        }
    }

    /// The value as an `SQLValue` to bind, or `nil` for text that is not valid UTF-8 (which a
    /// Swift `String` cannot hold: bind its bytes as a blob under `CAST(? AS TEXT)` instead).
    public var sqlValue: SQLValue? {
        switch self {
        case .null: .null
        case .integer(let number): .integer(number)
        case .real(let number): .real(number)
        case .text(let bytes): Self.utf8String(bytes).map(SQLValue.text)
        case .blob(let bytes): .blob(bytes)
        }
    }

    /// The storage class, as SQLite's `typeof()` names it.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "blob"
        }
    }

    var isNull: Bool { self == .null }

    /// The bytes SQLite's `hex()` prints for the value (integers as their decimal text; NULL as
    /// nothing). Reals are not stored, so not rendered.
    var hexBytes: [UInt8] {
        switch self {
        case .null: []
        case .integer(let number): Array(String(number).utf8)
        case .real(let number): Array(String(number).utf8)
        case .text(let bytes), .blob(let bytes): bytes
        }
    }

    /// Rebuilds a stored value from `typeof(column)` and `hex(column)`, which a raw query selects
    /// because a `String` cannot carry text that is not UTF-8.
    init?(typeName: String, hex: String) {
        guard let bytes = Self.bytes(fromHex: hex) else { return nil }
        switch typeName {
        case "null": self = .null
        case "integer":
            guard let number = Int64(String(decoding: bytes, as: UTF8.self)) else { return nil }
            self = .integer(number)
        case "text": self = .text(bytes)
        case "blob": self = .blob(bytes)
        default: return nil
        }
    }

    // MARK: SQLite's order

    /// SQLite's order of two values, as `ORDER BY` sorts them with the BINARY collation: NULL
    /// first, then integers and reals by value, then text by `memcmp` of its bytes, then blobs by
    /// `memcmp`. Returns -1, 0 or 1. Equal text means equal bytes: `"e\u{301}"` and `"\u{e9}"`
    /// differ.
    public static func sqliteOrder(_ lhs: StressValue, _ rhs: StressValue) -> Int {
        func sign<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : a == b ? 0 : 1 }
        func bytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
            a == b ? 0 : a.lexicographicallyPrecedes(b) ? -1 : 1
        }
        switch (lhs, rhs) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case (.integer(let a), .integer(let b)): return sign(a, b)
        case (.integer(let a), .real(let b)): return compare(integer: a, real: b)
        case (.real(let a), .integer(let b)): return -compare(integer: b, real: a)
        case (.real(let a), .real(let b)): return sign(a, b)
        case (.integer, _), (.real, _): return -1
        case (_, .integer), (_, .real): return 1
        case (.text(let a), .text(let b)): return bytes(a, b)
        case (.text, .blob): return -1
        case (.blob, .text): return 1
        case (.blob(let a), .blob(let b)): return bytes(a, b)
        }
    }

    /// An integer and a real compared exactly (a `Double` conversion would round large integers).
    private static func compare(integer: Int64, real: Double) -> Int {
        if real.isNaN { return 1 }
        if real >= 9_223_372_036_854_775_808.0 { return -1 }
        if real < -9_223_372_036_854_775_808.0 { return 1 }
        let truncated = Int64(real.rounded(.towardZero))
        if integer != truncated { return integer < truncated ? -1 : 1 }
        let fraction = real - real.rounded(.towardZero)
        return fraction > 0 ? -1 : fraction < 0 ? 1 : 0
    }

    // MARK: Text

    /// Readable and unambiguous: integers as they are, text quoted with every non-ASCII scalar escaped (`'e\u{301}'` vs
    /// `'\u{E9}'`), NUL as `\0`; text that is not UTF-8 and blobs as hex.
    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let number): return String(number)
        case .real(let number): return String(number)
        case .text(let bytes):
            guard let string = Self.utf8String(bytes) else {
                return "CAST(x'\(Self.hex(bytes))' AS TEXT)"
            }
            var quoted = "'"
            for scalar in string.unicodeScalars {
                switch scalar {
                case "\0": quoted += "\\0"
                case "'": quoted += "''"
                case "\\": quoted += "\\\\"
                case " "..."~": quoted.unicodeScalars.append(scalar)
                default: quoted += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                }
            }
            return quoted + "'"
        case .blob(let bytes): return "x'\(Self.hex(bytes))'"
        }
    }

    /// `bytes` as a `String` when they are valid UTF-8 (decoding repairs nothing), else `nil`.
    static func utf8String(_ bytes: [UInt8]) -> String? {
        let string = String(decoding: bytes, as: UTF8.self)
        return string.utf8.elementsEqual(bytes) ? string : nil
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    static func bytes(fromHex hex: String) -> [UInt8]? {
        func digit(_ character: UInt8) -> UInt8? {
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
            case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
            case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        let characters = Array(hex.utf8)
        guard characters.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count / 2)
        var index = 0
        while index < characters.count {
            guard let high = digit(characters[index]), let low = digit(characters[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

extension StressValue: Codable {
    /// One string per value, so that child processes report rows exactly (text as hex bytes):
    /// `n`, `i:42`, `r:<bits>`, `t:<hex>`, `b:<hex>`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encode("n")
        case .integer(let number): try container.encode("i:\(number)")
        case .real(let number): try container.encode("r:\(String(number.bitPattern, radix: 16))")
        case .text(let bytes): try container.encode("t:" + Self.hex(bytes))
        case .blob(let bytes): try container.encode("b:" + Self.hex(bytes))
        }
    }

    /// Reads a value written by ``encode(to:)``.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        let body = String(text.dropFirst(2))
        switch text.prefix(2) {
        case "n" where text == "n":
            self = .null
            return
        case "i:":
            if let number = Int64(body) { self = .integer(number); return }
        case "r:":
            if let bits = UInt64(body, radix: 16) { self = .real(Double(bitPattern: bits)); return }
        case "t:":
            if let bytes = Self.bytes(fromHex: body) { self = .text(bytes); return }
        case "b:":
            if let bytes = Self.bytes(fromHex: body) { self = .blob(bytes); return }
        default:
            break
        }
        throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a stress value: \(text)")
    }
}

/// One row of a stress table: its values in the table's column order. Two rows are equal when
/// every value is, byte for byte.
public struct StressRow: Hashable, Sendable, Codable {
    /// The values, in the table's column order.
    public var values: [StressValue]

    /// A row of `values`.
    public init(_ values: [StressValue]) { self.values = values }

    /// The primary key's values.
    func key(in table: StressTable) -> [StressValue] { table.keyColumns.map { values[$0] } }

    /// The row with its column names: `(id: 'a', rank: 2, label: NULL, …)`.
    func describe(in table: StressTable) -> String {
        "(" + zip(table.columns, values).map { "\($0.name): \($1)" }.joined(separator: ", ") + ")"
    }
}
