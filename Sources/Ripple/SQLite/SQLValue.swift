import Foundation

/// A value as SQLite stores it: one of its five storage classes.
public enum SQLValue: Hashable, Sendable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let value): "\(value)"
        case .real(let value): "\(value)"
        case .text(let value): "'\(value)'"
        case .blob(let bytes): "<\(bytes.count) bytes>"
        }
    }

    /// The storage class's name, as SQLite's `typeof()` gives it.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "blob"
        }
    }
}

/// A Swift value that is stored as one SQLite value, and read back from one.
///
/// Conforming: `Int`, `Int64`, `Int32`, `Double`, `Float`, `String`, `Bool` (0/1), `Data` and
/// `[UInt8]` (blob), `Date` (seconds since 1970: a real before 1970, exact decimal text from 1970
/// on), `UUID` (text), `URL` (its absolute string), `Decimal` (its decimal text), and `Optional`
/// of these. Each converts as a record stores it (see <doc:StoredValues>).
public protocol SQLValueConvertible: Sendable {
    /// The value to store.
    var sqlValue: SQLValue { get }
    /// Reads a stored value, or returns `nil` when it cannot represent one.
    init?(sqlValue: SQLValue)
}

extension SQLValue: SQLValueConvertible {
    public var sqlValue: SQLValue { self }
    public init?(sqlValue: SQLValue) { self = sqlValue }
}

extension Int64: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(self) }
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .integer(let value): self = value
        case .real(let value) where value.rounded() == value && abs(value) < 9.2e18: self = Int64(value)
        default: return nil
        }
    }
}

extension Int: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
    public init?(sqlValue: SQLValue) {
        guard let value = Int64(sqlValue: sqlValue) else { return nil }
        self = Int(value)
    }
}

extension Int32: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
    public init?(sqlValue: SQLValue) {
        guard let value = Int64(sqlValue: sqlValue), let exact = Int32(exactly: value) else { return nil }
        self = exact
    }
}

extension Double: SQLValueConvertible {
    public var sqlValue: SQLValue { .real(self) }
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .real(let value): self = value
        case .integer(let value): self = Double(value)
        default: return nil
        }
    }
}

extension Float: SQLValueConvertible {
    public var sqlValue: SQLValue { .real(Double(self)) }
    public init?(sqlValue: SQLValue) {
        guard let value = Double(sqlValue: sqlValue) else { return nil }
        self = Float(value)
    }
}

extension String: SQLValueConvertible {
    public var sqlValue: SQLValue { .text(self) }
    public init?(sqlValue: SQLValue) {
        guard case .text(let value) = sqlValue else { return nil }
        self = value
    }
}

extension Bool: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
    public init?(sqlValue: SQLValue) {
        guard case .integer(let value) = sqlValue else { return nil }
        self = value != 0
    }
}

extension Data: SQLValueConvertible {
    public var sqlValue: SQLValue { .blob([UInt8](self)) }
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .blob(let bytes): self = Data(bytes)
        default: return nil
        }
    }
}

extension [UInt8]: SQLValueConvertible {
    public var sqlValue: SQLValue { .blob(self) }
    public init?(sqlValue: SQLValue) {
        guard case .blob(let bytes) = sqlValue else { return nil }
        self = bytes
    }
}

extension Date: SQLValueConvertible {
    /// The number of seconds since 1970-01-01 00:00:00 UTC, exactly: a real before 1970, decimal
    /// text from 1970 on (`001748779496.12345678901234567890125`, the integer part in 12
    /// digits). A `REAL` column converts the text to its real, as earlier versions stored every
    /// date. See <doc:StoredValues>.
    ///
    /// A date without a stored form (NaN, or from the year 33658 on) gives the real
    /// `timeIntervalSince1970`, which compares with stored dates as a number (before every date
    /// from 1970 on); a record holding one is refused.
    public var sqlValue: SQLValue {
        (try? DateStorage.sqlValue(self)) ?? .real(timeIntervalSince1970)
    }

    /// Reads a number of seconds since 1970, or the decimal text of one.
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .real(let seconds): self = DateStorage.date(seconds: seconds)
        case .integer(let seconds): self = DateStorage.date(seconds: Double(seconds))
        case .text(var text):
            guard let date = text.withUTF8(DateStorage.date(text:)) else { return nil }
            self = date
        case .null, .blob: return nil
        }
    }
}

extension Decimal: SQLValueConvertible {
    /// Stored as its decimal text (`-12.5`): `==` in a filter is `==` on the values, but `<` and
    /// ordering compare the text, not the numbers. NaN gives NULL.
    public var sqlValue: SQLValue { (try? DecimalText.text(of: self)).map(SQLValue.text) ?? .null }

    /// Reads decimal text, an integer or a real (as the nearest decimal of its Double).
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .text(let text): guard let value = DecimalText.decimal(text) else { return nil }; self = value
        case .integer(let value): self = Decimal(value)
        case .real(let value) where value.isFinite: self = Decimal(value)
        default: return nil
        }
    }
}

extension URL: SQLValueConvertible {
    /// Stored as its absolute string (a URL relative to a base reads back as its `absoluteURL`).
    public var sqlValue: SQLValue { .text(absoluteString) }

    public init?(sqlValue: SQLValue) {
        guard case .text(let text) = sqlValue, let url = URL(string: text) else { return nil }
        self = url
    }
}

extension UUID: SQLValueConvertible {
    /// Stored as its canonical text (`E621E1F8-C36C-495A-93FC-0C247A3E6E5F`).
    public var sqlValue: SQLValue { .text(uuidString) }
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .text(let text): guard let uuid = UUID(uuidString: text) else { return nil }; self = uuid
        case .blob(let bytes) where bytes.count == 16:
            self = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
        default: return nil
        }
    }
}

extension Optional: SQLValueConvertible where Wrapped: SQLValueConvertible {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
    public init?(sqlValue: SQLValue) {
        if case .null = sqlValue { self = .none; return }
        guard let value = Wrapped(sqlValue: sqlValue) else { return nil }
        self = .some(value)
    }
}
