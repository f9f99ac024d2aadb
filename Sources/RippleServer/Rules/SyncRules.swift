#if Sync
import Foundation
import RippleSync

/// Who may read what: per synced table, a read rule — a filter over the table's columns that
/// may name the user — ANDed into every subscription to the table. A row outside a user's rule
/// never reaches that user.
///
/// The rules file is JSON; a rule is a filter as in `FilterDescription`, where the value
/// `{"user": true}` stands for the user's id; `true` lets everyone read the table:
///
/// ```json
/// {"tables": {
///     "todos": {"read": {"column": "owner", "op": "=", "value": {"user": true}}},
///     "announcements": {"read": true}
/// }}
/// ```
///
/// A table the file does not name is not readable.
///
/// Rules may read other tables with `in` a sub-query and `exists` (see `FilterDescription`),
/// so that a membership decides what a user reads:
///
/// ```json
/// {"tables": {
///     "todos": {"read": {"or": [{"column": "owner", "op": "=", "value": {"user": true}},
///                               {"column": "project_id", "op": "in", "query": {"table": "members", "columns": ["project_id"],
///                                "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}]}},
///     "members": {"read": {"column": "user_id", "op": "=", "value": {"user": true}}}
/// }}
/// ```
///
/// A client's sub-query gets the read rule of the table it reads (see ``restrict(_:to:)``), so
/// it sees only rows the user may read; a rule's own sub-queries are evaluated as written.
///
/// A table is writable by clients only when its rules have a `write` rule: `true` (anyone may
/// write any row), or a filter that the row must pass as it was before a client's operation and
/// as it is after (see ``MutationWriter``):
///
/// ```json
/// {"tables": {
///     "todos": {"read": {"column": "owner", "op": "=", "value": {"user": true}},
///               "write": {"column": "owner", "op": "=", "value": {"user": true}}}
/// }}
/// ```
public struct SyncRules: Decodable, Sendable {
    public var tables: [String: TableRules]

    public struct TableRules: Decodable, Sendable {
        /// `nil`: everyone reads every row.
        public var read: RuleFilter?
        /// `nil`: clients may not write the table.
        public var write: WriteRule?

        /// Who may write a table's rows.
        public enum WriteRule: Sendable {
            /// Anyone, any row.
            case everyone
            /// Rows that pass the filter, before and after each operation.
            case rows(RuleFilter)
        }

        enum CodingKeys: String, CodingKey { case read, write }

        public init(read: RuleFilter?, write: WriteRule? = nil) { (self.read, self.write) = (read, write) }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if (try? container.decode(Bool.self, forKey: .read)) == true {
                read = nil
            } else {
                read = try container.decode(RuleFilter.self, forKey: .read)
            }
            if !container.contains(.write) || (try? container.decode(Bool.self, forKey: .write)) == false {
                write = nil
            } else if (try? container.decode(Bool.self, forKey: .write)) == true {
                write = .everyone
            } else {
                write = .rows(try container.decode(RuleFilter.self, forKey: .write))
            }
        }
    }

    public init(tables: [String: TableRules]) { self.tables = tables }

    /// Reads a rules file.
    ///
    /// - Throws: ``RulesError`` saying what is wrong (JSON, an unknown operator, a value).
    public init(json: Data) throws {
        do {
            self = try JSONDecoder().decode(SyncRules.self, from: json)
        } catch let error as DecodingError {
            throw RulesError("the rules file is not valid: \(error)")
        }
    }

    /// The filter a row of `table` must pass for `user` to write it (`nil`: any row).
    ///
    /// - Throws: ``RulesError`` when the rules let no one write the table.
    public func writeRule(of table: String, for user: String) throws -> FilterDescription? {
        switch tables[table]?.write {
        case nil: throw RulesError("the rules let no one write table \(table)")
        case .everyone?: return nil
        case .rows(let rule)?: return rule.filter(for: user)
        }
    }

    /// `query` with `user`'s read rule of its table ANDed into its filter, and into the filter
    /// of every sub-query the query's filter holds (at every depth) the read rule of the table
    /// that sub-query reads: a client's sub-query sees only rows the user may read. The rules'
    /// own sub-queries are the administrator's: they are evaluated as written (the table they
    /// read does not get its read rule applied again, which also ends any recursion).
    ///
    /// - Throws: ``RulesError`` naming a table the query or one of its sub-queries reads that
    ///   is not readable under the rules.
    public func restrict(_ query: QueryDescription, to user: String) throws -> QueryDescription {
        var restricted = query
        restricted.filter = try restrict(query.filter, of: query.table, to: user)
        return restricted
    }

    /// `filter` over `table` with `user`'s read rule of the table ANDed in (rule first), its
    /// sub-queries restricted likewise.
    private func restrict(_ filter: FilterDescription?, of table: String, to user: String) throws -> FilterDescription? {
        guard let rules = tables[table] else { throw RulesError("the rules let no one read table \(table)") }
        let own = rules.read?.filter(for: user)
        guard let filter else { return own }
        let client = try restrictSubqueries(filter, to: user)
        return own.map { .and([$0, client]) } ?? client
    }

    private func restrictSubqueries(_ filter: FilterDescription, to user: String) throws -> FilterDescription {
        switch filter {
        case .inQuery(let column, var query):
            query.filter = try restrict(query.filter, of: query.table, to: user)
            return .inQuery(column: column, query: query)
        case .exists(var exists):
            exists.filter = try restrict(exists.filter, of: exists.table, to: user)
            return .exists(exists)
        case .and(let terms): return .and(try terms.map { try restrictSubqueries($0, to: user) })
        case .or(let terms): return .or(try terms.map { try restrictSubqueries($0, to: user) })
        case .not(let term): return .not(try restrictSubqueries(term, to: user))
        case .compare, .isNull, .isNotNull, .isIn, .like: return filter
        }
    }

    /// The tables the read rules' sub-queries read (a query restricted by the rules may read
    /// them too).
    public var tablesReadByReadRules: Set<String> {
        tables.values.reduce(into: []) { names, rules in
            if let read = rules.read { names.formUnion(read.tablesRead) }
        }
    }
}

