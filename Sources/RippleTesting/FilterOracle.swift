import Foundation
import Ripple

/// A ``Filter`` evaluated in Swift with SQLite's rules, to check what the store returns: for
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
            switch op {
            case .equal: return order == 0
            case .notEqual: return order != 0
            case .less: return order < 0
            case .lessOrEqual: return order <= 0
            case .greater: return order > 0
            case .greaterOrEqual: return order >= 0
            }
        case .in(let column, let bound):
            let stored = value(column.name)
            let values = bound.map { operand($0, for: column.name) }
            if values.isEmpty { return false }
            if stored == .null { return nil }
            if values.contains(where: { compare(stored, $0) == 0 }) { return true }
            return values.contains(.null) ? nil : false
        case .like(let column, let pattern, let escape):
            guard case .text(let text) = value(column.name) else { return nil }
            // SQLite's LIKE reads both as C strings: each ends at its first NUL.
            func upToNUL(_ string: String) -> [UInt8] { Array(string.utf8.prefix { $0 != 0 }) }
            return like(upToNUL(text), upToNUL(pattern), escape: escape.flatMap { $0.asciiValue })
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
    /// `escape` making the next pattern character literal (a pattern ending in it matches nothing).
    public static func like(_ text: [UInt8], _ pattern: [UInt8], escape: UInt8? = nil) -> Bool {
        func lower(_ byte: UInt8) -> UInt8 { (65...90).contains(byte) ? byte + 32 : byte }
        // One UTF-8 character's length from its first byte.
        func width(_ byte: UInt8) -> Int { byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1 }
        var memo: [Int: Bool] = [:]
        func match(_ t: Int, _ p: Int) -> Bool {
            let key = t &* (pattern.count + 1) &+ p
            if let known = memo[key] { return known }
            let result: Bool
            if p == pattern.count {
                result = t == text.count
            } else if pattern[p] == escape {
                // An escape ending the pattern escapes nothing: SQLite then matches no text.
                guard p + 1 < pattern.count else { memo[key] = false; return false }
                let literal = pattern[p + 1]
                result = t < text.count && lower(text[t]) == lower(literal) && match(t + 1, p + 2)
            } else if pattern[p] == UInt8(ascii: "%") {
                var next = t
                var found = match(next, p + 1)
                while !found && next < text.count {
                    next += width(text[next])
                    found = match(next, p + 1)
                }
                result = found
            } else if pattern[p] == UInt8(ascii: "_") {
                result = t < text.count && match(t + width(text[t]), p + 1)
            } else {
                result = t < text.count && lower(text[t]) == lower(pattern[p]) && match(t + 1, p + 1)
            }
            memo[key] = result
            return result
        }
        return match(0, 0)
    }
}
