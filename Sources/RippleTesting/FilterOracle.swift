import Foundation
import Ripple

/// A `Filter` evaluated in Swift with SQLite's rules, to check what the store returns: for
/// values of one column type each (integer, real, text with the default BINARY collation, NULL),
/// the answer SQLite gives. Three-valued like SQL: `nil` is "unknown" (a comparison with NULL),
/// and a row matches only when the filter is `true`.
///
/// ```swift
/// let expected = items.filter { FilterOracle.evaluate(filter) { column in value(of: $0, column) } == true }
/// #expect(try collection.filter(filter).fetchAll().map(\.id) == expected.map(\.id))
/// ```
public enum FilterOracle {
    /// A column's type affinity, which SQLite applies to a bound value compared with the column.
    public enum Affinity: Sendable {
        /// TEXT: numbers compared with the column are compared as their text.
        case text
        /// INTEGER, REAL or NUMERIC: text that reads as a number is compared as that number.
        case numeric
        /// BLOB (or none): values compare as they are.
        case none
    }

    /// Whether a row whose column values `value(column)` returns meets `filter`; `affinity`
    /// gives each column's affinity (by default none, right when values and columns share types).
    ///
    /// - Complexity: O(size of the filter), LIKE O(text × pattern) at worst.
    public static func evaluate(_ filter: Filter, _ value: (String) -> SQLValue,
                                affinity: (String) -> Affinity = { _ in .none }) -> Bool? {
        func operand(_ bound: SQLValue, for column: String) -> SQLValue {
            switch (affinity(column), bound) {
            case (.text, .integer(let number)): return .text(String(number))
            case (.text, .real(let number)): return .text(String(number))
            case (.numeric, .text(let text)): return numeric(text) ?? bound
            default: return bound
            }
        }
        switch filter {
        case .comparison(let column, let op, let bound):
            let stored = value(column.name)
            let operand = operand(bound, for: column.name)
            if operand == .null {   // `== nil` / `!= nil` compile to IS NULL / IS NOT NULL
                switch op {
                case .equal: return stored == .null
                case .notEqual: return stored != .null
                default: return nil
                }
            }
            guard let order = compare(stored, operand) else { return nil }
            return op.holds(for: order)
        case .in(let column, let bound):
            let stored = value(column.name)
            let values = bound.map { operand($0, for: column.name) }
            if values.isEmpty { return false }
            if stored == .null { return nil }
            if values.contains(where: { compare(stored, $0) == 0 }) { return true }
            return values.contains(.null) ? nil : false
        case .like(let column, let pattern, let escape):
            guard case .text(let text) = value(column.name) else { return nil }
            return like(Array(text.utf8), Array(pattern.utf8), escape: escape.flatMap { $0.asciiValue })
        case .isNull(let column):
            return value(column.name) == .null
        case .and(let filters):
            let results = filters.map { evaluate($0, value, affinity: affinity) }
            if results.contains(false) { return false }
            return results.contains(nil) ? nil : true
        case .or(let filters):
            let results = filters.map { evaluate($0, value, affinity: affinity) }
            if results.contains(true) { return true }
            return results.contains(nil) ? nil : false
        case .not(let inner):
            return evaluate(inner, value, affinity: affinity).map { !$0 }
        }
    }

