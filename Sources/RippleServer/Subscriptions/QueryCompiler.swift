#if Sync
import Ripple
import RippleSync

/// A synced table as the replica holds it: its columns (name, Postgres type OID) in order and
/// its key's positions.
public struct SyncedTableSchema: Hashable, Sendable {
    public var name: String
    public var columns: [Column]
    public var key: [Int]

    public struct Column: Hashable, Sendable {
        public var name: String
        public var typeOID: UInt32
        public init(name: String, typeOID: UInt32) { (self.name, self.typeOID) = (name, typeOID) }
    }

    public init(name: String, columns: [Column], key: [Int]) { (self.name, self.columns, self.key) = (name, columns, key) }
}

/// A `QueryDescription` compiled to parameterized SQL on the replica, meaning what it would
/// mean on PostgreSQL (see ``QueryCompiler``).
public struct CompiledQuery: Hashable, Sendable {
    /// The SQL, values as `?` parameters.
    public var sql: String
    public var arguments: [SQLValue]
    /// The result column that identifies a row: the key's column, or `ripple_key` (a JSON
    /// array of a composite key's values).
    public var identity: String
    /// The result's columns (the key's included; not `ripple_key`, nor the order keys the SQL
    /// selects after them: those stay on the server).
    public var columns: [String]
    /// How the replica routes commits to the query and patches its result (`nil`: it runs
    /// again after every commit to its table — a composite key, an offset).
    package var routing: RowRouting?
    /// What the result depends on in the tables its sub-queries read: one interest per
    /// sub-query, at every depth, in the order they are written (empty: no sub-query).
    package var dependencies: [RowDependency] = []
    /// The query gave no column list: its result has every column of the table, and follows
    /// the table's columns (see ``SubscriptionHub/followSchemaChange(of:added:dropped:)``).
    package var selectsEveryColumn = false
}

/// Compiles described queries against a synced table's schema (and, for sub-queries, the other
/// synced tables') into the replica's SQL, with PostgreSQL's meaning (text under `COLLATE "C"`):
///
/// * **NULL order**: last in ascending order and first in descending order unless the term says
///   otherwise (SQLite's default is the reverse), written out as `NULLS FIRST`/`NULLS LAST`;
/// * **text** compares and orders by its bytes (SQLite's BINARY on UTF-8, Postgres's "C");
/// * **LIKE** is case-sensitive, `%` any run, `_` one character, `\` escapes (SQLite's LIKE is
///   not case-sensitive: it becomes a GLOB with its own characters escaped);
/// * **floats**: NaN equals NaN and is greater than every number, as Postgres has it (the
///   replica keeps NaN as the text `NaN`, which SQLite orders after every number); ±Infinity are
///   numbers;
/// * **numeric** by value, **date** and **timestamp(tz)** by time, **bpchar** ignoring trailing
///   spaces: through the order keys the replica keeps beside them (`ripple_order:<column>`);
/// * **sub-queries**: `in` compiles to `IN (SELECT …)` and `exists` to a correlated
///   `EXISTS (SELECT 1 …)`, whose NULL logic is SQL's on both sides (a NULL on either side of
///   `in` or of an `on` pair matches nothing; `NOT IN` a sub-query that selects a NULL is never
///   true). The compared columns must compare alike: integers and floats together, text types
///   together, uuid with uuid, bool with bool, and each order-keyed type with itself;
/// * a query is ordered totally: the key's columns, ascending, break ties.
///
/// Comparing or ordering `time`, `interval`, JSON and `bytea` columns (and other types kept as
/// text) is refused with an error saying so; they can be selected.
public enum QueryCompiler {
    /// The most values a query may bind (comparisons' values and `in` lists', its sub-queries'
    /// and its read rules' included): well within what the replica's SQLite binds in one
    /// statement (32,766).
    public static let maximumValues = 10_000
    /// The longest `like` pattern, in bytes: its GLOB form (at most three times as long) stays
    /// within what the replica's SQLite matches (50,000 bytes).
    public static let maximumPatternBytes = 10_000
    /// How deep a filter may nest `and`, `or`, `not` and sub-queries, the read rules' included
    /// (see ``levels(of:)``): the replica's SQLite parses about 35 nested parentheses at most.
    public static let maximumFilterLevels = 20
    /// How deep a client's query may nest sub-queries (`in` a sub-query, `exists`), before the
    /// read rules are applied (see ``subqueryLevels(of:)`` and ``checkClientQuery(_:tables:)``).
    public static let maximumClientSubqueryLevels = 3
    /// How deep a compiled query may nest sub-queries, its read rules' included.
    public static let maximumSubqueryLevels = 5

