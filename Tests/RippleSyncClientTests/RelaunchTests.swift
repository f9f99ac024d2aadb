#if Sync
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ripple
import RippleDiffTesting
import RippleSync
@testable import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// A relaunched app resumes, it does not download: the client keeps its subscriptions, their
/// rows as the server sent them and their positions in the local store, in the same transaction
/// as the rows; a new `SyncClient` over the same file that declares the same subscriptions
/// resumes each with one changeset — also after being killed at any moment.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: relaunch tests skipped"), .timeLimit(.minutes(15)))
struct RelaunchTests {
    /// A store over `path` and a client of `node` for `user`, started for `body` (both released after).
    static func launch<Result>(_ node: TestNode, path: String, user: String = "alice",
                               _ body: (SyncClient, Store) async throws -> Result) async throws -> Result {
        let store = try Store(path: path)
        let token = try node.token(user)
        let client = SyncClient(url: node.url, store: store) { token }
        await client.setBackoff(min: .milliseconds(50), max: .milliseconds(500))
        return try await withStarted(client) { try await body(client, store) }
    }

    /// The rows `sql` reads from the local store as psql prints them (`|` between columns); none
    /// before the first result made the tables.
    static func local(_ store: Store, _ sql: String) throws -> [String] {
        try store.read { db in
            guard try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name IN ('todos', 'items')", as: Int.self) ?? 0 > 0 else { return [] }
            return try db.fetchAll(sql).map { row in
                row.values.map { value -> String in
                    switch value {
                    case .integer(let integer): String(integer)
                    case .text(let text): text
                    case .null: ""
                    default: "\(value)"
                    }
                }.joined(separator: "|")
            }
        }
    }

    static let first3 = QueryDescription(table: "todos", order: [OrderDescription(column: "id")], limit: 3)
    static let first3SQL = "SELECT id, owner, title, rank, done FROM todos WHERE owner = 'alice' ORDER BY id LIMIT 3"
    static let localTodos = "SELECT id, owner, title, rank, CASE done WHEN 1 THEN 't' ELSE 'f' END FROM todos"

    /// Alice's open todos and her first three, synced; the app goes away; Postgres changes rows
    /// of both; a new client over the same file declares them again: each resumes with one
    /// changeset (the node sends no snapshot), the rows and positions are there before any frame,
    /// and the local rows end equal to Postgres's.
    @Test func aRelaunchedClientResumesEachSubscriptionWithOneChangeset() async throws {
        try await withThrowawayPostgres { postgres in
            try await TodosFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            let path = directory.path("app.sqlite")
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules, directory: directory) { node in
                let expected = "SELECT id, owner, title, rank, done FROM todos WHERE id IN (SELECT id FROM (\(TodosFixture.aliceOpenSQL)) AS o "
                    + "UNION SELECT id FROM (\(Self.first3SQL)) AS f) ORDER BY id"
                let (held, positions) = try await Self.launch(node, path: path) { client, store in
                    try await client.subscribe("open", TodosFixture.aliceOpen)
                    try await client.subscribe("first", Self.first3)
                    try await Wait.until("the first launch's rows", pausingAtMost: .milliseconds(250)) {
                        try Self.local(store, Self.localTodos + " ORDER BY id") == (try await postgres.rows(expected))
                    }
                    #expect(try await client.storedSubscriptions() == ["open": TodosFixture.aliceOpen, "first": Self.first3])
                    return (await client.rows(of: "open"), [await client.position(of: "open"), await client.position(of: "first")])
                }
                // While the app is away: an open todo is done, another renamed, the first one renamed.
                try await postgres.psql("UPDATE todos SET done = true WHERE id = 4; UPDATE todos SET title = 'away' WHERE id IN (2, 6)")

                try await Self.launch(node, path: path) { client, store in
                    #expect(try await client.storedSubscriptions().keys.sorted() == ["first", "open"])
                    try await client.subscribe("open", TodosFixture.aliceOpen)
                    try await client.subscribe("first", Self.first3)
                    // What the store kept is there at once.
                    let framesBefore = (await client.traffic()).frames
                    #expect(await client.rows(of: "open") == held || framesBefore > 0)
                    try await Wait.until("the relaunched client's rows to equal Postgres's", pausingAtMost: .milliseconds(250)) {
                        let traffic = await client.traffic()
                        guard traffic.changesets["open"] != nil, traffic.changesets["first"] != nil else { return false }
                        return try Self.local(store, Self.localTodos + " ORDER BY id") == (try await postgres.rows(expected))
                    }
                    let traffic = await client.traffic()
                    #expect(traffic.snapshots.isEmpty, "the node sent snapshots: \(traffic)")
                    #expect(traffic.changesets == ["open": 1, "first": 1], "\(traffic)")
                    #expect(await client.rows(of: "open").map { $0.map(psqlText) } == (try await postgres.rows(TodosFixture.aliceOpenSQL)))
                    let resumed = [await client.position(of: "open"), await client.position(of: "first")]
                    for (before, after) in zip(positions, resumed) {
                        let (old, new) = (try #require(before.flatMap(SyncPosition.init)), try #require(after.flatMap(SyncPosition.init)))
                        #expect(new > old)
                    }
                }
            }
        }
    }

