/// Related rows a subscription brings with its result: each row's project and assignee
/// (to-one), or each project's todos (to-many).
///
/// ```json
/// {"table": "todos", "order": [{"column": "rank"}], "limit": 50,
///  "include": {
///    "project":  {"table": "projects", "on": {"project_id": "id"}},
///    "comments": {"table": "comments", "on": {"id": "todo_id"},
///                 "order": [{"column": "at", "descending": true}], "limit": 3}}}
/// ```
///
/// `on` maps the parent's columns to the included table's: a related row is one whose
/// columns equal the parent row's, pair by pair (a NULL relates to nothing, as in SQL). The
/// parent's `on` columns must be among the columns it selects.
///
/// * **To-one**: `on` reaches exactly the included table's primary key. Each parent row refers
///   to at most one row. The subscription holds the rows its parents refer to as a keyed set,
///   each sent once while any parent refers to it.
/// * **To-many**: any other `on`. Each parent row has a list of children with their own
///   ``filter``, ``order`` and ``limit`` (per parent). The subscription holds them as a
///   *sectioned list*: the sections are the parent rows in their order, the items each
///   parent's children in theirs.
///
/// The included table's read rule applies: a row its user may not read is never sent. The
/// reference stays: a todo whose project the user may not read still says `project_id = 7`,
/// and its to-one set has no row 7.
///
/// Includes nest (``include``) to-one only: a to-one inside a to-one (each todo's project's
/// owner) or inside a to-many (each todo's assignee in each project's todos). A to-many include
/// is top-level only: its sections are the root's rows (a sectioned list has one level of
/// sections). At most ``IncludeDescription/maximumDepth`` levels, and
/// ``IncludeDescription/maximumCount`` includes in a subscription.
public struct IncludeDescription: Codable, Hashable, Sendable {
    /// How deep includes nest: an include's own includes are level 2.
    public static let maximumDepth = 2
    /// How many includes a subscription may have, at every level.
    public static let maximumCount = 8

    /// The included synced table.
    public var table: String
    /// The parent's columns, each mapped to the included table's column it equals. At least one.
    public var on: [String: String]
    /// Which related rows are included; `nil`: every one the user may read.
    public var filter: FilterDescription?
    /// A to-many include's order of each parent's children (the included table's key breaks
    /// ties). Ignored for a to-one include.
    public var order: [OrderDescription]
    /// A to-many include's number of children per parent; `nil`: all of them.
    public var limit: Int?
    /// The included table's columns to send (its key's are always sent); `nil`: all.
    public var columns: [String]?
    /// The included rows' own includes, by name.
    public var include: [String: IncludeDescription]?

    public init(table: String, on: [String: String], filter: FilterDescription? = nil, order: [OrderDescription] = [],
                limit: Int? = nil, columns: [String]? = nil, include: [String: IncludeDescription]? = nil) {
        (self.table, self.on, self.filter, self.order, self.limit) = (table, on, filter, order, limit)
        (self.columns, self.include) = (columns, include)
    }

