#if Sync
import Foundation
import Logging
import Ripple
import RippleServer
import RippleSyncTesting
import RippleTesting
import Testing

/// The node's log says what failed in Postgres — the error's kind and SQLSTATE — never
/// PostgresNIO's "Generic description" (nor Postgres's message or DETAIL, which can hold values).
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed"), .timeLimit(.minutes(5)))
struct FeedFailureLogTests {
    @Test func aFeedThatLosesPostgresLogsTheErrorsKindAndState() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1)")
            let directory = try TemporaryDirectory()
            let log = directory.path("node.log")
            let configuration = try TestNode.configuration(postgres, tables: ["items"], rules: #"{"tables": {"items": {"read": true}}}"#,
                                                           directory: directory)
            try await postgres.setUpNode(tables: ["items"], writes: [], publication: configuration.publication)
            let handler = try FileLogHandler(label: "node", path: log)
            let server = try SyncServer(configuration: configuration, logger: Logger(label: "ripple-server") { _ in handler })
            let task = Task { try await server.run() }
            do {
                _ = try await Wait.value("the node to listen") { try await server.port }
                // Postgres ends the node's sessions (as a failover or an administrator would) —
                // again at each look, since the node listens before its feed has connected.
                // (A busy machine may first log another failure — the node's own timeout — which
                // describes itself; the wait is for Postgres's.)
                try await Wait.until("the node to log the feed's failure by Postgres") {
                    try await postgres.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'ripple_node'")
                    let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                    return text.split(separator: "\n").contains { $0.contains("the feed failed") && $0.contains("Postgres error (") }
                }
                let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.contains("the feed failed") }
                #expect(!lines.isEmpty)
                for line in lines { #expect(!line.contains("Generic description"), "\(line)") }
            } catch {
                task.cancel()
                _ = await task.result
                throw error
            }
            task.cancel()
            _ = try await Wait.value("the node to stop") { await task.result }
        }
    }
}
#endif