    /// A subscription with includes (alice's projects, each with its todos and owner): it
    /// resumes with one changeset after a relaunch, its included rows in their tables, and its
    /// sectioned list shows at once from what the store kept, then follows the resume.
    @Test func anIncludedSubscriptionResumesAndItsSectionedListFollows() async throws {
        try await withThrowawayPostgres { postgres in
            try await TeamFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            let path = directory.path("alice.sqlite")
            try await TestNode.with(postgres, tables: TeamFixture.tables, rules: TeamFixture.rules, directory: directory) { node in
                try await Self.launch(node, path: path) { client, _ in
                    try await client.subscribe("p", SyncClientIncludeTests.projects)
                    let collector = IncludedRowsTests.Collector(try await client.sectionedList(of: "p", include: "todos"))
                    try await postgres.psql("UPDATE users SET name = 'Carol' WHERE id = 'carol'")
                    let first = try await collector.next("the list's first event")
                    #expect(SyncClientIncludeTests.shown(first.sections) == (try await SyncClientIncludeTests.expected(postgres)))
                }
                // While the app is away, todo 2 moves to the garden.
                try await postgres.psql("UPDATE todos SET project_id = 2 WHERE id = 2")

                try await Self.launch(node, path: path) { client, store in
                    try await client.subscribe("p", SyncClientIncludeTests.projects)
                    let collector = IncludedRowsTests.Collector(try await client.sectionedList(of: "p", include: "todos"))
                    // A commit after subscribing: a subscription with includes is answered once the
                    // replica completes a version after the subscribe.
                    try await postgres.psql("UPDATE users SET name = 'Caroline' WHERE id = 'carol'")
                    try await Wait.until("the resume's changeset", pausingAtMost: .milliseconds(100)) {
                        (await client.traffic()).changesets["p"] != nil
                    }
                    var event = try await collector.next("the list's first event")
                    while SyncClientIncludeTests.shown(event.sections) != (try await SyncClientIncludeTests.expected(postgres)) {
                        event = try await collector.next("the list to show the moved todo")
                    }
                    let traffic = await client.traffic()
                    #expect(traffic.snapshots.isEmpty, "the node sent a snapshot: \(traffic)")
                    #expect(try SyncClientIncludeTests.local(store, "SELECT id || '|' || project_id FROM todos ORDER BY id")
                            == (try await postgres.rows("SELECT id || '|' || project_id FROM todos WHERE project_id IN (1, 2) ORDER BY id")))
                    #expect(try SyncClientIncludeTests.local(store, "SELECT id FROM projects ORDER BY id") == ["1", "2"])
                    #expect(collector.failures.withLock { $0 }.isEmpty, "\(collector.failures.withLock { $0 })")
                }
            }
        }
    }

    /// An app version that changed a subscription's query (same id): it starts afresh with a
    /// snapshot, and the rows only the old query held leave the local store.
    @Test func aChangedQueryStartsAfresh() async throws {
        try await withThrowawayPostgres { postgres in
            try await TodosFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            let path = directory.path("app.sqlite")
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules, directory: directory) { node in
                try await Self.launch(node, path: path) { client, store in
                    try await client.subscribe("open", TodosFixture.aliceOpen)
                    try await Wait.until("the first launch's rows", pausingAtMost: .milliseconds(250)) {
                        try Self.local(store, Self.localTodos + " ORDER BY rank, id") == (try await postgres.rows(TodosFixture.aliceOpenSQL))
                    }
                }
                try await Self.launch(node, path: path) { client, store in
                    try await client.subscribe("open", Self.first3)
                    let framesBefore = (await client.traffic()).frames
                    #expect(await client.rows(of: "open") == nil || framesBefore > 0, "the old query's rows were taken for the new one's")
                    try await Wait.until("the new query's rows", pausingAtMost: .milliseconds(250)) {
                        try Self.local(store, Self.localTodos + " ORDER BY id") == (try await postgres.rows(Self.first3SQL))
                    }
                    let traffic = await client.traffic()
                    #expect(traffic.snapshots == ["open": 1] && traffic.changesets.isEmpty, "\(traffic)")
                    #expect(try await client.storedSubscriptions() == ["open": Self.first3])
                    // Unsubscribed, the store forgets it.
                    try await client.unsubscribe("open")
                    #expect(try await client.storedSubscriptions().isEmpty)
                }
            }
        }
    }

    // MARK: The app killed at random moments

    /// The relaunch child's tables: `items`, which a writer changes, and `counters`, which the
    /// child adds to (`applied` counts the updates Postgres applied to each counter).
    static let crashSchema = """
        CREATE TABLE items(id int8 PRIMARY KEY, v int8 NOT NULL);
        INSERT INTO items SELECT n, 0 FROM generate_series(1, 2000) AS n;
        CREATE TABLE counters(id int8 PRIMARY KEY, n int8 NOT NULL DEFAULT 0, applied int8 NOT NULL DEFAULT 0);
        INSERT INTO counters SELECT n, 0, 0 FROM generate_series(1, 5) AS n;
        CREATE FUNCTION count_applied() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN NEW.applied := OLD.applied + 1; RETURN NEW; END $$;
        CREATE TRIGGER counters_applied BEFORE UPDATE OF n ON counters FOR EACH ROW EXECUTE FUNCTION count_applied();
        """
    static let crashRules = #"{"tables": {"items": {"read": true}, "counters": {"read": true, "write": true}}}"#
    static let kills = 5

    /// `ripple-server relaunch-child` subscribes to `items` and `counters` and adds to random
    /// counters in its local store, while a writer changes `items` in Postgres; the test kills it
    /// (SIGKILL) at seeded random moments, five times, launching it again over the same store.
    /// Then the writes stop, and a last launch (in this process) checks: every launch that found
    /// its subscriptions stored resumed them without a snapshot; the local rows equal Postgres's;
    /// every counter's value is the number of updates Postgres applied to it (no mutation lost,
    /// none applied twice) and the outbox is empty.
    ///
    /// (`items` holds 2,000 rows, so that a resume's changeset — at most the writer's 400 updates —
    /// stays below the result's size, where the node would send a snapshot instead.)
    @Test(arguments: [UInt64(42)])
    func aClientKilledAtRandomMomentsLosesNothingAndAppliesNothingTwice(seed: UInt64) async throws {
        let executable = try #require(Self.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in
            try await postgres.psql(Self.crashSchema)
            let directory = try TemporaryDirectory()
            let path = directory.path("app.sqlite")
            try await TestNode.with(postgres, tables: ["items", "counters"], rules: Self.crashRules, directory: directory) { node in
                var random = SeededGenerator(seed: seed)
                // The writer: 400 autocommit updates of random items, 15 ms apart.
                let writer = Task {
                    try await postgres.psql("""
                        DO $$ BEGIN FOR i IN 1..400 LOOP
                            UPDATE items SET v = v + 1 WHERE id = 1 + floor(random() * 2000)::int8; COMMIT; PERFORM pg_sleep(0.015);
                        END LOOP; END $$
                        """)
                }
                var launches: [(stored: [String], snapshots: [String: Int], changesets: [String: Int])] = []
                for launch in 0..<Self.kills {
                    let output = directory.path("child\(launch).out")
                    _ = FileManager.default.createFile(atPath: output, contents: nil)
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: executable)
                    process.arguments = ["relaunch-child", "--url", node.url, "--token", try node.token("alice"), "--store", path,
                                         "--seed", String(seed &+ UInt64(launch)), "--interval", "10"]
                    process.standardOutput = FileHandle(forWritingAtPath: output)
                    process.standardError = FileHandle(forWritingAtPath: directory.path("child\(launch).err"))
                    try ProcessLaunch.run(process)
                    do {
                        // Killed once it has applied a frame (the first launch: a frame of each
                        // subscription, so that the store keeps both), at a random moment after: 0 to 600 ms.
                        try await Wait.until("launch \(launch) to apply a frame", pausingAtMost: .milliseconds(20)) {
                            Self.childLines(output).contains { line in
                                let received = Set(((line["snapshots"] as? [String: Int]) ?? [:]).keys)
                                    .union(((line["changesets"] as? [String: Int]) ?? [:]).keys)
                                return launch == 0 ? received == ["items", "counters"] : line["snapshots"] != nil
                            }
                        }
                        try await Task.sleep(for: .milliseconds(Int.random(in: 0...600, using: &random)))
                    } catch {
                        kill(process.processIdentifier, SIGKILL)
                        try? await Wait.exit(of: process, "the child to end")
                        throw error
                    }
                    kill(process.processIdentifier, SIGKILL)
                    try await Wait.exit(of: process, "launch \(launch) to end after SIGKILL")
                    let lines = Self.childLines(output)
                    let stored = (lines.first?["stored"] as? [String]) ?? []
                    let last = lines.last { $0["snapshots"] != nil }
                    launches.append((stored, (last?["snapshots"] as? [String: Int]) ?? [:], (last?["changesets"] as? [String: Int]) ?? [:]))
                }
                _ = try await writer.value

                // The last launch, writes stopped: it resumes, pushes what is pending, and settles.
                try await Self.launch(node, path: path) { client, store in
                    let stored = try await client.storedSubscriptions().keys.sorted()
                    #expect(stored == ["counters", "items"])
                    for table in ["items", "counters"] {
                        try await client.subscribe(table, QueryDescription(table: table, order: [OrderDescription(column: "id")]))
                    }
                    try await Wait.until("the last launch to settle and equal Postgres", pausingAtMost: .milliseconds(250)) {
                        guard try await client.pendingMutations() == 0 else { return false }
                        let items = try await postgres.rows("SELECT id, v FROM items ORDER BY id")
                        let counters = try await postgres.rows("SELECT id, n, applied FROM counters ORDER BY id")
                        return try Self.local(store, "SELECT id, v FROM items ORDER BY id") == items
                            && Self.local(store, "SELECT id, n, applied FROM counters ORDER BY id") == counters
                    }
                    let traffic = await client.traffic()
                    #expect(traffic.snapshots.isEmpty, "the last launch got snapshots: \(traffic)")
                }
                for row in try await postgres.rows("SELECT id, n, applied FROM counters ORDER BY id") {
                    let fields = row.split(separator: "|")
                    #expect(fields[1] == fields[2], "counter \(fields[0]): value \(fields[1]), updates applied \(fields[2])")
                }
                let total = try await postgres.rows("SELECT sum(n) FROM counters")
                #expect(total != ["0"], "the children pushed nothing")
                for (index, launch) in launches.enumerated() {
                    for id in launch.stored {
                        #expect(launch.snapshots[id] == nil, "launch \(index) found \(id) stored but got a snapshot: \(launch)")
                    }
                }
                #expect(launches.dropFirst().contains { !$0.stored.isEmpty && !$0.changesets.isEmpty }, "no launch resumed: \(launches)")
            }
        }
    }

    /// The `ripple-server` beside the test bundle (built with the tests), if any.
    static var serverExecutable: String? {
        RippleExecutable.url().map { $0.deletingLastPathComponent().appendingPathComponent("ripple-server").path }
            .flatMap { FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil }
    }

    /// The whole JSON lines a child wrote so far (a line cut by SIGKILL is left out).
    static func childLines(_ path: String) -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n", omittingEmptySubsequences: true).compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }
}

