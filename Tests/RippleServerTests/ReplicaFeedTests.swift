#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple
import RippleServer
import RippleSyncTesting
import RippleTesting
import Testing

/// The feed from a real PostgreSQL cluster into a replica store: writes from any Postgres client
/// arrive, one replica commit per Postgres transaction, and a feed stopped anywhere replays
/// without skipping or repeating.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: feed tests skipped"), .timeLimit(.minutes(15)))
struct ReplicaFeedTests {
    let postgres: ThrowawayPostgres
    let directory: TemporaryDirectory

    init() async throws {
        postgres = try await ThrowawayPostgres.started()
        directory = try TemporaryDirectory()
        try await postgres.psql("""
            CREATE TABLE items(id bigint PRIMARY KEY, title text, price numeric(10,2), ratio float8, done bool,
                               data bytea, tag uuid, meta jsonb, due date, at timestamptz, big text);
            INSERT INTO items(id, title, price) VALUES (1, 'first', 1.50), (2, 'second', 2.00);
            """)
    }

    /// Runs `body` with a client of the cluster (its `run()` going on beside).
    func withClient<T: Sendable>(_ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let client = postgres.makeClient()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// The table as Postgres has it, each value through the replica's rules.
    func postgresRows() async throws -> [[SQLValue]] {
        let types: [UInt32] = [20, 25, 1700, 701, 16, 17, 2950, 3802, 1082, 1184, 25]
        let text = try await postgres.psql("""
            SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; SET extra_float_digits = 1;
            SELECT json_agg(json_build_array(id::text, title::text, price::text, ratio::text, done::text, data::text, tag::text,
                   meta::text, due::text, at::text, big::text) ORDER BY id) FROM items
            """).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, let rows = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[Any]] else { return [] }
        return try rows.map { row in
            try zip(row, types).map { value, type in
                guard let text = value as? String else { return .null }
                return try PostgresTypes.replicaValue(text, of: type)
            }
        }
    }

    func replicaRows(_ store: Store) throws -> [[SQLValue]] {
        try store.read { db in
            try db.fetchAll("SELECT id, title, price, ratio, done, data, tag, meta, due, at, big FROM items ORDER BY id").map(\.values)
        }
    }

    /// The events a subscriber received, in order.
    final class Events: @unchecked Sendable {   // every access holds `lock`
        private let lock = NSLock()
        private var received: [LiveQueryEvent<Row>] = []
        func append(_ event: LiveQueryEvent<Row>) { lock.withLock { received.append(event) } }
        var all: [LiveQueryEvent<Row>] { lock.withLock { received } }
    }

