/// A subscription's query, described rather than written in SQL: which table, which rows (a
/// filter tree), in which order, which window, which columns. Clients send it as JSON; the
/// server checks it against the table's schema and the user's rules and runs it with
/// PostgreSQL's meaning (see the protocol documentation).
///
/// ```json
/// {"table": "todos",
///  "filter": {"and": [{"column": "done", "op": "=", "value": false}, {"column": "title", "op": "like", "value": "%milk%"}]},
///  "order": [{"column": "rank"}, {"column": "title", "descending": true}],
///  "limit": 50}
/// ```
public struct QueryDescription: Codable, Hashable, Sendable {
    /// The synced table.
    public var table: String
    /// Which rows; `nil`: all.
    public var filter: FilterDescription?
    /// The order, most significant first; the table's key breaks ties (so the order is total).
    public var order: [OrderDescription]
    /// At most this many rows, after skipping `offset`.
    public var limit: Int?
    public var offset: Int?
    /// The columns to send (the key's are always sent); `nil`: every column.
    public var columns: [String]?

    /// Related rows sent with the result, by name (see ``IncludeDescription``); `nil` or empty:
    /// none, and the subscription is the flat list it always was.
    public var include: [String: IncludeDescription]?

    public init(table: String, filter: FilterDescription? = nil, order: [OrderDescription] = [], limit: Int? = nil,
                offset: Int? = nil, columns: [String]? = nil, include: [String: IncludeDescription]? = nil) {
        (self.table, self.filter, self.order, self.limit, self.offset, self.columns) = (table, filter, order, limit, offset, columns)
        self.include = include
    }

    /// Whether the query brings related rows with its result.
    public var hasIncludes: Bool { !(include?.isEmpty ?? true) }

    enum CodingKeys: String, CodingKey { case table, filter, order, limit, offset, columns, include }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        table = try container.decode(String.self, forKey: .table)
        filter = try container.decodeIfPresent(FilterDescription.self, forKey: .filter)
        order = try container.decodeIfPresent([OrderDescription].self, forKey: .order) ?? []
        limit = try container.decodeIfPresent(Int.self, forKey: .limit)
        offset = try container.decodeIfPresent(Int.self, forKey: .offset)
        columns = try container.decodeIfPresent([String].self, forKey: .columns)
        include = try container.decodeIfPresent([String: IncludeDescription].self, forKey: .include)
        if let include, let problem = IncludeDescription.problem(in: include, at: "include") {
            throw DecodingError.dataCorruptedError(forKey: .include, in: container, debugDescription: problem)
        }
    }
}

/// One term of a query's order.
public struct OrderDescription: Codable, Hashable, Sendable {
    public var column: String
    public var descending: Bool
    /// Where NULLs go; `nil`: as PostgreSQL puts them by default (last ascending, first descending).
    public var nullsFirst: Bool?

    public init(column: String, descending: Bool = false, nullsFirst: Bool? = nil) {
        (self.column, self.descending, self.nullsFirst) = (column, descending, nullsFirst)
    }

    enum CodingKeys: String, CodingKey { case column, descending, nullsFirst = "nulls_first" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        column = try container.decode(String.self, forKey: .column)
        descending = try container.decodeIfPresent(Bool.self, forKey: .descending) ?? false
        nullsFirst = try container.decodeIfPresent(Bool.self, forKey: .nullsFirst)
    }
}

/// A value in a query description or a row on the wire. Integers beyond ±2⁵³ and numerics
/// travel as strings (JSON readers lose their digits); the server reads a string as the
/// column's type.
public enum WireValue: Codable, Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case text(String)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let bool = try? container.decode(Bool.self) { self = .bool(bool) }
        else if let integer = try? container.decode(Int64.self) { self = .integer(integer) }
        else if let real = try? container.decode(Double.self) { self = .real(real) }
        else if let text = try? container.decode(String.self) { self = .text(text) }
        else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "a value must be null, a bool, a number or a string")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let bool): try container.encode(bool)
        case .integer(let integer): try container.encode(integer)
        case .real(let real): try container.encode(real)
        case .text(let text): try container.encode(text)
        }
    }
}

