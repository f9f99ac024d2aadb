extension FilterDescription {
    /// `column` is among the values of `selecting` in the rows of `table` that `filter` selects
    /// (and the user may read): SQL's `column IN (SELECT selecting FROM table WHERE filter)`.
    ///
    /// ```swift
    /// // The todos of the projects Alice is a member of.
    /// let filter = FilterDescription.column("project_id", in: "members", selecting: "project_id",
    ///                                       where: .compare(column: "user_id", op: .equal, value: .text("alice")))
    /// ```
    public static func column(_ column: String, in table: String, selecting: String,
                              where filter: FilterDescription? = nil) -> FilterDescription {
        .inQuery(column: column, query: SubqueryDescription(table: table, column: selecting, filter: filter))
    }

    /// Some row of `table` that `filter` selects (and the user may read) relates to this one:
    /// `on` maps this table's columns to `table`'s (SQL's correlated `EXISTS`).
    ///
    /// ```swift
    /// // The todos that have a flagged comment.
    /// let filter = FilterDescription.exists("comments", on: ["id": "todo_id"],
    ///                                       where: .compare(column: "flagged", op: .equal, value: .bool(true)))
    /// ```
    public static func exists(_ table: String, on: [String: String], where filter: FilterDescription? = nil) -> FilterDescription {
        .exists(ExistsDescription(table: table, on: on, filter: filter))
    }

    /// The tables this filter's sub-queries and `exists` read, nested ones included, each once,
    /// in the order they first appear.
    public var relatedTables: [String] {
        var tables: [String] = []
        func visit(_ filter: FilterDescription) {
            switch filter {
            case .compare, .isNull, .isNotNull, .isIn, .like: break
            case .inQuery(_, let query):
                if !tables.contains(query.table) { tables.append(query.table) }
                query.filter.map(visit)
            case .exists(let exists):
                if !tables.contains(exists.table) { tables.append(exists.table) }
                exists.filter.map(visit)
            case .and(let terms), .or(let terms): terms.forEach(visit)
            case .not(let term): visit(term)
            }
        }
        visit(self)
        return tables
    }
}

extension QueryDescription {
    /// This query with `filter` ANDed into its filter: to add a relational filter (``FilterDescription/column(_:in:selecting:where:)``,
    /// ``FilterDescription/exists(_:on:where:)``) to a query described another way.
    public func filtered(by filter: FilterDescription) -> QueryDescription {
        var query = self
        query.filter = self.filter.map { .and([$0, filter]) } ?? filter
        return query
    }
}
