/// A column of a collection, named in queries: `Column("rank") < 10`,
/// `Column("rank").descending`.
///
/// Comparing a column with a value builds a ``Filter``; the value is always bound as a
/// parameter, never spliced into SQL. Values convert as records store them: `Bool` → 0/1,
/// `Date` → seconds since 1970, `UUID` → upper-case text. (For an enum with a raw value, compare
/// with its `rawValue`.)
public struct Column: Sendable, Hashable, CustomStringConvertible {
    /// The column's name, as in the table (a record's coding key).
    public let name: String

    /// The column named `name`.
    public init(_ name: String) { self.name = name }

    public var description: String { SQLIdentifier.quoted(name) }
}

// MARK: Comparisons

extension Column {
    /// `column = value`; with a NULL value (a nil optional), `column IS NULL`.
    public static func == (column: Column, value: some SQLValueConvertible) -> Filter {
        .comparison(column, .equal, value.sqlValue)
    }

    /// `column <> value`; with a NULL value, `column IS NOT NULL`.
    ///
    /// As in SQL, a record whose column is NULL matches neither `==` nor `!=` a non-NULL value.
    public static func != (column: Column, value: some SQLValueConvertible) -> Filter {
        .comparison(column, .notEqual, value.sqlValue)
    }

    /// `column < value`.
    public static func < (column: Column, value: some SQLValueConvertible) -> Filter {
        .comparison(column, .less, value.sqlValue)
    }

    /// `column <= value`.
    public static func <= (column: Column, value: some SQLValueConvertible) -> Filter {
        .comparison(column, .lessOrEqual, value.sqlValue)
    }

    /// `column > value`.
    public static func > (column: Column, value: some SQLValueConvertible) -> Filter {
        .comparison(column, .greater, value.sqlValue)
    }

    /// `column >= value`.
    public static func >= (column: Column, value: some SQLValueConvertible) -> Filter {
        .comparison(column, .greaterOrEqual, value.sqlValue)
    }

    /// `column IN (values…)`: `Column("rank").in([1, 2, 3])`. An empty list matches nothing.
    public func `in`<Values: Sequence>(_ values: Values) -> Filter where Values.Element: SQLValueConvertible {
        .in(self, values.map(\.sqlValue))
    }

    /// `column LIKE pattern`: `%` matches any run of characters, `_` one character; ASCII
    /// letters match regardless of case (SQLite's rule). With `escape`, that character makes the
    /// next `%`, `_` or itself literal: `Column("title").like("100\\%", escape: "\\")`.
    public func like(_ pattern: String, escape: Character? = nil) -> Filter {
        .like(self, pattern: pattern, escape: escape)
    }

    /// `column IS NULL`.
    public var isNull: Filter { .isNull(self) }

    /// `column IS NOT NULL`.
    public var isNotNull: Filter { .not(.isNull(self)) }
}