    @Test func writesFromAnyClientArriveOneCommitPerTransaction() async throws {
        let store = try Store(path: directory.path("replica.sqlite"))
        let config = FeedConfiguration(tables: ["items"])
        let events = Events()
        try await withClient { client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            try await feed.prepare()
            #expect(try replicaRows(store) == (try await postgresRows()))
            let live = store.liveQuery(sql: "SELECT id, title FROM items ORDER BY id", identity: "id")
            let subscription = live.subscribe(on: .immediate) { events.append($0) }
            defer { subscription.cancel() }
            try await postgres.psql("""
                BEGIN;
                INSERT INTO items VALUES (3, 'third', 9999.99, 'NaN', true, '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
                    '{"b": 1, "a": [1, 2]}', '2026-11-27', '2026-11-27 06:32:03.123456+01',
                    (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3000) AS g));
                UPDATE items SET title = 'one' WHERE id = 1;
                COMMIT;
                """)
            try await postgres.psql("UPDATE items SET ratio = '-Infinity', price = 'NaN' WHERE id = 3")   // big stays TOASTed
            try await postgres.psql("UPDATE items SET id = 4 WHERE id = 2")
            try await postgres.psql("DELETE FROM items WHERE id = 1")
            let before = try store.currentVersion()
            #expect(try await feed.catchUp() == 4)
            #expect(try store.currentVersion() == before + 4)
            #expect(try replicaRows(store) == (try await postgresRows()))
            #expect(try replicaRows(store).first?[10] != .null)   // the TOASTed value kept through the update
        }
        // Each Postgres transaction that changed the result was one event, whole (the second
        // changed no column the query reads).
        let received = events.all
        #expect(received.map { $0.snapshot.map { $0["title"] ?? .null } } == [
            [.text("first"), .text("second")],
            [.text("one"), .text("second"), .text("third")],
            [.text("one"), .text("third"), .text("second")],
            [.text("third"), .text("second")],
        ])
        #expect(received.dropFirst().allSatisfy { $0.origin == .replication && $0.tag.flatMap(PGOutput.LSN.init) != nil })
    }

    /// Stopped after a peek (nothing applied) or after applying (the slot not advanced): a new
    /// feed on the same replica applies every transaction exactly once.
    @Test func aFeedStoppedAnywhereReplaysWithoutSkippingOrRepeating() async throws {
        let path = directory.path("replica.sqlite")
        let config = FeedConfiguration(tables: ["items"])
        var store = try Store(path: path)
        try await withClient { [store] client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            try await feed.prepare()
        }
        try await postgres.psql("INSERT INTO items(id, title) VALUES (10, 'a')")
        try await postgres.psql("UPDATE items SET title = 'b' WHERE id = 10")
        // Peeked, never applied.
        try await withClient { [store] client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            try await feed.prepare()
            #expect(try await feed.peek().isEmpty == false)
        }
        let afterCopy = try store.currentVersion()
        // Applied, the slot never advanced.
        try await withClient { [store] client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            try await feed.prepare()
            #expect(try await feed.catchUp(confirm: false) == 2)
        }
        #expect(try store.currentVersion() == afterCopy + 2)
        store = try Store(path: path)   // as a restarted node opens it
        try await postgres.psql("DELETE FROM items WHERE id = 10")
        try await withClient { [store] client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            try await feed.prepare()
            #expect(try await feed.catchUp() == 1)   // the two applied ones are skipped, the delete applied
            #expect(try await feed.catchUp() == 0)
        }
        #expect(try store.currentVersion() == afterCopy + 3)
        #expect(try replicaRows(store) == (try await postgresRows()))
    }

    /// A new replica (its file lost) never resumes the old slot's position: a fresh slot and copy.
    @Test func aNewReplicaGetsAFreshSlotAndCopy() async throws {
        let config = FeedConfiguration(tables: ["items"])
        let first = try Store(path: directory.path("first.sqlite"))
        try await withClient { client in
            let feed = ReplicaFeed(store: first, client: client, configuration: config)
            try await feed.prepare()
        }
        try await postgres.psql("INSERT INTO items(id, title) VALUES (20, 'x')")
        try await withClient { client in
            let feed = ReplicaFeed(store: first, client: client, configuration: config)
            try await feed.prepare()
            try await feed.catchUp()
        }
        let second = try Store(path: directory.path("second.sqlite"))
        try await withClient { client in
            let feed = ReplicaFeed(store: second, client: client, configuration: config)
            try await feed.prepare()
            try await feed.catchUp()
        }
        #expect(try replicaRows(second) == (try await postgresRows()))
        #expect(try replicaRows(second).count == 3)
    }

    @Test func aTableWithoutAPrimaryKeyIsRefused() async throws {
        try await postgres.psql("CREATE TABLE loose(x int)")
        let store = try Store(path: directory.path("replica.sqlite"))
        let config = FeedConfiguration(tables: ["loose"])
        try await withClient { client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            let error = await #expect(throws: FeedError.self) { try await feed.prepare() }
            #expect(error?.description.contains("primary key") == true)
        }
    }
}

/// Every mapped type at its extremes, through both paths into the replica — the initial copy
/// and the feed — against values written out by hand (not through the mapping under test).
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: type mapping tests skipped"), .timeLimit(.minutes(15)))
struct PostgresTypeMappingTests {
    static let columns = """
        id int PRIMARY KEY, small int2, large int8, exact numeric, precise numeric(30,10), real4 float4, real8 float8,
        yes bool, bytes bytea, name varchar(40), ident uuid, doc json, docb jsonb, day date, moment timestamp, instant timestamptz
        """

    static let rows = """
        (1, -32768, -9223372036854775808, 'NaN', 12345678901234567890.1234567890, 'Infinity', 'NaN', true, '\\x',
         '', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"b":1,  "a":2}', '{"b":1,  "a":2}', '0001-01-01', '1999-12-31 23:59:59.999999',
         '2026-11-27 06:32:03.5+05:30'),
        (2, 32767, 9223372036854775807, '-Infinity', -0.0000000001, '-Infinity', 1.7976931348623157e308, false,
         '\\x00ff', 'héllo ✓', '00000000-0000-0000-0000-000000000000', '[]', '[]', 'infinity', '294276-12-31 23:59:59.999999',
         '-infinity'),
        (3, 0, 9007199254740993, 1.50, 0, 1.5e-45, 5e-324, NULL, NULL, NULL, NULL, 'null', 'null', '2000-02-29', 'epoch', 'epoch')
        """