/// The stored result and position against a model, without a server: random trees (projects with
/// their owner and todos, each todo with its assignee) played to a client as snapshots and
/// changesets; after every frame the store's kept subscription — rebuilt from its frames — is
/// the tree the client holds, at the position it stands at, and the local tables hold exactly its
/// rows; at random moments the app relaunches (a new client over the same file), which holds the
/// same rows and position before any frame.
@Suite(.timeLimit(.minutes(10)))
struct RelaunchStoreTests {
    typealias Server = IncludedRowsTests.Server

    @Test(arguments: [UInt64(1), 2, 3])
    func theStoredPositionAndRowsAreAlwaysOfOneVersion(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        var server = Server.fixture()
        var tree = server.tree()
        var lsn = server.nextLSN()
        let port = try IncludedRowsTests.closedPort()
        var relaunches = 0
        var folds = 0
        var frame = 0
        while frame < 150 {
            let store = try Store(path: path)
            let client = SyncClient(url: "ws://127.0.0.1:\(port)/sync", store: store) { "a token" }
            await client.setBackoff(min: .seconds(60), max: .seconds(60))
            try await withStarted(client) {
                try await client.subscribe("p", Server.query)
                if frame == 0 {
                    await client.receive(frame: Server.frame(lsn: lsn, snapshots: ["p": Server.snapshot(tree)]))
                } else {
                    // Relaunched: the rows and position are there before any frame.
                    relaunches += 1
                    #expect(await client.position(of: "p") == lsn, "seed \(seed), frame \(frame): the relaunch's position")
                    #expect(await client.rows(of: "p") == tree.root, "seed \(seed), frame \(frame): the relaunch's rows")
                    #expect(await client.includedRows(of: "p", include: "todos")?.counts == tree.sections.map(\.count))
                }
                try Self.expectStored(store, tree: tree, lsn: lsn, seed: seed, frame: frame)
                while frame < 150 {
                    frame += 1
                    let old = tree
                    Self.change(&server, using: &random)
                    tree = server.tree()
                    lsn = server.nextLSN()
                    if Int.random(in: 0..<40, using: &random) == 0 {
                        await client.receive(frame: Server.frame(lsn: lsn, snapshots: ["p": Server.snapshot(tree)]))
                    } else {
                        @Sendable func kept() throws -> Int? {
                            try store.read { db in
                                try db.fetchValue("SELECT count(*) FROM ripple_sync_subscription_frames WHERE subscription = 'p'", as: Int.self)
                            }
                        }
                        let before = try kept()
                        await client.receive(frame: Server.frame(lsn: lsn, changesets: ["p": Server.changeset(from: old, to: tree)]))
                        // Frames kept, then one: the changesets were folded into a snapshot.
                        if let before, before > 1, try kept() == 1 { folds += 1 }
                    }
                    #expect(await client.rows(of: "p") == tree.root, "seed \(seed), frame \(frame)")
                    try Self.expectStored(store, tree: tree, lsn: lsn, seed: seed, frame: frame)
                    try IncludedRowsTests.expectLocalTables(store, tree)
                    if Int.random(in: 0..<8, using: &random) == 0 { break }
                }
            }
        }
        #expect(relaunches > 0)
        #expect(folds > 0, "seed \(seed): the kept changesets were never folded")
    }

