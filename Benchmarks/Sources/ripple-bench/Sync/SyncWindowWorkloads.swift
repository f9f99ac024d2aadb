import Foundation
import PostgresNIO
import RippleSync

/// S1, S5 and S2: one cluster, one table of 2,000 todos, one node, and the window clients
/// subscribe to — the 1,000 todos of lowest `rank`, every column.
///
/// Order: S1 (the frame of one UPDATE), S2's ripple impls (a socket, then the Swift client), S5
/// (a resume after 1,000 commits); then the node stops and S2's floors run on the same cluster
/// with nothing else running, each on a slot of its own. S2 comes before S5's burst: every peek
/// decodes the WAL from its slot's restart point, which PostgreSQL 15 moves only at its standby
/// snapshots (every 15 s), so for that long after 1,000 commits each peek of the node's slot
/// decodes them again (269 kB; S2's p50 2.1 → 2.7 ms) where the floors' fresh slots do not.
struct SyncWindowWorkloads {
    /// S2's timed commits per impl.
    let samples: Int

    static let rows = 2_000
    static let windowSize = 1_000
    static let window = QueryDescription(table: "todos", order: [OrderDescription(column: "rank")], limit: windowSize)

    /// Todos as an app keeps them; `rank` is a permutation of 0..<2000 unrelated to `id`.
    static let schema = """
        CREATE TABLE todos(id int8 PRIMARY KEY, list_id int4 NOT NULL, title text NOT NULL, notes text,
                           rank int4 NOT NULL, done bool NOT NULL, updated_at timestamptz NOT NULL);
        INSERT INTO todos
        SELECT n, 1 + n % 20,
               'Todo ' || n || ': ' || (ARRAY['water the plants', 'call the plumber', 'buy oat milk', 'book the dentist',
                                              'renew the passport'])[1 + n % 5],
               CASE WHEN n % 3 = 0 THEN NULL ELSE 'Check the list in the hall before leaving (' || n || ')' END,
               (n * 7919) % \(rows), n % 7 = 0, timestamptz '2026-11-01 09:00:00+00' + n * interval '1 minute'
        FROM generate_series(1, \(rows)) AS n;
        """

    func run(_ workloads: [SyncWorkload]) async -> Int {
        var failures = 0
        let cluster: SyncCluster
        do {
            cluster = try await SyncCluster.start()
        } catch {
            for workload in workloads {
                var lines = SyncLines(workload)
                lines.error("ripple", "cannot start PostgreSQL: \(describe(error))")
                failures += lines.failures
            }
            return failures
        }
        do {
            try await cluster.psql(Self.schema)
            let node = try await SyncNode.start(cluster, tables: ["todos"])
            if workloads.contains(.s1) { failures += await bytes(node: node, cluster: cluster) }
            var latencies = SyncLatencyResults()
            if workloads.contains(.s2) { await measureRipple(node: node, cluster: cluster, into: &latencies) }
            if workloads.contains(.s5) { failures += await resume(node: node, cluster: cluster) }
            await node.stop()
            if workloads.contains(.s2) {
                await measureFloors(cluster: cluster, into: &latencies)
                failures += latencies.emit()
            }
        } catch {
            var lines = SyncLines(workloads[0])
            lines.error("ripple", "setting up the window workloads: \(describe(error))")
            failures += lines.failures
        }
        await cluster.stop()
        return failures
    }

    /// A socket that said hello and holds the window under `id`, and the window's snapshot frame.
    static func subscribeWindow(_ node: SyncNode, id: String = "todos") async throws -> (SyncSocket, SyncSocket.Frame) {
        let socket = try await SyncSocket(url: node.url)
        do {
            try await socket.hello(try node.token())
            try await socket.send(.subscribe(id: id, query: window, resume: nil))
            return (socket, try await socket.nextChanges())
        } catch {
            await socket.close()
            throw error
        }
    }
}

extension PostgresConnection {
    /// Runs `query` to its end (an autocommit statement: until Postgres acknowledged its commit).
    func execute(_ query: PostgresQuery) async throws {
        for try await _ in try await self.query(query, logger: quietLogger) {}
    }
}