    /// Compiles `query` for `table`; `tables` are the synced tables its sub-queries may read
    /// (by name; `table` need not be among them).
    ///
    /// - Throws: ``QueryError`` naming what is wrong: another table, an unknown table or column,
    ///   a value of the wrong type, a negative limit, an operator the column's type does not
    ///   support, columns that do not compare alike, sub-queries nested too deep.
    public static func compile(_ query: QueryDescription, for table: SyncedTableSchema,
                               tables: [String: SyncedTableSchema] = [:]) throws -> CompiledQuery {
        try compile(query, for: table, tables: tables, part: nil)
    }

    /// How an include's rows are read (see ``TreeCompiler``): the query's rows that also meet
    /// `condition` (SQL over the query's table, with its arguments: the exact reference to the
    /// parent's rows), and for a to-many include, at most `limit` rows per value of the
    /// `partition` columns (the include's `on` columns: one list per parent), by a window
    /// function. Its sub-queries may nest ``maximumIncludeSubqueryLevels`` deep (an include's
    /// sub-query is its parent's query).
    package struct PartOptions: Sendable {
        var condition: (sql: String, arguments: [SQLValue])?
        var partition: [String] = []
        var limit: Int?
    }

    /// How deep an include's sub-queries may nest: its parents' queries (two levels of
    /// includes) over the client's and the rules' sub-queries.
    public static let maximumIncludeSubqueryLevels = maximumSubqueryLevels + 2

