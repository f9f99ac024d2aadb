#if Sync
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleTesting
import Testing

/// Filters over other tables (`in` a sub-query, `exists`) without Postgres: their SQL, their
/// refusals, how read rules reach them, their interests, and their meaning on a replica of
/// hand-made rows (Postgres's meaning is the oracle's, in `RelationalMeaningTests`).
@Suite struct RelationalCompilerTests {
    static let projects = SyncedTableSchema(name: "projects", columns: [
        .init(name: "id", typeOID: PostgresTypes.OID.int8), .init(name: "name", typeOID: PostgresTypes.OID.text),
        .init(name: "budget", typeOID: PostgresTypes.OID.numeric),
    ], key: [0])
    static let members = SyncedTableSchema(name: "members", columns: [
        .init(name: "id", typeOID: PostgresTypes.OID.int8), .init(name: "project_id", typeOID: PostgresTypes.OID.int4),
        .init(name: "user_id", typeOID: PostgresTypes.OID.text), .init(name: "payload", typeOID: PostgresTypes.OID.json),
    ], key: [0])
    static let todos = SyncedTableSchema(name: "todos", columns: [
        .init(name: "id", typeOID: PostgresTypes.OID.int8), .init(name: "project_id", typeOID: PostgresTypes.OID.int8),
        .init(name: "owner", typeOID: PostgresTypes.OID.text), .init(name: "parent_id", typeOID: PostgresTypes.OID.int8),
        .init(name: "cost", typeOID: PostgresTypes.OID.numeric), .init(name: "due", typeOID: PostgresTypes.OID.date),
    ], key: [0])
    static let tables = ["projects": projects, "members": members, "todos": todos]