    enum CodingKeys: String, CodingKey { case table, on, filter, order, limit, columns, include }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        table = try container.decode(String.self, forKey: .table)
        on = try container.decode([String: String].self, forKey: .on)
        guard !on.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: .on, in: container, debugDescription: "on must map at least one column")
        }
        filter = try container.decodeIfPresent(FilterDescription.self, forKey: .filter)
        order = try container.decodeIfPresent([OrderDescription].self, forKey: .order) ?? []
        limit = try container.decodeIfPresent(Int.self, forKey: .limit)
        if let limit, limit < 0 {
            throw DecodingError.dataCorruptedError(forKey: .limit, in: container, debugDescription: "a limit is 0 or more, not \(limit)")
        }
        columns = try container.decodeIfPresent([String].self, forKey: .columns)
        include = try container.decodeIfPresent([String: IncludeDescription].self, forKey: .include)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(table, forKey: .table)
        try container.encode(on, forKey: .on)
        try container.encodeIfPresent(filter, forKey: .filter)
        if !order.isEmpty { try container.encode(order, forKey: .order) }
        try container.encodeIfPresent(limit, forKey: .limit)
        try container.encodeIfPresent(columns, forKey: .columns)
        if let include, !include.isEmpty { try container.encode(include, forKey: .include) }
    }

    /// Whether `name` may name an include: a letter or `_`, then letters, digits or `_`
    /// (ASCII), at most 63 bytes — a name that is also a column, a table and a path segment
    /// (`todos.assignee`) without quoting.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard let first = bytes.first, bytes.count <= 63 else { return false }
        func isLetter(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
        return isLetter(first) && bytes.dropFirst().allSatisfy { isLetter($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// What is wrong with `includes` (a query's, at `path`, such as `query.include`) by the
    /// rules that need no schema, in words that name where: a name that is not
    /// ``isValidName(_:)``, more than ``maximumCount`` includes in all, nesting deeper than
    /// ``maximumDepth``, an `on` without pairs, a negative `limit`. `nil`: nothing.
    ///
    /// Whether each include is to-one or to-many, and whether its table and columns exist, needs
    /// the schema: the node checks those.
    package static func problem(in includes: [String: IncludeDescription], at path: String) -> String? {
        var count = 0
        func check(_ includes: [String: IncludeDescription], at path: String, level: Int) -> String? {
            guard !includes.isEmpty else { return nil }
            guard level <= maximumDepth else { return "\(path): includes nest at most \(maximumDepth) deep" }
            for (name, include) in includes.sorted(by: { $0.key < $1.key }) {
                guard isValidName(name) else {
                    return "\(path): \(JSONBytes.quoted(name)) is not an include's name (a letter or _, then letters, digits or _; "
                        + "at most 63 bytes)"
                }
                count += 1
                guard count <= maximumCount else { return "\(path).\(name): a query has at most \(maximumCount) includes, at every level" }
                let at = "\(path).\(name)"
                guard !include.on.isEmpty else { return "\(at).on must map at least one column" }
                if let limit = include.limit, limit < 0 { return "\(at).limit: a limit is 0 or more, not \(limit)" }
                if let nested = include.include, let problem = check(nested, at: "\(at).include", level: level + 1) { return problem }
            }
            return nil
        }
        return check(includes, at: path, level: 1)
    }

    /// `on`'s pairs in a fixed order (by the parent's column).
    public var pairs: [(parent: String, related: String)] {
        on.sorted { $0.key < $1.key }.map { (parent: $0.key, related: $0.value) }
    }
}

extension QueryDescription {
    /// Every include of the query, nested ones after their parent, each with its path (its
    /// name, or its parent's path, `.`, its name) and its parent's path (`nil`: the root), in a
    /// fixed order (by name at each level).
    public var includePaths: [(path: String, parent: String?, include: IncludeDescription)] {
        var out: [(path: String, parent: String?, include: IncludeDescription)] = []
        func walk(_ includes: [String: IncludeDescription]?, parent: String?) {
            for (name, include) in (includes ?? [:]).sorted(by: { $0.key < $1.key }) {
                let path = parent.map { "\($0).\(name)" } ?? name
                out.append((path, parent, include))
                walk(include.include, parent: path)
            }
        }
        walk(include, parent: nil)
        return out
    }

    /// The query with `include` added under `name` (replacing one of that name).
    public func including(_ name: String, _ include: IncludeDescription) -> QueryDescription {
        var query = self
        query.include = (query.include ?? [:]).merging([name: include]) { _, new in new }
        return query
    }
}

extension IncludeDescription {
    /// A to-one include: the row of `table` whose key columns equal the parent's `columns`
    /// (`["project_id": "id"]`).
    public static func row(of table: String, on columns: [String: String], columns selected: [String]? = nil) -> IncludeDescription {
        IncludeDescription(table: table, on: columns, columns: selected)
    }

    /// A to-many include: the rows of `table` related to each parent by `columns`
    /// (`["id": "project_id"]`), filtered, ordered and limited per parent.
    public static func rows(of table: String, on columns: [String: String], where filter: FilterDescription? = nil,
                            order: [OrderDescription] = [], limit: Int? = nil, columns selected: [String]? = nil) -> IncludeDescription {
        IncludeDescription(table: table, on: columns, filter: filter, order: order, limit: limit, columns: selected)
    }

    /// This include with `include` added under `name`.
    public func including(_ name: String, _ include: IncludeDescription) -> IncludeDescription {
        var copy = self
        copy.include = (copy.include ?? [:]).merging([name: include]) { _, new in new }
        return copy
    }
}
