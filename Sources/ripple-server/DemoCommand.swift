#if Sync
import ArgumentParser
import Foundation
import RippleServer
import RippleSyncTesting
import RippleTesting
import ServiceLifecycle

/// `ripple-server demo`: a node on its own throwaway PostgreSQL with a seeded `todos` table,
/// printing what to run next.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start a throwaway PostgreSQL with a seeded todos table and a node serving it; print what to try.")

    @Option(help: "The port to listen on (0: any free port).")
    var port = 8080

    @Option(help: "Change a random todo every this many seconds (0: never), so that subscribers see changes.")
    var writeEvery = 2.0

    func run() async throws {
        say("ripple-server demo: starting a throwaway PostgreSQL (Debian's postgresql-15)…")
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        try await postgres.psql("""
            CREATE TABLE todos (id bigint PRIMARY KEY, title text NOT NULL, owner text NOT NULL,
                                done boolean NOT NULL DEFAULT false, rank integer NOT NULL);
            INSERT INTO todos SELECT n, 'todo ' || n, CASE WHEN n % 2 = 0 THEN 'alice' ELSE 'bob' END, n % 5 = 0, n
            FROM generate_series(1, 20) AS n;
            """)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-server-demo-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = Array((0..<48).map { _ in UInt8.random(in: UInt8(ascii: "a")...UInt8(ascii: "z")) })
        let rules = SyncRules(tables: ["todos": .init(read: .compare(column: "owner", op: .equal, value: .user))])
        var configuration = SyncServerConfiguration(postgres: try SyncServerConfiguration.postgres(url: postgres.url),
                                                    tables: ["todos"], rules: rules, secret: secret,
                                                    replicaPath: directory + "/replica.sqlite")
        configuration.port = port
        SyncServer.raiseDescriptorLimit()
        let logger = serverLogger()
        let server = try SyncServer(configuration: configuration, logger: logger)
        let expires = Date().addingTimeInterval(24 * 3600)
        let alice = try SyncToken.sign(user: "alice", expires: expires, secret: secret)
        let bob = try SyncToken.sign(user: "bob", expires: expires, secret: secret)
        let psql = "psql -h 127.0.0.1 -p \(postgres.port) -U \(ThrowawayPostgres.user) postgres"
        let writeEvery = writeEvery
        // A todo changes now and then, until the node is shut down.
        let writer = ClosureService {
            guard writeEvery > 0 else { return try await gracefulShutdown() }
            do {
                try await cancelWhenGracefulShutdown {
                    while true {
                        try await Task.sleep(for: .milliseconds(Int64(writeEvery * 1000)))
                        let id = Int.random(in: 1...20)
                        try await postgres.psql("UPDATE todos SET rank = (random() * 40)::int, done = random() < 0.3 WHERE id = \(id)")
                    }
                }
            } catch where Task.isShuttingDownGracefully {}
        }
        try await runNode(server, with: [writer], logger: logger) { port in
            say("""

                Ripple Sync demo: serving ws://127.0.0.1:\(port)/sync

                Open alice's live list in a browser (it follows every change, and reconnects by itself):
                  http://127.0.0.1:\(port)/#token=\(alice)&table=todos&order=rank
                  health   http://127.0.0.1:\(port)/health    metrics  http://127.0.0.1:\(port)/metrics
                  table    todos(id, title, owner, done, rank); each user reads the rows they own

                Watch alice's open todos, live (another terminal):
                  swift run --traits Sync ripple-server subscribe --url ws://127.0.0.1:\(port)/sync --token \(alice) \\
                      --table todos --filter '{"column": "done", "op": "=", "value": false}' --order rank

                Change them as any Postgres client would:
                  \(psql) -c "UPDATE todos SET title = 'milk' WHERE id = 2"
                  \(psql) -c "INSERT INTO todos VALUES (100, 'new', 'alice', false, 0)"

                bob's token (he sees other rows): \(bob)
                More tokens: RIPPLE_SYNC_SECRET=\(String(decoding: secret, as: UTF8.self)) swift run --traits Sync ripple-server token --user carol
                \(writeEvery > 0 ? "A todo changes every \(writeEvery) s. " : "")Ctrl-C stops the node and PostgreSQL.

                """)
        }
    }
}

/// Prints `text` and flushes it at once: a pipe or a file (a log followed with `tail -f`) gets
/// it as it is said, not when the demo ends.
func say(_ text: String) {
    print(text)
    fflush(nil)
}
#endif