    /// A membership rule: your own todos and your projects' todos; your own memberships; every
    /// project; no secrets.
    static let rulesJSON = #"""
        {"tables": {
            "todos": {"read": {"or": [{"column": "owner", "op": "=", "value": {"user": true}},
                                      {"column": "project_id", "op": "in", "query": {"table": "members", "columns": ["project_id"],
                                       "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}]}},
            "members": {"read": {"column": "user_id", "op": "=", "value": {"user": true}}},
            "projects": {"read": true}
        }}
        """#

    static func membership(_ user: String) -> FilterDescription {
        .inQuery(column: "project_id", query: SubqueryDescription(table: "members", column: "project_id",
                                                                  filter: .compare(column: "user_id", op: .equal, value: .text(user))))
    }

    @Test func inAndExistsCompileToSubqueriesWithAliasedInnerTables() throws {
        let query = QueryDescription(table: "todos", filter: .and([
            Self.membership("alice"),
            .exists(ExistsDescription(table: "todos", on: ["id": "parent_id"], filter: .compare(column: "owner", op: .equal, value: .text("bob")))),
        ]))
        let compiled = try QueryCompiler.compile(query, for: Self.todos, tables: Self.tables)
        #expect(compiled.sql.contains(#"("project_id" IN (SELECT "ripple_s1"."project_id" FROM "members" AS "ripple_s1" WHERE "ripple_s1"."user_id" = ?)"#))
        #expect(compiled.sql.contains(#"EXISTS (SELECT 1 FROM "todos" AS "ripple_s2" WHERE "ripple_s2"."parent_id" = "todos"."id" AND "ripple_s2"."owner" = ?)"#))
        #expect(compiled.arguments == [.text("alice"), .text("bob")])
        // A sub-query over the query's own table: routed by table; its interests name what it reads.
        #expect(compiled.routing == nil)
        #expect(compiled.dependencies == [
            RowDependency(table: "members", filterSQL: #""user_id" = ?"#, filterArguments: [.text("alice")],
                             filter: .comparison(Column("user_id"), .equal, .text("alice"))),
            RowDependency(table: "todos", filterSQL: #""owner" = ?"#, filterArguments: [.text("bob")],
                             filter: .comparison(Column("owner"), .equal, .text("bob"))),
        ])
    }

    @Test func subqueriesOverOtherTablesAreRoutedByTheirRowsOnePerTable() throws {
        let query = QueryDescription(table: "todos", filter: .or([
            .compare(column: "owner", op: .equal, value: .text("alice")),
            Self.membership("alice"),
            .exists(ExistsDescription(table: "members", on: ["project_id": "project_id"],
                                      filter: .compare(column: "user_id", op: .equal, value: .text("carol")))),
        ]))
        let compiled = try QueryCompiler.compile(query, for: Self.todos, tables: Self.tables)
        let routing = try #require(compiled.routing, "a query whose sub-queries read other tables is row-precise")
        // An or with an exists in it may select any todo: the todos' filter is every row.
        #expect(routing.filter == nil)
        #expect(routing.dependencies == [
            RowDependency(table: "members", filterSQL: #"("user_id" = ?) OR ("user_id" = ?)"#, filterArguments: [.text("alice"), .text("carol")],
                          filter: .or([.comparison(Column("user_id"), .equal, .text("alice")), .comparison(Column("user_id"), .equal, .text("carol"))])),
        ])
        // An in a sub-query routes the todos' rows by the values it selected: in the filter it
        // stands for no row, and the term adds the rows whose project is among its values.
        let term = RowValueTerm(column: "project_id", dependency: 0, selectedColumn: "project_id")
        let both = try QueryCompiler.compile(QueryDescription(table: "todos", filter: .and([
            .compare(column: "owner", op: .equal, value: .text("bob")), Self.membership("bob"),
        ])), for: Self.todos, tables: Self.tables)
        #expect(both.routing?.filter == .and([.comparison(Column("owner"), .equal, .text("bob")), .in(Column("project_id"), [])]))
        #expect(both.routing?.dependencies.map(\.table) == ["members"])
        #expect(both.routing?.valueTerms == [term])
        let either = try QueryCompiler.compile(QueryDescription(table: "todos", filter: .or([
            .compare(column: "owner", op: .equal, value: .text("bob")), Self.membership("bob"),
        ])), for: Self.todos, tables: Self.tables)
        #expect(either.routing?.filter == .or([.comparison(Column("owner"), .equal, .text("bob")), .in(Column("project_id"), [])]))
        #expect(either.routing?.valueTerms == [term])
        // Under a not, its values are the rows it excludes: every row, no term.
        let neither = try QueryCompiler.compile(QueryDescription(table: "todos", filter: .not(Self.membership("bob"))),
                                                for: Self.todos, tables: Self.tables)
        #expect(neither.routing?.filter == nil)
        #expect(neither.routing?.valueTerms == [])
        #expect(neither.routing?.dependencies.map(\.table) == ["members"])
    }

    @Test func orderKeyedColumnsCompareByTheirOrderKeys() throws {
        let query = QueryDescription(table: "todos", filter: .inQuery(column: "cost", query: SubqueryDescription(table: "projects", column: "budget")))
        let compiled = try QueryCompiler.compile(query, for: Self.todos, tables: Self.tables)
        #expect(compiled.sql.contains(#""ripple_order:cost" IN (SELECT "ripple_s1"."ripple_order:budget" FROM "projects" AS "ripple_s1")"#))
        #expect(compiled.dependencies == [RowDependency(table: "projects", filterSQL: "", filterArguments: [], filter: nil)])
    }

    @Test func nestedSubqueriesEachHaveTheirInterest() throws {
        // Todos of projects named "x" that alice is a member of: exists → in.
        let query = QueryDescription(table: "todos", filter: .exists(ExistsDescription(table: "projects", on: ["project_id": "id"], filter: .and([
            .compare(column: "name", op: .equal, value: .text("x")),
            .inQuery(column: "id", query: SubqueryDescription(table: "members", column: "project_id",
                                                              filter: .compare(column: "user_id", op: .equal, value: .text("alice")))),
        ]))))
        let compiled = try QueryCompiler.compile(query, for: Self.todos, tables: Self.tables)
        #expect(compiled.dependencies.map(\.table) == ["projects", "members"])
        #expect(compiled.dependencies[0].filterSQL.contains(#""id" IN (SELECT "ripple_s1"."project_id" FROM "members" AS "ripple_s1""#))
        #expect(compiled.dependencies[0].filterArguments == [.text("x"), .text("alice")])
        #expect(compiled.dependencies[0].filter == .and([.comparison(Column("name"), .equal, .text("x"))]))
        #expect(compiled.dependencies[1] == RowDependency(table: "members", filterSQL: #""user_id" = ?"#, filterArguments: [.text("alice")],
                                                             filter: .comparison(Column("user_id"), .equal, .text("alice"))))
    }

    @Test func interestsInOneTableMergeIntoOnePerTable() throws {
        // The membership rule's sub-query and the client's exists both read members.
        let rules = try SyncRules(json: Data(Self.rulesJSON.utf8))
        let query = try rules.restrict(QueryDescription(table: "todos", filter: .exists(ExistsDescription(
            table: "members", on: ["project_id": "project_id"], filter: .compare(column: "user_id", op: .equal, value: .text("bob"))))), to: "alice")
        let compiled = try QueryCompiler.compile(query, for: Self.todos, tables: Self.tables)
        #expect(compiled.dependencies.map(\.table) == ["members", "members"])
        let merged = RowDependency.perTable(compiled.dependencies)
        #expect(merged == [RowDependency(
            table: "members", filterSQL: #"("user_id" = ?) OR (("user_id" = ? AND "user_id" = ?))"#,
            filterArguments: [.text("alice"), .text("alice"), .text("bob")],
            filter: .or([.comparison(Column("user_id"), .equal, .text("alice")),
                         .and([.comparison(Column("user_id"), .equal, .text("alice")), .comparison(Column("user_id"), .equal, .text("bob"))])]))])
        // A sub-query without a condition: every row of its table matters.
        #expect(RowDependency.perTable([merged[0], RowDependency(table: "members", filterSQL: "", filterArguments: [], filter: nil),
                                           RowDependency(table: "projects", filterSQL: "", filterArguments: [], filter: nil)])
                == [RowDependency(table: "members", filterSQL: "", filterArguments: [], filter: nil),
                    RowDependency(table: "projects", filterSQL: "", filterArguments: [], filter: nil)])
    }

    static func nested(_ levels: Int) -> FilterDescription {
        var filter = FilterDescription.isNotNull(column: "project_id")
        for _ in 0..<levels {
            filter = .inQuery(column: "id", query: SubqueryDescription(table: "todos", column: "parent_id", filter: filter))
        }
        return filter
    }

    @Test(arguments: [
        (QueryDescription(table: "todos", filter: .inQuery(column: "id", query: SubqueryDescription(table: "nowhere", column: "id"))),
         "no synced table nowhere"),
        (QueryDescription(table: "todos", filter: .inQuery(column: "id", query: SubqueryDescription(table: "members", column: "zz"))),
         "no column zz in members"),
        (QueryDescription(table: "todos", filter: .exists(ExistsDescription(table: "members", on: ["zz": "project_id"]))),
         "no column zz in todos"),
        (QueryDescription(table: "todos", filter: .inQuery(column: "owner", query: SubqueryDescription(table: "members", column: "project_id"))),
         "column owner of todos (text) and column project_id of members (int4) do not compare alike"),
        (QueryDescription(table: "todos", filter: .exists(ExistsDescription(table: "projects", on: ["cost": "id"]))),
         "column cost of todos (numeric) and column id of projects (int8) do not compare alike"),
        (QueryDescription(table: "todos", filter: .exists(ExistsDescription(table: "projects", on: ["due": "budget"]))),
         "do not compare alike"),
        (QueryDescription(table: "todos", filter: .inQuery(column: "id", query: SubqueryDescription(table: "members", column: "payload"))),
         "cannot be compared"),
        (QueryDescription(table: "todos", filter: .exists(ExistsDescription(table: "members", on: [:]))), "on needs a pair"),
        (QueryDescription(table: "todos", filter: nested(6)), "sub-queries 6 levels deep"),
        (QueryDescription(table: "todos", filter: .inQuery(column: "id", query: SubqueryDescription(table: "todos", column: "parent_id",
            filter: .compare(column: "owner", op: .equal, value: .integer(3))))), "not a value of column owner"),
    ])
    func relationalFiltersTheReplicaCannotRunAreRefusedSayingWhy(query: QueryDescription, expected: String) {
        let error = #expect(throws: QueryError.self) { try QueryCompiler.compile(query, for: Self.todos, tables: Self.tables) }
        #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
    }

    @Test func aClientsSubqueriesNestThreeLevelsAtMostAndRulesAddUpToFive() throws {
        let directory = try TemporaryDirectory()
        let hub = SubscriptionHub(store: try Store(path: directory.path("replica.sqlite")), rules: try SyncRules(json: Data(Self.rulesJSON.utf8)))
        _ = try hub.compile(QueryDescription(table: "todos", filter: Self.nested(3)), user: "alice", schema: Self.todos, tables: Self.tables)
        let error = #expect(throws: QueryError.self) {
            try hub.compile(QueryDescription(table: "todos", filter: Self.nested(4)), user: "alice", schema: Self.todos, tables: Self.tables)
        }
        #expect(error?.description.contains("4 levels deep; at most 3") == true, "\(String(describing: error))")
        // The todos' rule adds a level under each of the client's three.
        #expect(QueryCompiler.subqueryLevels(of: try SyncRules(json: Data(Self.rulesJSON.utf8)).restrict(
            QueryDescription(table: "todos", filter: Self.nested(3)), to: "alice").filter!) == 4)
        #expect(QueryCompiler.subqueryLevels(of: Self.nested(5)) == 5)
        _ = try QueryCompiler.compile(QueryDescription(table: "todos", filter: Self.nested(5)), for: Self.todos, tables: Self.tables)
    }

    @Test func aSubqueryOverATableTheRulesKeepFromTheUserIsRefused() throws {
        let rules = try SyncRules(json: Data(#"{"tables": {"todos": {"read": true}}}"#.utf8))
        let directory = try TemporaryDirectory()
        let hub = SubscriptionHub(store: try Store(path: directory.path("replica.sqlite")), rules: rules)
        let error = #expect(throws: RulesError.self) {
            try hub.compile(QueryDescription(table: "todos", filter: .not(.exists(ExistsDescription(table: "members", on: ["project_id": "project_id"])))),
                            user: "alice", schema: Self.todos, tables: Self.tables)
        }
        #expect(error?.description.contains("table members") == true, "\(String(describing: error))")
    }

    @Test func everyTableAClientsSubqueryReachesGetsItsReadRuleButRulesSubqueriesAreEvaluatedAsWritten() throws {
        let rules = try SyncRules(json: Data(Self.rulesJSON.utf8))
        let own = FilterDescription.compare(column: "user_id", op: .equal, value: .text("alice"))
        let todosRule = FilterDescription.or([.compare(column: "owner", op: .equal, value: .text("alice")), Self.membership("alice")])
        // A client's exists over members, holding an in over todos.
        let query = QueryDescription(table: "projects", filter: .exists(ExistsDescription(table: "members", on: ["id": "project_id"],
            filter: .inQuery(column: "project_id", query: SubqueryDescription(table: "todos", column: "project_id")))))
        let restricted = try rules.restrict(query, to: "alice")
        #expect(restricted.filter == .exists(ExistsDescription(table: "members", on: ["id": "project_id"], filter: .and([
            own, .inQuery(column: "project_id", query: SubqueryDescription(table: "todos", column: "project_id", filter: todosRule)),
        ]))))
        // The todos rule's own sub-query over members is left as written (members' rule is not
        // applied to it again).
        #expect(try rules.restrict(QueryDescription(table: "todos"), to: "alice").filter == todosRule)
    }

    @Test func aMembershipRuleReadsFromItsJSON() throws {
        let rules = try SyncRules(json: Data(Self.rulesJSON.utf8))
        #expect(rules.tables["todos"]?.read == .or([
            .compare(column: "owner", op: .equal, value: .user),
            .inQuery(column: "project_id", query: RuleFilter.Subquery(table: "members", column: "project_id",
                                                                       filter: .compare(column: "user_id", op: .equal, value: .user))),
        ]))
        let exists = try SyncRules(json: Data(#"""
            {"tables": {"todos": {"read": {"exists": {"table": "members", "on": {"project_id": "project_id"},
                                                      "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}}}}
            """#.utf8))
        #expect(exists.tables["todos"]?.read == .exists(RuleFilter.Exists(table: "members", on: ["project_id": "project_id"],
                                                                          filter: .compare(column: "user_id", op: .equal, value: .user))))
        #expect(exists.tablesReadByReadRules == ["members"])
        #expect(throws: RulesError.self) {
            try SyncRules(json: Data(#"{"tables": {"todos": {"read": {"exists": {"table": "members", "on": {}}}}}}"#.utf8))
        }
        #expect(throws: RulesError.self) {
            try SyncRules(json: Data(#"{"tables": {"todos": {"read": {"column": "a", "op": "in", "query": {"table": "m", "columns": ["a", "b"]}}}}}"#.utf8))
        }
    }

    /// A replica of hand-made rows: alice is a member of project 1, bob of projects 1 and 2.
    static func withReplica(_ body: (Store, SubscriptionHub) throws -> Void) throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("replica.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE projects(id INTEGER PRIMARY KEY, name TEXT, budget TEXT, \"ripple_order:budget\" BLOB)")
            try db.execute("CREATE TABLE members(id INTEGER PRIMARY KEY, project_id INTEGER, user_id TEXT, payload TEXT)")
            try db.execute("""
                CREATE TABLE todos(id INTEGER PRIMARY KEY, project_id INTEGER, owner TEXT, parent_id INTEGER, cost TEXT,
                "ripple_order:cost" BLOB, due TEXT, "ripple_order:due" BLOB)
                """)
            try db.execute("INSERT INTO projects(id, name) VALUES (1, 'one'), (2, 'two'), (3, 'three')")
            try db.execute("INSERT INTO members(id, project_id, user_id) VALUES (1, 1, 'alice'), (2, 1, 'bob'), (3, 2, 'bob'), (4, NULL, 'bob')")
            try db.execute("""
                INSERT INTO todos(id, project_id, owner, parent_id) VALUES (1, 1, 'carol', NULL), (2, 2, 'carol', 1), (3, NULL, 'alice', 2),
                (4, 3, 'alice', NULL), (5, 2, 'bob', 4)
                """)
        }
        try body(store, SubscriptionHub(store: store, rules: try SyncRules(json: Data(rulesJSON.utf8))))
    }

    static func ids(_ query: QueryDescription, _ user: String, _ store: Store, _ hub: SubscriptionHub) throws -> [Int64] {
        let (compiled, _) = try hub.compile(query, user: user, schema: tables[query.table]!, tables: tables)
        return try store.read { db in
            try db.fetchAll(compiled.sql, compiled.arguments).map { row -> Int64 in
                guard case .integer(let id)? = row["id"] else { return -1 }
                return id
            }
        }
    }

    @Test func aMembershipRuleLetsAUserReadTheirProjectsRows() throws {
        try Self.withReplica { (store: Store, hub: SubscriptionHub) throws in
            #expect(try Self.ids(QueryDescription(table: "todos"), "alice", store, hub) == [1, 3, 4])
            #expect(try Self.ids(QueryDescription(table: "todos"), "bob", store, hub) == [1, 2, 5])
            #expect(try Self.ids(QueryDescription(table: "todos"), "dave", store, hub) == [])
            #expect(try Self.ids(QueryDescription(table: "members"), "bob", store, hub) == [2, 3, 4])
        }
    }

    /// A client's filter cannot probe rows it may not read: `exists` and `in` over members see
    /// the user's own memberships only, so asking about bob's selects nothing more.
    @Test func aClientsSubqueryCannotProbeRowsTheUserMayNotRead() throws {
        try Self.withReplica { (store: Store, hub: SubscriptionHub) throws in
            let bobsMemberships = FilterDescription.exists(ExistsDescription(table: "members", on: ["id": "project_id"],
                                                                             filter: .compare(column: "user_id", op: .equal, value: .text("bob"))))
            // bob is a member of projects 1 and 2; alice sees neither through bob's rows.
            #expect(try Self.ids(QueryDescription(table: "projects", filter: bobsMemberships), "bob", store, hub) == [1, 2])
            #expect(try Self.ids(QueryDescription(table: "projects", filter: bobsMemberships), "alice", store, hub) == [])
            let bobsProjects = FilterDescription.inQuery(column: "id", query: SubqueryDescription(table: "members", column: "project_id",
                filter: .compare(column: "user_id", op: .equal, value: .text("bob"))))
            #expect(try Self.ids(QueryDescription(table: "projects", filter: bobsProjects), "alice", store, hub) == [])
            // Under not: what alice cannot read counts as absent (project 2 is not "without
            // bob" for bob, but is for alice, who cannot see bob's membership).
            #expect(try Self.ids(QueryDescription(table: "projects", filter: .not(bobsProjects)), "bob", store, hub) == [])
            #expect(try Self.ids(QueryDescription(table: "projects", filter: .not(bobsProjects)), "alice", store, hub) == [1, 2, 3])
            // Todos whose parent the user may read: exists over todos applies the todos rule to
            // the parent too (todo 3's parent, carol's todo 2 in project 2, is not alice's to
            // read; todo 5's parent, alice's todo 4, is not bob's).
            let parentReadable = FilterDescription.exists(ExistsDescription(table: "todos", on: ["parent_id": "id"]))
            #expect(try Self.ids(QueryDescription(table: "todos", filter: parentReadable), "alice", store, hub) == [])
            #expect(try Self.ids(QueryDescription(table: "todos", filter: parentReadable), "bob", store, hub) == [2])
        }
    }

    @Test func notInASubqueryThatSelectsANullSelectsNothing() throws {
        try Self.withReplica { (store: Store, hub: SubscriptionHub) throws in
            // bob's memberships hold a NULL project: NOT IN is never true.
            let notBobs = FilterDescription.not(.inQuery(column: "id", query: SubqueryDescription(table: "members", column: "project_id")))
            #expect(try Self.ids(QueryDescription(table: "projects", filter: notBobs), "bob", store, hub) == [])
            #expect(try Self.ids(QueryDescription(table: "projects", filter: notBobs), "alice", store, hub) == [2, 3])
        }
    }

    /// Records whether a subscription's events ended it.
    final class Endings: @unchecked Sendable {   // every access holds `lock`
        private let lock = NSLock()
        private var ended: Set<String> = []
        func handler(_ name: String) -> @Sendable (SubscriptionEvent) -> Void {
            { [self] event in
                if case .ended = event.kind { lock.withLock { _ = ended.insert(name) } }
            }
        }
        var all: Set<String> { lock.withLock { ended } }
    }

    @Test func aTableChangingShapeEndsTheSubscriptionsWhoseSubqueriesReadIt() throws {
        try Self.withReplica { (store: Store, hub: SubscriptionHub) throws in
            let endings = Endings()
            var tokens: [SubscriptionToken] = []
            defer { tokens.forEach { $0.cancel() } }
            // todos: its rule reads members; projects with todos: its filter reads todos, whose
            // rule (applied to the sub-query) reads members; projects: only projects.
            for (name, query) in [("todos", QueryDescription(table: "todos")),
                                  ("projects with todos", QueryDescription(table: "projects", filter: .exists(ExistsDescription(
                                      table: "todos", on: ["id": "project_id"])))),
                                  ("members", QueryDescription(table: "members")),
                                  ("projects", QueryDescription(table: "projects"))] {
                tokens.append(try hub.subscribe(query, user: "alice", schema: Self.tables[query.table]!, tables: Self.tables,
                                                handler: endings.handler(name)))
            }
            hub.endSubscriptions(on: "members", reason: "members changed")
            #expect(endings.all == ["todos", "projects with todos", "members"])
            hub.endSubscriptions(on: "projects", reason: "projects changed")
            #expect(endings.all == ["todos", "projects with todos", "members", "projects"])
        }
    }

    /// The deepest filter the levels allow (sub-queries and parentheses) parses on the replica.
    @Test func theDeepestFilterAllowedParses() throws {
        try Self.withReplica { (store: Store, hub: SubscriptionHub) throws in
            var filter = FilterDescription.isNotNull(column: "project_id")
            // Two parentheses per level of not-and around each of the five sub-queries.
            for level in 0..<5 {
                filter = .inQuery(column: "id", query: SubqueryDescription(table: "todos", column: "parent_id",
                                                                           filter: level < 2 ? .not(.and([filter, .isNotNull(column: "id")])) : filter))
            }
            var wrapped = filter
            while QueryCompiler.levels(of: .not(wrapped)) <= QueryCompiler.maximumFilterLevels { wrapped = .not(wrapped) }
            #expect(QueryCompiler.levels(of: wrapped) == QueryCompiler.maximumFilterLevels)
            let compiled = try QueryCompiler.compile(QueryDescription(table: "todos", filter: wrapped), for: Self.todos, tables: Self.tables)
            _ = try store.read { db in try db.fetchAll(compiled.sql, compiled.arguments) }
            _ = hub
        }
    }
}
#endif
