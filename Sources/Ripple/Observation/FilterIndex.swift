import Foundation
import RippleSQLite

/// A value as SQLite orders and compares it, for the terms of a filter the index can decide
/// without SQLite: numbers (an integral real is the integer: `1 = 1.0`), then text, then blobs
/// (both by their bytes, as the BINARY collation does). NULL is not a value here: it matches no
/// comparison.
enum IndexedValue: Hashable, Comparable, Sendable {
    case integer(Int64)
    /// Only reals that are not integers in the range of `Int64` (those are ``integer(_:)``).
    case real(Double)
    case text([UInt8])
    case blob([UInt8])

    /// A constant of a filter; `nil` for NULL and NaN.
    init?(_ value: SQLValue) {
        switch value {
        case .null: return nil
        case .integer(let integer): self = .integer(integer)
        case .real(let real): self.init(real: real)
        case .text(let text): self = .text(Array(text.utf8))
        case .blob(let bytes): self = .blob(bytes)
        }
    }

    init?(real: Double) {
        guard !real.isNaN else { return nil }
        if real.rounded() == real, real >= -9_223_372_036_854_775_808, real < 9_223_372_036_854_775_808 {
            self = .integer(Int64(real))
        } else {
            self = .real(real)
        }
    }

    /// Column `column` of the current row of `statement`, as stored; `nil` for NULL.
    init?(column: Int32, of statement: OpaquePointer) {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: self = .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: self.init(real: sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            let bytes = sqlite3_column_text(statement, column)
            let count = Int(sqlite3_column_bytes(statement, column))
            self = .text(bytes.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
        case SQLITE_BLOB:
            let bytes = sqlite3_column_blob(statement, column)
            let count = Int(sqlite3_column_bytes(statement, column))
            self = .blob(bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        default: return nil
        }
    }

    private var rank: Int {
        switch self {
        case .integer, .real: 0
        case .text: 1
        case .blob: 2
        }
    }

    var isNumber: Bool { rank == 0 }

    static func < (lhs: IndexedValue, rhs: IndexedValue) -> Bool {
        switch (lhs, rhs) {
        case (.integer(let a), .integer(let b)): return a < b
        case (.real(let a), .real(let b)): return a < b
        case (.integer(let a), .real(let b)): return Self.integer(a, isBelow: b)
        case (.real(let a), .integer(let b)): return !Self.integer(b, isBelow: a)   // never equal: a is not integral
        case (.text(let a), .text(let b)), (.blob(let a), .blob(let b)): return a.lexicographicallyPrecedes(b)
        default: return lhs.rank < rhs.rank
        }
    }

    /// Whether `integer < real`, exactly, for a real that is not an integer in `Int64`'s range.
    private static func integer(_ integer: Int64, isBelow real: Double) -> Bool {
        if real >= 9_223_372_036_854_775_808 { return true }
        if real < -9_223_372_036_854_775_808 { return false }
        return integer <= Int64(real.rounded(.down))
    }
}

/// What a column does to comparisons with a constant: its affinity and collation, from SQLite.
struct ColumnComparison: Sendable {
    enum Affinity: Sendable { case integer, real, numeric, text, blob }
    let affinity: Affinity
    /// Whether SQLite compares the column's text as the index does, by its UTF-8 bytes: the
    /// collation is BINARY and the database is in UTF-8 (BINARY compares a UTF-16 database's
    /// text by its UTF-16 bytes, another order).
    let comparesUTF8Bytes: Bool

    /// The column's, or `nil` when SQLite does not know it.
    init?(table: String, column: String, in db: Database) {
        var declared: UnsafePointer<CChar>?
        var collation: UnsafePointer<CChar>?
        var notNull: Int32 = 0, primaryKey: Int32 = 0, autoIncrement: Int32 = 0
        guard sqlite3_table_column_metadata(db.handle, "main", table, column, &declared, &collation,
                                            &notNull, &primaryKey, &autoIncrement) == SQLITE_OK else { return nil }
        // SQLite's rules for a column's affinity, as the collection's table check reads them
        // (`ANY` keeps values as given only in a STRICT table).
        let strict = (try? db.fetchValue("SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = ? COLLATE NOCASE",
                                         [table], as: Int.self)) == 1
        switch DeclaredTable.affinity(of: declared.map { String(cString: $0) } ?? "", strict: strict) {
        case nil: affinity = .blob
        case "INTEGER": affinity = .integer
        case "TEXT": affinity = .text
        case "REAL": affinity = .real
        default: affinity = .numeric
        }
        comparesUTF8Bytes = db.isUTF8 && (collation.map { String(cString: $0).uppercased() == "BINARY" } ?? true)
    }

    /// Whether `column <op> constant` compares the stored value with the constant as it is: no
    /// affinity converts the constant, and text is compared by its bytes.
    func comparesAsIs(_ constant: IndexedValue) -> Bool {
        switch affinity {
        case .integer, .real, .numeric: constant.isNumber   // a text constant would be converted
        case .text: !constant.isNumber && comparesUTF8Bytes          // a number would become text
        case .blob: constant.isNumber || comparesUTF8Bytes
        }
    }
}

/// One end of an interval of values.
struct IntervalBound: Sendable {
    var value: IndexedValue
    var inclusive: Bool
}

/// The values a column may hold for a range filter (`rank >= 10 AND rank < 20`); `nil` bounds are
/// open.
struct ValueInterval: Sendable {
    var lower: IntervalBound?
    var upper: IntervalBound?

    func contains(_ value: IndexedValue) -> Bool {
        if let lower, value < lower.value || (!lower.inclusive && value == lower.value) { return false }
        if let upper, upper.value < value || (!upper.inclusive && value == upper.value) { return false }
        return true
    }

    /// Narrows to also satisfy `column <op> value`.
    mutating func narrow(_ op: ComparisonOperator, _ value: IndexedValue) {
        switch op {
        case .greater, .greaterOrEqual:
            let bound = IntervalBound(value: value, inclusive: op == .greaterOrEqual)
            if let lower, lower.value > value || (lower.value == value && !lower.inclusive) { break }
            lower = bound
        case .less, .lessOrEqual:
            let bound = IntervalBound(value: value, inclusive: op == .lessOrEqual)
            if let upper, upper.value < value || (upper.value == value && !upper.inclusive) { break }
            upper = bound
        case .equal, .notEqual:
            break
        }
    }
}

/// How the index finds the rows a filter may match.
enum FilterPlan: Sendable {
    /// No filter: every row.
    case everyRow
    /// Rows whose `column` equals one of `values`; `exact` when that is the whole filter.
    case equality(column: String, values: [IndexedValue], exact: Bool)
    /// Rows whose `column` lies in `interval`; `exact` when that is the whole filter.
    case interval(column: String, ValueInterval, exact: Bool)
    /// Only SQLite can tell (LIKE, OR, NOT, IS NULL, `<>`, a collation, a conversion).
    case unindexed

    /// The plan of `filter` on `table`; `comparison` says what a column does to comparisons.
    static func of(_ filter: Filter?, comparison: (String) -> ColumnComparison?) -> FilterPlan {
        guard let filter else { return .everyRow }
        let terms: [Filter]
        if case .and(let list) = filter { terms = list } else { terms = [filter] }
        var equality: (column: String, values: [IndexedValue])?
        var intervals: [String: ValueInterval] = [:]
        var rangeTerms: [String: Int] = [:]
        var unused = 0
        for term in terms {
            switch term {
            case .comparison(let column, .equal, let value) where equality == nil:
                guard let constant = IndexedValue(value), comparison(column.name)?.comparesAsIs(constant) == true else {
                    unused += 1
                    continue
                }
                equality = (column.name, [constant])
            case .in(let column, let values) where equality == nil:
                // NULLs in the list match nothing (`x IN (1, NULL)` is NULL when x is not 1).
                let constants = values.compactMap(IndexedValue.init)
                guard let rules = comparison(column.name), constants.allSatisfy(rules.comparesAsIs) else {
                    unused += 1
                    continue
                }
                equality = (column.name, constants)
            case .comparison(let column, let op, let value) where op != .equal && op != .notEqual:
                guard let constant = IndexedValue(value), comparison(column.name)?.comparesAsIs(constant) == true else {
                    unused += 1
                    continue
                }
                intervals[column.name, default: ValueInterval()].narrow(op, constant)
                rangeTerms[column.name, default: 0] += 1
            default:
                unused += 1
            }
        }
        if let equality {
            let exact = terms.count == 1
            return .equality(column: equality.column, values: Array(Set(equality.values)), exact: exact)
        }
        // The column with the most range terms (a two-sided range beats a one-sided one).
        if let (column, count) = rangeTerms.max(by: { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }) {
            return .interval(column: column, intervals[column]!, exact: unused == 0 && count == terms.count)
        }
        return .unindexed
    }
}

/// Intervals of one column, found by the values they contain ("stabbing"): sorted by lower
/// bound, with the greatest upper bound of each node of a segment tree over that order, so that
/// a value visits only the nodes that may hold an interval containing it.
///
/// - Complexity: building O(n log n); a value's intervals in O(log n + k log n) for k found.
struct IntervalIndex<Member: Sendable>: Sendable {
    private var entries: [(interval: ValueInterval, member: Member)] = []
    /// Per node, the greatest upper bound below it (`nil`: unbounded).
    private var maxUpper: [IntervalBound?] = []

    init(_ members: [(ValueInterval, Member)]) {
        entries = members.map { (interval: $0.0, member: $0.1) }.sorted { a, b in
            switch (a.interval.lower, b.interval.lower) {
            case (nil, nil): false
            case (nil, _): true
            case (_, nil): false
            case (let x?, let y?): x.value < y.value
            }
        }
        guard !entries.isEmpty else { return }
        maxUpper = Array(repeating: nil, count: 4 * entries.count)
        build(node: 1, entries.startIndex, entries.endIndex)
    }

    private static func greater(_ a: IntervalBound?, _ b: IntervalBound?) -> IntervalBound? {
        guard let a, let b else { return nil }
        if a.value == b.value { return a.inclusive ? a : b }
        return a.value < b.value ? b : a
    }

    private mutating func build(node: Int, _ start: Int, _ end: Int) {
        if end - start == 1 {
            maxUpper[node] = entries[start].interval.upper
            return
        }
        let middle = (start + end) / 2
        build(node: 2 * node, start, middle)
        build(node: 2 * node + 1, middle, end)
        maxUpper[node] = Self.greater(maxUpper[2 * node], maxUpper[2 * node + 1])
    }

    /// The members whose interval contains `value`.
    func members(containing value: IndexedValue, into found: inout [Member]) {
        guard !entries.isEmpty else { return }
        // Entries past `limit` begin above `value`.
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if let lower = entries[middle].interval.lower, value < lower.value { high = middle } else { low = middle + 1 }
        }
        visit(node: 1, 0, entries.count, limit: low, value: value, into: &found)
    }

    private func visit(node: Int, _ start: Int, _ end: Int, limit: Int, value: IndexedValue, into found: inout [Member]) {
        guard start < limit else { return }
        if let upper = maxUpper[node], upper.value < value || (!upper.inclusive && upper.value == value) { return }
        if end - start == 1 {
            if entries[start].interval.contains(value) { found.append(entries[start].member) }
            return
        }
        let middle = (start + end) / 2
        visit(node: 2 * node, start, middle, limit: limit, value: value, into: &found)
        visit(node: 2 * node + 1, middle, end, limit: limit, value: value, into: &found)
    }
}
