#if Sync
import Foundation
import PostgresNIO
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Postgres is the oracle for filters over other tables: on seeded random rows (NULLs in every
/// related column, NaN and ±Infinity among floats, numerics equal by value but not by text),
/// seeded random filters — `in`, `not in`, `exists`, `not exists`, nested up to three levels,
/// with comparisons under `and`, `or` and `not` — under seeded random read rules (a membership
/// rule among them) select on the replica exactly the rows the same filter selects on Postgres,
/// where the rules are applied by the test's own translation.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: the Postgres oracle tests skipped"), .timeLimit(.minutes(15)))
struct RelationalMeaningTests {
    static let users = ["alice", "bob", "carol", "dave"]
    static let numerics = ["1.5", "1.50", "2", "10", "NaN", "-0.0", "0"]
    static let floats = ["NaN", "Infinity", "-Infinity", "1", "2", "3.5", "0"]

    /// The columns that compare alike, by family: (table, column).
    static let families: [[(String, String)]] = [
        [("todos", "id"), ("todos", "project_id"), ("todos", "parent_id"), ("todos", "rank"), ("members", "id"),
         ("members", "project_id"), ("projects", "id"), ("projects", "score")],
        [("todos", "owner"), ("members", "user_id"), ("members", "role"), ("projects", "owner")],
        [("todos", "cost"), ("projects", "budget")],
    ]

    static let readRules: [String: [String]] = [
        "todos": [
            "true",
            #"{"column": "owner", "op": "=", "value": {"user": true}}"#,
            #"{"or": [{"column": "owner", "op": "=", "value": {"user": true}}, {"column": "project_id", "op": "in", "query": {"table": "members", "columns": ["project_id"], "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}]}"#,
            #"{"exists": {"table": "members", "on": {"project_id": "project_id"}, "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}"#,
        ],
        "members": [
            "true",
            #"{"column": "user_id", "op": "=", "value": {"user": true}}"#,
            #"{"column": "project_id", "op": "in", "query": {"table": "members", "columns": ["project_id"], "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}"#,
        ],
        "projects": [
            "true",
            #"{"column": "owner", "op": "=", "value": {"user": true}}"#,
            #"{"column": "id", "op": "in", "query": {"table": "members", "columns": ["project_id"], "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}"#,
            #"{"not": {"exists": {"table": "members", "on": {"id": "project_id"}, "filter": {"column": "role", "op": "=", "value": "banned"}}}}"#,
        ],
    ]

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func aRelationalFilterUnderRulesMeansWhatItMeansOnPostgres(seed: UInt64) async throws {
        try await withThrowawayPostgres { postgres in
            var random = SeededGenerator(seed: seed)
            try await postgres.psql("""
                CREATE TABLE projects(id int8 PRIMARY KEY, owner text, score float8, budget numeric);
                CREATE TABLE members(id int8 PRIMARY KEY, project_id int4, user_id text, role text);
                CREATE TABLE todos(id int8 PRIMARY KEY, project_id int8, owner text, parent_id int8, rank int4, cost numeric);
                """)
            func literal(_ text: String?) -> String { text.map { "'\($0)'" } ?? "NULL" }
            func maybe(_ text: String, _ random: inout SeededGenerator) -> String? { Int.random(in: 0..<5, using: &random) == 0 ? nil : text }
            var inserts: [String] = []
            for id in 1...8 {
                inserts.append("INSERT INTO projects VALUES (\(id), \(literal(maybe(Self.users.randomElement(using: &random)!, &random))), "
                               + "\(literal(maybe(Self.floats.randomElement(using: &random)!, &random))), "
                               + "\(literal(maybe(Self.numerics.randomElement(using: &random)!, &random))))")
            }
            for id in 1...16 {
                inserts.append("INSERT INTO members VALUES (\(id), \(literal(maybe(String(Int.random(in: 1...9, using: &random)), &random))), "
                               + "\(literal(maybe(Self.users.randomElement(using: &random)!, &random))), "
                               + "\(literal(maybe(["admin", "viewer", "banned"].randomElement(using: &random)!, &random))))")
            }
            for id in 1...40 {
                inserts.append("INSERT INTO todos VALUES (\(id), \(literal(maybe(String(Int.random(in: 1...9, using: &random)), &random))), "
                               + "\(literal(maybe(Self.users.randomElement(using: &random)!, &random))), "
                               + "\(literal(maybe(String(Int.random(in: 1...42, using: &random)), &random))), "
                               + "\(literal(maybe(String(Int.random(in: -1...4, using: &random)), &random))), "
                               + "\(literal(maybe(Self.numerics.randomElement(using: &random)!, &random))))")
            }
            try await postgres.psql(inserts.joined(separator: ";\n"))
            let directory = try TemporaryDirectory()
            let store = try Store(path: directory.path("replica.sqlite"))
            let client = postgres.makeClient()
            var cases: [(query: QueryDescription, user: String, rules: String)] = []
            for _ in 0..<80 {
                let table = ["todos", "todos", "members", "projects"].randomElement(using: &random)!
                var query = QueryDescription(table: table, filter: Self.randomFilter(over: table, depth: 0, subqueries: 3, &random))
                if Int.random(in: 0..<8, using: &random) == 0 { query.filter = nil }
                var tables: [String] = []
                for (name, choices) in Self.readRules.sorted(by: { $0.key < $1.key }) where Int.random(in: 0..<12, using: &random) > 0 {
                    // Half the rules let everyone read the table: the filters then select more.
                    let rule = Bool.random(using: &random) ? "true" : choices.randomElement(using: &random)!
                    tables.append("\"\(name)\": {\"read\": \(rule)}")
                }
                cases.append((query, Self.users.randomElement(using: &random)!, "{\"tables\": {\(tables.joined(separator: ", "))}}"))
            }
            let planned = cases
            let (compared, selecting, rows, refused) = try await withThrowingTaskGroup(of: (Int, Int, Int, Int).self) { group in
                group.addTask {
                    await client.run()
                    return (0, 0, 0, 0)
                }
                defer { group.cancelAll() }
                let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: ["projects", "members", "todos"]))
                try await feed.prepare()
                var schemas: [String: SyncedTableSchema] = [:]
                for name in ["projects", "members", "todos"] {
                    let schema = try #require(await feed.schema(of: name))
                    schemas[name] = schema
                }
                var (compared, selecting, rows, refused) = (0, 0, 0, 0)
                for (query, user, json) in planned {
                    let rules = try SyncRules(json: Data(json.utf8))
                    let reached = Set([query.table]).union(query.filter?.relatedTables ?? [])
                    let hub = SubscriptionHub(store: store, rules: rules)
                    let compiled: RippleServer.CompiledQuery
                    do {
                        (compiled, _) = try hub.compile(query, user: user, schema: schemas[query.table]!, tables: schemas)
                    } catch let error as RulesError {
                        // Refused exactly when the query reaches a table the rules do not name.
                        #expect(reached.contains { rules.tables[$0] == nil }, "\(error): \(query)")
                        refused += 1
                        continue
                    }
                    #expect(reached.allSatisfy { rules.tables[$0] != nil }, "not refused: \(query)\n\(json)")
                    let replica = try store.read { db in
                        try db.fetchAll(compiled.sql, compiled.arguments).map { row -> Int64 in
                            guard case .integer(let id)? = row["id"] else { return -1 }
                            return id
                        }
                    }
                    var translator = PostgresFilterTranslator(tables: schemas) { rules.tables[$0]?.read?.filter(for: user) }
                    var conditions: [String] = []
                    let root = schemas[query.table]!
                    if let rule = rules.tables[query.table]?.read?.filter(for: user) {
                        conditions.append(translator.condition(rule, over: root, as: root.name, client: false))
                    }
                    if let filter = query.filter { conditions.append(translator.condition(filter, over: root, as: root.name, client: true)) }
                    let sql = "SELECT \"\(root.name)\".id FROM \"\(root.name)\""
                        + (conditions.isEmpty ? "" : " WHERE " + conditions.map { "(\($0))" }.joined(separator: " AND ")) + " ORDER BY 1"
                    var oracle: [Int64] = []
                    for try await row in try await client.query(PostgresQuery(unsafeSQL: sql, binds: translator.bindings)) {
                        oracle.append(try row.decode(Int64.self))
                    }
                    #expect(replica == oracle, "user \(user), rules \(json)\n\(query)\nreplica: \(compiled.sql)\npostgres: \(sql)")
                    if replica != oracle { break }
                    compared += 1
                    if !oracle.isEmpty { selecting += 1 }
                    rows += oracle.count
                }
                return (compared, selecting, rows, refused)
            }
            // Many filters selected rows: the comparison is not between empty results.
            #expect(compared >= 60 && selecting >= compared / 3 && rows > 300,
                    "\(compared) queries compared, \(selecting) selecting rows, \(rows) rows, \(refused) refused")
        }
    }

    static func value(for table: String, _ column: String, _ random: inout SeededGenerator) -> WireValue {
        if Int.random(in: 0..<8, using: &random) == 0 { return .null }
        switch (table, column) {
        case (_, "owner"), (_, "user_id"): return .text(users.randomElement(using: &random)!)
        case (_, "role"): return .text(["admin", "viewer", "banned"].randomElement(using: &random)!)
        case (_, "score"): return [.real(.nan), .real(.infinity), .integer(1), .real(3.5), .text("NaN")].randomElement(using: &random)!
        case (_, "cost"), (_, "budget"): return .text(numerics.randomElement(using: &random)!)
        default: return .integer(Int64.random(in: -1...10, using: &random))
        }
    }

    static func randomFilter(over table: String, depth: Int, subqueries: Int, _ random: inout SeededGenerator) -> FilterDescription {
        let columns = families.flatMap { $0 }.filter { $0.0 == table }.map(\.1)
        let column = columns.randomElement(using: &random)!
        let choice = Int.random(in: 0..<(depth > 2 ? 5 : 12), using: &random)
        switch choice {
        case 0, 1:
            return .compare(column: column, op: FilterDescription.Comparison.allCases.randomElement(using: &random)!,
                            value: value(for: table, column, &random))
        case 2: return Bool.random(using: &random) ? .isNull(column: column) : .isNotNull(column: column)
        case 3: return .isIn(column: column, values: (0..<Int.random(in: 0...3, using: &random)).map { _ in value(for: table, column, &random) })
        case 4...6 where subqueries > 0:
            let family = families.first { $0.contains { $0 == (table, column) } }!
            let (other, selected) = family.randomElement(using: &random)!
            let filter = Int.random(in: 0..<3, using: &random) == 0 ? nil
                : randomFilter(over: other, depth: depth + 1, subqueries: subqueries - 1, &random)
            let sub = FilterDescription.inQuery(column: column, query: SubqueryDescription(table: other, column: selected, filter: filter))
            return Bool.random(using: &random) ? .not(sub) : sub
        case 7...8 where subqueries > 0:
            let other = ["todos", "members", "projects"].randomElement(using: &random)!
            var on: [String: String] = [:]
            for _ in 0..<(Int.random(in: 0..<4, using: &random) == 0 ? 2 : 1) {
                let pairs = families.flatMap { family in
                    family.filter { $0.0 == table }.flatMap { mine in family.filter { $0.0 == other }.map { (mine.1, $0.1) } }
                }
                let (mine, theirs) = pairs.randomElement(using: &random)!
                on[mine] = theirs
            }
            let filter = Int.random(in: 0..<3, using: &random) == 0 ? nil
                : randomFilter(over: other, depth: depth + 1, subqueries: subqueries - 1, &random)
            let exists = FilterDescription.exists(ExistsDescription(table: other, on: on, filter: filter))
            return Bool.random(using: &random) ? .not(exists) : exists
        case 9: return .and((0..<Int.random(in: 1...3, using: &random)).map { _ in
            randomFilter(over: table, depth: depth + 1, subqueries: subqueries, &random) })
        case 10: return .or((0..<Int.random(in: 1...3, using: &random)).map { _ in
            randomFilter(over: table, depth: depth + 1, subqueries: subqueries, &random) })
        case 11: return .not(randomFilter(over: table, depth: depth + 1, subqueries: subqueries, &random))
        default: return .compare(column: column, op: .equal, value: value(for: table, column, &random))
        }
    }
}
#endif
