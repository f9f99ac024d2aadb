#if Sync
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// The client's half of writes, against a real node and Postgres: the app writes its local store
/// as usual, each local transaction becomes one mutation in a durable outbox, the local rows show
/// the write at once and never flicker while the server catches up, and they end equal to
/// Postgres — rejections undone with their reason, concurrent edits of a row merged by column,
/// and nothing lost or applied twice across a restart of the app.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync write tests skipped"), .timeLimit(.minutes(15)))
struct SyncClientWriteTests {
    /// Alice's notes on Postgres, as the local store shows them.
    static let aliceNotes = "SELECT id, owner, title, coalesce(body, '-'), CASE WHEN done THEN 1 ELSE 0 END FROM notes WHERE owner = 'alice' ORDER BY id"
    static let localNotes = "SELECT id, owner, title, coalesce(body, '-'), done FROM notes ORDER BY id"
    static let notes = QueryDescription(table: "notes", order: [OrderDescription(column: "id")])

    /// A device of `user`: a store at `path` and a client of `node` subscribed to `notes`.
    struct Device {
        let store: Store
        let client: SyncClient

        init(_ node: TestNode, user: String, path: String) async throws {
            store = try Store(path: path)
            let token = try node.token(user)
            client = SyncClient(url: node.url, store: store) { token }
            await client.setBackoff(min: .milliseconds(20), max: .milliseconds(200))
            try await client.start()
            try await client.subscribe("notes", SyncClientWriteTests.notes)
        }

        func rows() throws -> [String] {
            try store.read { db in
                guard try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = 'notes'", as: Int.self) == 1 else { return [] }
                return try db.fetchAll(SyncClientWriteTests.localNotes).map { row in
                    row.values.map { value -> String in
                        switch value {
                        case .integer(let integer): String(integer)
                        case .text(let text): text
                        default: "\(value)"
                        }
                    }.joined(separator: "|")
                }
            }
        }

        /// Waits until the outbox is empty and the local rows equal `expected` on Postgres.
        func settles(_ postgres: ThrowawayPostgres, _ expected: String = SyncClientWriteTests.aliceNotes) async throws {
            try await SyncClientTests.until(client) {
                guard try await client.pendingMutations() == 0 else { return false }
                return try rows() == (try await postgres.rows(expected))
            }
        }
    }

    /// Waits for an event of `client` that `match` picks, and returns what it gave.
    static func event<T: Sendable>(of client: SyncClient, _ what: String = "the client's event", within limit: Duration = Wait.limit,
                                   _ match: @escaping @Sendable (SyncClientEvent) -> T?) async throws -> T {
        try await Wait.value(what, within: limit) {
            for await event in client.events { if let found = match(event) { return found } }
            throw SyncClientTestError("the client's events ended before \(what)")
        }
    }

