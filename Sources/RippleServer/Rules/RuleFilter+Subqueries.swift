#if Sync
import RippleSync

extension RuleFilter {
    /// A rule's `in` sub-query: one column of another synced table, of the rows its filter
    /// (a rule filter: values may stand for the user) selects.
    ///
    /// ```json
    /// {"column": "project_id", "op": "in",
    ///  "query": {"table": "members", "columns": ["project_id"], "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}
    /// ```
    public struct Subquery: Decodable, Hashable, Sendable {
        /// The other synced table.
        public var table: String
        /// The one column it selects.
        public var column: String
        /// Which of its rows; `nil`: all.
        public var filter: RuleFilter?

        public init(table: String, column: String, filter: RuleFilter? = nil) {
            (self.table, self.column, self.filter) = (table, column, filter)
        }

        enum CodingKeys: String, CodingKey { case table, columns, filter }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            table = try container.decode(String.self, forKey: .table)
            let columns = try container.decode([String].self, forKey: .columns)
            guard columns.count == 1 else {
                throw DecodingError.dataCorruptedError(forKey: .columns, in: container,
                                                       debugDescription: "a sub-query selects exactly one column, not \(columns.count)")
            }
            column = columns[0]
            filter = try container.decodeIfPresent(RuleFilter.self, forKey: .filter)
        }
    }

    /// A rule's `exists`: some row of another synced table relates to this one (`on` maps this
    /// table's columns to the other's) and passes the filter.
    ///
    /// ```json
    /// {"exists": {"table": "members", "on": {"project_id": "project_id"},
    ///             "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}
    /// ```
    public struct Exists: Decodable, Hashable, Sendable {
        /// The other synced table.
        public var table: String
        /// This table's columns, each mapped to the other table's column it equals. At least one.
        public var on: [String: String]
        /// Which related rows count; `nil`: any.
        public var filter: RuleFilter?

        public init(table: String, on: [String: String], filter: RuleFilter? = nil) {
            (self.table, self.on, self.filter) = (table, on, filter)
        }

        enum CodingKeys: String, CodingKey { case table, on, filter }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            table = try container.decode(String.self, forKey: .table)
            on = try container.decode([String: String].self, forKey: .on)
            guard !on.isEmpty else {
                throw DecodingError.dataCorruptedError(forKey: .on, in: container, debugDescription: "exists relates no columns: on needs a pair at least")
            }
            filter = try container.decodeIfPresent(RuleFilter.self, forKey: .filter)
        }
    }

    /// The tables this rule's sub-queries read, at every depth.
    var tablesRead: Set<String> {
        switch self {
        case .inQuery(_, let query): Set([query.table]).union(query.filter?.tablesRead ?? [])
        case .exists(let exists): Set([exists.table]).union(exists.filter?.tablesRead ?? [])
        case .and(let terms), .or(let terms): terms.reduce(into: []) { $0.formUnion($1.tablesRead) }
        case .not(let term): term.tablesRead
        case .compare, .isNull, .isNotNull, .isIn: []
        }
    }
}
#endif
