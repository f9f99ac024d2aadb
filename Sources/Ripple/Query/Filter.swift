/// A condition on a collection's records, compiled to an SQL `WHERE` clause with every value a
/// bound parameter. Build one with ``Column``'s operators and combine with `&&`, `||` and `!`:
///
/// ```swift
/// let filter = Column("done") == false && (Column("rank") < 10 || Column("tags").like("%urgent%"))
/// ```
///
/// Filters follow SQL's rules for NULL: a comparison with a NULL column is neither true nor
/// false, so such a record matches neither `Column("due") < date` nor `!(Column("due") < date)`.
/// Test NULL with ``Column/isNull`` and ``Column/isNotNull`` (comparing `==` or `!=` with a nil
/// optional, such as `Column("due") == Date?.none`, compiles to `IS NULL` / `IS NOT NULL` too).
public indirect enum Filter: Sendable, Hashable {
    /// `column op value`.
    case comparison(Column, ComparisonOperator, SQLValue)
    /// `column IN (values…)`.
    case `in`(Column, [SQLValue])
    /// `column LIKE pattern [ESCAPE escape]`.
    case like(Column, pattern: String, escape: Character?)
    /// `column IS NULL`.
    case isNull(Column)
    /// Every filter holds (true when empty).
    case and([Filter])
    /// At least one filter holds (false when empty).
    case or([Filter])
    /// The filter does not hold.
    case not(Filter)

    /// Both filters hold.
    public static func && (lhs: Filter, rhs: Filter) -> Filter {
        switch (lhs, rhs) {
        case (.and(let left), .and(let right)): .and(left + right)
        case (.and(let left), _): .and(left + [rhs])
        case (_, .and(let right)): .and([lhs] + right)
        default: .and([lhs, rhs])
        }
    }

    /// At least one of the filters holds.
    public static func || (lhs: Filter, rhs: Filter) -> Filter {
        switch (lhs, rhs) {
        case (.or(let left), .or(let right)): .or(left + right)
        case (.or(let left), _): .or(left + [rhs])
        case (_, .or(let right)): .or([lhs] + right)
        default: .or([lhs, rhs])
        }
    }

    /// The filter does not hold.
    public static prefix func ! (filter: Filter) -> Filter {
        if case .not(let inner) = filter { return inner }
        return .not(filter)
    }

    /// Every column the filter names.
    var columns: [Column] {
        switch self {
        case .comparison(let column, _, _), .in(let column, _), .like(let column, _, _), .isNull(let column): [column]
        case .and(let filters), .or(let filters): filters.flatMap(\.columns)
        case .not(let filter): filter.columns
        }
    }

    /// Whether the filter has an `IN` list (whose SQL varies with the list's length).
    var hasInList: Bool {
        switch self {
        case .in: true
        case .comparison, .like, .isNull: false
        case .and(let filters), .or(let filters): filters.contains(where: \.hasInList)
        case .not(let filter): filter.hasInList
        }
    }
}

/// A comparison operator of ``Filter/comparison(_:_:_:)`` (coded as its SQL spelling).
public enum ComparisonOperator: String, Sendable, Hashable, Codable, CaseIterable {
    case equal = "="
    case notEqual = "<>"
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
}
