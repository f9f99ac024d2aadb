extension SyncProtocol {
    /// How deep a client's message may nest arrays and objects, the message's own object
    /// counting as 1: a deeper message is refused (`malformed`), wherever the nesting lies.
    public static let maximumNesting = 64
}

/// Why a node refuses a client's message: the `error` frame it answers with.
package struct ClientMessageRefusal: Error, Hashable, Sendable {
    /// `malformed`, `unknown_message` or `invalid_query`.
    package var code: SyncErrorCode
    /// What was wrong, in words.
    package var message: String
    /// The subscription the refused message is about: the `id` of a `subscribe` (when it is a
    /// string); `nil` for other messages.
    package var id: String?
}

extension ClientMessage {
    /// Reads a client's message from its UTF-8 text as the protocol page says a node reads it,
    /// refusing anything else with the error the page gives for it:
    ///
    /// * text that is not JSON (RFC 8259), or JSON that is not an object with a string `type`:
    ///   `malformed`;
    /// * an object nested deeper than ``SyncProtocol/maximumNesting``: `malformed`;
    /// * a `type` the protocol does not have: `unknown_message`;
    /// * a field missing or of the wrong type: `malformed`, or `invalid_query` inside `query`.
    ///
    /// A refusal of a `subscribe` names its `id` (when the `id` is a string). Fields a message
    /// does not define are ignored, and a name written twice in one object counts the first
    /// time. A number is read by its value: an integer field takes any number whose value is a
    /// whole number (`100`, `1e2`, `100.0`; `-0` is 0), and a number beyond a double's range
    /// (`1e400`) is no value at all.
    ///
    /// - Complexity: O(bytes).
    package static func read(json bytes: some Collection<UInt8>) throws(ClientMessageRefusal) -> ClientMessage {
        let tree: JSONTree
        do {
            tree = try FrameReader.tree(in: bytes, depth: SyncProtocol.maximumNesting)
        } catch {
            throw ClientMessageRefusal(code: .malformed, message: "the message is not JSON: at byte \(error.offset), \(error.reason)",
                                       id: nil)
        }
        guard case .object = tree, case .string(let type)? = tree.member("type") else {
            throw ClientMessageRefusal(code: .malformed, message: "a message is a JSON object with a \"type\" string", id: nil)
        }
        let id: String? = if type == "subscribe", case .string(let id)? = tree.member("id"), !id.isEmpty, id.utf8.count <= 256 {
            id
        } else {
            nil
        }
        var fields = MessageFields(type: type, id: id, tree: tree)
        guard !Self.nestsTooDeep(tree) else {
            throw ClientMessageRefusal(code: .malformed, message: "\(type): arrays and objects nest deeper than "
                                       + "\(SyncProtocol.maximumNesting)", id: id)
        }
        switch type {
        case "hello":
            return .hello(protocol: try fields.integer("protocol"), token: try fields.string("token"),
                          client: try fields.optional("client") { (value: JSONTree, path: String) throws(ClientMessageRefusal) in
                              try fields.string(value, at: path)
                          })
        case "subscribe":
            let subscription = try fields.string("id")
            let queryField = try fields.required("query")
            fields.inQuery = true
            let query = try fields.query(queryField)
            fields.inQuery = false
            let resume = try fields.optional("resume") { (value: JSONTree, path: String) throws(ClientMessageRefusal) in
                try fields.resume(value, at: path)
            }
            return .subscribe(id: subscription, query: query, resume: resume)
        case "unsubscribe":
            return .unsubscribe(id: try fields.string("id"))
        case "ping":
            return .ping
        case "push":
            return .push(mutations: try fields.mutations(try fields.required("mutations")))
        case "auth":
            return .auth(token: try fields.string("token"))
        default:
            throw ClientMessageRefusal(code: .unknownMessage, message: "there is no message \(JSONBytes.quoted(type)) "
                                       + "(hello, subscribe, unsubscribe, ping, push, auth)", id: nil)
        }
    }

    /// Whether `tree` holds a value nested deeper than the reader keeps (checked iteratively:
    /// the tree is at most ``SyncProtocol/maximumNesting`` + 1 deep).
    private static func nestsTooDeep(_ tree: JSONTree) -> Bool {
        var waiting = [tree]
        while let value = waiting.popLast() {
            switch value {
            case .array(let elements): waiting.append(contentsOf: elements)
            case .object(let members): waiting.append(contentsOf: members.map(\.value))
            case .unreadable(let reason) where reason.hasPrefix("arrays and objects nested deeper"): return true
            default: continue
            }
        }
        return false
    }
}

/// Reads a message's fields from its tree, each refusal saying where (a path such as
/// `query.filter.and.1.value`) and with the code of where it stands.
private struct MessageFields {
    let type: String
    let id: String?
    let tree: JSONTree
    /// Whether the fields read now are inside `query` (refused as `invalid_query`).
    var inQuery = false