    package static func compile(_ query: QueryDescription, for table: SyncedTableSchema,
                                tables: [String: SyncedTableSchema], part: PartOptions?) throws -> CompiledQuery {
        guard query.table == table.name else { throw QueryError("the query is over \(query.table), not \(table.name)") }
        var catalog = tables
        catalog[table.name] = table
        var context = Context(catalog: catalog, dependencies: [])
        let keyNames = table.key.map { table.columns[$0].name }
        var selected: [String] = []
        for name in query.columns ?? table.columns.map(\.name) {
            guard table.columns.contains(where: { $0.name == name }) else { throw QueryError("no column \(name) in \(table.name)") }
            guard !selected.contains(name) else { throw QueryError("columns names \(name) twice") }
            selected.append(name)
        }
        for name in keyNames where !selected.contains(name) { selected.append(name) }
        var list = selected.map(SQLIdentifier.quoted)
        let identity: String
        if keyNames.count == 1 {
            identity = keyNames[0]
        } else {
            identity = "ripple_key"
            list.append("json_array(\(keyNames.map(SQLIdentifier.quoted).joined(separator: ", "))) AS \"ripple_key\"")
        }
        var resultNames = selected + (keyNames.count == 1 ? [] : [identity])
        var terms: [String] = []
        var ordered: Set<String> = []
        var orderColumns: [Int] = []
        func orderBy(_ column: SyncedTableSchema.Column, _ direction: String) {
            // What the order compares is selected too (after the columns sent), so that the
            // replica can tell when a changed row's place may have changed.
            let name = OrderKeys.applies(to: column.typeOID) ? OrderKeys.column(for: column.name) : column.name
            if !resultNames.contains(name) {
                resultNames.append(name)
                list.append(SQLIdentifier.quoted(name))
            }
            orderColumns.append(resultNames.firstIndex(of: name)!)
            terms.append("\(SQLIdentifier.quoted(name)) \(direction)")
        }
        for term in query.order {
            let column = try self.column(term.column, in: table)
            try requireComparable(column, "ordered by")
            // A column ordered again orders nothing more: rows its first term leaves tied are
            // equal in it.
            guard !ordered.contains(column.name) else { continue }
            let nullsFirst = term.nullsFirst ?? term.descending
            orderBy(column, "\(term.descending ? "DESC" : "ASC") NULLS \(nullsFirst ? "FIRST" : "LAST")")
            ordered.insert(column.name)
        }
        for name in keyNames where !ordered.contains(name) { orderBy(try column(name, in: table), "ASC") }
        let select = "SELECT \(list.joined(separator: ", ")) FROM \(SQLIdentifier.quoted(table.name))"
        var sql = select
        var filterSQL = ""
        if let filter = query.filter {
            let levels = levels(of: filter)
            guard levels <= maximumFilterLevels else {
                throw QueryError("the filter nests \(levels) levels of and, or, not and sub-queries (with the read rules'); at most "
                                 + "\(maximumFilterLevels) are allowed")
            }
            let subqueryLevels = subqueryLevels(of: filter)
            let allowed = part == nil ? maximumSubqueryLevels : maximumIncludeSubqueryLevels
            guard subqueryLevels <= allowed else {
                throw QueryError("the filter nests sub-queries \(subqueryLevels) levels deep (with the read rules'); at most "
                                 + "\(allowed) are allowed")
            }
            filterSQL = try condition(filter, Scope(table), &context)
        }
        var arguments = context.arguments
        if let condition = part?.condition {
            filterSQL = filterSQL.isEmpty ? condition.sql : "(\(filterSQL)) AND (\(condition.sql))"
            arguments += condition.arguments
        }
        let whereClause = filterSQL.isEmpty ? "" : " WHERE " + filterSQL
        sql += whereClause
        guard arguments.count <= maximumValues else {
            throw QueryError("the query holds \(arguments.count) values (its filter's, its sub-queries' and its read rules'); at most "
                             + "\(maximumValues) are allowed")
        }
        if let part, let limit = part.limit {
            // One list per parent: at most `limit` rows per value of the partition columns, in
            // the include's order (the partition's columns lead it).
            guard limit >= 0 else { throw QueryError("limit \(limit) is negative") }
            let names = resultNames.map(SQLIdentifier.quoted).joined(separator: ", ")
            let partition = part.partition.map(SQLIdentifier.quoted).joined(separator: ", ")
            let within = terms.dropFirst(part.partition.count).joined(separator: ", ")
            let ranked = "SELECT \(list.joined(separator: ", ")), ROW_NUMBER() OVER (PARTITION BY \(partition) ORDER BY \(within)) "
                + "AS \"ripple_rank\" FROM \(SQLIdentifier.quoted(table.name))\(whereClause)"
            sql = "SELECT \(names) FROM (\(ranked)) WHERE \"ripple_rank\" <= \(limit)"
        }
        sql += " ORDER BY " + terms.joined(separator: ", ")
        // LIMIT and OFFSET are written as the integers they were decoded to.
        if let limit = query.limit {
            guard limit >= 0 else { throw QueryError("limit \(limit) is negative") }
            sql += " LIMIT \(limit)"
        }
        if let offset = query.offset {
            guard offset >= 0 else { throw QueryError("offset \(offset) is negative") }
            if query.limit == nil { sql += " LIMIT -1" }
            sql += " OFFSET \(offset)"
        }
        var compiled = CompiledQuery(sql: sql, arguments: arguments, identity: identity, columns: selected)
        compiled.dependencies = context.dependencies ?? []
        compiled.selectsEveryColumn = query.columns == nil
        // A query with sub-queries reads other tables' rows too: each becomes a dependency of its
        // routing, merged to one per table (the store holds a dependency's rows by table). A
        // commit that changes a row a dependency's condition selects, before or after, runs the
        // query again; other commits to those tables pass it by (see `RowDependency`). Its own
        // table's rows are routed by the filter without its sub-queries (a wider filter: more
        // rows checked, never fewer). A sub-query over the query's own table leaves it routed by
        // table: its rows would be both the result's and a dependency's.
        //
        // A term `column IN (sub-query)` outside a `not` routes its table's rows by the values
        // the sub-query selected at the query's last run (a `RowValueTerm`: read with the
        // dependency's condition, merged per table, so a superset of them): in the filter it
        // stands for no row, and the rows whose column holds one of those values are added to
        // what the filter matches. The filter with the terms then matches every row the
        // condition selects: an `and` holding the term selects only rows among its values, an
        // `or` only rows its other terms or the values select.
        let dependencies = RowDependency.perTable(compiled.dependencies)
        if keyNames.count == 1, (query.offset ?? 0) == 0, !dependencies.contains(where: { $0.table == table.name }) {
            var terms: [RowValueTerm]? = []
            let filter = try query.filter.flatMap { filter -> Filter? in
                try routingFilter(filter, table, valueTerms: &terms, dependencies: dependencies, catalog: catalog)?.filter
            }
            compiled.routing = RowRouting(table: table.name, keyColumn: keyNames[0], filterSQL: filterSQL, filterArguments: arguments,
                                          filter: filter, orderColumns: orderColumns, isWindowed: query.limit != nil || part?.limit != nil,
                                          selectSQL: select,
                                          dependencies: dependencies, valueTerms: terms ?? [])
        }
        return compiled
    }

