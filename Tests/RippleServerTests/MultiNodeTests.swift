#if Sync
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Several nodes on one Postgres, each with its own slot and replica: a client moves between
/// them and resumes by position — one changeset, nothing missed, nothing repeated — though the
/// replicas number their versions differently; a node started later with an empty replica
/// answers a position older than its copy with a snapshot.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: multi-node tests skipped"), .timeLimit(.minutes(15)))
struct MultiNodeTests {
    static let rules = #"{"tables": {"todos": {"read": {"column": "owner", "op": "=", "value": {"user": true}}}, "tags": {"read": true}, "noise": {"read": true}}}"#

    /// A node's `ripple_replica_version` from its `/metrics`.
    static func replicaVersion(_ node: TestNode) async -> Int64? {
        let text = await node.server.metricsText()
        return text.split(separator: "\n").first { $0.hasPrefix("ripple_replica_version ") }
            .flatMap { Double($0.split(separator: " ")[1]) }.map { Int64($0) }
    }

    /// Subscribes (or resumes) on `node` and reads until the rows equal Postgres's. Returns
    /// whether the first answer was a snapshot, and the socket (open, one of `sockets`).
    static func follow(_ rows: inout ClientRows, on node: TestNode, resume: Bool, postgres: ThrowawayPostgres,
                       sockets: TestSockets) async throws -> (snapshot: Bool, socket: TestSocket) {
        let socket = try await sockets.open(node.url)
        _ = try await socket.hello(try node.token("alice"))
        try await socket.send(.subscribe(id: "open", query: SyncProtocolTests.aliceOpen,
                                         resume: resume ? ResumePoint(basis: rows.basis, lsn: rows.lsn) : nil))
        var first: Bool?
        while true {
            if first != nil, try await rows.rows.map(psqlText) == postgres.rows(SyncProtocolTests.aliceOpenSQL) { break }
            let message = try #require(try await socket.nextSkippingHeartbeats())
            if case .changes(_, let snapshots, let changesets) = message, first == nil {
                if snapshots["open"] != nil { first = true } else if changesets["open"] != nil { first = false }
            } else if case .changes(_, let snapshots, _) = message {
                #expect(snapshots.isEmpty, "after the first answer, only changesets")
            }
            // A changeset applies to the rows held, or throws: a gap or a repeat would not fit.
            _ = try rows.take(message, id: "open")
        }
        return (first ?? true, socket)
    }

    @Test func aClientMovingBetweenNodesResumesByPositionWithOneChangeset() async throws {
        try await withThrowawayPostgres { postgres in
            try await SyncProtocolTests.prepare(postgres)
            try await postgres.psql("CREATE TABLE noise(id int8 PRIMARY KEY, n int8 NOT NULL); INSERT INTO noise VALUES (1, 0)")
            let directory = try TemporaryDirectory()
            // Node b also follows `noise`, written often: its replica's versions run ahead of a's.
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory, name: "a") { a in
                try await TestNode.with(postgres, tables: ["todos", "tags", "noise"], rules: Self.rules, directory: directory,
                                        name: "b") { b in

                    // A node resumes by changeset from positions at or after its copy of Postgres. A client
                    // that stayed connected a moment holds such a position (a commit, or a heartbeat).
                    try await a.untilReady()
                    try await b.untilReady()
                    try await postgres.psql("UPDATE todos SET title = 'seen on a' WHERE id = 2")
                    var rows = ClientRows()
                    try await withSockets { sockets in
                        var (snapshot, socket) = try await Self.follow(&rows, on: a, resume: false, postgres: postgres, sockets: sockets)
                        #expect(snapshot)
                        await socket.end()

                        // While the client is away: its rows change, and noise (which only b follows) piles up.
                        for round in 0..<3 {
                            for n in 0..<15 { try await postgres.psql("UPDATE noise SET n = n + 1 WHERE id = 1 -- \(round).\(n)") }
                            try await postgres.psql("UPDATE todos SET rank = rank + 100 WHERE id = \(2 * (round + 1))")
                            try await postgres.psql("UPDATE todos SET title = 'moved " + String(round) + "' WHERE id = \(2 * round + 12)")
                        }
                        try await postgres.psql("INSERT INTO todos VALUES (100, 'alice', 'new', 0, false)")

                        // To b, with a's position: one changeset.
                        (snapshot, socket) = try await Self.follow(&rows, on: b, resume: true, postgres: postgres, sockets: sockets)
                        #expect(!snapshot, "a resume on another node of the same cluster is a changeset")
                        let (versionA, versionB) = (await Self.replicaVersion(a), await Self.replicaVersion(b))
                        #expect(versionA != nil && versionB != nil && versionA != versionB,
                                "the replicas number their versions differently (a: \(versionA ?? -1), b: \(versionB ?? -1))")
                        // Later writes reach it there.
                        try await postgres.psql("UPDATE todos SET title = 'on b' WHERE id = 100")
                        while rows.rows.map(psqlText) != (try await postgres.rows(SyncProtocolTests.aliceOpenSQL)) {
                            _ = try rows.take(try #require(try await socket.nextSkippingHeartbeats()), id: "open")
                        }
                        await socket.end()

                        // And back to a, with b's position.
                        try await postgres.psql("DELETE FROM todos WHERE id = 100; UPDATE noise SET n = 0")
                        (snapshot, socket) = try await Self.follow(&rows, on: a, resume: true, postgres: postgres, sockets: sockets)
                        #expect(!snapshot, "back on the first node: a changeset again")
                        await socket.end()

                        // A node started now, on an empty replica: its history begins at its copy, so an older
                        // position gets a snapshot — of the right rows.
                        let stale = rows
                        try await postgres.psql("UPDATE todos SET title = 'after the copy' WHERE id = 2")
                        try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory, name: "c") { c in
                            rows = stale
                            (snapshot, socket) = try await Self.follow(&rows, on: c, resume: true, postgres: postgres, sockets: sockets)
                            #expect(snapshot, "a position before the node's copy of Postgres: a snapshot")
                            await socket.end()
                        }
                    }
                }
            }
        }
    }
}
#endif
