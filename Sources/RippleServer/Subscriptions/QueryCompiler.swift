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
}

/// Compiles described queries against a synced table's schema into the replica's SQL, with
/// PostgreSQL's meaning (text under `COLLATE "C"`):
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
/// * a query is ordered totally: the key's columns, ascending, break ties.
///
/// Comparing or ordering `time`, `interval`, JSON and `bytea` columns (and other types kept as
/// text) is refused with an error saying so; they can be selected.
public enum QueryCompiler {
    /// The most values a query may bind (comparisons' values and `in` lists', its read rule's
    /// included): well within what the replica's SQLite binds in one statement (32,766).
    public static let maximumValues = 10_000
    /// The longest `like` pattern, in bytes: its GLOB form (at most three times as long) stays
    /// within what the replica's SQLite matches (50,000 bytes).
    public static let maximumPatternBytes = 10_000
    /// How deep a filter may nest `and`, `or` and `not`, the read rule's included (see
    /// ``levels(of:)``): the replica's SQLite parses about 35 nested parentheses at most.
    public static let maximumFilterLevels = 20

    /// Compiles `query` for `table`.
    ///
    /// - Throws: ``QueryError`` naming what is wrong: another table, an unknown column, a value
    ///   of the wrong type, a negative limit, an operator the column's type does not support.
    public static func compile(_ query: QueryDescription, for table: SyncedTableSchema) throws -> CompiledQuery {
        guard query.table == table.name else { throw QueryError("the query is over \(query.table), not \(table.name)") }
        var arguments: [SQLValue] = []
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
                throw QueryError("the filter nests \(levels) levels of and, or and not (with the read rule's); at most "
                                 + "\(maximumFilterLevels) are allowed")
            }
            filterSQL = try condition(filter, table, &arguments)
            sql += " WHERE " + filterSQL
        }
        guard arguments.count <= maximumValues else {
            throw QueryError("the query holds \(arguments.count) values (its filter's and its read rule's); at most \(maximumValues) "
                             + "are allowed")
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
        if keyNames.count == 1, (query.offset ?? 0) == 0 {
            compiled.routing = RowRouting(table: table.name, keyColumn: keyNames[0], filterSQL: filterSQL, filterArguments: arguments,
                                          filter: try query.filter.flatMap { try routingFilter($0, table)?.filter },
                                          orderColumns: orderColumns, isWindowed: query.limit != nil, selectSQL: select)
        }
        return compiled
    }

    /// A Ripple filter that every row `filter` selects matches, for the replica's filter index,
    /// and whether it selects exactly those rows: comparisons, `in` and NULL tests are exact;
    /// `like` (a GLOB, which Ripple's filters do not have) matches every row. `nil`: every row.
    private static func routingFilter(_ filter: FilterDescription, _ table: SyncedTableSchema) throws -> (filter: Filter?, exact: Bool)? {
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
        case .like, .inQuery, .exists:
            return nil
        case .and(let terms):
            let parts = try terms.map { try routingFilter($0, table) }
            let known = parts.compactMap { $0?.filter }
            let exact = parts.allSatisfy { $0?.exact == true }
            return known.isEmpty ? (exact ? (.and([]), true) : nil) : (.and(known), exact)
        case .or(let terms):
            let parts = try terms.map { try routingFilter($0, table) }
            guard parts.allSatisfy({ $0 != nil }) else { return nil }
            return (.or(parts.compactMap { $0?.filter }), parts.allSatisfy { $0?.exact == true })
        case .not(let term):
            // The negation of an approximation is not an approximation of the negation.
            guard let inner = try routingFilter(term, table), inner.exact, let filter = inner.filter else { return nil }
            return (.not(filter), true)
        }
    }

    private static func condition(_ filter: FilterDescription, _ table: SyncedTableSchema, _ arguments: inout [SQLValue]) throws -> String {
        switch filter {
        case .compare(let name, let op, let value):
            let column = try self.column(name, in: table)
            try requireComparable(column, "compared")
            arguments.append(try comparedValue(value, for: column))
            return "\(orderedName(column)) \(op == .notEqual ? "<>" : op.rawValue) ?"
        case .isNull(let name):
            return "\(SQLIdentifier.quoted(try column(name, in: table).name)) IS NULL"
        case .isNotNull(let name):
            return "\(SQLIdentifier.quoted(try column(name, in: table).name)) IS NOT NULL"
        case .isIn(let name, let values):
            let column = try self.column(name, in: table)
            try requireComparable(column, "compared")
            guard !values.isEmpty else { return "0" }
            for value in values { arguments.append(try comparedValue(value, for: column)) }
            return "\(orderedName(column)) IN (\(Array(repeating: "?", count: values.count).joined(separator: ", ")))"
        case .like(let name, let pattern):
            let column = try self.column(name, in: table)
            guard isText(column.typeOID) else { throw QueryError("like needs a text column; \(name) is not one") }
            guard pattern.utf8.count <= maximumPatternBytes else {
                throw QueryError("a like pattern may hold at most \(maximumPatternBytes) bytes; this one holds \(pattern.utf8.count)")
            }
            arguments.append(.text(try glob(likePattern: pattern)))
            return "\(SQLIdentifier.quoted(column.name)) GLOB ?"
        case .inQuery, .exists:
            throw QueryError("this node does not evaluate sub-queries")
        case .and(let terms):
            guard !terms.isEmpty else { return "1" }
            return joined(try terms.map { try condition($0, table, &arguments) }[...], by: "AND")
        case .or(let terms):
            guard !terms.isEmpty else { return "0" }
            return joined(try terms.map { try condition($0, table, &arguments) }[...], by: "OR")
        case .not(let term):
            return "NOT (" + (try condition(term, table, &arguments)) + ")"
        }
    }

    /// How many levels of parentheses `filter` compiles to: one per `and`, `or` and `not` on
    /// its deepest path, and for an `and` or `or` of more than 8 filters, one more for each
    /// doubling (long lists compile as balanced groups of 8).
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
        case .compare, .isNull, .isNotNull, .isIn, .like, .inQuery, .exists:
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

    /// What a column compares and orders by, quoted: itself, or its order key (see ``OrderKeys``).
    private static func orderedName(_ column: SyncedTableSchema.Column) -> String {
        SQLIdentifier.quoted(orderedColumnName(column))
    }

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