    /// Checks what a client may ask before its read rules are applied: its sub-queries nest at
    /// most ``maximumClientSubqueryLevels`` deep and read synced tables (in `tables`).
    ///
    /// - Throws: ``QueryError`` naming the table that is not synced, or saying the limit.
    public static func checkClientQuery(_ query: QueryDescription, tables: [String: SyncedTableSchema]) throws {
        guard let filter = query.filter else { return }
        let levels = subqueryLevels(of: filter)
        guard levels <= maximumClientSubqueryLevels else {
            throw QueryError("the filter nests sub-queries \(levels) levels deep; at most \(maximumClientSubqueryLevels) are allowed")
        }
        for name in filter.relatedTables where name != query.table && tables[name] == nil {
            throw QueryError("there is no synced table \(name)")
        }
    }

    /// How deep `filter` nests sub-queries: 0 without any, 1 for an `in` sub-query or an
    /// `exists` whose own filter has none, and so on.
    public static func subqueryLevels(of filter: FilterDescription) -> Int {
        switch filter {
        case .inQuery(_, let query): 1 + (query.filter.map(subqueryLevels(of:)) ?? 0)
        case .exists(let exists): 1 + (exists.filter.map(subqueryLevels(of:)) ?? 0)
        case .and(let terms), .or(let terms): terms.map(subqueryLevels(of:)).max() ?? 0
        case .not(let term): subqueryLevels(of: term)
        case .compare, .isNull, .isNotNull, .isIn, .like: 0
        }
    }

    /// Where a condition's columns are: a table, under its own name (the query's table,
    /// unqualified) or an alias (a sub-query's).
    private struct Scope {
        let table: SyncedTableSchema
        let alias: String?

        init(_ table: SyncedTableSchema, alias: String? = nil) { (self.table, self.alias) = (table, alias) }

        /// `column` as a condition names it: qualified by the alias in a sub-query.
        func name(_ column: String) -> String {
            alias.map { SQLIdentifier.quoted($0) + "." + SQLIdentifier.quoted(column) } ?? SQLIdentifier.quoted(column)
        }

        /// `column` as a correlated sub-query names it: always qualified.
        func outerName(_ column: String) -> String {
            SQLIdentifier.quoted(alias ?? table.name) + "." + SQLIdentifier.quoted(column)
        }
    }

    /// What compiling a filter gathers: its values, its sub-queries' aliases and interests.
    private struct Context {
        let catalog: [String: SyncedTableSchema]
        var arguments: [SQLValue] = []
        var aliases = 0
        /// `nil`: not gathered (a sub-query's condition compiled alone, for its interest).
        var dependencies: [RowDependency]?

        init(catalog: [String: SyncedTableSchema], dependencies: [RowDependency]?) {
            (self.catalog, self.dependencies) = (catalog, dependencies)
        }

