import Foundation

extension RecordQuery {
    /// This query, live: subscribers receive its result after every commit that changes it.
    ///
    /// ```swift
    /// let open = try todos.filter(Column("done") == false).order(by: Column("rank")).live()
    /// ```
    ///
    /// A single-table filter without offset is invalidated row by row: a commit whose changed rows
    /// are neither in the current result nor match the filter does not re-run the query. A
    /// collection whose key is not how the change log names its rows (a `UNIQUE` column of a
    /// table without `PRIMARY KEY`, whose rows the log names by rowid) runs again after any change
    /// to its table; one over a view, after any change to a table the view reads.
    ///
    /// - Throws: ``StoreError`` with kind ``StoreError/Kind/invalidQuery`` for an unknown column or
    ///   a negative window.
    public func live() throws(StoreError) -> LiveQuery<Record> {
        let compiled = try compiled()
        let schema = collection.schema
        var rowCheck: RowCheck?
        if offset == 0 && schema.observation == .byKey {
            var condition = SQLBuilder(schema: schema)
            if let filter { try condition.appendCondition(filter) }
            let quotedKey = SQLIdentifier.quoted(schema.primaryKey)
            rowCheck = RowCheck(interest: RowInterest(table: SQLIdentifier.folded(schema.table), quotedTable: schema.quotedTable, quotedKey: quotedKey,
                                                      filterSQL: condition.sql, filterArguments: condition.arguments,
                                                      filter: filter))
        }
        let cached = !(filter?.hasInList ?? false)
        // Without a window, a row entering the result (or moving in it) is placed by the order's
        // values, which the snapshots keep: the SQL's total order.
        var orderTerms: [RowOrder.Term] = []
        var sortColumns: [Int32] = []
        if rowCheck != nil, limit == nil, !orderings.isEmpty {
            orderTerms = schema.totalOrder(orderings).map { RowOrder.Term(column: $0.column.name, isDescending: $0.isDescending) }
            sortColumns = orderTerms.compactMap { schema.layout.indexByName[$0.column].map(Int32.init) }
            if sortColumns.count != orderTerms.count {
                orderTerms = []
                sortColumns = []
            }
        }
        let reader = SnapshotReader(keyColumn: Int32(schema.primaryKeyIndex), sortColumns: sortColumns)
        var source = QuerySource<Record>(
            description: compiled.sql, sql: compiled.sql, arguments: compiled.arguments,
            knownTables: schema.observation == .byTablesRead ? nil : [schema.table], rowCheck: rowCheck
        ) { db in
            let statement = cached ? try db.cachedStatement(compiled.sql) : try db.makeStatement(compiled.sql)
            defer { statement.reset() }
            try statement.bind(compiled.arguments)
            let decoder = RowDecoder(statement: statement, layout: schema.layout, recordType: Record.self)
            defer { decoder.finish() }
            return try reader.read(statement) { try decoder.decode(Record.self) }
        }
        source.shareKey = SharedReadKey(reading: "record", element: Record.self, sql: compiled.sql,
                                        arguments: compiled.arguments, identity: schema.primaryKey)
        if let rowCheck, !orderings.isEmpty {
            // Rows whose ordering columns did not change keep their place: they are read alone.
            source.isWindowed = limit != nil
            source.orderColumns = orderings.compactMap { schema.layout.indexByName[$0.column.name] }
            source.orderTerms = orderTerms
            let select = "\(schema.selectAllSQL) WHERE \(rowCheck.interest.quotedKey) IN ("
            let filter = rowCheck.filterSQL.isEmpty ? "" : " AND (" + rowCheck.filterSQL + ")"
            let sql: @Sendable (Int) -> String = { count in
                select + Array(repeating: "?", count: count).joined(separator: ", ") + ")" + filter
            }
            // Keys of a few sizes recur (one row, a handful): those statements are cached, their
            // text built once.
            let few = (1...4).map(sql)
            source.fetchRows = { db, keys in
                let statement = few.indices.contains(keys.count - 1) ? try db.cachedStatement(few[keys.count - 1])
                    : try db.makeStatement(sql(keys.count))
                defer { statement.reset() }
                try RowCheck.bind(keys, then: rowCheck.filterArguments, to: statement)
                let decoder = RowDecoder(statement: statement, layout: schema.layout, recordType: Record.self)
                defer { decoder.finish() }
                return try reader.read(statement) { try decoder.decode(Record.self) }
            }
        }
        return LiveQuery(store: collection.store, source: source)
    }
}

