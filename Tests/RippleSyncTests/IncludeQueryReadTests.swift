import Foundation
import RippleDiffTesting
@testable import RippleSync
import Testing

/// A subscribe's `include` (related rows with every result): read from a client's frame by the
/// node's reader as `JSONDecoder` reads it, written back by `JSONEncoder` to the same meaning,
/// and refused — `invalid_query`, naming the subscription and the place — when it breaks a rule
/// that needs no schema: a name that is not an identifier, more than eight includes, nesting
/// deeper than two, a negative limit, or a field of the wrong shape.
@Suite struct IncludeQueryReadTests {
    static func subscribe(_ query: String) -> String { #"{"type":"subscribe","id":"s","query":"# + query + "}" }

    static func read(_ frame: String) -> Result<ClientMessage, ClientMessageRefusal> {
        Result { () throws(ClientMessageRefusal) -> ClientMessage in try ClientMessage.read(json: Array(frame.utf8)) }
    }

    static let assignee = IncludeDescription.row(of: "users", on: ["assignee_id": "id"], columns: ["id", "name"])

    @Test(arguments: [
        // To-one: each todo's project.
        (#"{"table":"todos","include":{"project":{"table":"projects","on":{"project_id":"id"}}}}"#,
         QueryDescription(table: "todos").including("project", .row(of: "projects", on: ["project_id": "id"]))),
        // To-many with its own filter, order and limit per parent, and a to-one inside it.
        (#"{"table":"projects","order":[{"column":"name"}],"include":{"todos":{"table":"todos","on":{"id":"project_id"},"#
            + #""filter":{"column":"done","op":"=","value":false},"order":[{"column":"rank"},{"column":"title","descending":true,"nulls_first":true}],"#
            + #""limit":50,"columns":["id","project_id","title","assignee_id"],"include":{"assignee":{"table":"users","on":{"assignee_id":"id"},"columns":["id","name"]}}}}}"#,
         QueryDescription(table: "projects", order: [OrderDescription(column: "name")]).including(
            "todos", IncludeDescription.rows(of: "todos", on: ["id": "project_id"], where: .compare(column: "done", op: .equal, value: .bool(false)),
                                             order: [OrderDescription(column: "rank"), OrderDescription(column: "title", descending: true, nullsFirst: true)],
                                             limit: 50, columns: ["id", "project_id", "title", "assignee_id"])
                .including("assignee", assignee))),
        // A to-one inside a to-one (each todo's project's owner), an `on` of two pairs, a limit of 0.
        (#"{"table":"todos","include":{"project":{"table":"projects","on":{"project_id":"id","org_id":"org_id"},"limit":0,"#
            + #""include":{"owner":{"table":"users","on":{"owner_id":"id"},"filter":{"exists":{"table":"members","on":{"id":"user_id"}}}}}}}}"#,
         QueryDescription(table: "todos").including(
            "project", IncludeDescription(table: "projects", on: ["project_id": "id", "org_id": "org_id"], limit: 0)
                .including("owner", IncludeDescription(table: "users", on: ["owner_id": "id"], filter: .exists("members", on: ["id": "user_id"]))))),
        // Names at the edges of the rule.
        (#"{"table":"t","include":{"_":{"table":"u","on":{"a":"b"}},"A_9z":{"table":"u","on":{"a":"b"}},"#
            + #"""# + String(repeating: "n", count: 63) + #"":{"table":"u","on":{"a":"b"}}}}"#,
         QueryDescription(table: "t", include: ["_": IncludeDescription(table: "u", on: ["a": "b"]), "A_9z": IncludeDescription(table: "u", on: ["a": "b"]),
                                               String(repeating: "n", count: 63): IncludeDescription(table: "u", on: ["a": "b"])])),
        // An empty `include` is no include; `null` fields are absent.
        (#"{"table":"t","include":{}}"#, QueryDescription(table: "t", include: [:])),
        (#"{"table":"t","include":null}"#, QueryDescription(table: "t")),
        (#"{"table":"t","include":{"p":{"table":"u","on":{"a":"b"},"filter":null,"order":null,"limit":null,"columns":null,"include":null}}}"#,
         QueryDescription(table: "t", include: ["p": IncludeDescription(table: "u", on: ["a": "b"])])),
        // A name given twice: the first counts (as JSONDecoder reads it).
        (#"{"table":"t","include":{"p":{"table":"u","on":{"a":"b"}},"p":{"table":"v","on":{"c":"d"}}}}"#,
         QueryDescription(table: "t", include: ["p": IncludeDescription(table: "u", on: ["a": "b"])])),
    ] as [(String, QueryDescription)])
    func includesReadAsTheirMeaningBothWays(json: String, query: QueryDescription) throws {
        let expected = ClientMessage.subscribe(id: "s", query: query, resume: nil)
        let frame = Self.subscribe(json)
        #expect(try Self.read(frame).get() == expected)
        #expect(try JSONDecoder().decode(ClientMessage.self, from: Data(frame.utf8)) == expected)
        let written = try JSONEncoder().encode(expected)
        #expect(try ClientMessage.read(json: Array(written)) == expected, "as JSONEncoder writes it: \(String(decoding: written, as: UTF8.self))")
        #expect(try JSONDecoder().decode(ClientMessage.self, from: written) == expected)
    }

    /// Eight includes in all, two levels deep, is the most a query may have.
    @Test func eightIncludesTwoLevelsDeepAreTheMost() throws {
        var query = QueryDescription(table: "todos")
        for index in 0..<4 {
            query = query.including("i\(index)", IncludeDescription.row(of: "u", on: ["a": "id"]).including("n", .row(of: "v", on: ["b": "id"])))
        }
        let written = try JSONEncoder().encode(ClientMessage.subscribe(id: "s", query: query, resume: nil))
        #expect(try ClientMessage.read(json: Array(written)) == .subscribe(id: "s", query: query, resume: nil))
        #expect(query.includePaths.count == IncludeDescription.maximumCount)
        let more = query.including("i4", .row(of: "u", on: ["a": "id"]))
        let refused = try JSONEncoder().encode(ClientMessage.subscribe(id: "s", query: more, resume: nil))
        #expect(throws: ClientMessageRefusal.self) { try ClientMessage.read(json: Array(refused)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ClientMessage.self, from: refused) }
    }

    static func one(_ name: String = "p", _ extra: String = "") -> String {
        #""\#(name)":{"table":"u","on":{"a":"b"}\#(extra)}"#
    }

    @Test(arguments: [
        // Names.
        (#"{"table":"t","include":{"# + one("1x") + "}}", #"query.include: "1x" is not an include's name"#),
        (#"{"table":"t","include":{"# + one("a-b") + "}}", #"query.include: "a-b" is not an include's name"#),
        (#"{"table":"t","include":{"# + one("") + "}}", #"query.include: "" is not an include's name"#),
        (#"{"table":"t","include":{"# + one("a.b") + "}}", #"query.include: "a.b" is not an include's name"#),
        (#"{"table":"t","include":{"# + one("é") + "}}", #"query.include: "é" is not an include's name"#),
        (#"{"table":"t","include":{"# + one(String(repeating: "n", count: 64)) + "}}", "is not an include's name"),
        (#"{"table":"t","include":{"# + one("p", #","include":{"# + one("x y") + "}") + "}}", #"query.include.p.include: "x y" is not an include's name"#),
        // How many, how deep.
        (#"{"table":"t","include":{"# + (0..<9).map { one("i\($0)") }.joined(separator: ",") + "}}",
         "query.include.i8: a query has at most 8 includes, at every level"),
        (#"{"table":"t","include":{"# + (0..<5).map { one("i\($0)", #","include":{"# + one("n") + "}") }.joined(separator: ",") + "}}",
         "query.include.i4: a query has at most 8 includes, at every level"),
        (#"{"table":"t","include":{"# + one("a", #","include":{"# + one("b", #","include":{"# + one("c") + "}") + "}") + "}}",
         "query.include.a.include.b.include: includes nest at most 2 deep"),
        // Limits.
        (#"{"table":"t","include":{"# + one("todos", #","limit":-1"#) + "}}", "query.include.todos.limit: a limit is 0 or more, not -1"),
        (#"{"table":"t","include":{"# + one("p", #","include":{"# + one("q", #","limit":-5"#) + "}") + "}}",
         "query.include.p.include.q.limit: a limit is 0 or more, not -5"),
        (#"{"table":"t","include":{"# + one("p", #","limit":1.5"#) + "}}", "query.include.p.limit must be an integer, not 1.5"),
        // Shapes.
        (#"{"table":"t","include":[]}"#, "query.include must be an object of includes by name, not an array"),
        (#"{"table":"t","include":{"p":"projects"}}"#, "query.include.p must be an object, not a string"),
        (#"{"table":"t","include":{"p":{"on":{"a":"b"}}}}"#, #"missing "table" in query.include.p"#),
        (#"{"table":"t","include":{"p":{"table":"u"}}}"#, #"missing "on" in query.include.p"#),
        (#"{"table":"t","include":{"p":{"table":5,"on":{"a":"b"}}}}"#, "query.include.p.table must be a string, not the number 5"),
        (#"{"table":"t","include":{"p":{"table":"u","on":{}}}}"#, "query.include.p.on must map at least one column"),
        (#"{"table":"t","include":{"p":{"table":"u","on":["a","b"]}}}"#, "query.include.p.on must be an object, not an array"),
        (#"{"table":"t","include":{"p":{"table":"u","on":{"a":1}}}}"#, "query.include.p.on.a must be a string, not the number 1"),
        (#"{"table":"t","include":{"# + one("p", #","columns":["id",2]"#) + "}}", "query.include.p.columns.1 must be a string, not the number 2"),
        (#"{"table":"t","include":{"# + one("p", #","order":[{"column":"a","descending":"yes"}]"#) + "}}",
         "query.include.p.order.0.descending must be true or false, not a string"),
        (#"{"table":"t","include":{"# + one("p", #","filter":{"column":"a","op":"~","value":1}"#) + "}}",
         #"query.include.p.filter.op: unknown operator "~""#),
        (#"{"table":"t","include":{"# + one("p", #","include":5"#) + "}}", "query.include.p.include must be an object of includes by name, not the number 5"),
    ] as [(String, String)])
    func brokenIncludesAreRefusedSayingWhere(query: String, message: String) {
        let frame = Self.subscribe(query)
        switch Self.read(frame) {
        case .success(let read): Issue.record("\(query) read as \(read)")
        case .failure(let refusal):
            #expect(refusal.code == .invalidQuery && refusal.id == "s", "\(query): \(refusal)")
            #expect(refusal.message.hasPrefix("subscribe: ") && refusal.message.contains(message), "\(query): \(refusal.message)")
        }
        #expect(throws: DecodingError.self, "JSONDecoder refuses \(query) too") {
            try JSONDecoder().decode(ClientMessage.self, from: Data(frame.utf8))
        }
    }

    // MARK: Random trees

    /// Names that are and are not include names.
    static let names = ["a", "project", "todos", "_x", "Z9", "n_1", "1a", "a b", "a-b", "", "é", "todos.x",
                        String(repeating: "m", count: 63), String(repeating: "m", count: 64)]

    static func randomInclude(_ random: inout SeededGenerator, level: Int) -> IncludeDescription {
        var include = IncludeDescription(table: ["users", "projects", "todos"].randomElement(using: &random)!,
                                         on: Bool.random(using: &random) ? ["project_id": "id"] : ["id": "todo_id", "list_id": "list_id"])
        if Int.random(in: 0..<3, using: &random) == 0 { include.filter = .compare(column: "done", op: .equal, value: .bool(false)) }
        if Int.random(in: 0..<3, using: &random) == 0 { include.order = [OrderDescription(column: "rank", descending: Bool.random(using: &random))] }
        if Int.random(in: 0..<3, using: &random) == 0 { include.limit = Int.random(in: -2...60, using: &random) }
        if Int.random(in: 0..<3, using: &random) == 0 { include.columns = ["id", "title"] }
        if level < 4, Int.random(in: 0..<3, using: &random) == 0 {
            let nested = randomIncludes(&random, level: level + 1)
            if !nested.isEmpty { include.include = nested }
        }
        return include
    }

    static func randomIncludes(_ random: inout SeededGenerator, level: Int) -> [String: IncludeDescription] {
        var includes: [String: IncludeDescription] = [:]
        for _ in 0..<Int.random(in: 0...(level == 1 ? 6 : 3), using: &random) {
            let name = Int.random(in: 0..<10, using: &random) == 0 ? names.randomElement(using: &random)! : "n\(Int.random(in: 0..<30, using: &random))"
            includes[name] = randomInclude(&random, level: level)
        }
        return includes
    }

    /// Whether `includes` keep the rules, told plainly: every name matches the pattern, at most
    /// eight in all, at most two levels, no negative limit.
    static func keepsTheRules(_ includes: [String: IncludeDescription]) -> Bool {
        var count = 0
        func walk(_ includes: [String: IncludeDescription], level: Int) -> Bool {
            includes.allSatisfy { name, include in
                count += 1
                return name.range(of: "^[A-Za-z_][A-Za-z0-9_]{0,62}$", options: .regularExpression) != nil && level <= 2
                    && (include.limit ?? 0) >= 0 && walk(include.include ?? [:], level: level + 1)
            }
        }
        return walk(includes, level: 1) && count <= 8
    }

    /// Random include trees, written by `JSONEncoder`: the node's reader and `JSONDecoder` read
    /// each the same, and refuse exactly those that break a rule.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func bothReadersAgreeOnRandomIncludeTrees(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var refused = 0
        for number in 0..<300 {
            let query = QueryDescription(table: "todos", include: Self.randomIncludes(&random, level: 1))
            let message = ClientMessage.subscribe(id: "s", query: query, resume: nil)
            let written = try JSONEncoder().encode(message)
            let text = String(decoding: written, as: UTF8.self)
            let decoded = Result { try JSONDecoder().decode(ClientMessage.self, from: written) }
            if Self.keepsTheRules(query.include ?? [:]) {
                #expect(try Self.read(text).get() == message, "seed \(seed) case \(number): \(text)")
                #expect(try decoded.get() == message, "seed \(seed) case \(number): \(text)")
            } else {
                refused += 1
                guard case .failure(let refusal) = Self.read(text) else {
                    Issue.record("seed \(seed) case \(number) breaks a rule but reads: \(text)")
                    continue
                }
                #expect(refusal.code == .invalidQuery && refusal.id == "s" && refusal.message.contains("query.include"),
                        "seed \(seed) case \(number): \(refusal)")
                #expect(throws: DecodingError.self, "seed \(seed) case \(number): \(text)") { try decoded.get() }
            }
        }
        #expect(refused > 20 && refused < 280, "the trees reach both sides of the rules: \(refused) of 300 refused")
    }
}