        func table(_ name: String) throws -> SyncedTableSchema {
            guard let table = catalog[name] else { throw QueryError("there is no synced table \(name)") }
            return table
        }

        mutating func alias() -> String {
            aliases += 1
            return "ripple_s\(aliases)"
        }

        /// Records a sub-query's interest: its condition over `table`, compiled alone.
        mutating func record(_ table: SyncedTableSchema, _ filter: FilterDescription?) throws {
            guard dependencies != nil else { return }
            var alone = Context(catalog: catalog, dependencies: nil)
            let sql = try filter.map { try QueryCompiler.condition($0, Scope(table), &alone) } ?? ""
            dependencies!.append(RowDependency(table: table.name, filterSQL: sql, filterArguments: alone.arguments,
                                                  filter: try filter.flatMap { try QueryCompiler.routingFilter($0, table)?.filter }))
        }
    }

    /// A Ripple filter that every row `filter` selects matches, for the replica's filter index,
    /// and whether it selects exactly those rows: comparisons, `in` and NULL tests are exact;
    /// `like` (a GLOB, which Ripple's filters do not have) matches every row. `nil`: every row.
    private static func routingFilter(_ filter: FilterDescription, _ table: SyncedTableSchema) throws -> (filter: Filter?, exact: Bool)? {
        var none: [RowValueTerm]? = nil
        return try routingFilter(filter, table, valueTerms: &none, dependencies: [], catalog: [:])
    }

    /// ``routingFilter(_:_:)`` that, given `valueTerms` (not `nil`), routes a term `column IN
    /// (sub-query)` over a table among `dependencies` by the values its sub-query selects: the
    /// term stands for no row in the filter and is added to `valueTerms` (the filter is then
    /// exact no more).
    private static func routingFilter(_ filter: FilterDescription, _ table: SyncedTableSchema, valueTerms: inout [RowValueTerm]?,
                                      dependencies: [RowDependency],
                                      catalog: [String: SyncedTableSchema]) throws -> (filter: Filter?, exact: Bool)? {
        switch filter {
        case .compare(let name, let op, let value):
            let column = try self.column(name, in: table)
            let comparison: ComparisonOperator = switch op {
            case .equal: .equal
            case .notEqual: .notEqual
            case .less: .less
            case .lessOrEqual: .lessOrEqual
            case .greater: .greater
            case .greaterOrEqual: .greaterOrEqual
            }
            return (.comparison(Column(orderedColumnName(column)), comparison, try comparedValue(value, for: column)), true)
        case .isNull(let name):
            return (.isNull(Column(try column(name, in: table).name)), true)
        case .isNotNull(let name):
            return (.not(.isNull(Column(try column(name, in: table).name))), true)
        case .isIn(let name, let values):
            let column = try self.column(name, in: table)
            return (.in(Column(orderedColumnName(column)), try values.map { try comparedValue($0, for: column) }), true)
        case .inQuery(let name, let query):
            guard valueTerms != nil, let dependency = dependencies.firstIndex(where: { $0.table == query.table }),
                  let other = catalog[query.table] else { return nil }
            let column = try self.column(name, in: table)
            let selected = try self.column(query.column, in: other)
            valueTerms!.append(RowValueTerm(column: orderedColumnName(column), dependency: dependency,
                                            selectedColumn: orderedColumnName(selected)))
            return (.in(Column(orderedColumnName(column)), []), false)
        case .like, .exists:
            return nil
        case .and(let terms):
            let parts = try terms.map { try routingFilter($0, table, valueTerms: &valueTerms, dependencies: dependencies, catalog: catalog) }
            let known = parts.compactMap { $0?.filter }
            let exact = parts.allSatisfy { $0?.exact == true }
            return known.isEmpty ? (exact ? (.and([]), true) : nil) : (.and(known), exact)
        case .or(let terms):
            let parts = try terms.map { try routingFilter($0, table, valueTerms: &valueTerms, dependencies: dependencies, catalog: catalog) }
            guard parts.allSatisfy({ $0 != nil }) else { return nil }
            return (.or(parts.compactMap { $0?.filter }), parts.allSatisfy { $0?.exact == true })
        case .not(let term):
            // The negation of an approximation is not an approximation of the negation.
            // (Nor can a value term stand under it: its values would be the rows it excludes.)
            var none: [RowValueTerm]? = nil
            guard let inner = try routingFilter(term, table, valueTerms: &none, dependencies: [], catalog: [:]), inner.exact,
                  let filter = inner.filter else { return nil }
            return (.not(filter), true)
        }
    }