    /// A snapshot's result is kept in the write after its rows': an app killed between the two
    /// keeps the subscription without a result. The next launch then subscribes it afresh (no
    /// position, no rows of its own) and the snapshot replaces the rows the file held exactly;
    /// and a changeset that comes before the result was kept keeps the whole result.
    @Test func aSnapshotWhoseResultWasNotKeptStartsAfreshAndAChangesetKeepsTheWholeResult() async throws {
        var random = SeededGenerator(seed: 7)
        let directory = try TemporaryDirectory()
        let path = directory.path("device.sqlite")
        var server = Server.fixture()
        let port = try IncludedRowsTests.closedPort()
        let queryText = try StoredSubscriptions.queryText(Server.query)
        @Sendable func launch(_ body: (SyncClient, Store) async throws -> Void) async throws {
            let store = try Store(path: path)
            let client = SyncClient(url: "ws://127.0.0.1:\(port)/sync", store: store) { "a token" }
            await client.setBackoff(min: .seconds(60), max: .seconds(60))
            try await withStarted(client) {
                try await client.subscribe("p", Server.query)
                try await body(client, store)
            }
        }
        /// The app killed between a snapshot's two writes: its rows and position, no result.
        func dropResult(_ store: Store, lsn: String) throws {
            try store.write { db in try StoredSubscriptions.keepPosition("p", query: queryText, lsn: lsn, in: db) }
            #expect(try store.read { db in try StoredSubscriptions.load("p", in: db) } == nil)
            #expect(try store.read { db in try StoredSubscriptions.queries(in: db) }.keys.sorted() == ["p"])
        }
        var tree = server.tree()
        var lsn = server.nextLSN()
        try await launch { client, store in
            await client.receive(frame: Server.frame(lsn: lsn, snapshots: ["p": Server.snapshot(tree)]))
            try Self.expectStored(store, tree: tree, lsn: lsn, seed: 7, frame: 1)
            try dropResult(store, lsn: lsn)
        }
        // Relaunched without a result: nothing to resume from; the next snapshot replaces the
        // rows the file held.
        for _ in 0..<6 { Self.change(&server, using: &random) }
        tree = server.tree()
        lsn = server.nextLSN()
        try await launch { client, store in
            #expect(await client.position(of: "p") == nil, "a subscription kept without its result does not resume")
            #expect(await client.rows(of: "p") == nil)
            await client.receive(frame: Server.frame(lsn: lsn, snapshots: ["p": Server.snapshot(tree)]))
            #expect(await client.rows(of: "p") == tree.root)
            try IncludedRowsTests.expectLocalTables(store, tree)
            try Self.expectStored(store, tree: tree, lsn: lsn, seed: 7, frame: 2)
            // The result not kept, then a changeset: the whole result is kept with it.
            try dropResult(store, lsn: lsn)
            let old = tree
            for _ in 0..<3 { Self.change(&server, using: &random) }
            tree = server.tree()
            lsn = server.nextLSN()
            await client.receive(frame: Server.frame(lsn: lsn, changesets: ["p": Server.changeset(from: old, to: tree)]))
            #expect(await client.rows(of: "p") == tree.root)
            try Self.expectStored(store, tree: tree, lsn: lsn, seed: 7, frame: 3)
        }
        // And it resumes from there.
        try await launch { client, store in
            #expect(await client.position(of: "p") == lsn)
            #expect(await client.rows(of: "p") == tree.root)
            try IncludedRowsTests.expectLocalTables(store, tree)
        }
    }