extension RecordCollection {
    /// Every record of the collection, live (in table order; see ``RecordQuery/live()``).
    public func live() throws(StoreError) -> LiveQuery<Record> {
        try all.live()
    }
}

extension Store {
    /// A raw SQL query, live: its rows after every commit that changes a table it reads (found
    /// by SQLite while preparing it, views included). Arguments are bound, never spliced.
    ///
    /// `identity` names the result column that identifies a row across snapshots (a primary key):
    /// rows with the same identity are the same element, updated when another column changed.
    ///
    /// ```swift
    /// let counts = store.liveQuery(sql: "SELECT done, count(*) AS n FROM todos GROUP BY done", identity: "done")
    /// ```
    public func liveQuery(sql: String, arguments: [any SQLValueConvertible] = [], identity: String) -> LiveQuery<Row> {
        let arguments = arguments.map(\.sqlValue)
        var source = QuerySource<Row>(description: sql, sql: sql, arguments: arguments, knownTables: nil, rowCheck: nil) { db in
            let statement = try db.cachedStatement(sql)
            defer { statement.reset() }
            try statement.bind(arguments)
            return try SnapshotReader.rows(of: statement, identity: identity, sql: sql)
        }
        source.shareKey = SharedReadKey(reading: "rows", element: Row.self, sql: sql, arguments: arguments, identity: identity)
        return LiveQuery(store: self, source: source)
    }

    /// A raw SQL query, live, its rows decoded as `type` (columns matched to coding keys by name,
    /// as ``Database/fetchAll(_:_:_:)`` does). `identity` names the identifying column.
    public func liveQuery<Record: Decodable & Sendable>(_ type: Record.Type, sql: String,
                                                        arguments: [any SQLValueConvertible] = [],
                                                        identity: String) -> LiveQuery<Record> {
        let arguments = arguments.map(\.sqlValue)
        var source = QuerySource<Record>(description: sql, sql: sql, arguments: arguments, knownTables: nil, rowCheck: nil) { db in
            let statement = try db.cachedStatement(sql)
            defer { statement.reset() }
            try statement.bind(arguments)
            // The decoder matches the result's columns, known once the statement stepped.
            var decoder: RowDecoder?
            defer { decoder?.finish() }
            return try SnapshotReader(keyColumnNamed: identity, sql: sql).read(statement, columnsKnown: { _ in
                decoder = RowDecoder(statement: statement, recordType: Record.self)
            }) { try decoder!.decode(Record.self) }
        }
        source.shareKey = SharedReadKey(reading: "decoded", element: Record.self, sql: sql, arguments: arguments, identity: identity)
        return LiveQuery(store: self, source: source)
    }
}

