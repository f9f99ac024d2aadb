#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import RippleDiffTesting
import Testing

/// Subscriptions with includes over the replica (``TeamFixture``'s tables under membership
/// rules): a subscriber that builds its tree from the first event and applies every later one
/// holds, after every Postgres commit, exactly what Postgres answers — the root's rows, each
/// to-one include's rows (those referred to, readable), each to-many include's lists per parent
/// (ordered and limited per parent). Seeded random commits move todos between projects, grant
/// and revoke memberships, rename, insert and delete.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: include tests skipped"), .timeLimit(.minutes(15)))
struct IncludeHubTests {
    /// A subscriber's tree, built from its events.
    final class TreeClient: @unchecked Sendable {   // every access holds `lock`
        private let lock = NSLock()
        private var tree: WireTree?
        private var failures: [String] = []
        private var versions: [Int64] = []
        private(set) var changes: [WireChangeset] = []

        func receive(_ event: SubscriptionEvent) {
            lock.withLock {
                if let last = versions.last, event.version <= last { failures.append("version \(event.version) after \(last)") }
                versions.append(event.version)
                switch event.kind {
                case .snapshot(let snapshot):
                    tree = WireTree(snapshot)
                    // What a client reads is what the node wrote.
                    if (try? JSONDecoder().decode(WireSnapshot.self, from: Data(event.json))) != snapshot {
                        failures.append("the snapshot's JSON does not read back as the snapshot")
                    }
                case .changes(let changeset):
                    changes.append(changeset)
                    if (try? JSONDecoder().decode(WireChangeset.self, from: Data(event.json))) != changeset {
                        failures.append("the changeset's JSON does not read back as the changeset")
                    }
                    guard tree != nil else { failures.append("a change before the first result"); return }
                    do { try tree!.apply(changeset) } catch { failures.append("\(error)") }
                case .ended(let reason, _): failures.append("ended: \(reason)")
                case .refused(let reason): failures.append("refused: \(reason)")
                }
            }
        }

        var current: WireTree? { lock.withLock { tree } }
        var problems: [String] { lock.withLock { failures } }
        var received: [WireChangeset] { lock.withLock { changes } }
    }

    static let columns = "id, project_id, owner, title, done, rank"
    static func readableTodos(_ user: String) -> String {
        "(owner = '\(user)' OR project_id IN (SELECT project_id FROM members WHERE user_id = '\(user)'))"
    }
    static func readableProjects(_ user: String) -> String {
        "id IN (SELECT project_id FROM members WHERE user_id = '\(user)')"
    }

    /// Projects, each with its first two open-or-done todos by rank, and its owner.
    static let projectsWithTodos = QueryDescription(
        table: "projects", order: [OrderDescription(column: "id")],
        include: ["todos": .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")], limit: 2),
                  "owner": .row(of: "users", on: ["owner": "id"])])

    /// The five first todos by rank, each with its project and that project's owner.
    static let todosWithProjects = QueryDescription(
        table: "todos", order: [OrderDescription(column: "rank"), OrderDescription(column: "id")], limit: 5,
        include: ["project": IncludeDescription.row(of: "projects", on: ["project_id": "id"])
            .including("owner", .row(of: "users", on: ["owner": "id"]))])

    /// What Postgres says `user`'s tree of ``projectsWithTodos`` is, as psql writes rows.
    static func expectedProjects(_ postgres: ThrowawayPostgres, _ user: String) async throws -> (root: [String], todos: [[String]], owners: [String]) {
        let root = try await postgres.rows("SELECT id, name, owner FROM projects WHERE \(readableProjects(user)) ORDER BY id")
        let todos = try await postgres.rows("""
            SELECT \(columns) FROM (SELECT \(columns), row_number() OVER (PARTITION BY project_id ORDER BY rank, id) AS n
                                    FROM todos WHERE \(readableTodos(user))) AS ranked
            WHERE n <= 2 ORDER BY project_id, rank, id
            """)
        var byProject: [String: [String]] = [:]
        for row in todos { byProject[String(row.split(separator: "|", omittingEmptySubsequences: false)[1]), default: []].append(row) }
        let sections = root.map { byProject[String($0.split(separator: "|")[0])] ?? [] }
        let owners = try await postgres.rows("""
            SELECT id, name FROM users WHERE id IN (SELECT owner FROM projects WHERE \(readableProjects(user))) ORDER BY id
            """)
        return (root, sections, owners)
    }

