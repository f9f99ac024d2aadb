#if Sync
import Foundation
import Ripple
import RippleDiff
import RippleServer
import RippleSync
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// The Swift client against a real node: its local store holds the rows of its subscriptions
/// (the app's own live queries fire), remote live queries hand changesets to lists, and it
/// reconnects and resumes by itself.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync client tests skipped"), .timeLimit(.minutes(15)))
struct SyncClientTests {
    /// Waits (bounded) until `condition`, about `client`'s store or rows, holds. (Checked every
    /// quarter of a second at most: it often runs psql, a process of its own.)
    static func until(_ client: SyncClient, _ what: String = "the client's rows to match", within limit: Duration = Wait.limit,
                      _ condition: @escaping @Sendable () async throws -> Bool) async throws {
        try await Wait.until(what, within: limit, pausingAtMost: .milliseconds(250)) { try await condition() }
    }

    @Test func theLocalStoreHoldsEachSubscriptionsRowsAndLiveQueriesFire() async throws {
        try await withThrowawayPostgres { postgres in
            try await TodosFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules, directory: directory) { node in
                let store = try Store(path: directory.path("client.sqlite"))
                let token = try node.token("alice")
                let client = SyncClient(url: node.url, store: store) { token }
                try await withStarted(client) {
                    // Two overlapping subscriptions: a row stays while either holds it.
                    try await client.subscribe("open", TodosFixture.aliceOpen)
                    try await client.subscribe("first", QueryDescription(table: "todos", order: [OrderDescription(column: "id")], limit: 3))
                    let expected = "SELECT id, owner, title, rank, done FROM todos WHERE owner = 'alice' AND "
                        + "(id IN (SELECT id FROM todos WHERE owner = 'alice' AND NOT done ORDER BY rank, id LIMIT 10) "
                        + " OR id IN (SELECT id FROM todos WHERE owner = 'alice' ORDER BY id LIMIT 3)) ORDER BY id"
                    let local = "SELECT id, owner, title, rank, CASE done WHEN 1 THEN 't' ELSE 'f' END FROM todos ORDER BY id"
                    @Sendable func localRows() throws -> [String] {
                        try store.read { db in
                            guard try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = 'todos'", as: Int.self) == 1 else { return [] }
                            return try db.fetchAll(local).map { row in row.values.map { value -> String in
                            switch value {
                            case .integer(let integer): String(integer)
                            case .text(let text): text
                            default: "\(value)"
                            }
                        }.joined(separator: "|") } }
                    }
                    try await Self.until(client) { try localRows() == (try await postgres.rows(expected)) }
                    // The app's own live query over the local store follows the server.
                    let live = store.liveQuery(sql: "SELECT id, title FROM todos WHERE rank < 5 ORDER BY id", identity: "id")
                    let seen = Locked<[[Row]]>([])
                    let subscription = live.subscribe(on: .immediate) { event in seen.withLock { $0.append(event.snapshot) } }
                    defer { subscription.cancel() }
                    try await postgres.psql("UPDATE todos SET title = 'milk' WHERE id = 2; UPDATE todos SET done = true, rank = 1 WHERE id = 4")
                    try await Self.until(client) { try localRows() == (try await postgres.rows(expected)) }
                    #expect(seen.withLock { $0.last }?.first?.values == [.integer(2), .text("milk")])
                    // A row leaving one subscription but held by the other stays; leaving both, it goes.
                    try await postgres.psql("UPDATE todos SET done = true WHERE id = 6")
                    try await Self.until(client) { try localRows() == (try await postgres.rows(expected)) }
                    try await postgres.psql("UPDATE todos SET owner = 'bob' WHERE id = 8")
                    try await Self.until(client) { try localRows() == (try await postgres.rows(expected)) }
                    try await client.unsubscribe("first")
                    let onlyOpen = "SELECT id, owner, title, rank, done FROM todos WHERE owner = 'alice' AND NOT done ORDER BY id LIMIT 100"
                    let window = try await postgres.rows(TodosFixture.aliceOpenSQL).map { $0.split(separator: "|")[0] }
                    #expect(try localRows().map { $0.split(separator: "|")[0] } == (try await postgres.rows(onlyOpen)).map { $0.split(separator: "|")[0] }.filter(window.contains))
                }
            }
        }
    }

    struct Todo: Codable, Sendable, Identifiable, Equatable {
        var id: Int64
        var owner: String
        var title: String
        var rank: Int
        var done: Bool
    }

    /// A typed query subscribes as its description: its collection in the local store reads the
    /// rows the server sends, and the same query run locally gives the server's result.
    @Test func aTypedQuerySubscribesAndItsCollectionReadsTheRows() async throws {
        try await withThrowawayPostgres { postgres in
            try await TodosFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules, directory: directory) { node in
                let store = try Store(path: directory.path("client.sqlite"))
                let todos = try store.collection("todos", of: Todo.self)
                let token = try node.token("alice")
                let client = SyncClient(url: node.url, store: store) { token }
                try await withStarted(client) {
                    let open = todos.filter(Column("done") == false && Column("title").like("todo 1%")).order(by: Column("rank").descending).limit(4)
                    #expect(try open.syncDescription() == QueryDescription(
                        table: "todos", filter: .and([.compare(column: "done", op: .equal, value: .integer(0)), .like(column: "title", pattern: "todo 1%")]),
                        order: [OrderDescription(column: "rank", descending: true)], limit: 4))
                    try await client.subscribe("open", open)
                    let expected = "SELECT id FROM todos WHERE owner = 'alice' AND NOT done AND title LIKE 'todo 1%' ORDER BY rank DESC, id LIMIT 4"
                    try await Self.until(client) { try open.fetchAll().map { String($0.id) } == (try await postgres.rows(expected)) }
                    try await postgres.psql("UPDATE todos SET done = true WHERE id = 18")
                    try await Self.until(client) { try open.fetchAll().map { String($0.id) } == (try await postgres.rows(expected)) }
                    #expect(try todos.fetchAll().allSatisfy { $0.owner == "alice" })
                }
            }
        }
    }

    /// A synced table that gains a column: the client subscribes again by itself, and the local
    /// table gains the column with the rows' values.
    @Test func aColumnAddedOnPostgresReachesTheLocalStore() async throws {
        try await withThrowawayPostgres { postgres in
            try await TodosFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules, directory: directory) { node in
                let store = try Store(path: directory.path("client.sqlite"))
                let token = try node.token("alice")
                let client = SyncClient(url: node.url, store: store) { token }
                try await withStarted(client) {
                    try await client.subscribe("open", TodosFixture.aliceOpen)
                    @Sendable func notes() throws -> [String] {
                        try store.read { db in
                            guard try db.fetchValue("SELECT count(*) FROM pragma_table_info('todos') WHERE name = 'note'", as: Int.self) == 1 else {
                                return []
                            }
                            return try db.fetchAll("SELECT id || ':' || note AS pair FROM todos ORDER BY id").map { try $0.value("pair", as: String.self) }
                        }
                    }
                    let expected = "SELECT id || ':' || note FROM todos WHERE owner = 'alice' AND NOT done ORDER BY rank, id LIMIT 10"
                    try await Self.until(client) { await client.rows(of: "open")?.count == 10 }
                    try await postgres.psql("ALTER TABLE todos ADD COLUMN note text NOT NULL DEFAULT 'n'; UPDATE todos SET note = 'two' WHERE id = 2")
                    try await Self.until(client) { try notes() == (try await postgres.rows(expected)).sorted { Int($0.split(separator: ":")[0])! < Int($1.split(separator: ":")[0])! } }
                }
            }
        }
    }

    /// A remote live query's changesets apply to a list, across a restart of the node (the
    /// client reconnects and resumes by itself).
    @Test func aRemoteLiveQueryFollowsAcrossANodeRestart() async throws {
        try await withThrowawayPostgres { postgres in
            try await TodosFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules, directory: directory) { node in
                let port = node.port
                let store = try Store(path: directory.path("client.sqlite"))
                let token = try node.token("alice")
                let client = SyncClient(url: node.url, store: store) { token }
                await client.setBackoff(min: .milliseconds(20), max: .milliseconds(200))
                try await withStarted(client) {
                    var list: [[WireValue]] = []
                    var iterator = await client.remoteQuery(TodosFixture.aliceOpen).makeAsyncIterator()
                    func next() async throws {
                        let event = try #require(try await iterator.next())
                        list = event.changeset.apply(to: list, using: event.rows)
                        #expect(list == event.rows)
                    }
                    try await next()
                    #expect(list.map(psqlText) == (try await postgres.rows(TodosFixture.aliceOpenSQL)))
                    try await postgres.psql("UPDATE todos SET rank = 0 WHERE id = 20")
                    try await next()
                    #expect(list.map(psqlText) == (try await postgres.rows(TodosFixture.aliceOpenSQL)))
                    // The node goes away (its scope's stop finds it stopped); writes go on; a node
                    // comes back on the same port and replica.
                    await node.stop()
                    try await postgres.psql("UPDATE todos SET done = true WHERE id = 2; INSERT INTO todos VALUES (200, 'alice', 'x', -1, false)")
                    try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules,
                                            directory: directory, adjust: { $0.port = port }) { _ in
                        while list.map(psqlText) != (try await postgres.rows(TodosFixture.aliceOpenSQL)) { try await next() }
                    }
                }
            }
        }
    }
}
#endif