/// What a raw SQL query over one table tells the store so that its live query is told only of
/// the commits that may change it, and patched rather than run again when a few of its rows
/// change — as a ``RecordQuery``'s is (for a layer that compiles its own SQL: a sync server).
package struct RowRouting: Hashable, Sendable {
    /// The table the query reads (alone).
    package var table: String
    /// The table's one-column primary key, selected by the query under that name.
    package var keyColumn: String
    /// The query's WHERE condition with `?` parameters (empty: every row), and its arguments.
    package var filterSQL: String
    package var filterArguments: [SQLValue]
    /// A filter every row the condition selects matches, unless ``valueTerms`` selects it
    /// (`nil`: every row may match): what the store's filter index evaluates on changed rows. It
    /// may match more rows than the condition (those only cost a check); never fewer. With value
    /// terms, the rows the store looks at are those that match this filter *or* a term: a
    /// condition that selects rows only by a term (`project_id IN (SELECT …)`) has the filter
    /// `Filter.in(column, [])`, which matches no row.
    package var filter: Filter?
    /// The positions, in the result, of the columns the query orders by (a row whose values
    /// there changed may move: the query runs again).
    package var orderColumns: [Int]
    /// Whether the query has a LIMIT (a row leaving makes room for another: it runs again).
    package var isWindowed: Bool
    /// `SELECT <the query's result columns> FROM <table>`, to read changed rows by key.
    package var selectSQL: String
    /// The other tables the query reads in sub-queries (`IN (SELECT …)`, `EXISTS (…)`), and which
    /// of their rows can change its result: a commit that changes such a row runs the query
    /// again; one that changes only other rows of those tables does not. Every table the query
    /// reads besides ``table`` must be named here (a dependency's condition may read other
    /// tables only if they are dependencies too).
    package var dependencies: [RowDependency]
    /// Terms of the condition whose values a dependency's sub-query selects
    /// (`"project_id" IN (SELECT "project_id" FROM "members" WHERE "user_id" = ?)`): besides the
    /// rows ``filter`` matches, a changed row whose column holds one of the values the term's
    /// dependency selected at the query's last run concerns the query. The store reads those
    /// values with the result and indexes them, so that a commit to ``table`` tells the query
    /// only when it changes a row of one of its projects (say), not every commit to the table.
    ///
    /// The condition `owner = ? OR project_id IN (SELECT …)` routes with the filter
    /// `owner = ?` and one term; `project_id IN (SELECT …)` alone, with the filter
    /// `Filter.in(Column("project_id"), [])` and one term; `done = 0 AND project_id IN (SELECT …)`
    /// may route as the term alone (it selects more rows than the condition, never fewer). A
    /// `NOT IN` term cannot be routed so (its filter stays `nil`).
    package var valueTerms: [RowValueTerm]

    package init(table: String, keyColumn: String, filterSQL: String, filterArguments: [SQLValue], filter: Filter?,
                 orderColumns: [Int], isWindowed: Bool, selectSQL: String, dependencies: [RowDependency] = [],
                 valueTerms: [RowValueTerm] = []) {
        (self.table, self.keyColumn, self.filterSQL, self.filterArguments) = (table, keyColumn, filterSQL, filterArguments)
        (self.filter, self.orderColumns, self.isWindowed, self.selectSQL) = (filter, orderColumns, isWindowed, selectSQL)
        (self.dependencies, self.valueTerms) = (dependencies, valueTerms)
    }
}

/// A term `column IN (SELECT selectedColumn FROM <dependency's table> WHERE <dependency's
/// condition>)` of a routed query's condition (see ``RowRouting/valueTerms``): the rows of the
/// query's table whose `column` holds a value the dependency selects may be in the result.
///
/// At each run of its query the store reads the values (`SELECT selectedColumn FROM … WHERE
/// <the dependency's condition>`, in the same read transaction) and indexes them for the
/// observer alone, in place; a commit that changes what the dependency selects tells the query
/// (as any dependency change does), and until its next run has read past that commit, every
/// commit to its table tells it (the values it registered may be stale).
///
/// When SQLite would compare the two columns otherwise than value for value (their affinities
/// differ, so that one side is converted, or `column`'s collation is not BINARY), the term
/// cannot be decided by the index: every commit to the table tells the query.
package struct RowValueTerm: Hashable, Sendable {
    /// The column of the query's table (``RowRouting/table``) the term compares.
    package var column: String
    /// The index, in ``RowRouting/dependencies``, of the sub-query that selects the values.
    package var dependency: Int
    /// The column of the dependency's table the sub-query selects.
    package var selectedColumn: String

    package init(column: String, dependency: Int, selectedColumn: String) {
        (self.column, self.dependency, self.selectedColumn) = (column, dependency, selectedColumn)
    }
}

