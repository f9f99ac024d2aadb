#if Sync
import Foundation
import RippleSyncTesting
import RippleTesting
import Testing

/// The tests' scopes stop what they started before they end, also when their body throws: a
/// node scope's node has ended (its `run()` returned), then closes its port and lets go of its
/// slot. (A cleanup started in a task of its own might run later, or never.)
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: test scope tests skipped"), .timeLimit(.minutes(15)))
struct TestScopeTests {
    struct Thrown: Error {}

    @Test func aNodeScopeWhoseBodyThrowsHasStoppedItsNodeWhenItEnds() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            let directory = try TemporaryDirectory()
            var started: TestNode?
            do {
                try await TestNode.with(postgres, tables: ["items"], rules: #"{"tables": {"items": {"read": true}}}"#,
                                        directory: directory, name: "thrown") { node in
                    try await node.untilReady()
                    started = node
                    try await withSocket(node.url) { socket in
                        _ = try await socket.hello(try node.token("u"))
                        throw Thrown()
                    }
                }
                Issue.record("the body's error was not thrown")
            } catch is Thrown {
            }
            let node = try #require(started)
            #expect(node.hasEnded, "the node's run() had not returned when its scope ended")
            try await Wait.until("the node's port \(node.port) to close") { !ThrowawayPostgresTests.acceptsConnections(port: node.port) }
            try await Wait.until("the node's slot to be let go") {
                try await postgres.psql("SELECT active FROM pg_replication_slots WHERE slot_name = 'ripple_thrown'") == "f\n"
            }
        }
    }
}
#endif
