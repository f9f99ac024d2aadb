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
            var configuration = SyncServerConfiguration(
                postgres: try SyncServerConfiguration.postgres(url: postgres.nodeURL), tables: ["items"],
                rules: try SyncRules(json: Data(#"{"tables": {"items": {"read": true}}}"#.utf8)),
                secret: Array("a test secret of at least thirty-two bytes".utf8), replicaPath: directory.path("node.sqlite"))
            configuration.port = 0
            try await postgres.setUpNode(tables: ["items"], writes: [], publication: configuration.publication)
            let handler = try FileLogHandler(label: "node", path: log)
            let server = try SyncServer(configuration: configuration, logger: Logger(label: "ripple-server") { _ in handler })
            let task = Task { try await server.run() }
            do {
                _ = try await Wait.value("the node to listen") { try await server.port }
                // Postgres ends the node's sessions (as a failover or an administrator would).
                try await postgres.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'ripple_node'")
                try await Wait.until("the node to log the feed's failure") {
                    ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("the feed failed")
                }
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                let line = text.split(separator: "\n").first { $0.contains("the feed failed") }.map(String.init) ?? ""
                #expect(line.contains("Postgres error ("), "\(line)")
                #expect(!line.contains("Generic description"), "\(line)")
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