/// Another table a routed query reads (in a sub-query), and which of its rows can change the result.
///
/// A commit that changes a row of ``table`` that matches ``filterSQL`` before or after the change
/// tells the query, which then runs again; a commit that changes only other rows of the table
/// does not. After the change is evaluated inside the commit by the store's filter index (with
/// ``filter``); before the change, by the keys of the rows ``filterSQL`` selected at the query's
/// last run, which the store holds as it holds the result's keys (read with the result, in the
/// same transaction).
///
/// For a sub-query bound to a user (`"project_id" IN (SELECT "project_id" FROM "members" WHERE
/// "user_id" = ?)`), that is the user's rows: one user's membership change tells only that user's
/// queries, whatever the number of other users' queries.
package struct RowDependency: Hashable, Sendable {
    /// The table, as the query names it.
    package var table: String
    /// The sub-query's condition on `table` with `?` parameters (empty: every row may matter), and its arguments.
    ///
    /// It must not mention the outer query's row: for a correlated `EXISTS`, only the parts of the
    /// sub-query's condition that do not (possibly none). It may select more rows than matter
    /// (those only cost a run of the query when they change); never fewer.
    package var filterSQL: String
    package var filterArguments: [SQLValue]
    /// A filter every row the condition selects matches, for the filter index (`nil`: every row of the table).
    package var filter: Filter?

    package init(table: String, filterSQL: String, filterArguments: [SQLValue], filter: Filter?) {
        (self.table, self.filterSQL, self.filterArguments, self.filter) = (table, filterSQL, filterArguments, filter)
    }
}

extension Store {
    /// ``liveQuery(sql:arguments:identity:)`` for a query over one table that says how to route
    /// commits to it (see ``RowRouting``): a commit whose changed rows are neither in the result
    /// nor match the filter does not run it again, and a few changed rows of the result are read
    /// alone and put in place. A commit that changes a row its dependencies (``RowDependency``)
    /// select, before or after, runs it again.
    package func liveQuery(sql: String, arguments: [SQLValue], identity: String, routing: RowRouting) -> LiveQuery<Row> {
        let dependencies = routing.dependencies.map { dependency in
            RowInterest(table: SQLIdentifier.folded(dependency.table), quotedTable: "main." + SQLIdentifier.quoted(dependency.table),
                        quotedKey: "", filterSQL: dependency.filterSQL, filterArguments: dependency.filterArguments,
                        filter: dependency.filter)
        }
        let rowCheck = RowCheck(interest: RowInterest(
            table: SQLIdentifier.folded(routing.table), quotedTable: "main." + SQLIdentifier.quoted(routing.table),
            quotedKey: SQLIdentifier.quoted(routing.keyColumn), filterSQL: routing.filterSQL,
            filterArguments: routing.filterArguments, filter: routing.filter, dependencies: dependencies,
            valueTerms: routing.valueTerms.map { term in
                // A term naming no dependency is refused by the first read (see ``ValueTermRead``).
                RowInterest.ValueTerm(column: term.column, dependency: term.dependency,
                                      dependencyTable: dependencies.indices.contains(term.dependency)
                                          ? dependencies[term.dependency].table : "",
                                      selectedColumn: term.selectedColumn)
            }))
        // A schema change or a commit of unknown extent to a dependency's table reaches it as one
        // to its own table does.
        let tables = Set([routing.table] + routing.dependencies.map(\.table))
        var source = QuerySource<Row>(description: sql, sql: sql, arguments: arguments, knownTables: tables,
                                      rowCheck: rowCheck) { db in
            let statement = try db.cachedStatement(sql)
            defer { statement.reset() }
            try statement.bind(arguments)
            return try SnapshotReader.rows(of: statement, identity: identity, sql: sql)
        }
        source.shareKey = SharedReadKey(reading: "rows", element: Row.self, sql: sql, arguments: arguments, identity: identity)
        source.isWindowed = routing.isWindowed
        source.orderColumns = routing.orderColumns
        let select = "\(routing.selectSQL) WHERE \(SQLIdentifier.quoted(routing.keyColumn)) IN ("
        let filter = routing.filterSQL.isEmpty ? "" : " AND (" + routing.filterSQL + ")"
        let byKeys: @Sendable (Int) -> String = { count in select + Array(repeating: "?", count: count).joined(separator: ", ") + ")" + filter }
        let few = (1...4).map(byKeys)
        source.fetchRows = { db, keys in
            let text = few.indices.contains(keys.count - 1) ? few[keys.count - 1] : byKeys(keys.count)
            let statement = keys.count <= 4 ? try db.cachedStatement(text) : try db.makeStatement(text)
            defer { statement.reset() }
            try RowCheck.bind(keys, then: rowCheck.filterArguments, to: statement)
            return try SnapshotReader.rows(of: statement, identity: identity, sql: text)
        }
        return LiveQuery(store: self, source: source)
    }
}
