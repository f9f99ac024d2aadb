#if Sync
import PostgresNIO
import RippleServer
import RippleSync

/// A described filter as Postgres SQL, values bound: the oracle's side of the query meaning
/// tests, written apart from the node's compiler (and from `SyncRules.restrict`: a client's
/// sub-query gets its table's read rule here by this translator's own hand).
struct PostgresFilterTranslator {
    let tables: [String: SyncedTableSchema]
    /// The read rule of a table, for the user (`nil`: none): ANDed into every sub-query of the
    /// client's filter, and evaluated as written itself.
    let rule: (String) -> FilterDescription?
    var bindings = PostgresBindings()
    private var aliases = 0

    init(tables: [String: SyncedTableSchema], rule: @escaping (String) -> FilterDescription? = { _ in nil }) {
        (self.tables, self.rule) = (tables, rule)
    }

    mutating func bind(_ value: WireValue, _ type: UInt32) -> String {
        switch value {
        case .null: bindings.appendNull()
        case .bool(let bool): bindings.append(bool)
        case .integer(let integer): bindings.append(integer)
        case .real(let real): bindings.append(real)
        case .text(let text): bindings.append(text)
        }
        let cast = switch type {
        case PostgresTypes.OID.int2, PostgresTypes.OID.int4, PostgresTypes.OID.int8: "::int8"
        case PostgresTypes.OID.float8: "::float8"
        case PostgresTypes.OID.numeric: "::numeric"
        case PostgresTypes.OID.timestamptz: "::timestamptz"
        case PostgresTypes.OID.date: "::date"
        case PostgresTypes.OID.bpchar: "::bpchar"
        default: ""
        }
        return "$\(bindings.count)\(cast)"
    }

    /// `filter` over `table`, named `qualifier` in the SQL; `client`: a client's filter (its
    /// sub-queries get their tables' read rules), or a rule's (as written).
    mutating func condition(_ filter: FilterDescription, over table: SyncedTableSchema, as qualifier: String, client: Bool) -> String {
        func column(_ name: String, collated: Bool = true) -> (String, UInt32) {
            let type = table.columns.first { $0.name == name }!.typeOID
            let sql = "\"\(qualifier)\".\"\(name)\""
            return (collated && [PostgresTypes.OID.text, PostgresTypes.OID.bpchar].contains(type) ? sql + " COLLATE \"C\"" : sql, type)
        }
        switch filter {
        case .compare(let name, let op, let value):
            let (sql, type) = column(name)
            return "\(sql) \(op == .notEqual ? "<>" : op.rawValue) \(bind(value, type))"
        case .isNull(let name): return "\(column(name).0) IS NULL"
        case .isNotNull(let name): return "\(column(name).0) IS NOT NULL"
        case .isIn(let name, let values):
            let (sql, type) = column(name)
            return values.isEmpty ? "false" : "\(sql) IN (\(values.map { bind($0, type) }.joined(separator: ", ")))"
        case .like(let name, let pattern): return "\(column(name).0) LIKE \(bind(.text(pattern), PostgresTypes.OID.text))"
        case .inQuery(let name, let query):
            let other = tables[query.table]!
            aliases += 1
            let alias = "o\(aliases)"
            let conditions = inner(query.filter, over: other, as: alias, client: client)
            return "\(column(name, collated: false).0) IN (SELECT \"\(alias)\".\"\(query.column)\" FROM \"\(other.name)\" AS \"\(alias)\""
                + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")) + ")"
        case .exists(let exists):
            let other = tables[exists.table]!
            aliases += 1
            let alias = "o\(aliases)"
            let pairs = exists.pairs.map { "\"\(alias)\".\"\($0.related)\" = \(column($0.column, collated: false).0)" }
            let conditions = pairs + inner(exists.filter, over: other, as: alias, client: client)
            return "EXISTS (SELECT 1 FROM \"\(other.name)\" AS \"\(alias)\" WHERE \(conditions.joined(separator: " AND ")))"
        case .and(let terms):
            return terms.isEmpty ? "true" : "(" + terms.map { condition($0, over: table, as: qualifier, client: client) }.joined(separator: " AND ") + ")"
        case .or(let terms):
            return terms.isEmpty ? "false" : "(" + terms.map { condition($0, over: table, as: qualifier, client: client) }.joined(separator: " OR ") + ")"
        case .not(let term): return "NOT (" + condition(term, over: table, as: qualifier, client: client) + ")"
        }
    }

    /// A sub-query's conditions: its table's read rule (for a client's), then its own filter.
    private mutating func inner(_ filter: FilterDescription?, over table: SyncedTableSchema, as alias: String, client: Bool) -> [String] {
        var conditions: [String] = []
        if client, let rule = rule(table.name) { conditions.append("(" + condition(rule, over: table, as: alias, client: false) + ")") }
        if let filter { conditions.append("(" + condition(filter, over: table, as: alias, client: client) + ")") }
        return conditions
    }
}
#endif
