extension RecordQuery {
    /// The query's `SELECT` statement and arguments.
    ///
    /// ```swift
    /// let compiled = try todos.filter(Column("rank") < 10).limit(5).compiled()
    /// // compiled.sql: SELECT "id", … FROM "main"."todos" WHERE "rank" < ? LIMIT ? OFFSET ?
    /// // compiled.arguments: [10, 5, 0]
    /// ```
    ///
    /// - Throws: ``StoreError`` with kind ``StoreError/Kind/invalidQuery`` for an unknown column
    ///   or a negative limit or offset.
    public func compiled() throws(StoreError) -> CompiledQuery {
        var builder = SQLBuilder(schema: collection.schema)
        builder.sql = collection.schema.selectAllSQL
        try builder.appendWhere(filter)
        try builder.appendOrder(orderings)
        try builder.appendWindow(limit: limit, offset: offset)
        return CompiledQuery(sql: builder.sql, arguments: builder.arguments)
    }

    /// The query's `SELECT count(*)` statement and arguments.
    func compiledCount() throws(StoreError) -> CompiledQuery {
        var builder = SQLBuilder(schema: collection.schema)
        if limit == nil && offset == 0 {
            builder.sql = collection.schema.countSQL
            try builder.appendWhere(filter)
        } else {
            builder.sql = "SELECT count(*) FROM (SELECT 1 FROM \(collection.schema.quotedTable)"
            try builder.appendWhere(filter)
            try builder.appendWindow(limit: limit, offset: offset)
            builder.sql += ")"
        }
        return CompiledQuery(sql: builder.sql, arguments: builder.arguments)
    }

    /// The query's `DELETE` statement and arguments.
    func compiledDelete() throws(StoreError) -> CompiledQuery {
        var builder = SQLBuilder(schema: collection.schema)
        let schema = collection.schema
        if limit == nil && offset == 0 && orderings.isEmpty {
            builder.sql = "DELETE FROM \(schema.quotedTable)"
            try builder.appendWhere(filter)
        } else {
            let key = SQLIdentifier.quoted(schema.primaryKey)
            builder.sql = "DELETE FROM \(schema.quotedTable) WHERE \(key) IN (SELECT \(key) FROM \(schema.quotedTable)"
            try builder.appendWhere(filter)
            try builder.appendOrder(orderings)
            try builder.appendWindow(limit: limit, offset: offset)
            builder.sql += ")"
        }
        return CompiledQuery(sql: builder.sql, arguments: builder.arguments)
    }
}

/// Builds SQL text with `?` parameters from a query's parts; identifiers are checked against the
/// collection's columns and quoted.
struct SQLBuilder {
    let schema: CollectionSchema
    var sql = ""
    var arguments: [SQLValue] = []

    init(schema: CollectionSchema) { self.schema = schema }

    mutating func appendWhere(_ filter: Filter?) throws(StoreError) {
        guard let filter else { return }
        sql += " WHERE "
        try append(filter)
    }

    /// Appends `filter` as a bare condition (no `WHERE`).
    mutating func appendCondition(_ filter: Filter) throws(StoreError) {
        try append(filter)
    }

    /// Appends `ORDER BY` with `orderings` made total (see ``CollectionSchema/totalOrder(_:)``).
    mutating func appendOrder(_ orderings: [ColumnOrdering]) throws(StoreError) {
        guard !orderings.isEmpty else { return }
        var terms: [String] = []
        for ordering in schema.totalOrder(orderings) {
            terms.append(try quoted(ordering.column) + (ordering.isDescending ? " DESC" : " ASC"))
        }
        sql += " ORDER BY " + terms.joined(separator: ", ")
    }

    mutating func appendWindow(limit: Int?, offset: Int) throws(StoreError) {
        if let limit, limit < 0 { throw StoreError(.invalidQuery, "negative limit \(limit)") }
        if offset < 0 { throw StoreError(.invalidQuery, "negative offset \(offset)") }
        guard limit != nil || offset != 0 else { return }
        sql += " LIMIT ? OFFSET ?"
        arguments.append(.integer(Int64(limit ?? -1)))   // -1: no limit
        arguments.append(.integer(Int64(offset)))
    }

    private func quoted(_ column: Column) throws(StoreError) -> String {
        guard schema.layout.indexByName[column.name] != nil else {
            throw StoreError(.invalidQuery, "no column \"\(column.name)\" in collection \"\(schema.table)\" "
                             + "(columns: \(schema.layout.listed))")
        }
        return SQLIdentifier.quoted(column.name)
    }

    private mutating func parameter(_ value: SQLValue) -> String {
        arguments.append(value)
        return "?"
    }

    private mutating func append(_ filter: Filter) throws(StoreError) {
        switch filter {
        case .comparison(let column, let op, let value):
            let name = try quoted(column)
            switch (op, value) {
            case (.equal, .null): sql += "\(name) IS NULL"
            case (.notEqual, .null): sql += "\(name) IS NOT NULL"
            default: sql += "\(name) \(op.rawValue) \(parameter(value))"
            }
        case .in(let column, let values):
            sql += try quoted(column) + " IN ("
            sql += values.map { parameter($0) }.joined(separator: ", ")
            sql += ")"
        case .like(let column, let pattern, let escape):
            sql += "\(try quoted(column)) LIKE \(parameter(.text(pattern)))"
            if let escape { sql += " ESCAPE \(parameter(.text(String(escape))))" }
        case .isNull(let column):
            sql += "\(try quoted(column)) IS NULL"
        case .and(let filters), .or(let filters):
            guard !filters.isEmpty else {
                sql += filter == .and([]) ? "1" : "0"
                return
            }
            let separator = if case .and = filter { " AND " } else { " OR " }
            sql += "("
            for (index, inner) in filters.enumerated() {
                if index > 0 { sql += separator }
                try append(inner)
            }
            sql += ")"
        case .not(let inner):
            sql += "NOT ("
            try append(inner)
            sql += ")"
        }
    }
}
