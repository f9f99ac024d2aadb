/// A column of a collection, named in queries: `Column("rank") < 10`,
/// `Column("rank").descending`.
///
/// Comparing a column with a value builds a ``Filter``; the value is always bound as a
/// parameter, never spliced into SQL. Values convert as records store them (see
/// <doc:StoredValues>), so a filter finds exactly the records holding the value: `Bool` → 0/1;
/// `Date` → its exact number of seconds since 1970 (a real before 1970, decimal text from 1970
/// on); `UUID` → upper-case text; `URL` → its absolute string; `Decimal` → its decimal text.
/// (For an enum with a raw value, compare with its `rawValue`.)
///
/// Comparisons and orders follow SQLite's rules for what is stored, which agree with Swift's
/// `==` and `<` for integers, `Double`, `Float`, `Date`, `UUID` (by its bytes) and `Bool`. Text
/// compares by Unicode scalars (its UTF-8 bytes): `==` does not equate canonically equivalent
/// spellings (`"\u{E9}"` and `"e\u{301}"`), and for text in normalization form C the order is
/// Swift's. A `Decimal` orders by its text, not by its value; nested values (JSON) by their JSON
/// text.
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