    private static func condition(_ filter: FilterDescription, _ scope: Scope, _ context: inout Context) throws -> String {
        let table = scope.table
        switch filter {
        case .compare(let name, let op, let value):
            let column = try self.column(name, in: table)
            try requireComparable(column, "compared")
            context.arguments.append(try comparedValue(value, for: column))
            return "\(scope.name(orderedColumnName(column))) \(op == .notEqual ? "<>" : op.rawValue) ?"
        case .isNull(let name):
            return "\(scope.name(try column(name, in: table).name)) IS NULL"
        case .isNotNull(let name):
            return "\(scope.name(try column(name, in: table).name)) IS NOT NULL"
        case .isIn(let name, let values):
            let column = try self.column(name, in: table)
            try requireComparable(column, "compared")
            guard !values.isEmpty else { return "0" }
            for value in values { context.arguments.append(try comparedValue(value, for: column)) }
            return "\(scope.name(orderedColumnName(column))) IN (\(Array(repeating: "?", count: values.count).joined(separator: ", ")))"
        case .like(let name, let pattern):
            let column = try self.column(name, in: table)
            guard isText(column.typeOID) else { throw QueryError("like needs a text column; \(name) is not one") }
            guard pattern.utf8.count <= maximumPatternBytes else {
                throw QueryError("a like pattern may hold at most \(maximumPatternBytes) bytes; this one holds \(pattern.utf8.count)")
            }
            context.arguments.append(.text(try glob(likePattern: pattern)))
            return "\(scope.name(column.name)) GLOB ?"
        case .inQuery(let name, let query):
            let column = try self.column(name, in: table)
            let other = try context.table(query.table)
            let selected = try self.column(query.column, in: other)
            try requireAlike(column, of: table, selected, of: other)
            try context.record(other, query.filter)
            let inner = Scope(other, alias: context.alias())
            var sql = "\(scope.name(orderedColumnName(column))) IN (SELECT \(inner.name(orderedColumnName(selected))) FROM "
                + "\(SQLIdentifier.quoted(other.name)) AS \(SQLIdentifier.quoted(inner.alias!))"
            if let filter = query.filter { sql += " WHERE " + (try condition(filter, inner, &context)) }
            return sql + ")"
        case .exists(let exists):
            let other = try context.table(exists.table)
            guard !exists.on.isEmpty else { throw QueryError("exists over \(exists.table) relates no columns: on needs a pair at least") }
            var pairs: [(SyncedTableSchema.Column, SyncedTableSchema.Column)] = []
            for pair in exists.pairs {
                let column = try self.column(pair.column, in: table)
                let related = try self.column(pair.related, in: other)
                try requireAlike(column, of: table, related, of: other)
                pairs.append((column, related))
            }
            try context.record(other, exists.filter)
            let inner = Scope(other, alias: context.alias())
            var conditions = pairs.map { column, related in
                "\(inner.name(orderedColumnName(related))) = \(scope.outerName(orderedColumnName(column)))"
            }
            if let filter = exists.filter { conditions.append(try condition(filter, inner, &context)) }
            return "EXISTS (SELECT 1 FROM \(SQLIdentifier.quoted(other.name)) AS \(SQLIdentifier.quoted(inner.alias!)) WHERE "
                + conditions.joined(separator: " AND ") + ")"
        case .and(let terms):
            guard !terms.isEmpty else { return "1" }
            return joined(try terms.map { try condition($0, scope, &context) }[...], by: "AND")
        case .or(let terms):
            guard !terms.isEmpty else { return "0" }
            return joined(try terms.map { try condition($0, scope, &context) }[...], by: "OR")
        case .not(let term):
            return "NOT (" + (try condition(term, scope, &context)) + ")"
        }
    }