    static let expected: [[SQLValue]] = [
        [.integer(1), .integer(-32768), .integer(.min), .text("NaN"), .text("12345678901234567890.1234567890"), .real(.infinity),
         .text("NaN"), .integer(1), .blob([]), .text(""), .text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), .text("{\"b\":1,  \"a\":2}"),
         .text("{\"a\": 2, \"b\": 1}"), .text("0001-01-01"), .text("1999-12-31 23:59:59.999999"), .text("2026-11-27 01:02:03.5+00")],
        [.integer(2), .integer(32767), .integer(.max), .text("-Infinity"), .text("-0.0000000001"), .real(-.infinity),
         .real(1.7976931348623157e308), .integer(0), .blob([0, 255]), .text("héllo ✓"), .text("00000000-0000-0000-0000-000000000000"),
         .text("[]"), .text("[]"), .text("infinity"), .text("294276-12-31 23:59:59.999999"), .text("-infinity")],
        [.integer(3), .integer(0), .integer(9_007_199_254_740_993), .text("1.50"), .text("0.0000000000"), .real(Double(Float(1.5e-45))),
         .real(.leastNonzeroMagnitude), .null, .null, .null, .null, .text("null"), .text("null"), .text("2000-02-29"), .text("1970-01-01 00:00:00"),
         .text("1970-01-01 00:00:00+00")],
    ]

    func replica(_ store: Store) throws -> [[SQLValue]] {
        try store.read { db in try db.fetchAll("SELECT * FROM typed ORDER BY id").map(\.postgresValues) }
    }

    func feed(_ postgres: ThrowawayPostgres, into store: Store, _ body: @Sendable (ReplicaFeed) async throws -> Void) async throws {
        let client = postgres.makeClient()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: ["typed"]))
            try await feed.prepare()
            try await body(feed)
        }
    }

    @Test func extremeValuesArriveExactlyThroughTheCopy() async throws {
        try await withThrowawayPostgres { postgres in
            let directory = try TemporaryDirectory()
            try await postgres.psql("CREATE TABLE typed(\(Self.columns)); INSERT INTO typed VALUES \(Self.rows)")
            let store = try Store(path: directory.path("replica.sqlite"))
            try await feed(postgres, into: store) { _ in }
            #expect(try replica(store) == Self.expected)
        }
    }

    @Test func extremeValuesArriveExactlyThroughTheFeed() async throws {
        try await withThrowawayPostgres { postgres in
            let directory = try TemporaryDirectory()
            try await postgres.psql("CREATE TABLE typed(\(Self.columns))")
            let store = try Store(path: directory.path("replica.sqlite"))
            try await feed(postgres, into: store) { feed in
                try await postgres.psql("INSERT INTO typed VALUES \(Self.rows)")
                #expect(try await feed.catchUp() == 1)
            }
            #expect(try replica(store) == Self.expected)
        }
    }
}

extension PostgresTypeMappingTests {
    /// A megabyte of bytea (stored out of line) arrives whole, and stays when an update leaves it.
    @Test func aLargeByteaArrivesWholeAndStaysWhenUnchanged() async throws {
        try await withThrowawayPostgres { postgres in
            let directory = try TemporaryDirectory()
            try await postgres.psql("CREATE TABLE typed(id int PRIMARY KEY, note text, data bytea)")
            let store = try Store(path: directory.path("replica.sqlite"))
            try await feed(postgres, into: store) { feed in
                try await postgres.psql("INSERT INTO typed SELECT 1, 'a', decode(string_agg(md5(g::text), ''), 'hex') FROM generate_series(1, 65536) AS g")
                try await postgres.psql("UPDATE typed SET note = 'b'")
                #expect(try await feed.catchUp() == 2)
            }
            let expected = try await postgres.psql("SELECT encode(data, 'hex') FROM typed").filter { !$0.isWhitespace }
            let blob = try store.read { db in try db.fetchOne("SELECT note, data FROM typed")?.values }
            #expect(blob?.first == .text("b"))
            guard case .blob(let bytes)? = blob?.last else { Issue.record("no blob: \(String(describing: blob))"); return }
            #expect(bytes.count == 1_048_576)
            let hexDigits = Array("0123456789abcdef".utf8)
            #expect(String(decoding: bytes.flatMap { [hexDigits[Int($0 >> 4)], hexDigits[Int($0 & 15)]] }, as: UTF8.self) == expected)
        }
    }
}

