import Ripple

/// A condition on the rows of one stress table: what a collection query's `Filter` says and
/// what a raw query's `WHERE` says, in a form that child processes can report and that the
/// reference evaluator runs with SQLite's rules (affinity, three-valued NULL logic, LIKE).
///
/// Operands are values a Swift ``SQLValue`` can carry (text that is valid UTF-8); the rows they
/// are evaluated on may hold any bytes.
indirect enum StressPredicate: Hashable, Sendable, Codable {
    case compare(column: Int, ComparisonOperator, StressValue)
    case isIn(column: Int, [StressValue])
    case like(column: Int, pattern: String, escape: String?)
    case isNull(column: Int)
    case and([StressPredicate])
    case or([StressPredicate])
    case not(StressPredicate)

    // MARK: As a collection filter

    /// The predicate as a Ripple `Filter`, built with the public operators as an app would.
    func filter(for table: StressTable) -> Filter {
        func column(_ index: Int) -> Column { Column(table.columns[index].name) }
        func bound(_ value: StressValue) -> SQLValue { value.sqlValue ?? .null }
        switch self {
        case .compare(let index, let op, let value):
            let operand = bound(value)
            switch op {
            case .equal: return column(index) == operand
            case .notEqual: return column(index) != operand
            case .less: return column(index) < operand
            case .lessOrEqual: return column(index) <= operand
            case .greater: return column(index) > operand
            case .greaterOrEqual: return column(index) >= operand
            }
        case .isIn(let index, let values):
            return column(index).in(values.map(bound))
        case .like(let index, let pattern, let escape):
            return column(index).like(pattern, escape: escape?.first)
        case .isNull(let index):
            return column(index).isNull
        case .and(let parts):
            return parts.dropFirst().reduce(parts.first?.filter(for: table) ?? .and([])) { $0 && $1.filter(for: table) }
        case .or(let parts):
            return parts.dropFirst().reduce(parts.first?.filter(for: table) ?? .or([])) { $0 || $1.filter(for: table) }
        case .not(let inner):
            return !inner.filter(for: table)
        }
    }

    // MARK: As SQL

    /// The predicate as SQL with `?` parameters, appending their values to `arguments`.
    /// `column = NULL` and `column <> NULL` read as `IS NULL` / `IS NOT NULL`, as Ripple compiles them.
    func sql(for table: StressTable, arguments: inout [SQLValue]) -> String {
        func column(_ index: Int) -> String { "\"\(table.columns[index].name)\"" }
        switch self {
        case .compare(let index, let op, let value):
            switch (op, value) {
            case (.equal, .null): return "\(column(index)) IS NULL"
            case (.notEqual, .null): return "\(column(index)) IS NOT NULL"
            default:
                arguments.append(value.sqlValue ?? .null)
                return "\(column(index)) \(op.rawValue) ?"
            }
        case .isIn(let index, let values):
            arguments += values.map { $0.sqlValue ?? .null }
            return "\(column(index)) IN (" + values.map { _ in "?" }.joined(separator: ", ") + ")"
        case .like(let index, let pattern, let escape):
            arguments.append(.text(pattern))
            guard let escape else { return "\(column(index)) LIKE ?" }
            arguments.append(.text(escape))
            return "\(column(index)) LIKE ? ESCAPE ?"
        case .isNull(let index):
            return "\(column(index)) IS NULL"
        case .and(let parts):
            if parts.isEmpty { return "1" }
            return "(" + parts.map { $0.sql(for: table, arguments: &arguments) }.joined(separator: " AND ") + ")"
        case .or(let parts):
            if parts.isEmpty { return "0" }
            return "(" + parts.map { $0.sql(for: table, arguments: &arguments) }.joined(separator: " OR ") + ")"
        case .not(let inner):
            return "NOT (" + inner.sql(for: table, arguments: &arguments) + ")"
        }
    }

    /// Readably, with the values inline (for reports only; queries always bind them).
    func describe(in table: StressTable) -> String {
        func column(_ index: Int) -> String { table.columns[index].name }
        switch self {
        case .compare(let index, let op, let value):
            switch (op, value) {
            case (.equal, .null): return "\(column(index)) IS NULL"
            case (.notEqual, .null): return "\(column(index)) IS NOT NULL"
            default: return "\(column(index)) \(op.rawValue) \(value)"
            }
        case .isIn(let index, let values):
            return "\(column(index)) IN (" + values.map(\.description).joined(separator: ", ") + ")"
        case .like(let index, let pattern, let escape):
            return "\(column(index)) LIKE \(StressValue.string(pattern))" + (escape.map { " ESCAPE \(StressValue.string($0))" } ?? "")
        case .isNull(let index):
            return "\(column(index)) IS NULL"
        case .and(let parts):
            return parts.isEmpty ? "TRUE" : "(" + parts.map { $0.describe(in: table) }.joined(separator: " AND ") + ")"
        case .or(let parts):
            return parts.isEmpty ? "FALSE" : "(" + parts.map { $0.describe(in: table) }.joined(separator: " OR ") + ")"
        case .not(let inner):
            return "NOT " + inner.describe(in: table)
        }
    }

    // MARK: The reference evaluator

    /// Whether `row` meets the predicate, by SQLite's rules: `true`, `false`, or `nil` for
    /// unknown (a comparison with NULL). A row matches a `WHERE` only when this is `true`.
    func evaluate(_ row: StressRow, in table: StressTable) -> Bool? {
        switch self {
        case .compare(let index, let op, let value):
            let stored = row.values[index]
            if value == .null {   // `== nil` / `!= nil` are IS NULL / IS NOT NULL
                switch op {
                case .equal: return stored.isNull
                case .notEqual: return !stored.isNull
                default: return nil
                }
            }
            if stored.isNull { return nil }
            let order = StressValue.sqliteOrder(stored, Self.apply(table.columns[index].affinity, to: value))
            return op.holds(for: order)
        case .isIn(let index, let values):
            // An empty list is false whatever the left side, NULL included (SQLite's rule).
            if values.isEmpty { return false }
            let stored = row.values[index]
            if stored.isNull { return nil }
            let affinity = table.columns[index].affinity
            if values.contains(where: { !$0.isNull && StressValue.sqliteOrder(stored, Self.apply(affinity, to: $0)) == 0 }) {
                return true
            }
            return values.contains(.null) ? nil : false
        case .like(let index, let pattern, let escape):
            let text: [UInt8]
            switch row.values[index] {
            case .null: return nil
            case .integer(let number): text = Array(String(number).utf8)
            case .real(let number): text = Array(String(number).utf8)
            case .text(let bytes), .blob(let bytes): text = bytes
            }
            return FilterOracle.like(text, Array(pattern.utf8), escapeCharacter: escape.map { Array($0.utf8) })
        case .isNull(let index):
            return row.values[index].isNull
        case .and(let parts):
            var unknown = false
            for part in parts {
                switch part.evaluate(row, in: table) {
                case false?: return false
                case nil: unknown = true
                case true?: break
                }
            }
            return unknown ? nil : true
        case .or(let parts):
            var unknown = false
            for part in parts {
                switch part.evaluate(row, in: table) {
                case true?: return true
                case nil: unknown = true
                case false?: break
                }
            }
            return unknown ? nil : false
        case .not(let inner):
            return inner.evaluate(row, in: table).map { !$0 }
        }
    }

    /// The operand as SQLite compares it with a column of `affinity` (a bound parameter has no
    /// affinity of its own, so the column's applies): text that reads as a number becomes that
    /// number for an INTEGER column; a number becomes its text for a TEXT column.
    static func apply(_ affinity: StressAffinity, to value: StressValue) -> StressValue {
        switch (affinity, value) {
        case (.integer, .text(let bytes)): return numeric(bytes) ?? value
        case (.text, .integer(let number)): return .string(String(number))
        case (.text, .real(let number)): return .string(String(number))
        default: return value
        }
    }

    /// The number that `bytes` read as under numeric affinity (a decimal integer or real literal,
    /// surrounding spaces allowed), or `nil` when it stays text.
    static func numeric(_ bytes: [UInt8]) -> StressValue? {
        guard let text = StressValue.utf8String(bytes) else { return nil }
        let trimmed = text.trimmingCharacters(in: [" ", "\t", "\n", "\r"])
        let allowed = Set("0123456789+-.eE".utf8)
        guard !trimmed.isEmpty, trimmed.utf8.allSatisfy(allowed.contains),
              trimmed.utf8.contains(where: { (48...57).contains($0) }) else { return nil }
        if let integer = Int64(trimmed) { return .integer(integer) }
        guard let real = Double(trimmed), real.isFinite else { return nil }
        if real == real.rounded(), abs(real) < 9.2e18 { return .integer(Int64(real)) }
        return .real(real)
    }
}