/// A filter tree: comparisons of a column with a value, NULL tests, `in` a list or a sub-query,
/// `like`, `exists` over a related table, and `and`, `or`, `not` of filters.
///
/// JSON: `{"column": "rank", "op": "<", "value": 3}` (ops `=`, `!=`, `<`, `<=`, `>`, `>=`),
/// `{"column": "due", "op": "is null"}`, `{"column": "due", "op": "is not null"}`,
/// `{"column": "tag", "op": "in", "values": ["a", "b"]}`, `{"column": "title", "op": "like",
/// "value": "a%"}` (case-sensitive; `%` any run, `_` one character, `\` escapes),
/// `{"and": [...]}`, `{"or": [...]}`, `{"not": {...}}`, and over other tables:
///
/// ```json
/// {"column": "project_id", "op": "in",
///  "query": {"table": "members", "columns": ["project_id"], "filter": {"column": "role", "op": "=", "value": "owner"}}}
/// {"exists": {"table": "comments", "on": {"id": "todo_id"}, "filter": {"column": "flagged", "op": "=", "value": true}}}
/// ```
///
/// Both mean what they mean in PostgreSQL, NULLs included (see ``SubqueryDescription`` and
/// ``ExistsDescription``); `not` of an `in` is SQL's `NOT IN`.
public indirect enum FilterDescription: Codable, Hashable, Sendable {
    case compare(column: String, op: Comparison, value: WireValue)
    case isNull(column: String)
    case isNotNull(column: String)
    case isIn(column: String, values: [WireValue])
    case like(column: String, pattern: String)
    /// The column's value is among the values a sub-query selects (SQL's `column IN (SELECT …)`).
    case inQuery(column: String, query: SubqueryDescription)
    /// Some row of another table relates to this one (SQL's correlated `EXISTS (SELECT …)`).
    case exists(ExistsDescription)
    case and([FilterDescription])
    case or([FilterDescription])
    case not(FilterDescription)

    public enum Comparison: String, Codable, Hashable, Sendable, CaseIterable {
        case equal = "=", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    }

    enum CodingKeys: String, CodingKey { case column, op, value, values, query, exists, and, or, not }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let terms = try container.decodeIfPresent([FilterDescription].self, forKey: .and) { self = .and(terms); return }
        if let terms = try container.decodeIfPresent([FilterDescription].self, forKey: .or) { self = .or(terms); return }
        if let term = try container.decodeIfPresent(FilterDescription.self, forKey: .not) { self = .not(term); return }
        if let exists = try container.decodeIfPresent(ExistsDescription.self, forKey: .exists) { self = .exists(exists); return }
        let column = try container.decode(String.self, forKey: .column)
        let op = try container.decode(String.self, forKey: .op)
        switch op {
        case "is null": self = .isNull(column: column)
        case "is not null": self = .isNotNull(column: column)
        case "in" where container.contains(.query):
            self = .inQuery(column: column, query: try container.decode(SubqueryDescription.self, forKey: .query))
        case "in": self = .isIn(column: column, values: try container.decode([WireValue].self, forKey: .values))
        case "like":
            guard case .text(let pattern) = try container.decode(WireValue.self, forKey: .value) else {
                throw DecodingError.dataCorruptedError(forKey: .value, in: container, debugDescription: "a like pattern is a string")
            }
            self = .like(column: column, pattern: pattern)
        default:
            guard let comparison = Comparison(rawValue: op) else {
                throw DecodingError.dataCorruptedError(forKey: .op, in: container, debugDescription: "unknown operator \(op)")
            }
            self = .compare(column: column, op: comparison, value: try container.decode(WireValue.self, forKey: .value))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .compare(let column, let op, let value):
            try container.encode(column, forKey: .column)
            try container.encode(op.rawValue, forKey: .op)
            try container.encode(value, forKey: .value)
        case .isNull(let column):
            try container.encode(column, forKey: .column)
            try container.encode("is null", forKey: .op)
        case .isNotNull(let column):
            try container.encode(column, forKey: .column)
            try container.encode("is not null", forKey: .op)
        case .isIn(let column, let values):
            try container.encode(column, forKey: .column)
            try container.encode("in", forKey: .op)
            try container.encode(values, forKey: .values)
        case .like(let column, let pattern):
            try container.encode(column, forKey: .column)
            try container.encode("like", forKey: .op)
            try container.encode(WireValue.text(pattern), forKey: .value)
        case .inQuery(let column, let query):
            try container.encode(column, forKey: .column)
            try container.encode("in", forKey: .op)
            try container.encode(query, forKey: .query)
        case .exists(let exists):
            try container.encode(exists, forKey: .exists)
        case .and(let terms): try container.encode(terms, forKey: .and)
        case .or(let terms): try container.encode(terms, forKey: .or)
        case .not(let term): try container.encode(term, forKey: .not)
        }
    }
}