extension ReplicaFeedTests {
    /// Runs the feed through `changes` (each a psql command) and returns the replica's rows of
    /// `sql` and what a live query over it received.
    func afterSchemaChange(_ changes: [String], sql: String) async throws -> (rows: [Row], events: Events, error: (any Error)?) {
        let store = try Store(path: directory.path("replica.sqlite"))
        let events = Events()
        let ended = EndingError()
        let config = FeedConfiguration(tables: ["items"])
        try await withClient { client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            try await feed.prepare()
            let subscription = store.liveQuery(sql: sql, identity: "id")
                .subscribe(on: .immediate, onError: { ended.set($0) }) { events.append($0) }
            defer { subscription.cancel() }
            for change in changes { try await postgres.psql(change) }
            try await feed.catchUp()
        }
        let rows = (try? store.read { db in try db.fetchAll(sql) }) ?? []
        return (rows, events, ended.error)
    }

    final class EndingError: @unchecked Sendable {   // every access holds `lock`
        private let lock = NSLock()
        private var stored: (any Error)?
        func set(_ error: any Error) { lock.withLock { stored = error } }
        var error: (any Error)? { lock.withLock { stored } }
    }

    /// An added column with a default: every row has it (no row change told it), and a live
    /// `SELECT *` delivers it.
    @Test func anAddedColumnWithADefaultReachesEveryRow() async throws {
        let (rows, events, error) = try await afterSchemaChange([
            "ALTER TABLE items ADD COLUMN extra text NOT NULL DEFAULT 'd'",
            "INSERT INTO items(id, title) VALUES (5, 'fifth')",
        ], sql: "SELECT * FROM items ORDER BY id")
        #expect(error == nil)
        #expect(rows.map { $0["extra"] } == [.text("d"), .text("d"), .text("d")])
        #expect(events.all.last?.snapshot == rows)
        #expect(events.all.last?.snapshot.first?.columnNames.filter { !$0.hasPrefix("ripple_order:") }.last == "extra")
    }

    /// A column dropped, and a column's type changed (a rewrite): the replica follows, values
    /// in the new type.
    @Test func aDroppedColumnAndARewriteAreCopiedAgain() async throws {
        let (rows, _, error) = try await afterSchemaChange([
            "ALTER TABLE items DROP COLUMN price",
            "ALTER TABLE items ALTER COLUMN id TYPE int4",
            "UPDATE items SET title = 'changed' WHERE id = 1",
        ], sql: "SELECT * FROM items ORDER BY id")
        #expect(error == nil)
        #expect(rows.first?.columnNames.contains("price") == false)
        #expect(rows.map { $0["title"] } == [.text("changed"), .text("second")])
    }

    /// TRUNCATE empties the replica's table in the transaction's commit.
    @Test func aTruncateEmptiesTheTable() async throws {
        let (rows, events, _) = try await afterSchemaChange(["TRUNCATE items"], sql: "SELECT * FROM items ORDER BY id")
        #expect(rows.isEmpty)
        #expect(events.all.last?.snapshot.isEmpty == true)
    }

    /// A synced table dropped in Postgres: the replica's is dropped, and a live query over it
    /// ends with an error naming it.
    @Test func aDroppedTableEndsItsLiveQueriesWithAnErrorNamingIt() async throws {
        let (_, _, error) = try await afterSchemaChange(["DROP TABLE items"], sql: "SELECT * FROM items ORDER BY id")
        #expect("\(error.map { "\($0)" } ?? "no error")".contains("items"))
    }
}

extension ReplicaFeedTests {
    /// Running, the feed brings each commit to the replica's live queries without being asked.
    @Test func aRunningFeedDeliversCommitsAsTheyHappen() async throws {
        let store = try Store(path: directory.path("replica.sqlite"))
        let config = FeedConfiguration(tables: ["items"])
        try await withClient { client in
            let feed = ReplicaFeed(store: store, client: client, configuration: config)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await feed.run() }
                defer { group.cancelAll() }
                // The replica holds the table once the feed copied it: wait for that commit.
                try await Wait.value("the replica's copy") {
                    for try await commit in store.commits(after: 0) where commit.tag?.hasPrefix("copy") == true { break }
                }
                let live = store.liveQuery(sql: "SELECT id, title FROM items ORDER BY id", identity: "id")
                for title in ["a", "b", "c"] {
                    try await postgres.psql("UPDATE items SET title = '\(title)' WHERE id = 1")
                    try await Wait.value("the live query to show title \(title)") {
                        for try await event in live.events() where event.snapshot.first?["title"] == .text(title) { break }
                    }
                }
                #expect(try replicaRows(store) == (try await postgresRows()))
            }
        }
    }
}