/// A read rule: a `FilterDescription` whose values may stand for the user's id.
public indirect enum RuleFilter: Decodable, Hashable, Sendable {
    case compare(column: String, op: FilterDescription.Comparison, value: RuleValue)
    case isNull(column: String)
    case isNotNull(column: String)
    case isIn(column: String, values: [RuleValue])
    /// The column's value is among those a sub-query of another table selects (see
    /// `SubqueryDescription`); evaluated as written, without the other table's read rule.
    case inQuery(column: String, query: Subquery)
    /// Some row of another table relates to this one (see `ExistsDescription`); evaluated as
    /// written, without the other table's read rule.
    case exists(Exists)
    case and([RuleFilter])
    case or([RuleFilter])
    case not(RuleFilter)

    /// A literal value, or the user's id.
    public enum RuleValue: Decodable, Hashable, Sendable {
        case value(WireValue)
        case user

        enum CodingKeys: String, CodingKey { case user }

        public init(from decoder: any Decoder) throws {
            if let container = try? decoder.container(keyedBy: CodingKeys.self) {
                guard try container.decode(Bool.self, forKey: .user) else {
                    throw DecodingError.dataCorruptedError(forKey: .user, in: container, debugDescription: "write {\"user\": true}")
                }
                self = .user
            } else {
                self = .value(try WireValue(from: decoder))
            }
        }

        func resolved(for user: String) -> WireValue {
            switch self {
            case .value(let value): value
            case .user: .text(user)
            }
        }
    }

    enum CodingKeys: String, CodingKey { case column, op, value, values, query, exists, and, or, not }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let exists = try container.decodeIfPresent(Exists.self, forKey: .exists) { self = .exists(exists); return }
        if let terms = try container.decodeIfPresent([RuleFilter].self, forKey: .and) { self = .and(terms); return }
        if let terms = try container.decodeIfPresent([RuleFilter].self, forKey: .or) { self = .or(terms); return }
        if let term = try container.decodeIfPresent(RuleFilter.self, forKey: .not) { self = .not(term); return }
        let column = try container.decode(String.self, forKey: .column)
        let op = try container.decode(String.self, forKey: .op)
        switch op {
        case "is null": self = .isNull(column: column)
        case "is not null": self = .isNotNull(column: column)
        case "in" where container.contains(.query):
            self = .inQuery(column: column, query: try container.decode(Subquery.self, forKey: .query))
        case "in": self = .isIn(column: column, values: try container.decode([RuleValue].self, forKey: .values))
        default:
            guard let comparison = FilterDescription.Comparison(rawValue: op) else {
                throw DecodingError.dataCorruptedError(forKey: .op, in: container, debugDescription: "unknown operator \(op)")
            }
            self = .compare(column: column, op: comparison, value: try container.decode(RuleValue.self, forKey: .value))
        }
    }

    /// The rule for `user`, as a query's filter.
    public func filter(for user: String) -> FilterDescription {
        switch self {
        case .compare(let column, let op, let value): .compare(column: column, op: op, value: value.resolved(for: user))
        case .isNull(let column): .isNull(column: column)
        case .isNotNull(let column): .isNotNull(column: column)
        case .isIn(let column, let values): .isIn(column: column, values: values.map { $0.resolved(for: user) })
        case .inQuery(let column, let query):
            .inQuery(column: column, query: SubqueryDescription(table: query.table, column: query.column,
                                                                filter: query.filter?.filter(for: user)))
        case .exists(let exists): .exists(ExistsDescription(table: exists.table, on: exists.on, filter: exists.filter?.filter(for: user)))
        case .and(let terms): .and(terms.map { $0.filter(for: user) })
        case .or(let terms): .or(terms.map { $0.filter(for: user) })
        case .not(let term): .not(term.filter(for: user))
        }
    }
}

/// Rules that cannot be read or applied, and why.
public struct RulesError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
