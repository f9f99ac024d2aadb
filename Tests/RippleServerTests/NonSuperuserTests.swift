#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple
import RippleServer
import RippleSyncTesting
import RippleTesting
import Testing

/// A node whose role is not a superuser (`LOGIN REPLICATION`, as on a managed Postgres): the
/// setup an administrator applies once, the node's plain refusal without it, `check`'s findings,
/// and schema changes seen without event triggers.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: non-superuser tests skipped"), .timeLimit(.minutes(10)))
struct NonSuperuserTests {
    static let rules = #"{"tables": {"items": {"read": true, "write": true}}}"#

    /// Runs `body` with a client of `postgres` as `user` (its `run()` going on beside).
    static func withClient<T: Sendable>(_ postgres: ThrowawayPostgres, as user: String = ThrowawayPostgres.nodeRole,
                                        _ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        try await PostgresReadiness.withClient(url: "postgres://\(user)@127.0.0.1:\(postgres.port)/postgres", body)
    }

    /// The findings for the node's role on `tables`, read as the superuser.
    static func findings(_ postgres: ThrowawayPostgres, tables: [String], writes: [String] = [],
                         role: String = ThrowawayPostgres.nodeRole) async throws -> [PostgresFinding] {
        try await withClient(postgres, as: ThrowawayPostgres.user) { client in
            try await PostgresReadiness.findings(on: client, tables: tables, writes: writes, role: role)
        }
    }