/// The feed under real load and faults: pgbench's own tables synced while pgbench runs, and a
/// Postgres that restarts without a clean shutdown in the middle.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: feed load tests skipped"), .timeLimit(.minutes(15)))
struct ReplicaFeedLoadTests {
    /// Every synced table's rows, ordered by key, each value through the replica's rules.
    func postgresRows(_ postgres: ThrowawayPostgres, _ table: String, _ schema: SyncedTableSchema) async throws -> [[SQLValue]] {
        // Each value in its output form (NULL kept apart), as JSON.
        let list = schema.columns.map { "CASE WHEN \"\($0.name)\" IS NULL THEN NULL ELSE concat(\"\($0.name)\") END" }
        let key = schema.key.map { "\"\(schema.columns[$0].name)\"" }.joined(separator: ", ")
        let text = try await postgres.psql("SELECT json_agg(json_build_array(\(list.joined(separator: ", "))) ORDER BY \(key)) FROM \(table)")
        guard let rows = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[Any]] else { return [] }
        return try rows.map { row in
            try zip(row, schema.columns).map { value, column in
                guard let text = value as? String else { return .null }
                return try PostgresTypes.replicaValue(text, of: column.typeOID)
            }
        }
    }

    func replicaRows(_ store: Store, _ table: String, _ schema: SyncedTableSchema) throws -> [[SQLValue]] {
        let key = schema.key.map { "\"\(schema.columns[$0].name)\"" }.joined(separator: ", ")
        return try store.read { db in try db.fetchAll("SELECT * FROM \(table) ORDER BY \(key)").map(\.postgresValues) }
    }

    @Test func pgbenchsTablesStayExactWhilePgbenchRuns() async throws {
        try await withThrowawayPostgres { postgres in
            let directory = try TemporaryDirectory()
            try await postgres.pgbench(["-i", "-q", "-s", "1"])
            let tables = ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"]
            let store = try Store(path: directory.path("replica.sqlite"))
            let client = postgres.makeClient()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: tables))
                // Writers from another program, concurrently with the copy and the feed.
                let done = Flag()
                let pgbench = Task.detached {
                    defer { done.raise() }
                    return try await postgres.pgbench(["-c", "2", "-t", "1500", "-n"])
                }
                try await feed.prepare()
                while !done.isRaised { try await feed.catchUp() }
                #expect(try await Wait.value("pgbench") { try await pgbench.value }.contains("number of transactions actually processed: 3000"))
                try await feed.catchUp()
                for table in tables {
                    let schema = try #require(await feed.schema(of: table))
                    let (replica, expected) = (try replicaRows(store, table, schema), try await postgresRows(postgres, table, schema))
                    let differing = zip(replica, expected).filter { $0 != $1 }.prefix(3)
                    #expect(replica == expected, "\(table): \(replica.count) rows vs \(expected.count); first differences \(Array(differing))")
                }
            }
        }
    }

    /// Postgres stopped as a crash would stop it between a commit and the feed reading it: once
    /// Postgres is back, a feed on the same replica catches up, nothing lost or repeated.
    @Test func aPostgresThatCrashesMidwayLosesNothing() async throws {
        try await withThrowawayPostgres { postgres in
            let directory = try TemporaryDirectory()
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY, n int8 NOT NULL)")
            let store = try Store(path: directory.path("replica.sqlite"))
            let config = FeedConfiguration(tables: ["items"])
            let first = postgres.makeClient()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await first.run() }
                defer { group.cancelAll() }
                let feed = ReplicaFeed(store: store, client: first, configuration: config)
                try await feed.prepare()
                for n in 1...20 { try await postgres.psql("INSERT INTO items VALUES (\(n), \(n))") }
                try await feed.catchUp()
                try await postgres.psql("UPDATE items SET n = n + 100")
                try await postgres.kill()
            }
            try await postgres.start()
            let versionBefore = try store.currentVersion()
            let second = postgres.makeClient()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await second.run() }
                defer { group.cancelAll() }
                let feed = ReplicaFeed(store: store, client: second, configuration: config)
                try await feed.prepare()
                #expect(try await feed.catchUp() == 1)   // the update, once
                let schema = try #require(await feed.schema(of: "items"))
                #expect(try replicaRows(store, "items", schema) == (try await postgresRows(postgres, "items", schema)))
            }
            #expect(try store.currentVersion() == versionBefore + 1)
        }
    }
}

/// A flag one task raises and another reads.
final class Flag: @unchecked Sendable {   // every access holds `lock`
    private let lock = NSLock()
    private var raised = false
    func raise() { lock.withLock { raised = true } }
    var isRaised: Bool { lock.withLock { raised } }
}

extension Row {
    /// The values of the Postgres columns (not the order keys the replica keeps beside some).
    var postgresValues: [SQLValue] {
        zip(columnNames, values).filter { !$0.0.hasPrefix("ripple_order:") }.map(\.1)
    }
}
#endif
