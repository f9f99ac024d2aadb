/// An `exists` filter: some row of another synced table relates to this one.
///
/// ```json
/// {"exists": {"table": "comments", "on": {"id": "todo_id"}, "filter": {"column": "flagged", "op": "=", "value": true}}}
/// ```
///
/// It means SQL's correlated `EXISTS (SELECT 1 FROM comments WHERE comments.todo_id = todos.id
/// AND flagged)`, as PostgreSQL evaluates it: `on` maps this table's columns to the other's,
/// every pair compared with `=` (so a NULL on either side relates to nothing), and the related
/// rows are those the filter selects.
///
/// The other table's read rule is applied to it: rows the user may not read never count.
/// `exists` nests to the same bounded depth as ``SubqueryDescription``.
public struct ExistsDescription: Codable, Hashable, Sendable {
    /// The other synced table.
    public var table: String
    /// This table's columns, each mapped to the other table's column it equals. At least one.
    public var on: [String: String]
    /// Which related rows count; `nil`: any.
    public var filter: FilterDescription?

    public init(table: String, on: [String: String], filter: FilterDescription? = nil) {
        (self.table, self.on, self.filter) = (table, on, filter)
    }

    enum CodingKeys: String, CodingKey { case table, on, filter }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        table = try container.decode(String.self, forKey: .table)
        on = try container.decode([String: String].self, forKey: .on)
        guard !on.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: .on, in: container, debugDescription: "on must map at least one column")
        }
        filter = try container.decodeIfPresent(FilterDescription.self, forKey: .filter)
    }

    /// `on`'s pairs in a fixed order (by this table's column), as the query is compiled.
    public var pairs: [(column: String, related: String)] {
        on.sorted { $0.key < $1.key }.map { (column: $0.key, related: $0.value) }
    }
}
