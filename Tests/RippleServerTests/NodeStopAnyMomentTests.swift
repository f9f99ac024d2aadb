#if Sync
import Foundation
import Logging
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleDiffTesting
import RippleTesting
import Testing

/// A node told to stop at any moment of its life — while it prepares Postgres, copies, catches
/// up, checks the catalog, or serves — stops within its stop grace and what the machine's load adds.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed"), .timeLimit(.minutes(10)))
struct NodeStopAnyMomentTests {
    @Test(arguments: [5, 6] as [UInt64])
    func aNodeStoppedAtARandomMomentStopsWithinItsGrace(seed: UInt64) async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY, n int4 NOT NULL); INSERT INTO items SELECT i, i FROM generate_series(1, 2000) AS i")
            var random = SeededGenerator(seed: seed)
            for round in 0..<24 {
                let directory = try TemporaryDirectory()
                var configuration = try TestNode.configuration(postgres, tables: ["items"], rules: #"{"tables": {"items": {"read": true}}}"#,
                                                               directory: directory, name: "stop_\(round % 3)")
                configuration.catalogCheckInterval = .milliseconds(20)
                configuration.stopGrace = .seconds(2)
                try await postgres.setUpNode(tables: ["items"], writes: [], publication: configuration.publication)
                // Its errors on standard error: a stop that outlasts the grace names the parts still running.
                var logger = Logger(label: "stop \(seed), round \(round)") { StreamLogHandler.standardError(label: $0) }
                logger.logLevel = .error
                let server = try SyncServer(configuration: configuration, logger: logger)
                let task = Task { try await server.run() }
                let delay = Int(random.next() % 1500)
                try await Task.sleep(for: .milliseconds(delay))
                if round % 2 == 0 { try await postgres.psql("UPDATE items SET n = n + 1 WHERE id % 7 = \(round % 7)") }
                let stopping = ContinuousClock.now
                task.cancel()
                _ = try await Wait.value("round \(round): the node told to stop \(delay) ms after its start to stop", within: .seconds(60)) {
                    await task.result
                }
                let took = ContinuousClock.now - stopping
                // Within its grace (2 s) and what a loaded machine adds: the whole suite beside it
                // (its CPU-bound tests hold the cooperative threads the stop's tasks wait for)
                // added up to 16 s. What this catches is a stop that hangs (one was 30 s and more).
                #expect(took < .seconds(30), "round \(round): stopped \(delay) ms after its start, it took \(took)")
            }
        }
    }
}
#endif
