#if Sync
import ArgumentParser
import Foundation
import RippleServer
import RippleSyncTesting
import RippleTesting
import ServiceLifecycle

/// `ripple-server demo`: a node on its own throwaway PostgreSQL with a seeded team schema
/// (users, projects, their members, todos; ``TeamFixture``) whose rules follow membership,
/// printing what to run next.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start a throwaway PostgreSQL with seeded projects, members and todos and a node serving them; print what to try.",
        discussion: """
            alice and bob share the project Launch, and each has a project of their own (Garden, Band); \
            carol is a member of nothing. Each user reads the todos they own and those of the projects \
            they are a member of, and may write the same ones.
            """)

    @Option(help: "The port to listen on (0: any free port).")
    var port = 8080

    @Option(help: "Change a random todo every this many seconds (0: never), so that subscribers see changes; now and then carol joins or leaves Launch.")
    var writeEvery = 2.0

    func run() async throws {
        say("ripple-server demo: starting a throwaway PostgreSQL (Debian's postgresql-15)…")
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        try await TeamFixture.prepare(postgres)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-server-demo-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = Array((0..<48).map { _ in UInt8.random(in: UInt8(ascii: "a")...UInt8(ascii: "z")) })
        var configuration = SyncServerConfiguration(postgres: try SyncServerConfiguration.postgres(url: postgres.url),
                                                    tables: TeamFixture.tables, rules: try SyncRules(json: Data(TeamFixture.rules.utf8)),
                                                    secret: secret, replicaPath: directory + "/replica.sqlite")
        configuration.port = port
        SyncServer.raiseDescriptorLimit()
        let logger = serverLogger()
        let server = try SyncServer(configuration: configuration, logger: logger)
        let expires = Date().addingTimeInterval(24 * 3600)
        let alice = try SyncToken.sign(user: "alice", expires: expires, secret: secret)
        let bob = try SyncToken.sign(user: "bob", expires: expires, secret: secret)
        let carol = try SyncToken.sign(user: "carol", expires: expires, secret: secret)
        let psql = "psql -h 127.0.0.1 -p \(postgres.port) -U \(ThrowawayPostgres.user) postgres"
        let writeEvery = writeEvery
        // A todo changes now and then (sometimes it changes project), and carol now and then
        // joins or leaves Launch, until the node is shut down.
        let writer = ClosureService {
            guard writeEvery > 0 else { return try await gracefulShutdown() }
            do {
                try await cancelWhenGracefulShutdown {
                    while true {
                        try await Task.sleep(for: .milliseconds(Int64(writeEvery * 1000)))
                        try await postgres.psql(Self.randomWrite())
                    }
                }
            } catch where Task.isShuttingDownGracefully {}
        }
        try await runNode(server, with: [writer], logger: logger) { port in
            // The page's user switch: each user with their token.
            let users = [("alice", alice), ("bob", bob), ("carol", carol)].map { user, token in
                "as=" + "\(user):\(token)".addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "-._~:").union(.alphanumerics))!
            }.joined(separator: "&")
            say("""

                Ripple Sync demo: serving ws://127.0.0.1:\(port)/sync

                alice and bob share the project Launch (1); alice has Garden (2), bob has Band (3); carol has
                nothing yet. Each reads the todos they own and those of their projects, and writes the same.
                  tables   users(id, name)  projects(id, name, owner)  members(id, project_id, user_id, role)
                           todos(id, project_id, owner, title, done, rank)

                Open the live list in a browser; its user switch shows alice's, bob's and carol's todos (Launch's
                are in alice's and bob's), as a flat list and, beside it, as projects with their todos (a todo that
                changes project moves from one section to the other). It follows every change, and reconnects by itself:
                  http://127.0.0.1:\(port)/#table=todos&order=project_id&\(users)
                  health   http://127.0.0.1:\(port)/health    metrics  http://127.0.0.1:\(port)/metrics

                Watch bob's todos, live, under the membership rule (another terminal):
                  swift run --traits Sync ripple-server subscribe --url ws://127.0.0.1:\(port)/sync --token \(bob) \\
                      --table todos --order project_id,rank
                Only those of Launch, by a sub-query (the projects it reaches are only those bob may read):
                  swift run --traits Sync ripple-server subscribe --url ws://127.0.0.1:\(port)/sync --token \(bob) \\
                      --table todos --order rank --filter '\(Self.launchFilter)'

                Change memberships and todos as any Postgres client would:
                  \(psql) -c "INSERT INTO members(project_id, user_id) VALUES (2, 'bob')"      # Garden's todos arrive for bob
                  \(psql) -c "DELETE FROM members WHERE project_id = 2 AND user_id = 'bob'"    # and leave again
                  \(psql) -c "UPDATE todos SET project_id = 3 WHERE id = 1"                    # alice's todo moves to Band
                  \(psql) -c "INSERT INTO todos VALUES (100, 1, 'bob', 'new', false, 0)"

                carol's token: \(carol)
                More tokens: RIPPLE_SYNC_SECRET=\(String(decoding: secret, as: UTF8.self)) swift run --traits Sync ripple-server token --user carol
                \(writeEvery > 0 ? "A todo changes every \(writeEvery) s; now and then carol joins or leaves Launch. " : "")Ctrl-C stops the node and PostgreSQL.

                """)
        }
    }

    /// The todos of the project named Launch, by a sub-query over `projects`.
    static let launchFilter = #"{"column": "project_id", "op": "in", "query": {"table": "projects", "columns": ["id"], "filter": {"column": "name", "op": "=", "value": "Launch"}}}"#

    /// The demo's next change: mostly a todo's rank and state, sometimes a todo moving to another
    /// project, sometimes carol joining or leaving Launch. (Only numbers of its own choosing go
    /// into the SQL.)
    static func randomWrite() -> String {
        switch Int.random(in: 0..<10) {
        case 0:
            "WITH gone AS (DELETE FROM members WHERE project_id = 1 AND user_id = 'carol' RETURNING id) "
                + "INSERT INTO members(project_id, user_id) SELECT 1, 'carol' WHERE NOT EXISTS (SELECT FROM gone)"
        case 1:
            "UPDATE todos SET project_id = \(Int.random(in: 1...3)) WHERE id = \(Int.random(in: 1...10))"
        default:
            "UPDATE todos SET rank = (random() * 10)::int, done = random() < 0.3 WHERE id = \(Int.random(in: 1...10))"
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
