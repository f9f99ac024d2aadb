#if Sync
import Foundation
import PostgresNIO
import Ripple
import RippleDiffTesting
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// The oracle for includes: seeded random queries with random includes (to-one, to-many with
/// their own filter, order and per-parent limit, a to-one nested in each), under random read
/// rules, over tables with NULLs in every related column; each include's rows on the replica
/// (its compiled query) equal what Postgres answers for it, written apart from the node's
/// compiler: the included table's rows, under its rule, related to the rows of the parent's own
/// answer (its order and limit included), per parent ordered and limited.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: include meaning tests skipped"), .timeLimit(.minutes(15)))
struct IncludeMeaningTests {
    /// The includes a root table may have: name, include, and the includes it may nest.
    static func randomIncludes(of table: String, _ random: inout SeededGenerator) -> [String: IncludeDescription] {
        var includes: [String: IncludeDescription] = [:]
        func maybe() -> Bool { Int.random(in: 0..<3, using: &random) > 0 }
        func order(_ columns: [String]) -> [OrderDescription] {
            guard maybe() else { return [] }
            return [OrderDescription(column: columns.randomElement(using: &random)!, descending: Bool.random(using: &random))]
        }
        func filter(_ table: String) -> FilterDescription? {
            Int.random(in: 0..<3, using: &random) == 0 ? RelationalMeaningTests.randomFilter(over: table, depth: 1, subqueries: 1, &random) : nil
        }
        switch table {
        case "todos":
            if maybe() { includes["project"] = .row(of: "projects", on: ["project_id": "id"]) }
            if maybe() {
                var parent = IncludeDescription.row(of: "todos", on: ["parent_id": "id"])
                if maybe() { parent = parent.including("project", .row(of: "projects", on: ["project_id": "id"])) }
                includes["parent"] = parent
            }
        case "projects":
            if maybe() {
                var todos = IncludeDescription.rows(of: "todos", on: ["id": "project_id"], where: filter("todos"),
                                                    order: order(["rank", "parent_id", "id"]),
                                                    limit: maybe() ? Int.random(in: 0...3, using: &random) : nil)
                if maybe() { todos = todos.including("parent", .row(of: "todos", on: ["parent_id": "id"])) }
                includes["todos"] = todos
            }
            if maybe() {
                includes["members"] = .rows(of: "members", on: ["id": "project_id"], where: filter("members"), order: order(["id", "project_id"]),
                                            limit: maybe() ? Int.random(in: 1...2, using: &random) : nil)
            }
        default:
            if maybe() { includes["project"] = .row(of: "projects", on: ["project_id": "id"]) }
        }
        if includes.isEmpty { includes["project"] = table == "projects" ? .rows(of: "todos", on: ["id": "project_id"]) : .row(of: "projects", on: ["project_id": "id"]) }
        return includes
    }