    /// What Postgres says `user`'s tree of ``todosWithProjects`` is.
    static func expectedTodos(_ postgres: ThrowawayPostgres, _ user: String) async throws -> (root: [String], projects: [String], owners: [String]) {
        let window = "SELECT \(columns) FROM todos WHERE \(readableTodos(user)) ORDER BY rank, id LIMIT 5"
        let root = try await postgres.rows(window)
        let projects = try await postgres.rows("""
            SELECT id, name, owner FROM projects WHERE \(readableProjects(user)) AND id IN (SELECT project_id FROM (\(window)) AS w) ORDER BY id
            """)
        let owners = try await postgres.rows("""
            SELECT id, name FROM users WHERE id IN (SELECT owner FROM projects WHERE \(readableProjects(user))
                                                    AND id IN (SELECT project_id FROM (\(window)) AS w)) ORDER BY id
            """)
        return (root, projects, owners)
    }

    static func text(_ rows: [[WireValue]]) -> [String] { rows.map(psqlText) }

    /// A throwaway Postgres with ``TeamFixture``'s tables, a replica following it whose commits
    /// finish the hub's versions, and the tables' schemas, for `body`.
    func withTeamHub(_ body: (ThrowawayPostgres, SubscriptionHub, ReplicaFeed, [String: SyncedTableSchema]) async throws -> Void) async throws {
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        let directory = try TemporaryDirectory()
        try await postgres.psql(TeamFixture.schema + TeamFixture.seed)
        let hub = SubscriptionHub(store: try Store(path: directory.path("replica.sqlite")), rules: try SyncRules(json: Data(TeamFixture.rules.utf8)))
        let client = postgres.makeClient()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let feed = ReplicaFeed(store: hub.store, client: client, configuration: FeedConfiguration(tables: TeamFixture.tables)) { commit in
                hub.complete(version: commit.version)
            }
            try await feed.prepare()
            var schemas: [String: SyncedTableSchema] = [:]
            for table in TeamFixture.tables {
                let schema = try #require(await feed.schema(of: table))
                schemas[table] = schema
            }
            try await body(postgres, hub, feed, schemas)
        }
    }

    @Test(arguments: [1, 2, 3]) func treesStayEqualToPostgresUnderRandomCommits(seed: UInt64) async throws {
        let users = ["alice", "bob", "carol"]
        let projectTrees = users.map { _ in TreeClient() }
        let todoTrees = users.map { _ in TreeClient() }
        var random = SeededGenerator(seed: seed)
        try await withTeamHub { postgres, hub, feed, schemas in
            var tokens: [SubscriptionToken] = []
            defer { tokens.forEach { $0.cancel() } }
            for (index, user) in users.enumerated() {
                for (query, tree) in [(Self.projectsWithTodos, projectTrees[index]), (Self.todosWithProjects, todoTrees[index])] {
                    let (compiled, basis) = try hub.compileSubscription(query, user: user, schema: schemas[query.table]!, tables: schemas)
                    guard case .tree = compiled else { Issue.record("a query with includes compiled flat"); return }
                    tokens.append(hub.subscribe(compiled, basis: basis, schema: schemas[query.table]!, resumingFrom: nil) { tree.receive($0) })
                }
            }
            // Equal subscriptions share their tree, and the tree's parts share live queries.
            let (again, basis) = try hub.compileSubscription(Self.projectsWithTodos, user: "alice", schema: schemas["projects"]!, tables: schemas)
            let aliceAgain = TreeClient()
            tokens.append(hub.subscribe(again, basis: basis, schema: schemas["projects"]!, resumingFrom: nil) { aliceAgain.receive($0) })
            #expect(hub.treeCount == 6)

            func check(_ what: String) async throws {
                for (index, user) in users.enumerated() {
                    let projects = try #require(projectTrees[index].current, "\(user)'s projects after \(what)")
                    let expected = try await Self.expectedProjects(postgres, user)
                    #expect(Self.text(projects.rows) == expected.root, "\(user)'s projects after \(what)")
                    #expect(projects.sections(of: "todos")?.map(Self.text) == expected.todos, "\(user)'s projects' todos after \(what)")
                    #expect(Self.text(projects.included["owner"]?.rows ?? []).sorted() == expected.owners, "\(user)'s owners after \(what)")
                    let todos = try #require(todoTrees[index].current, "\(user)'s todos after \(what)")
                    let expectedTodos = try await Self.expectedTodos(postgres, user)
                    #expect(Self.text(todos.rows) == expectedTodos.root, "\(user)'s todos after \(what)")
                    #expect(Self.text(todos.included["project"]?.rows ?? []).sorted() == expectedTodos.projects, "\(user)'s projects after \(what)")
                    #expect(Self.text(todos.included["project.owner"]?.rows ?? []).sorted() == expectedTodos.owners,
                            "\(user)'s project owners after \(what)")
                    for tree in [projectTrees[index], todoTrees[index]] { #expect(tree.problems.isEmpty, "\(user): \(tree.problems)") }
                }
                #expect(aliceAgain.current == projectTrees[0].current)
            }
            try await feed.catchUp()
            try await check("the first results")
            var nextTodo = 11
            for step in 0..<60 {
                let todo = 1 + Int(random.next() % UInt64(nextTodo - 1))
                let project = 1 + Int(random.next() % 3)
                let user = users[Int(random.next() % 3)]
                let sql: String
                switch random.next() % 9 {
                case 0: sql = "UPDATE todos SET project_id = \(project) WHERE id = \(todo)"
                case 1: sql = "UPDATE todos SET rank = \(random.next() % 6) WHERE id = \(todo)"
                case 2: sql = "INSERT INTO members(project_id, user_id) VALUES (\(project), '\(user)') ON CONFLICT DO NOTHING"
                case 3: sql = "DELETE FROM members WHERE project_id = \(project) AND user_id = '\(user)'"
                case 4: sql = "UPDATE projects SET name = 'p\(step)' WHERE id = \(project)"
                case 5: sql = "UPDATE users SET name = 'n\(step)' WHERE id = '\(user)'"
                case 6:
                    nextTodo += 1
                    sql = "INSERT INTO todos VALUES (\(nextTodo), \(project), '\(user)', 't\(step)', false, \(random.next() % 6))"
                case 7: sql = "DELETE FROM todos WHERE id = \(todo)"
                default:
                    sql = "BEGIN; UPDATE todos SET project_id = \(project), rank = 0 WHERE id = \(todo); "
                        + "UPDATE projects SET owner = '\(user)' WHERE id = \(project); COMMIT;"
                }
                try await postgres.psql(sql)
                try await feed.catchUp()
                try await check("step \(step): \(sql)")
            }
        }
    }

    /// A resume of a tree from an earlier version: the tree's rows read from the replica's
    /// history at that version are what the subscriber had then, and the first event is one
    /// changeset that brings them to now (includes and all).
    @Test func aTreeResumesWithOneChangeset() async throws {
        try await withTeamHub { postgres, hub, feed, schemas in
            let (compiled, basis) = try hub.compileSubscription(Self.projectsWithTodos, user: "bob", schema: schemas["projects"]!, tables: schemas)
            let first = TreeClient()
            var token = hub.subscribe(compiled, basis: basis, schema: schemas["projects"]!, resumingFrom: nil) { first.receive($0) }
            try await feed.catchUp()
            let then = try #require(first.current)
            let version = try await hub.store.asyncCurrentVersion()
            token.cancel()
            // While bob is away: a todo moves between his projects, he loses Launch, gains Garden.
            try await postgres.psql("""
                UPDATE todos SET project_id = 3, rank = 0 WHERE id = 4;
                DELETE FROM members WHERE project_id = 1 AND user_id = 'bob';
                INSERT INTO members(project_id, user_id) VALUES (2, 'bob');
                UPDATE users SET name = 'Alice A.' WHERE id = 'alice';
                """)
            try await feed.catchUp()
            guard case .tree(let old) = try await hub.asyncRows(of: compiled, schema: schemas["projects"]!, at: version) else {
                Issue.record("a tree's rows at a version are not a tree's")
                return
            }
            #expect(old.parts[0] == then.rows)
            let resumed = TreeClient()
            let events = Locked<[SubscriptionEvent]>([])
            token = hub.subscribe(compiled, basis: basis, schema: schemas["projects"]!, resumingFrom: .tree(old)) { event in
                events.withLock { $0.append(event) }
                resumed.receive(event)
            }
            defer { token.cancel() }
            let firstEvent = try #require(events.withLock { $0.first })
            guard case .changes(let changeset) = firstEvent.kind else {
                Issue.record("the resume's first event is not a changeset: \(firstEvent.kind)")
                return
            }
            var tree = then
            try tree.apply(changeset)
            let expected = try await Self.expectedProjects(postgres, "bob")
            #expect(Self.text(tree.rows) == expected.root)
            #expect(tree.sections(of: "todos")?.map(Self.text) == expected.todos)
            #expect(Self.text(tree.included["owner"]?.rows ?? []).sorted() == expected.owners)
        }
    }

    /// A todo moved to another project is one cross-section move in one event (with its changed
    /// column), and nothing else of the tree is sent.
    @Test func aTodoMovedToAnotherProjectIsOneMove() async throws {
        let tree = TreeClient()
        try await withTeamHub { postgres, hub, feed, schemas in
            let query = QueryDescription(table: "projects", order: [OrderDescription(column: "id")],
                                         include: ["todos": .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")])])
            let (compiled, basis) = try hub.compileSubscription(query, user: "alice", schema: schemas["projects"]!, tables: schemas)
            let token = hub.subscribe(compiled, basis: basis, schema: schemas["projects"]!, resumingFrom: nil) { tree.receive($0) }
            defer { token.cancel() }
            try await feed.catchUp()
            #expect(tree.current?.sections(of: "todos")?.map(\.count) == [4, 3])
            // Todo 2 (rank 2 in Launch) moves to Garden, ranked first there.
            try await postgres.psql("UPDATE todos SET project_id = 2, rank = 0 WHERE id = 2")
            try await feed.catchUp()
            let changes = tree.received
            #expect(changes.count == 1)
            let change = try #require(changes.last)
            #expect(change.deletes.isEmpty && change.inserts.isEmpty && change.moves.isEmpty && change.updates.isEmpty)
            guard case .sectioned(let todos)? = change.included?["todos"] else {
                Issue.record("the todos' change is not sectioned: \(change)")
                return
            }
            #expect(todos.moves == [WireSectionedChangeset.Move(old: WirePath(section: 0, item: 1), new: WirePath(section: 1, item: 0))])
            #expect(todos.deletes.isEmpty && todos.inserts.isEmpty)
            #expect(todos.updates.map(\.columns) == [[1: .integer(2), 5: .integer(0)]])
            #expect(tree.current?.sections(of: "todos")?.map(\.count) == [3, 4])
            #expect(tree.problems.isEmpty, "\(tree.problems)")
        }
    }
}
#endif