    @Test(arguments: ResolverMode.allCases) func localWritesReachPostgresOnceWithoutFlicker(_ resolvers: ResolverMode) async throws {
        try await NotesFixture.withNode(resolvers: resolvers) { postgres, node in
            let directory = try TemporaryDirectory()
            let device = try await Device(node, user: "alice", path: directory.path("alice.sqlite"))
            try await device.settles(postgres)
            // The app's own live query over its local store.
            let live = device.store.liveQuery(sql: "SELECT id, title FROM notes ORDER BY id", identity: "id")
            let seen = Locked<[[Int64]]>([])
            let subscription = live.subscribe(on: .immediate) { event in
                seen.withLock { $0.append(event.snapshot.compactMap { try? $0.value("id", as: Int64.self) }) }
            }
            defer { subscription.cancel() }

            try device.store.write { db in
                try db.execute("INSERT INTO notes(id, owner, title, body, done) VALUES (10, 'alice', 'eggs', NULL, 0)")
            }
            // Optimistic: the local rows have it before the server does.
            #expect(try device.rows().contains("10|alice|eggs|-|0"))
            try device.store.write { db in
                try db.execute("UPDATE notes SET done = 1, body = 'now' WHERE id = 1")
                try db.execute("INSERT INTO notes(id, owner, title, body, done) VALUES (11, 'alice', 'tea', 'green', 0)")
            }
            try device.store.write { db in try db.execute("DELETE FROM notes WHERE id = 11") }
            try await device.settles(postgres)
            #expect(try await postgres.rows(Self.aliceNotes) == ["1|alice|milk|now|1", "10|alice|eggs|-|0"])
            // One result per local transaction, each applied once.
            #expect(try await postgres.rows("SELECT mutation_id, status FROM ripple_sync_results ORDER BY mutation_id")
                        == ["1|applied", "2|applied", "3|applied"])
            // Once shown, row 10 never left the app's list (no flicker while the server caught up).
            let snapshots = seen.withLock { $0 }
            let first = try #require(snapshots.firstIndex { $0.contains(10) })
            #expect(snapshots[first...].allSatisfy { $0.contains(10) })
            await device.client.stop()
        }
    }

    @Test(arguments: ResolverMode.allCases) func aRejectedMutationLeavesTheLocalRowsWithItsReason(_ resolvers: ResolverMode) async throws {
        try await NotesFixture.withNode(resolvers: resolvers) { postgres, node in
            let directory = try TemporaryDirectory()
            let device = try await Device(node, user: "alice", path: directory.path("alice.sqlite"))
            try await device.settles(postgres)
            // Alice may not write a note of Bob's: the write rule rejects it on the server.
            try device.store.write { db in
                try db.execute("INSERT INTO notes(id, owner, title, body, done) VALUES (20, 'bob', 'forged', NULL, 0)")
            }
            #expect(try device.rows().contains("20|bob|forged|-|0"))
            let rejection = try await Self.event(of: device.client) { event -> MutationResult? in
                if case .rejected(let result) = event { return result }
                return nil
            }
            #expect(rejection.id == 1 && rejection.code == "write_rule")
            #expect(!(try device.rows().contains { $0.hasPrefix("20|") }))
            #expect(try await postgres.rows("SELECT count(*) FROM notes WHERE id = 20") == ["0"])
            try await device.settles(postgres)
            await device.client.stop()
        }
    }

    @Test(arguments: ResolverMode.allCases) func offlineEditsOfOneRowMergeByColumnAndTheLaterArrivalWins(_ resolvers: ResolverMode) async throws {
        try await NotesFixture.withNode(resolvers: resolvers) { postgres, node in
            let directory = try TemporaryDirectory()
            let phone = try await Device(node, user: "alice", path: directory.path("phone.sqlite"))
            let laptop = try await Device(node, user: "alice", path: directory.path("laptop.sqlite"))
            try await phone.settles(postgres)
            try await laptop.settles(postgres)
            await phone.client.stop()
            await laptop.client.stop()
            // Offline, each edits another column of note 1, and both its title.
            try phone.store.write { db in try db.execute("UPDATE notes SET body = 'from the phone', title = 'phone' WHERE id = 1") }
            try laptop.store.write { db in try db.execute("UPDATE notes SET done = 1, title = 'laptop' WHERE id = 1") }
            try await phone.client.start()
            try await phone.settles(postgres)
            try await laptop.client.start()
            try await laptop.settles(postgres)
            try await phone.settles(postgres)
            // Both columns survive; the title pushed last wins, on both devices.
            #expect(try await postgres.rows("SELECT title, body, done FROM notes WHERE id = 1") == ["laptop|from the phone|t"])
            #expect(try phone.rows() == (try laptop.rows()))
            await phone.client.stop()
            await laptop.client.stop()
        }
    }

    @Test(arguments: ResolverMode.allCases) func aWriteMadeWhileTheAppWasDownIsPushedOnceAfterARestart(_ resolvers: ResolverMode) async throws {
        try await NotesFixture.withNode(resolvers: resolvers) { postgres, node in
            let directory = try TemporaryDirectory()
            let path = directory.path("alice.sqlite")
            do {
                let device = try await Device(node, user: "alice", path: path)
                try await device.settles(postgres)
                await device.client.stop()
                // Written, and the app ends before anything is pushed.
                try device.store.write { db in
                    try db.execute("INSERT INTO notes(id, owner, title, body, done) VALUES (30, 'alice', 'offline', NULL, 0)")
                }
            }
            let device = try await Device(node, user: "alice", path: path)
            try await device.settles(postgres)
            #expect(try await postgres.rows("SELECT count(*) FROM notes WHERE id = 30") == ["1"])
            #expect(try await postgres.rows("SELECT count(*) FROM ripple_sync_results") == ["1"])
            await device.client.stop()
        }
    }

    /// The app dies after pushing a mutation and before hearing its result: started again on its
    /// store, the client pushes the mutation again and it takes effect once (the node answers
    /// the stored result, or applies it if the first push never committed); the local rows end
    /// equal to Postgres.
    @Test(arguments: ResolverMode.allCases) func aWriteWhoseResultWasNeverHeardTakesEffectOnceAfterARestart(_ resolvers: ResolverMode) async throws {
        try await NotesFixture.withNode(resolvers: resolvers) { postgres, node in
            // An update of counters waits on Postgres until the test opens a gate (a table the
            // node does not follow; two minutes at most): the push stays in flight until the app
            // died in the middle of it, however slow the machine.
            try await postgres.psql("""
                CREATE TABLE push_gate(open boolean NOT NULL);
                INSERT INTO push_gate VALUES (false);
                CREATE FUNCTION slow_down() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    FOR step IN 1..12000 LOOP
                        EXIT WHEN (SELECT open FROM push_gate);
                        PERFORM pg_sleep(0.01);
                    END LOOP;
                    RETURN NEW;
                END $$;
                CREATE TRIGGER counters_slow BEFORE UPDATE ON counters FOR EACH ROW EXECUTE FUNCTION slow_down();
                GRANT SELECT ON push_gate TO \(ThrowawayPostgres.nodeRole);
                """)
            let directory = try TemporaryDirectory()
            let path = directory.path("alice.sqlite")
            let counters = QueryDescription(table: "counters", order: [OrderDescription(column: "id")])
            let token = try node.token("alice")
            do {
                let store = try Store(path: path)
                let client = SyncClient(url: node.url, store: store) { token }
                try await client.start()
                try await client.subscribe("counters", counters)
                try await SyncClientTests.until(client) { await client.rows(of: "counters")?.count == 1 }
                try store.write { db in try db.execute("UPDATE counters SET total = total + 5 WHERE id = 1") }
                // The push reached Postgres (its update waits in the trigger): the app dies now.
                try await Wait.until("the push to reach Postgres") {
                    try await postgres.rows("""
                        SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%ripple_sync_apply(%' AND pid <> pg_backend_pid()
                        """) == ["1"]
                }
                await client.stop()
                _ = try await postgres.psql("UPDATE push_gate SET open = true")
            }
            let store = try Store(path: path)
            let client = SyncClient(url: node.url, store: store) { token }
            await client.setBackoff(min: .milliseconds(20), max: .milliseconds(200))
            try await client.start()
            try await client.subscribe("counters", counters)
            try await SyncClientTests.until(client) {
                try await client.pendingMutations() == 0
                    && (try store.read { db in try db.fetchValue("SELECT total FROM counters", as: Int64.self) }) == 15
            }
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["15|1"])
            #expect(try await postgres.rows("SELECT count(*), max(mutation_id) FROM ripple_sync_results") == ["1|1"])
            await client.stop()
        }
    }

    /// A program that is not Ripple cannot write a synced table (its write could not become a
    /// mutation, and the next rebase would erase it): the `sqlite3` shell fails, changing nothing.
    @Test(arguments: ResolverMode.allCases) func aWriteAroundRippleIsRefused(_ resolvers: ResolverMode) async throws {
        try await NotesFixture.withNode(resolvers: resolvers) { postgres, node in
            let directory = try TemporaryDirectory()
            let path = directory.path("alice.sqlite")
            let device = try await Device(node, user: "alice", path: path)
            try await device.settles(postgres)
            let shell = Process()
            shell.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
            shell.arguments = [path, "INSERT INTO notes(id, owner, title, done) VALUES (40, 'alice', 'around', 0)"]
            let errors = Pipe()
            shell.standardError = errors
            let errorHandle = errors.fileHandleForReading
            let message = try await Wait.run(shell, "the sqlite3 shell") {
                String(decoding: errorHandle.readToEndRetryingInterrupts(), as: UTF8.self)
            }
            #expect(shell.terminationStatus != 0)
            #expect(message.contains("ripple_origin"))
            #expect(!(try device.rows().contains { $0.hasPrefix("40|") }))
            #expect(try await device.client.pendingMutations() == 0)
            await device.client.stop()
        }
    }
}
#endif