    /// Postgres's ORDER BY for `order` over `qualifier` (the key last), NULLs placed as the
    /// protocol says (last ascending, first descending).
    static func orderBy(_ order: [OrderDescription], _ qualifier: String) -> String {
        (order.map { "\"\(qualifier)\".\"\($0.column)\" \($0.descending ? "DESC NULLS FIRST" : "ASC NULLS LAST")" } + ["\"\(qualifier)\".id ASC"])
            .joined(separator: ", ")
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func everyIncludesRowsAreWhatPostgresAnswers(seed: UInt64) async throws {
        try await withThrowawayPostgres { postgres in
            var random = SeededGenerator(seed: seed &+ 1000)
            try await postgres.psql("""
                CREATE TABLE projects(id int8 PRIMARY KEY, owner text, score float8, budget numeric);
                CREATE TABLE members(id int8 PRIMARY KEY, project_id int4, user_id text, role text);
                CREATE TABLE todos(id int8 PRIMARY KEY, project_id int8, owner text, parent_id int8, rank int4, cost numeric);
                """)
            func literal(_ text: String?) -> String { text.map { "'\($0)'" } ?? "NULL" }
            func maybe(_ text: String, _ random: inout SeededGenerator) -> String? { Int.random(in: 0..<6, using: &random) == 0 ? nil : text }
            let users = RelationalMeaningTests.users
            var inserts: [String] = []
            for id in 1...8 {
                inserts.append("INSERT INTO projects VALUES (\(id), \(literal(maybe(users.randomElement(using: &random)!, &random))), 1, 1)")
            }
            for id in 1...16 {
                inserts.append("INSERT INTO members VALUES (\(id), \(literal(maybe(String(Int.random(in: 1...9, using: &random)), &random))), "
                               + "\(literal(maybe(users.randomElement(using: &random)!, &random))), "
                               + "\(literal(maybe(["admin", "viewer", "banned"].randomElement(using: &random)!, &random))))")
            }
            for id in 1...40 {
                inserts.append("INSERT INTO todos VALUES (\(id), \(literal(maybe(String(Int.random(in: 1...9, using: &random)), &random))), "
                               + "\(literal(maybe(users.randomElement(using: &random)!, &random))), "
                               + "\(literal(maybe(String(Int.random(in: 1...42, using: &random)), &random))), "
                               + "\(literal(maybe(String(Int.random(in: -1...4, using: &random)), &random))), 1)")
            }
            try await postgres.psql(inserts.joined(separator: ";\n"))
            var cases: [(query: QueryDescription, user: String, rules: String)] = []
            for _ in 0..<40 {
                let table = ["todos", "projects", "projects", "members"].randomElement(using: &random)!
                var query = QueryDescription(table: table)
                if Int.random(in: 0..<3, using: &random) > 0 {
                    query.filter = RelationalMeaningTests.randomFilter(over: table, depth: 1, subqueries: 1, &random)
                }
                let orderColumns = ["todos": ["rank", "project_id", "parent_id"], "projects": ["id"], "members": ["project_id", "id"]][table]!
                if Bool.random(using: &random) {
                    query.order = [OrderDescription(column: orderColumns.randomElement(using: &random)!, descending: Bool.random(using: &random))]
                }
                if Bool.random(using: &random) { query.limit = Int.random(in: 1...6, using: &random) }
                query.include = Self.randomIncludes(of: table, &random)
                var tables: [String] = []
                for (name, choices) in RelationalMeaningTests.readRules.sorted(by: { $0.key < $1.key }) where Int.random(in: 0..<12, using: &random) > 0 {
                    let rule = Bool.random(using: &random) ? "true" : choices.randomElement(using: &random)!
                    tables.append("\"\(name)\": {\"read\": \(rule)}")
                }
                cases.append((query, users.randomElement(using: &random)!, "{\"tables\": {\(tables.joined(separator: ", "))}}"))
            }
            let planned = cases
            let directory = try TemporaryDirectory()
            let store = try Store(path: directory.path("replica.sqlite"))
            let client = postgres.makeClient()
            let (parts, withRows, refused) = try await withThrowingTaskGroup(of: (Int, Int, Int).self) { group in
                group.addTask {
                    await client.run()
                    return (0, 0, 0)
                }
                defer { group.cancelAll() }
                let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: ["projects", "members", "todos"]))
                try await feed.prepare()
                var schemas: [String: SyncedTableSchema] = [:]
                for name in ["projects", "members", "todos"] {
                    let schema = try #require(await feed.schema(of: name))
                    schemas[name] = schema
                }
                var (parts, withRows, refused) = (0, 0, 0)
                for (query, user, json) in planned {
                    let rules = try SyncRules(json: Data(json.utf8))
                    let hub = SubscriptionHub(store: store, rules: rules)
                    let compiled: HubQuery
                    do {
                        (compiled, _) = try hub.compileSubscription(query, user: user, schema: schemas[query.table]!, tables: schemas)
                    } catch let error as RulesError {
                        var reached = Set([query.table]).union(query.filter?.relatedTables ?? [])
                        for (_, _, include) in query.includePaths { reached.insert(include.table); reached.formUnion(include.filter?.relatedTables ?? []) }
                        #expect(reached.contains { rules.tables[$0] == nil }, "\(error): \(query)")
                        refused += 1
                        continue
                    }
                    guard case .tree(let tree) = compiled else {
                        Issue.record("a query with includes compiled flat: \(query)")
                        continue
                    }
                    let includes = query.includePaths
                    for (index, (path, _, _)) in includes.enumerated() {
                        let part = tree.parts[index]
                        #expect(part.path == path)
                        // The SQL of this include and of its parents, with bindings of its own.
                        var translator = PostgresFilterTranslator(tables: schemas) { rules.tables[$0]?.read?.filter(for: user) }
                        func conditions(_ table: String, _ filter: FilterDescription?, as alias: String) -> [String] {
                            var list: [String] = []
                            if let rule = rules.tables[table]?.read?.filter(for: user) {
                                list.append(translator.condition(rule, over: schemas[table]!, as: alias, client: false))
                            }
                            if let filter { list.append(translator.condition(filter, over: schemas[table]!, as: alias, client: true)) }
                            return list.isEmpty ? ["true"] : list.map { "(\($0))" }
                        }
                        // The rows of `path` on Postgres, exactly ("" the root's).
                        func exact(_ path: String) -> (sql: String, answer: String) {
                            guard let level = includes.firstIndex(where: { $0.path == path }) else {
                                let sql = "SELECT * FROM \"\(query.table)\" AS r WHERE \(conditions(query.table, query.filter, as: "r").joined(separator: " AND ")) "
                                    + "ORDER BY \(Self.orderBy(query.order, "r"))" + (query.limit.map { " LIMIT \($0)" } ?? "")
                                return (sql, "")
                            }
                            let (_, parentPath, include) = includes[level]
                            let alias = "p\(level)"
                            let pair = include.pairs[0]
                            let related = "\"\(alias)\".\"\(pair.related)\" IN (SELECT x.\"\(pair.parent)\" FROM (\(exact(parentPath ?? "").sql)) AS x)"
                            let filtered = (conditions(include.table, include.filter, as: alias) + [related]).joined(separator: " AND ")
                            if tree.parts[level].isToMany {
                                let ranked = "SELECT \"\(alias)\".*, row_number() OVER (PARTITION BY \"\(alias)\".\"\(pair.related)\" "
                                    + "ORDER BY \(Self.orderBy(include.order, alias))) AS ripple_n FROM \"\(include.table)\" AS \"\(alias)\" WHERE \(filtered)"
                                let sql = "SELECT * FROM (\(ranked)) AS \"\(alias)\"" + (include.limit.map { " WHERE ripple_n <= \($0)" } ?? "")
                                return (sql, "SELECT \"\(alias)\".\"\(pair.related)\"::text || ':' || \"\(alias)\".id::text FROM (\(sql)) AS \"\(alias)\" "
                                        + "ORDER BY \"\(alias)\".\"\(pair.related)\", \(Self.orderBy(include.order, alias))")
                            }
                            let sql = "SELECT * FROM \"\(include.table)\" AS \"\(alias)\" WHERE \(filtered)"
                            return (sql, "SELECT \"\(alias)\".id::text FROM (\(sql)) AS \"\(alias)\" ORDER BY \"\(alias)\".id")
                        }
                        let answer = exact(path).answer
                        var oracle: [String] = []
                        do {
                            for try await row in try await client.query(PostgresQuery(unsafeSQL: answer, binds: translator.bindings)) {
                                oracle.append(try row.decode(String.self))
                            }
                        } catch {
                            Issue.record("Postgres refused the oracle's SQL: \(String(reflecting: error))\n\(answer)")
                            return (parts, withRows, refused)
                        }
                        let relatedIndex = part.relatedColumns[0]
                        let replica = try store.read { db in
                            try db.fetchAll(part.compiled.sql, part.compiled.arguments).map { row -> String in
                                func text(_ value: SQLValue?) -> String {
                                    guard case .integer(let integer)? = value else { return "?" }
                                    return String(integer)
                                }
                                guard part.isToMany else { return text(row["id"]) }
                                return "\(text(row.values[relatedIndex])):\(text(row["id"]))"
                            }
                        }
                        #expect(replica == oracle, "include \(path) of \(query)\nuser \(user), rules \(json)\nreplica: \(part.compiled.sql)\npostgres: \(answer)")
                        if replica != oracle { return (parts, withRows, refused) }
                        parts += 1
                        if !oracle.isEmpty { withRows += 1 }
                    }
                }
                return (parts, withRows, refused)
            }
            #expect(parts >= 30 && withRows >= parts / 4, "\(parts) includes compared, \(withRows) with rows, \(refused) refused")
        }
    }
}
#endif
