/// A column to sort by, and the direction: `Column("rank").descending`.
public struct ColumnOrdering: Sendable, Hashable {
    /// The column.
    public let column: Column
    /// Whether larger values come first.
    public let isDescending: Bool

    /// Sorting by `column`, ascending unless `descending`.
    public init(_ column: Column, descending: Bool = false) {
        self.column = column
        self.isDescending = descending
    }
}

/// What `order(by:)` accepts: a ``Column`` (ascending) or a
/// ``ColumnOrdering``.
public protocol OrderingTerm: Sendable {
    /// The ordering this term stands for.
    var ordering: ColumnOrdering { get }
}

extension ColumnOrdering: OrderingTerm {
    public var ordering: ColumnOrdering { self }
}

extension Column: OrderingTerm {
    /// Ascending order on this column.
    public var ordering: ColumnOrdering { ColumnOrdering(self) }

    /// Ascending order on this column (smallest first; NULL before any value, as in SQLite).
    public var ascending: ColumnOrdering { ColumnOrdering(self) }

    /// Descending order on this column (largest first; NULL last).
    public var descending: ColumnOrdering { ColumnOrdering(self, descending: true) }
}
