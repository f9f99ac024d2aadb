#if Sync
import PostgresNIO
import Ripple
import RippleSync

/// A synced table as writes see it on Postgres: its columns with their types as Postgres
/// names them (`bigint`, `numeric(10,2)`, `timestamp with time zone`…), and its primary key.
struct WritableTable: Sendable {
    let name: String
    /// Column names, in the table's order.
    let columns: [String]
    /// Each column's type, as `format_type` writes it (what `CAST(… AS type)` takes).
    let types: [String: String]
    /// The primary key's columns, in key order.
    let key: [String]

    /// `name`, quoted as a Postgres identifier.
    var quoted: String { SQLIdentifier.quoted(name) }
}

/// SQL text with its `$n` parameters, built piece by piece: every value is bound (as text, cast
/// to its column's type by Postgres), none is spliced into the text.
struct PostgresStatement {
    var sql = ""
    var bindings = PostgresBindings()
    /// Packed: the values go to one JSON array, the statement's only parameter (`$1`), each read
    /// as `$1->>n` (for ``MutationBatch``'s function, which runs statements with one argument).
    private(set) var packed: [String?]?
    private var count = 0
    private var aliases = 0

    init(packed: Bool = false) {
        if packed { self.packed = [] }
    }

    /// Appends `$n` bound to `value` in its text form, cast to `type` (`nil`: left as text).
    mutating func bind(_ value: WireValue, as type: String?) {
        let parameter: String
        if packed != nil {
            parameter = "($1->>\(packed!.count))"
            packed!.append(Self.text(of: value))
        } else {
            count += 1
            bindings.append(Self.text(of: value))
            parameter = "$\(count)"
        }
        sql += type.map { "CAST(\(parameter) AS \($0))" } ?? parameter
    }

    var query: PostgresQuery { PostgresQuery(unsafeSQL: sql, binds: bindings) }

    /// A wire value in the text form Postgres's input functions read (`nil`: SQL NULL).
    static func text(of value: WireValue) -> String? {
        switch value {
        case .null: nil
        case .bool(let bool): bool ? "true" : "false"
        case .integer(let integer): String(integer)
        case .real(let real): real.isNaN ? "NaN" : real.isInfinite ? (real > 0 ? "Infinity" : "-Infinity") : "\(real)"
        case .text(let text): text
        }
    }

    /// Appends `filter` as a boolean expression over `table`'s columns, with Postgres's own
    /// meaning (its comparisons, NULL logic, LIKE, `IN (SELECT …)` and correlated `EXISTS`).
    /// `tables`: the tables its sub-queries read, described (their columns' types cast the
    /// values compared with them). `table` is named by its own name (as the statement's `FROM`
    /// names it); a sub-query's table by an alias of its own, so a table related to itself works.
    ///
    /// - Throws: ``QueryError`` naming a column or a table that is not there.
    mutating func append(_ filter: FilterDescription, of table: WritableTable, tables: [String: WritableTable] = [:]) throws {
        try append(filter, of: table, alias: nil, tables: tables)
    }

    private mutating func append(_ filter: FilterDescription, of table: WritableTable, alias: String?,
                                 tables: [String: WritableTable]) throws {
        func column(_ name: String, of table: WritableTable, alias: String?) throws -> String {
            guard table.types[name] != nil else { throw QueryError("table \(table.name) has no column \(name)") }
            let quoted = SQLIdentifier.quoted(name)
            return alias.map { SQLIdentifier.quoted($0) + "." + quoted } ?? quoted
        }
        func column(_ name: String) throws -> String { try column(name, of: table, alias: alias) }
        func other(_ name: String) throws -> WritableTable {
            guard let other = tables[name] else { throw QueryError("there is no table \(name)") }
            return other
        }
        switch filter {
        case .compare(let name, let op, let value):
            sql += "\(try column(name)) \(op == .notEqual ? "<>" : op.rawValue) "
            bind(value, as: table.types[name])
        case .isNull(let name):
            sql += "\(try column(name)) IS NULL"
        case .isNotNull(let name):
            sql += "\(try column(name)) IS NOT NULL"
        case .isIn(let name, let values):
            guard !values.isEmpty else { sql += "FALSE"; return }
            sql += "\(try column(name)) IN ("
            for (offset, value) in values.enumerated() {
                if offset > 0 { sql += ", " }
                bind(value, as: table.types[name])
            }
            sql += ")"
        case .like(let name, let pattern):
            sql += "\(try column(name))::text LIKE "
            bind(.text(pattern), as: nil)
        case .inQuery(let name, let query):
            let inner = try other(query.table)
            let innerAlias = nextAlias()
            sql += "\(try column(name)) IN (SELECT \(try column(query.column, of: inner, alias: innerAlias)) FROM \(inner.quoted) AS "
                + SQLIdentifier.quoted(innerAlias)
            if let filter = query.filter {
                sql += " WHERE "
                try append(filter, of: inner, alias: innerAlias, tables: tables)
            }
            sql += ")"
        case .exists(let exists):
            let inner = try other(exists.table)
            guard !exists.on.isEmpty else { throw QueryError("exists over \(exists.table) relates no columns: on needs a pair at least") }
            let innerAlias = nextAlias()
            let outer = SQLIdentifier.quoted(alias ?? table.name)
            sql += "EXISTS (SELECT 1 FROM \(inner.quoted) AS \(SQLIdentifier.quoted(innerAlias)) WHERE "
            for (offset, pair) in exists.pairs.enumerated() {
                if offset > 0 { sql += " AND " }
                _ = try column(pair.column)
                sql += "\(try column(pair.related, of: inner, alias: innerAlias)) = \(outer).\(SQLIdentifier.quoted(pair.column))"
            }
            if let filter = exists.filter {
                sql += " AND ("
                try append(filter, of: inner, alias: innerAlias, tables: tables)
                sql += ")"
            }
            sql += ")"
        case .and(let terms), .or(let terms):
            let isAnd = if case .and = filter { true } else { false }
            guard !terms.isEmpty else { sql += isAnd ? "TRUE" : "FALSE"; return }
            sql += "("
            for (offset, term) in terms.enumerated() {
                if offset > 0 { sql += isAnd ? " AND " : " OR " }
                try append(term, of: table, alias: alias, tables: tables)
            }
            sql += ")"
        case .not(let term):
            sql += "NOT ("
            try append(term, of: table, alias: alias, tables: tables)
            sql += ")"
        }
    }

    /// A new alias for a sub-query's table.
    private mutating func nextAlias() -> String {
        aliases += 1
        return "ripple_s\(aliases)"
    }

    /// Appends `WHERE`'s condition for the row whose key `values` hold.
    mutating func appendKey(of table: WritableTable, _ values: [String: WireValue]) {
        for (offset, name) in table.key.enumerated() {
            if offset > 0 { sql += " AND " }
            sql += "\(SQLIdentifier.quoted(name)) = "
            bind(values[name] ?? .null, as: table.types[name])
        }
    }
}
#endif