    /// The number `text` reads as under NUMERIC affinity (an integer or real literal, optional
    /// surrounding spaces), or `nil` when it stays text.
    static func numeric(_ text: String) -> SQLValue? {
        let trimmed = text.trimmingCharacters(in: .init(charactersIn: " \t\n\r"))
        guard !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (48...57).contains($0) || $0 == 43 || $0 == 45 || $0 == 46 || $0 == 101 || $0 == 69 }) else {
            return nil
        }
        if let integer = Int64(trimmed) { return .integer(integer) }
        if let real = Double(trimmed), real.isFinite { return real == real.rounded() && abs(real) < 9e15 ? .integer(Int64(real)) : .real(real) }
        return nil
    }

    /// SQLite's order of two values: `nil` when either is NULL; numbers before text, text
    /// before blobs; integers and reals compared as numbers; text byte by byte (BINARY).
    public static func compare(_ lhs: SQLValue, _ rhs: SQLValue) -> Int? {
        func sign<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : a == b ? 0 : 1 }
        switch (lhs, rhs) {
        case (.null, _), (_, .null): return nil
        case (.integer(let a), .integer(let b)): return sign(a, b)
        case (.integer(let a), .real(let b)): return sign(Double(a), b)
        case (.real(let a), .integer(let b)): return sign(a, Double(b))
        case (.real(let a), .real(let b)): return sign(a, b)
        case (.text(let a), .text(let b)):
            return a.utf8.elementsEqual(b.utf8) ? 0 : a.utf8.lexicographicallyPrecedes(b.utf8) ? -1 : 1
        case (.blob(let a), .blob(let b)):
            return a == b ? 0 : a.lexicographicallyPrecedes(b) ? -1 : 1
        case (.integer, _), (.real, _): return -1
        case (_, .integer), (_, .real): return 1
        case (.text, .blob): return -1
        case (.blob, .text): return 1
        }
    }

    /// SQLite's LIKE: `%` any run, `_` any one character, ASCII letters case-insensitive,
    /// `escape` making the next pattern character literal (a pattern ending in it matches nothing);
    /// text and pattern read as SQLite reads them (see `like(_:_:escapeCharacter:)`).
    public static func like(_ text: [UInt8], _ pattern: [UInt8], escape: UInt8? = nil) -> Bool {
        like(text, pattern, escapeCharacter: escape.map { [$0] })
    }

    /// SQLite's `LIKE` (case-insensitive for ASCII letters only, `%` any run of characters, `_`
    /// one character, an optional escape character making the next one literal, and a pattern
    /// ending in the escape matching nothing), on both strings read as SQLite reads them: up to
    /// the first NUL byte, characters decoded by SQLite's lenient UTF-8 reader (a lead byte takes
    /// every continuation byte after it; malformed characters read as U+FFFD).
    ///
    /// - Complexity: O(text × pattern) characters.
    static func like(_ text: [UInt8], _ pattern: [UInt8], escapeCharacter escape: [UInt8]?) -> Bool {
        let string = characters(text)
        let symbols = characters(pattern)
        let escapeCharacter = escape.flatMap { characters($0).first }
        enum Token { case literal(UInt32), one, any }
        var tokens: [Token] = []
        var index = 0
        while index < symbols.count {
            let symbol = symbols[index]
            if symbol == escapeCharacter {
                guard index + 1 < symbols.count else { return false }   // escapes nothing: no match
                tokens.append(.literal(symbols[index + 1]))
                index += 2
                continue
            }
            tokens.append(symbol == 0x25 ? .any : symbol == 0x5F ? .one : .literal(symbol))
            index += 1
        }
        func lower(_ c: UInt32) -> UInt32 { (0x41...0x5A).contains(c) ? c + 0x20 : c }
        // matches[t][p]: does string[t...] match tokens[p...]? Filled from the ends.
        var matches = Array(repeating: Array(repeating: false, count: tokens.count + 1), count: string.count + 1)
        matches[string.count][tokens.count] = true
        for t in stride(from: string.count, through: 0, by: -1) {
            for p in stride(from: tokens.count - 1, through: 0, by: -1) {
                switch tokens[p] {
                case .any:
                    matches[t][p] = matches[t][p + 1] || (t < string.count && matches[t + 1][p])
                case .one:
                    matches[t][p] = t < string.count && matches[t + 1][p + 1]
                case .literal(let c):
                    guard t < string.count else { continue }
                    let s = string[t]
                    let equal = c == s || (c < 0x80 && s < 0x80 && lower(c) == lower(s))
                    matches[t][p] = equal && matches[t + 1][p + 1]
                }
            }
        }
        return matches[0][0]
    }

    /// The characters of `bytes` as SQLite's `LIKE` reads them (see ``like(_:_:escapeCharacter:)``).
    static func characters(_ bytes: [UInt8]) -> [UInt32] {
        var result: [UInt32] = []
        var index = 0
        while index < bytes.count, bytes[index] != 0 {
            var c = UInt32(bytes[index])
            index += 1
            if c >= 0xC0 {
                c = leadBits(c)
                while index < bytes.count, bytes[index] & 0xC0 == 0x80 {
                    c = (c &<< 6) &+ UInt32(bytes[index] & 0x3F)
                    index += 1
                }
                if c < 0x80 || c & 0xFFFF_F800 == 0xD800 || c & 0xFFFF_FFFE == 0xFFFE { c = 0xFFFD }
            }
            result.append(c)
        }
        return result
    }

    /// The payload bits of a UTF-8 lead byte ≥ 0xC0, as SQLite's decoding table gives them.
    private static func leadBits(_ byte: UInt32) -> UInt32 {
        switch byte {
        case 0xC0...0xDF: byte & 0x1F
        case 0xE0...0xEF: byte & 0x0F
        case 0xF0...0xF7: byte & 0x07
        case 0xF8...0xFB: byte & 0x03
        case 0xFC...0xFD: byte & 0x01
        default: 0
        }
    }
}

extension ComparisonOperator {
    /// Whether the operator holds for two values whose comparison gave `order` (negative: the
    /// left one is smaller, 0: equal, positive: larger).
    func holds(for order: Int) -> Bool {
        switch self {
        case .equal: order == 0
        case .notEqual: order != 0
        case .less: order < 0
        case .lessOrEqual: order <= 0
        case .greater: order > 0
        case .greaterOrEqual: order >= 0
        }
    }
}