    /// How many levels of parentheses `filter` compiles to: one per `and`, `or` and `not` on
    /// its deepest path, two per sub-query (its parentheses and its `SELECT`), and for an `and`
    /// or `or` of more than 8 filters, one more for each doubling (long lists compile as
    /// balanced groups of 8).
    public static func levels(of filter: FilterDescription) -> Int {
        switch filter {
        case .and(let terms), .or(let terms):
            var (levels, size) = (1, terms.count)
            while size > 8 {
                size = (size + 1) / 2
                levels += 1
            }
            return levels + (terms.map { self.levels(of: $0) }.max() ?? 0)
        case .not(let term):
            return 1 + levels(of: term)
        case .inQuery(_, let query):
            return 2 + (query.filter.map(levels(of:)) ?? 0)
        case .exists(let exists):
            return 2 + (exists.filter.map(levels(of:)) ?? 0)
        case .compare, .isNull, .isNotNull, .isIn, .like:
            return 0
        }
    }

    /// `parts` joined by `connective` (AND, OR: associative, in SQL's three-valued logic too),
    /// in parentheses. A long list is split in halves, recursively: SQLite refuses an
    /// expression nested deeper than 1,000, and a flat list of N terms nests N deep.
    private static func joined(_ parts: ArraySlice<String>, by connective: String) -> String {
        guard parts.count > 8 else { return "(" + parts.joined(separator: " \(connective) ") + ")" }
        let middle = parts.startIndex + parts.count / 2
        return "(" + joined(parts[..<middle], by: connective) + " \(connective) " + joined(parts[middle...], by: connective) + ")"
    }

    /// A LIKE pattern (Postgres's: `%`, `_`, `\` escapes) as a GLOB pattern (SQLite's:
    /// case-sensitive; its own `*`, `?` and `[` in brackets).
    static func glob(likePattern pattern: String) throws -> String {
        var glob = ""
        var escaped = false
        for character in pattern {
            if escaped {
                glob += literal(character)
                escaped = false
                continue
            }
            switch character {
            case "\\": escaped = true
            case "%": glob += "*"
            case "_": glob += "?"
            default: glob += literal(character)
            }
        }
        guard !escaped else { throw QueryError("the like pattern \(pattern) ends with an escape") }
        return glob
    }

    private static func literal(_ character: Character) -> String {
        switch character {
        case "*", "?", "[": "[\(character)]"
        default: String(character)
        }
    }

    private static func column(_ name: String, in table: SyncedTableSchema) throws -> SyncedTableSchema.Column {
        guard let column = table.columns.first(where: { $0.name == name }) else { throw QueryError("no column \(name) in \(table.name)") }
        return column
    }

    private static func isText(_ oid: UInt32) -> Bool {
        [PostgresTypes.OID.text, PostgresTypes.OID.varchar, PostgresTypes.OID.name].contains(oid)
    }

    /// What a column compares and orders by: itself, or its order key (see ``OrderKeys``).
    private static func orderedColumnName(_ column: SyncedTableSchema.Column) -> String {
        OrderKeys.applies(to: column.typeOID) ? OrderKeys.column(for: column.name) : column.name
    }

    /// A query's value as the column compares: its order key, or its replica value.
    private static func comparedValue(_ value: WireValue, for column: SyncedTableSchema.Column) throws -> SQLValue {
        guard OrderKeys.applies(to: column.typeOID) else { return try replicaValue(value, for: column) }
        let text: String
        switch value {
        case .null: return .null
        case .text(let string): text = string
        case .integer(let integer) where column.typeOID == PostgresTypes.OID.numeric: text = String(integer)
        case .real(let real) where column.typeOID == PostgresTypes.OID.numeric && real.isFinite: text = String(real)
        default: throw QueryError("\(value) is not a value of column \(column.name)")
        }
        do {
            return .blob(try OrderKeys.key(text, of: column.typeOID))
        } catch let error as QueryError {
            throw QueryError("\(error.description) (column \(column.name))")
        }
    }