    /// The store's kept subscription `p` is `tree` at `lsn`.
    static func expectStored(_ store: Store, tree: Server.Tree, lsn: String, seed: UInt64, frame: Int,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let stored = try #require(try store.read { db in try StoredSubscriptions.load("p", in: db) }, sourceLocation: sourceLocation)
        #expect(stored.lsn == lsn, "seed \(seed), frame \(frame): the stored position", sourceLocation: sourceLocation)
        #expect(stored.tree.rows == tree.root, "seed \(seed), frame \(frame): the stored rows", sourceLocation: sourceLocation)
        #expect(stored.tree.included["todos"]?.sections == tree.sections, "seed \(seed), frame \(frame): the stored sections",
                sourceLocation: sourceLocation)
        #expect(Set(stored.tree.included["owner"]?.rows ?? []) == Set(tree.owner), sourceLocation: sourceLocation)
        #expect(Set(stored.tree.included["todos.assignee"]?.rows ?? []) == Set(tree.assignee), sourceLocation: sourceLocation)
    }

    /// One random change of the model: a project renamed, added or deleted; a todo moved,
    /// re-ranked, added or deleted; a user renamed.
    static func change(_ server: inout Server, using random: inout SeededGenerator) {
        let projects = server.projects.keys.sorted()
        let todos = server.todos.keys.sorted()
        switch Int.random(in: 0..<7, using: &random) {
        case 0 where !projects.isEmpty:
            server.projects[projects.randomElement(using: &random)!]!.name = "P\(Int.random(in: 0..<100, using: &random))"
        case 1:
            let id = (projects.last ?? 0) + 1
            server.projects[id] = ("P\(Int.random(in: 0..<100, using: &random))", Int64.random(in: 1...5, using: &random))
        case 2 where projects.count > 1:
            let id = projects.randomElement(using: &random)!
            server.projects[id] = nil
            server.todos = server.todos.filter { $0.value.project != id }
        case 3 where !todos.isEmpty && !projects.isEmpty:
            server.todos[todos.randomElement(using: &random)!]!.project = projects.randomElement(using: &random)!
        case 4 where !todos.isEmpty:
            server.todos[todos.randomElement(using: &random)!]!.rank = Int64.random(in: 0..<10, using: &random)
        case 5 where !projects.isEmpty:
            let id = (todos.last ?? 0) + 1
            server.todos[id] = (projects.randomElement(using: &random)!, "t\(id)", Int64.random(in: 0..<10, using: &random),
                                Int64.random(in: 1...5, using: &random))
        default:
            if let user = server.users.keys.sorted().randomElement(using: &random) { server.users[user] = "u\(Int.random(in: 0..<100, using: &random))" }
        }
    }
}
#endif
