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
/// Read rules may use the claims of the user's JSON Web Token (see ``SyncIdentity``):
/// `{"claim": "org_id"}` stands for the claim's value (a string, number or boolean), and with
/// `in`, `{"claim": "orgs"}` for each element of an array claim:
///
/// ```json
/// {"tables": {
///     "invoices": {"read": {"column": "org_id", "op": "=", "value": {"claim": "org_id"}}},
///     "projects": {"read": {"column": "org_id", "op": "in", "value": {"claim": "orgs"}}}
/// }}
/// ```
///
/// Claims are bound as parameters like every value. A subscription whose rule needs a claim
/// the token lacks, or holds as another type (an array with `=`, an object), is refused with
/// `forbidden` naming the claim: a token that does not say what the rules need is a mistake of
/// the identity provider's configuration, which matching no rows would hide. An empty array
/// claim with `in` matches no rows. Write rules name the user only: a rules file whose write
/// rule uses a claim is refused when it is read.
///
/// A client's sub-query gets the read rule of the table it reads (see `restrict(_:to:)`), so
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
                let rule = try container.decode(RuleFilter.self, forKey: .write)
                guard rule.claimsUsed.isEmpty else {
                    throw DecodingError.dataCorruptedError(forKey: .write, in: container,
                                                           debugDescription: "a write rule names the user only, not claims")
                }
                write = .rows(rule)
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

    /// The claims the read rules use, by name: two identities of one user that agree on them
    /// read the same rows (an `auth` renewal must keep them).
    public var claimsUsed: Set<String> {
        tables.values.reduce(into: []) { names, rules in
            if let read = rules.read { names.formUnion(read.claimsUsed) }
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
        try restrict(query, to: SyncIdentity(user: user))
    }

    /// `query` restricted as the form for a user id says, for `identity` (its claims
    /// standing for the rules' `{"claim": …}` values).
    ///
    /// - Throws: ``RulesError`` as that does, and naming a claim a rule needs that the
    ///   identity lacks or holds as another type.
    public func restrict(_ query: QueryDescription, to identity: SyncIdentity) throws -> QueryDescription {
        var restricted = query
        restricted.filter = try restrict(query.filter, of: query.table, to: identity)
        return restricted
    }

    /// `filter` over `table` with `user`'s read rule of the table ANDed in (rule first), its
    /// sub-queries restricted likewise.
    private func restrict(_ filter: FilterDescription?, of table: String, to user: SyncIdentity) throws -> FilterDescription? {
        guard let rules = tables[table] else { throw RulesError("the rules let no one read table \(table)") }
        let own: FilterDescription?
        do {
            own = try rules.read?.filter(for: user)
        } catch let error as RulesError {
            throw RulesError("the read rule of \(table): \(error.description)")
        }
        guard let filter else { return own }
        let client = try restrictSubqueries(filter, to: user)
        return own.map { .and([$0, client]) } ?? client
    }

    private func restrictSubqueries(_ filter: FilterDescription, to user: SyncIdentity) throws -> FilterDescription {
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

    /// A literal value, the user's id (`{"user": true}`), or a claim of the user's token
    /// (`{"claim": "org_id"}`).
    public enum RuleValue: Decodable, Hashable, Sendable {
        case value(WireValue)
        case user
        case claim(String)

        enum CodingKeys: String, CodingKey { case user, claim }

        public init(from decoder: any Decoder) throws {
            if let container = try? decoder.container(keyedBy: CodingKeys.self) {
                if let claim = try container.decodeIfPresent(String.self, forKey: .claim) {
                    guard !claim.isEmpty else {
                        throw DecodingError.dataCorruptedError(forKey: .claim, in: container, debugDescription: "a claim has a name")
                    }
                    self = .claim(claim)
                    return
                }
                guard try container.decode(Bool.self, forKey: .user) else {
                    throw DecodingError.dataCorruptedError(forKey: .user, in: container, debugDescription: "write {\"user\": true}")
                }
                self = .user
            } else {
                self = .value(try WireValue(from: decoder))
            }
        }

        /// The one value this stands for.
        ///
        /// - Throws: ``RulesError`` for a claim the identity lacks, or that is not a string,
        ///   number or boolean.
        func resolved(for identity: SyncIdentity) throws -> WireValue {
            switch self {
            case .value(let value): return value
            case .user: return .text(identity.user)
            case .claim(let name):
                guard let claim = identity.claims[name] else { throw RulesError("the token has no claim \(name)") }
                guard let value = claim.scalar else {
                    throw RulesError("the token's claim \(name) is not a string, number or boolean")
                }
                return value
            }
        }

        /// The values this stands for in an `in` list: an array claim's elements.
        ///
        /// - Throws: ``RulesError`` for a claim the identity lacks, or an element that is not a
        ///   string, number or boolean.
        func resolvedList(for identity: SyncIdentity) throws -> [WireValue] {
            guard case .claim(let name) = self, case .array(let elements)? = identity.claims[name] else {
                return [try resolved(for: identity)]
            }
            return try elements.map { element in
                guard let value = element.scalar else {
                    throw RulesError("the token's claim \(name) holds an element that is not a string, number or boolean")
                }
                return value
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
        case "in" where container.contains(.value):
            // `{"column": "org_id", "op": "in", "value": {"claim": "orgs"}}`: each element of an array claim.
            let value = try container.decode(RuleValue.self, forKey: .value)
            guard case .claim = value else {
                throw DecodingError.dataCorruptedError(forKey: .value, in: container,
                                                       debugDescription: "in takes values (a list), a query, or a value that is a claim")
            }
            self = .isIn(column: column, values: [value])
        case "in": self = .isIn(column: column, values: try container.decode([RuleValue].self, forKey: .values))
        default:
            guard let comparison = FilterDescription.Comparison(rawValue: op) else {
                throw DecodingError.dataCorruptedError(forKey: .op, in: container, debugDescription: "unknown operator \(op)")
            }
            self = .compare(column: column, op: comparison, value: try container.decode(RuleValue.self, forKey: .value))
        }
    }

    /// The rule for `user`, as a query's filter, for rules that name the user only: a claim
    /// stands for `null` here (which equals nothing). Sockets use the rule for their whole
    /// identity, claims and all.
    public func filter(for user: String) -> FilterDescription {
        // (Cannot throw: every claim is null.)
        (try? filter(for: SyncIdentity(user: user), claimsAsNull: true)) ?? .and([])
    }

    /// The rule for `identity`, as a query's filter: `{"user": true}` its user, each
    /// `{"claim": …}` its claim's value (bound as a parameter like every value).
    ///
    /// - Throws: ``RulesError`` naming a claim the identity lacks or holds as another type.
    public func filter(for identity: SyncIdentity) throws -> FilterDescription {
        try filter(for: identity, claimsAsNull: false)
    }

    private func filter(for identity: SyncIdentity, claimsAsNull: Bool) throws -> FilterDescription {
        let identity = claimsAsNull ? SyncIdentity(user: identity.user, expires: identity.expires,
                                                   claims: Dictionary(uniqueKeysWithValues: claimsUsed.map { ($0, SyncClaim.null) }))
                                    : identity
        return switch self {
        case .compare(let column, let op, let value): .compare(column: column, op: op, value: try value.resolved(for: identity))
        case .isNull(let column): .isNull(column: column)
        case .isNotNull(let column): .isNotNull(column: column)
        case .isIn(let column, let values): .isIn(column: column, values: try values.flatMap { try $0.resolvedList(for: identity) })
        case .inQuery(let column, let query):
            .inQuery(column: column, query: SubqueryDescription(table: query.table, column: query.column,
                                                                filter: try query.filter?.filter(for: identity)))
        case .exists(let exists):
            .exists(ExistsDescription(table: exists.table, on: exists.on, filter: try exists.filter?.filter(for: identity)))
        case .and(let terms): .and(try terms.map { try $0.filter(for: identity) })
        case .or(let terms): .or(try terms.map { try $0.filter(for: identity) })
        case .not(let term): .not(try term.filter(for: identity))
        }
    }

    /// The claims this rule uses, by name, at every depth.
    public var claimsUsed: Set<String> {
        func claims(_ values: [RuleValue]) -> Set<String> {
            Set(values.compactMap { if case .claim(let name) = $0 { name } else { nil } })
        }
        return switch self {
        case .compare(_, _, let value): claims([value])
        case .isIn(_, let values): claims(values)
        case .isNull, .isNotNull: []
        case .inQuery(_, let query): query.filter?.claimsUsed ?? []
        case .exists(let exists): exists.filter?.claimsUsed ?? []
        case .and(let terms), .or(let terms): terms.reduce(into: []) { $0.formUnion($1.claimsUsed) }
        case .not(let term): term.claimsUsed
        }
    }
}

/// Rules that cannot be read or applied, and why.
public struct RulesError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