    private static func requireComparable(_ column: SyncedTableSchema.Column, _ what: String) throws {
        let comparable: Set<UInt32> = [PostgresTypes.OID.int2, PostgresTypes.OID.int4, PostgresTypes.OID.int8, PostgresTypes.OID.bool,
                                       PostgresTypes.OID.float4, PostgresTypes.OID.float8, PostgresTypes.OID.text,
                                       PostgresTypes.OID.varchar, PostgresTypes.OID.name, PostgresTypes.OID.uuid]
        guard comparable.contains(column.typeOID) || OrderKeys.applies(to: column.typeOID) else {
            throw QueryError("column \(column.name) cannot be \(what) yet: its type (OID \(column.typeOID)) does not compare in "
                             + "the replica as Postgres compares it")
        }
    }

    /// Requires `column` of `table` and `other` of `otherTable` to compare alike on the replica
    /// as on Postgres: integers and floats together, the text types together, uuid, bool, and
    /// each type compared by its order key with itself.
    private static func requireAlike(_ column: SyncedTableSchema.Column, of table: SyncedTableSchema,
                                     _ other: SyncedTableSchema.Column, of otherTable: SyncedTableSchema) throws {
        try requireComparable(column, "compared")
        try requireComparable(other, "compared")
        func family(_ oid: UInt32) -> UInt32 {
            switch oid {
            case PostgresTypes.OID.int2, PostgresTypes.OID.int4, PostgresTypes.OID.int8, PostgresTypes.OID.float4,
                 PostgresTypes.OID.float8: PostgresTypes.OID.float8
            case PostgresTypes.OID.varchar, PostgresTypes.OID.name: PostgresTypes.OID.text
            default: oid
            }
        }
        guard family(column.typeOID) == family(other.typeOID) else {
            throw QueryError("column \(column.name) of \(table.name) (\(PostgresTypes.wireName(of: column.typeOID))) and column "
                             + "\(other.name) of \(otherTable.name) (\(PostgresTypes.wireName(of: other.typeOID))) do not compare alike")
        }
    }

    /// A query's value as the replica holds values of the column's type (see ``PostgresTypes``).
    private static func replicaValue(_ value: WireValue, for column: SyncedTableSchema.Column) throws -> SQLValue {
        let wrong = QueryError("\(value) is not a value of column \(column.name)")
        switch (column.typeOID, value) {
        case (_, .null): return .null
        case (PostgresTypes.OID.int2, _), (PostgresTypes.OID.int4, _), (PostgresTypes.OID.int8, _):
            switch value {
            case .integer(let integer): return .integer(integer)
            case .real(let real) where real.isFinite: return .real(real)
            case .text(let text): return .integer(try Int64(text).orThrow(wrong))
            default: throw wrong
            }
        case (PostgresTypes.OID.float4, _), (PostgresTypes.OID.float8, _):
            switch value {
            case .integer(let integer): return .real(Double(integer))
            case .real(let real): return real.isNaN ? .text("NaN") : .real(real)
            case .text(let text): return try PostgresTypes.replicaValue(text, of: PostgresTypes.OID.float8)
            default: throw wrong
            }
        case (PostgresTypes.OID.bool, .bool(let bool)):
            return .integer(bool ? 1 : 0)
        case (PostgresTypes.OID.bool, .integer(let integer)) where integer == 0 || integer == 1:
            // 1 and 0: booleans as SQLite (and a Ripple query) keeps them.
            return .integer(integer)
        case (PostgresTypes.OID.uuid, .text(let text)):
            return .text(text.lowercased())
        case (_, .text(let text)) where isText(column.typeOID):
            return .text(text)
        default:
            throw wrong
        }
    }

}

private extension Optional {
    func orThrow(_ error: some Error) throws -> Wrapped {
        guard let self else { throw error }
        return self
    }
}

/// A described query the server cannot run, and why (sent to the client in an `error` frame).
public struct QueryError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