    @Test func theSetupIsIdempotentAndCoversATableAddedLater() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY, title text); CREATE TABLE tags(id int8 PRIMARY KEY)")
            #expect(try await Self.findings(postgres, tables: ["items"]).contains { $0.severity == .blocking })
            // Printed (through psql) twice, then applied through a client twice: nothing fails.
            try await postgres.setUpNode(tables: ["items"], writes: ["items"])
            try await postgres.setUpNode(tables: ["items"], writes: ["items"])
            let setup = PostgresSetup(role: ThrowawayPostgres.nodeRole, tables: ["items"], writes: ["items"])
            for _ in 1...2 {
                let caveats = try await Self.withClient(postgres, as: ThrowawayPostgres.user) { client in
                    try await setup.apply(on: client, logger: Logger(label: "test"))
                }
                #expect(caveats == [], "a superuser's setup leaves nothing undone")
            }
            // Applied by a role that may not (the node's own): Postgres's reason, nothing applied.
            let refused = await #expect(throws: SyncServerError.self) {
                try await Self.withClient(postgres) { client in
                    try await PostgresSetup(role: "other", tables: ["items"]).apply(on: client, logger: Logger(label: "test"))
                }
            }
            #expect(refused?.description.hasPrefix("Postgres refused the setup, and nothing was applied: permission denied") == true,
                    "\(String(describing: refused))")
            #expect(try await postgres.rows("SELECT count(*) FROM pg_roles WHERE rolname = 'other'") == ["0"])
            let ready = try await Self.findings(postgres, tables: ["items"], writes: ["items"])
            #expect(ready.filter { $0.severity != .note } == [], "\(ready)")
            // A table added: blocking until the setup runs again with it.
            let before = try await Self.findings(postgres, tables: ["items", "tags"])
            #expect(before.contains { $0.what == "publication ripple_sync does not include tags" })
            #expect(before.contains { $0.what == "role ripple_node may not read table tags" })
            try await postgres.setUpNode(tables: ["items", "tags"], writes: ["items"])
            let after = try await Self.findings(postgres, tables: ["items", "tags"], writes: ["items"])
            #expect(after.filter { $0.severity != .note } == [], "\(after)")
            #expect(try await postgres.rows("SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'ripple_sync_%'") == ["3"])
            #expect(try await postgres.rows("SELECT rolsuper, rolreplication FROM pg_roles WHERE rolname = 'ripple_node'") == ["f|t"])
        }
    }

    /// The setup applied by the tables' owner, not a superuser (as on a managed service): it
    /// says the step Postgres refused and what that step needs; once the owner may, it applies
    /// and says what it could not do (REPLICATION, event triggers) — Postgres's warnings, which
    /// a client does not show.
    @Test func theTablesOwnerAppliesTheSetupAndHearsWhatItNeedsAndWhatItLeftUndone() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE ROLE app_owner LOGIN CREATEROLE;
                GRANT CREATE ON SCHEMA public TO app_owner;
                SET ROLE app_owner;
                CREATE TABLE items(id int8 PRIMARY KEY, title text);
                """)
            let setup = PostgresSetup(role: "ripple_other", tables: ["items"], writes: ["items"])
            let refused = await #expect(throws: SyncServerError.self) {
                try await Self.withClient(postgres, as: "app_owner") { client in
                    try await setup.apply(on: client, logger: Logger(label: "test"))
                }
            }
            let message = refused?.description ?? ""
            #expect(message.contains("permission denied for database postgres"), "\(message)")
            #expect(message.contains("(in the step: The publication of the synced tables"), "\(message)")
            #expect(message.contains("needs CREATE on the database"), "\(message)")
            try await postgres.psql("GRANT CREATE ON DATABASE postgres TO app_owner")
            let caveats = try await Self.withClient(postgres, as: "app_owner") { client in
                try await setup.apply(on: client, logger: Logger(label: "test"))
            }
            #expect(caveats.count == 2, "\(caveats)")
            #expect(caveats.first?.hasPrefix("role ripple_other lacks REPLICATION") == true, "\(caveats)")
            #expect(caveats.last?.hasPrefix("no event triggers") == true, "\(caveats)")
            #expect(try await postgres.rows("SELECT count(*) FROM pg_publication_tables WHERE pubname = 'ripple_sync'") == ["1"])
        }
    }

    @Test func aNodeWithoutTheSetupSaysWhatIsMissingAndRunsAfterIt() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY, title text); INSERT INTO items VALUES (1, 'one')")
            let directory = try TemporaryDirectory()
            let configuration = try TestNode.configuration(postgres, tables: ["items"], rules: Self.rules, directory: directory)
            let server = try SyncServer(configuration: configuration)
            let task = Task { try await server.run() }
            let failure = await #expect(throws: (any Error).self) { _ = try await Wait.value("the node to fail") { try await task.value } }
            let message = "\(failure.map { "\($0)" } ?? "")"
            #expect(message.contains("publication ripple_sync does not exist"), "\(message)")
            #expect(message.contains("the node's table ripple_sync_nodes does not exist"), "\(message)")
            #expect(message.contains("role ripple_node may not read table items"), "\(message)")
            #expect(message.contains("ripple-server setup --postgres URL --role ripple_node --tables items --rules FILE --apply"), "\(message)")
            #expect(!message.contains("PSQLError"), "\(message)")
            // After the setup (TestNode applies it, as the administrator), the same role runs a node.
            try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory, name: "after") { node in
                try await node.untilReady()
                #expect(try await postgres.rows("SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = 'ripple_node'") == ["t"])
            }
        }
    }

    @Test func checkSaysWhatADatabaseLacks() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE items(id int8 PRIMARY KEY, title text); CREATE TABLE loose(x int);
                CREATE TABLE hidden(id int8 PRIMARY KEY); CREATE TABLE quiet(id int8 PRIMARY KEY);
                ALTER TABLE quiet REPLICA IDENTITY NOTHING; CREATE ROLE plain LOGIN
                """)
            try await postgres.setUpNode(tables: ["items"], writes: [])
            let found = try await Self.findings(postgres, tables: ["items", "loose", "hidden", "quiet", "gone"], writes: ["items"])
            func finding(_ what: String) -> PostgresFinding? { found.first { $0.what == what } }
            #expect(finding("table loose has no primary key")?.severity == .blocking)
            #expect(finding("table quiet has REPLICA IDENTITY NOTHING")?.severity == .blocking)
            #expect(finding("role ripple_node may not read table hidden")?.fix == "GRANT SELECT ON \"hidden\" TO \"ripple_node\";")
            #expect(finding("table gone does not exist in the public schema")?.severity == .blocking)
            #expect(finding("publication ripple_sync does not include loose, hidden, quiet, gone")?.severity == .blocking)
            #expect(finding("role ripple_node may not insert, update and delete in table items")?.severity == .warning)
            #expect(finding("role ripple_node lacks REPLICATION") == nil)
            // Another role: no REPLICATION, no grants.
            let plain = try await Self.findings(postgres, tables: ["items"], role: "plain")
            #expect(plain.first { $0.what == "role plain lacks REPLICATION" }?.severity == .blocking)
            #expect(plain.contains { $0.what == "role plain may not read and write the node's table ripple_sync_nodes" }, "\(plain)")
            // A publication gone, and the event triggers.
            try await postgres.psql("DROP PUBLICATION ripple_sync")
            try await postgres.dropEventTriggers()
            let later = try await Self.findings(postgres, tables: ["items"])
            #expect(later.first { $0.what == "publication ripple_sync does not exist" }?.severity == .blocking)
            #expect(later.first { $0.what.hasPrefix("the event triggers are not installed") }?.severity == .note)
        }
        // Settings: wal_level and slot retention.
        try await withThrowawayPostgres(settings: ["wal_level": "replica", "max_slot_wal_keep_size": "-1"]) { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            try await postgres.setUpNode(tables: ["items"])
            let found = try await Self.findings(postgres, tables: ["items"])
            #expect(found.first { $0.what == "wal_level is replica, not logical" }?.severity == .blocking)
            #expect(found.first { $0.what == "max_slot_wal_keep_size is unset (-1)" }?.severity == .warning)
        }
    }

    @Test func theCheckCommandExitsNonzeroWhenSomethingBlocks() async throws {
        let executable = try #require(NodeDescriptorTests.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY, title text)")
            func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = arguments
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                let reader = output.fileHandleForReading
                let data = try await Wait.run(process, "ripple-server \(arguments[0])") { reader.readDataToEndOfFile() }
                return (process.terminationStatus, String(decoding: data, as: UTF8.self))
            }
            func check() async throws -> (status: Int32, output: String) {
                try await run(["check", "--postgres", postgres.nodeURL, "--tables", "items"])
            }
            let before = try await check()
            #expect(before.status == 1)
            #expect(before.output.contains("BLOCKING: publication ripple_sync does not exist"), "\(before.output)")
            #expect(before.output.contains("fix: ripple-server setup"), "\(before.output)")
            // `setup` prints the SQL; psql applies it (as an administrator would).
            let printed = try await run(["setup", "--role", "ripple_node", "--tables", "items"])
            #expect(printed.status == 0)
            #expect(printed.output.contains("CREATE PUBLICATION \"ripple_sync\" FOR TABLE \"items\""), "\(printed.output)")
            try await postgres.psql(printed.output)
            try await postgres.psql(printed.output)
            let after = try await check()
            #expect(after.status == 0, "\(after.output)")
            #expect(after.output.contains("0 blocking"), "\(after.output)")
        }
    }

    /// Without event triggers: a column added then written arrives through pgoutput's relation
    /// message; one added with no write since, through the catalog check.
    @Test func schemaChangesAreSeenWithoutEventTriggers() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY, title text); INSERT INTO items VALUES (1, 'one')")
            try await postgres.setUpNode(tables: ["items"])
            try await postgres.dropEventTriggers()
            let directory = try TemporaryDirectory()
            let store = try Store(path: directory.path("replica.sqlite"))
            try await Self.withClient(postgres) { client in
                var configuration = FeedConfiguration(tables: ["items"])
                configuration.catalogCheckInterval = .milliseconds(200)
                let feed = ReplicaFeed(store: store, client: client, configuration: configuration)
                try await feed.prepare()
                #expect(try await feed.checkCatalog() == [])
                // Added, then written: the relation message tells it.
                try await postgres.psql("ALTER TABLE items ADD COLUMN note text NOT NULL DEFAULT 'n'")
                try await postgres.psql("INSERT INTO items VALUES (2, 'two', 'm')")
                try await feed.catchUp()
                #expect(await feed.schema(of: "items")?.columns.map(\.name) == ["id", "title", "note"])
                #expect(try store.read { db in try db.fetchAll("SELECT note FROM items ORDER BY id").map(\.values) }
                        == [[.text("n")], [.text("m")]])
                // Added with no write since: nothing in the slot; the catalog check tells it.
                try await postgres.psql("ALTER TABLE items ADD COLUMN rank int NOT NULL DEFAULT 7")
                try await feed.catchUp()
                #expect(await feed.schema(of: "items")?.columns.map(\.name) == ["id", "title", "note"])
                #expect(try await feed.checkCatalog() == ["items"])
                try await feed.catchUp()
                #expect(await feed.schema(of: "items")?.columns.map(\.name) == ["id", "title", "note", "rank"])
                #expect(try store.read { db in try db.fetchAll("SELECT rank FROM items ORDER BY id").map(\.values) }
                        == [[.integer(7)], [.integer(7)]])
                #expect(try await feed.checkCatalog() == [])
                // Following: a column added with no later write appears within the check's interval.
                let following = Task { try await feed.follow() }
                defer { following.cancel() }
                try await postgres.psql("ALTER TABLE items DROP COLUMN note")
                try await Wait.until("the dropped column to leave the replica") {
                    await feed.schema(of: "items")?.columns.map(\.name) == ["id", "title", "rank"]
                }
                following.cancel()
                _ = await following.result
            }
        }
    }
}
#endif