    init(type: String, id: String?, tree: JSONTree) { (self.type, self.id, self.tree) = (type, id, tree) }

    func refusal(_ message: String) -> ClientMessageRefusal {
        ClientMessageRefusal(code: inQuery ? .invalidQuery : .malformed, message: "\(type): \(message)", id: id)
    }

    // MARK: The message's own fields

    func required(_ name: String) throws(ClientMessageRefusal) -> (JSONTree, String) {
        guard let value = tree.member(name) else { throw refusal("missing \"\(name)\"") }
        return (value, name)
    }

    /// A field that may be absent (`null` counts as absent).
    func optional<Value>(_ name: String, _ read: (JSONTree, String) throws(ClientMessageRefusal) -> Value)
        throws(ClientMessageRefusal) -> Value? {
        guard let value = tree.member(name), value != .null else { return nil }
        return try read(value, name)
    }

    func string(_ name: String) throws(ClientMessageRefusal) -> String {
        let (value, path) = try required(name)
        return try string(value, at: path)
    }

    func integer(_ name: String) throws(ClientMessageRefusal) -> Int {
        let (value, path) = try required(name)
        return try integer(value, at: path)
    }

    // MARK: Values

    func string(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> String {
        guard case .string(let string) = value else { throw refusal("\(path) must be a string, not \(value.kind)") }
        return string
    }

    func bool(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> Bool {
        guard case .bool(let bool) = value else { throw refusal("\(path) must be true or false, not \(value.kind)") }
        return bool
    }

    /// An integer: any number whose value is a whole number within `Int`.
    func integer(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> Int {
        guard case .number(let number) = value else { throw refusal("\(path) must be an integer, not \(value.kind)") }
        guard let whole = number.wholeValue, let integer = Int(exactly: whole) else {
            throw refusal("\(path) must be an integer, not \(number.text)"
                          + (Self.isFinite(number) ? "" : ", which is beyond a double's range"))
        }
        return integer
    }

    func array(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> [JSONTree] {
        guard case .array(let elements) = value else { throw refusal("\(path) must be an array, not \(value.kind)") }
        return elements
    }

    func object(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> JSONTree {
        guard case .object = value else { throw refusal("\(path) must be an object, not \(value.kind)") }
        return value
    }

    /// A member of `object` that must be there.
    func member(_ name: String, of object: JSONTree, at path: String) throws(ClientMessageRefusal) -> (JSONTree, String) {
        guard let value = object.member(name) else { throw refusal("missing \"\(name)\" in \(path)") }
        return (value, "\(path).\(name)")
    }

    /// A member of `object` that may be absent (`null` counts as absent).
    func optionalMember(_ name: String, of object: JSONTree, at path: String) -> (JSONTree, String)? {
        guard let value = object.member(name), value != .null else { return nil }
        return (value, "\(path).\(name)")
    }

    /// A value in a filter or a mutation: null, a boolean, a number (an integer when its value
    /// is a whole number within `Int64`) or a string.
    func wireValue(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> WireValue {
        switch value {
        case .null: return .null
        case .bool(let bool): return .bool(bool)
        case .string(let string): return .text(string)
        case .number(let number):
            switch number.value {
            case .integer(let integer): return .integer(integer)
            case .real(let real):
                guard real.isFinite else { throw refusal("\(path) is \(number.text), which is beyond a double's range") }
                return Int64(exactly: real).map(WireValue.integer) ?? .real(real)
            }
        case .array, .object, .unreadable:
            throw refusal("\(path) must be null, true, false, a number or a string, not \(value.kind)")
        }
    }

    private static func isFinite(_ number: JSONNumber) -> Bool {
        if case .real(let real) = number.value { return real.isFinite }
        return true
    }

    // MARK: Queries

    func query(_ field: (JSONTree, String)) throws(ClientMessageRefusal) -> QueryDescription {
        let (value, path) = field
        let query = try object(value, at: path)
        let (table, tablePath) = try member("table", of: query, at: path)
        var description = QueryDescription(table: try string(table, at: tablePath))
        if let (filter, filterPath) = optionalMember("filter", of: query, at: path) {
            description.filter = try self.filter(filter, at: filterPath)
        }
        if let (order, orderPath) = optionalMember("order", of: query, at: path) { description.order = try orderTerms(order, at: orderPath) }
        if let (limit, limitPath) = optionalMember("limit", of: query, at: path) { description.limit = try integer(limit, at: limitPath) }
        if let (offset, offsetPath) = optionalMember("offset", of: query, at: path) {
            description.offset = try integer(offset, at: offsetPath)
        }
        if let (columns, columnsPath) = optionalMember("columns", of: query, at: path) {
            description.columns = try columnNames(columns, at: columnsPath)
        }
        if let (include, includePath) = optionalMember("include", of: query, at: path) {
            let includes = try self.includes(include, at: includePath)
            if let problem = IncludeDescription.problem(in: includes, at: includePath) { throw refusal(problem) }
            description.include = includes
        }
        return description
    }

    func orderTerms(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> [OrderDescription] {
        var terms: [OrderDescription] = []
        for (index, term) in try array(value, at: path).enumerated() {
            terms.append(try order(term, at: "\(path).\(index)"))
        }
        return terms
    }

    func columnNames(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> [String] {
        var names: [String] = []
        for (index, column) in try array(value, at: path).enumerated() {
            names.append(try string(column, at: "\(path).\(index)"))
        }
        return names
    }

    /// A query's or an include's `include`: an object of includes by name (a name given twice:
    /// the first counts). The rules that need no schema (names, how many, how deep, limits) are
    /// checked on the whole tree once it is read (``IncludeDescription/problem(in:at:)``).
    func includes(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> [String: IncludeDescription] {
        guard case .object(let members) = value else { throw refusal("\(path) must be an object of includes by name, not \(value.kind)") }
        var includes: [String: IncludeDescription] = [:]
        for member in members where includes[member.name] == nil {
            includes[member.name] = try include(member.value, at: "\(path).\(member.name)")
        }
        return includes
    }

    /// An include: `{"table": …, "on": {"parent column": "its column", …}, "filter": …,
    /// "order": […], "limit": …, "columns": […], "include": {…}}`.
    func include(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> IncludeDescription {
        let include = try object(value, at: path)
        let (table, tablePath) = try member("table", of: include, at: path)
        var description = IncludeDescription(table: try string(table, at: tablePath), on: try pairs(member("on", of: include, at: path)))
        if let (filter, filterPath) = optionalMember("filter", of: include, at: path) {
            description.filter = try self.filter(filter, at: filterPath)
        }
        if let (order, orderPath) = optionalMember("order", of: include, at: path) { description.order = try orderTerms(order, at: orderPath) }
        if let (limit, limitPath) = optionalMember("limit", of: include, at: path) { description.limit = try integer(limit, at: limitPath) }
        if let (columns, columnsPath) = optionalMember("columns", of: include, at: path) {
            description.columns = try columnNames(columns, at: columnsPath)
        }
        if let (nested, nestedPath) = optionalMember("include", of: include, at: path) {
            description.include = try includes(nested, at: nestedPath)
        }
        return description
    }

    /// An `on` of `exists` or of an include: an object of at least one pair of column names
    /// (a name given twice: the first counts, as everywhere in a message).
    func pairs(_ field: (JSONTree, String)) throws(ClientMessageRefusal) -> [String: String] {
        let (on, onPath) = field
        guard case .object(let pairs) = on else { throw refusal("\(onPath) must be an object, not \(on.kind)") }
        guard !pairs.isEmpty else { throw refusal("\(onPath) must map at least one column") }
        var mapping: [String: String] = [:]
        for pair in pairs where mapping[pair.name] == nil {
            mapping[pair.name] = try string(pair.value, at: "\(onPath).\(pair.name)")
        }
        return mapping
    }

    func order(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> OrderDescription {
        let term = try object(value, at: path)
        let (column, columnPath) = try member("column", of: term, at: path)
        var order = OrderDescription(column: try string(column, at: columnPath))
        if let (descending, descendingPath) = optionalMember("descending", of: term, at: path) {
            order.descending = try bool(descending, at: descendingPath)
        }
        if let (nullsFirst, nullsFirstPath) = optionalMember("nulls_first", of: term, at: path) {
            order.nullsFirst = try bool(nullsFirst, at: nullsFirstPath)
        }
        return order
    }

    /// A filter: `and`, `or` or `not` when the object has one (in that order), otherwise a
    /// test of a column.
    func filter(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> FilterDescription {
        let filter = try object(value, at: path)
        for connective in ["and", "or"] {
            guard let (terms, termsPath) = optionalMember(connective, of: filter, at: path) else { continue }
            var filters: [FilterDescription] = []
            for (index, term) in try array(terms, at: termsPath).enumerated() {
                filters.append(try self.filter(term, at: "\(termsPath).\(index)"))
            }
            return connective == "and" ? .and(filters) : .or(filters)
        }
        if let (term, termPath) = optionalMember("not", of: filter, at: path) { return .not(try self.filter(term, at: termPath)) }
        if let (exists, existsPath) = optionalMember("exists", of: filter, at: path) { return .exists(try self.exists(exists, at: existsPath)) }
        let (columnValue, columnPath) = try member("column", of: filter, at: path)
        let column = try string(columnValue, at: columnPath)
        let (opValue, opPath) = try member("op", of: filter, at: path)
        let op = try string(opValue, at: opPath)
        switch op {
        case "is null": return .isNull(column: column)
        case "is not null": return .isNotNull(column: column)
        case "in":
            if let (query, queryPath) = optionalMember("query", of: filter, at: path) {
                return .inQuery(column: column, query: try subquery(query, at: queryPath))
            }
            let (values, valuesPath) = try member("values", of: filter, at: path)
            var list: [WireValue] = []
            for (index, element) in try array(values, at: valuesPath).enumerated() {
                list.append(try wireValue(element, at: "\(valuesPath).\(index)"))
            }
            return .isIn(column: column, values: list)
        case "like":
            let (pattern, patternPath) = try member("value", of: filter, at: path)
            guard case .string(let text) = pattern else { throw refusal("\(patternPath): a like pattern is a string, not \(pattern.kind)") }
            return .like(column: column, pattern: text)
        default:
            guard let comparison = FilterDescription.Comparison(rawValue: op) else {
                throw refusal("\(opPath): unknown operator \(JSONBytes.quoted(op)) (=, !=, <, <=, >, >=, in, like, is null, is not null)")
            }
            let (bound, boundPath) = try member("value", of: filter, at: path)
            return .compare(column: column, op: comparison, value: try wireValue(bound, at: boundPath))
        }
    }

    /// An `in` filter's sub-query: `{"table": …, "columns": [one column], "filter": …}`.
    func subquery(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> SubqueryDescription {
        let query = try object(value, at: path)
        let (table, tablePath) = try member("table", of: query, at: path)
        let (columns, columnsPath) = try member("columns", of: query, at: path)
        let list = try array(columns, at: columnsPath)
        guard list.count == 1 else { throw refusal("\(columnsPath): a sub-query selects exactly one column, not \(list.count)") }
        var subquery = SubqueryDescription(table: try string(table, at: tablePath), column: try string(list[0], at: "\(columnsPath).0"))
        if let (filter, filterPath) = optionalMember("filter", of: query, at: path) {
            subquery.filter = try self.filter(filter, at: filterPath)
        }
        return subquery
    }

    /// An `exists` filter: `{"table": …, "on": {"this column": "its column", …}, "filter": …}`.
    func exists(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> ExistsDescription {
        let exists = try object(value, at: path)
        let (table, tablePath) = try member("table", of: exists, at: path)
        let mapping = try pairs(member("on", of: exists, at: path))
        var description = ExistsDescription(table: try string(table, at: tablePath), on: mapping)
        if let (filter, filterPath) = optionalMember("filter", of: exists, at: path) {
            description.filter = try self.filter(filter, at: filterPath)
        }
        return description
    }

    func resume(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> ResumePoint {
        let point = try object(value, at: path)
        let (basis, basisPath) = try member("basis", of: point, at: path)
        let (lsn, lsnPath) = try member("lsn", of: point, at: path)
        return ResumePoint(basis: try string(basis, at: basisPath), lsn: try string(lsn, at: lsnPath))
    }

    // MARK: Mutations

    func mutations(_ field: (JSONTree, String)) throws(ClientMessageRefusal) -> [Mutation] {
        let (value, path) = field
        var mutations: [Mutation] = []
        for (index, element) in try array(value, at: path).enumerated() {
            let at = "\(path).\(index)"
            let mutation = try object(element, at: at)
            let (idValue, idPath) = try member("id", of: mutation, at: at)
            guard case .number(let number) = idValue, let id = number.wholeValue else {
                throw refusal("\(idPath) must be an integer, not \(idValue.kind)")
            }
            let (opsValue, opsPath) = try member("ops", of: mutation, at: at)
            var ops: [MutationOp] = []
            for (opIndex, opValue) in try array(opsValue, at: opsPath).enumerated() {
                ops.append(try op(opValue, at: "\(opsPath).\(opIndex)"))
            }
            mutations.append(Mutation(id: id, ops: ops))
        }
        return mutations
    }

    func op(_ value: JSONTree, at path: String) throws(ClientMessageRefusal) -> MutationOp {
        let op = try object(value, at: path)
        let (kindValue, kindPath) = try member("op", of: op, at: path)
        let name = try string(kindValue, at: kindPath)
        guard let kind = MutationOp.Kind(rawValue: name) else {
            throw refusal("\(kindPath): unknown operation \(JSONBytes.quoted(name)) (put, patch, delete)")
        }
        let (table, tablePath) = try member("table", of: op, at: path)
        let (valuesValue, valuesPath) = try member("values", of: op, at: path)
        guard case .object(let members) = valuesValue else { throw refusal("\(valuesPath) must be an object, not \(valuesValue.kind)") }
        var values: [String: WireValue] = [:]
        for member in members where values[member.name] == nil {
            values[member.name] = try wireValue(member.value, at: "\(valuesPath).\(member.name)")
        }
        return MutationOp(kind, table: try string(table, at: tablePath), values: values)
    }
}
