/// A sub-query for an `in` filter: one column of another synced table, of the rows its own
/// filter selects.
///
/// ```json
/// {"column": "project_id", "op": "in",
///  "query": {"table": "members", "columns": ["project_id"], "filter": {"column": "user_id", "op": "=", "value": "alice"}}}
/// ```
///
/// It means SQL's `project_id IN (SELECT project_id FROM members WHERE user_id = 'alice')`, as
/// PostgreSQL evaluates it: a row whose column is NULL is not selected; under `not`, a
/// sub-query that selects a NULL selects no row (`NOT IN` is never true then); an empty
/// sub-query selects no row under `in` and every row under `not`.
///
/// The sub-query sees only the rows of its table that the user may read (the table's read rule
/// is applied to it), so a filter can never tell a user anything about rows they cannot read.
/// The compared columns must compare alike (both integers or floats, both text, both uuid…).
/// Sub-queries nest (a sub-query's filter may hold `in` and `exists` of its own) to a bounded
/// depth; see the protocol article.
public struct SubqueryDescription: Codable, Hashable, Sendable {
    /// The other synced table.
    public var table: String
    /// The one column it selects.
    public var column: String
    /// Which of its rows; `nil`: all (that the user may read).
    public var filter: FilterDescription?

    public init(table: String, column: String, filter: FilterDescription? = nil) {
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
        filter = try container.decodeIfPresent(FilterDescription.self, forKey: .filter)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(table, forKey: .table)
        try container.encode([column], forKey: .columns)
        try container.encodeIfPresent(filter, forKey: .filter)
    }
}
