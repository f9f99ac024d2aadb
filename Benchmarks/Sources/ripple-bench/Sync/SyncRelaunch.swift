import Foundation
import Ripple
import RippleSync
import RippleSyncClient

/// W4: an app relaunched over its local store, which holds a 10,000-row subscription, after 100
/// of those rows changed in Postgres while it was away — beside a fresh install (a new store)
/// subscribing to the same query.
///
/// Each is timed from the new `SyncClient`'s start (connecting included) until its local rows
/// equal Postgres's (the 100 changed rows there, the count and a checksum equal), and its bytes
/// are those of every frame the client received meanwhile (``SyncClient/traffic()``). The
/// relaunch must resume with one changeset (no snapshot): its bytes at most 5% of the fresh
/// snapshot's.
struct SyncRelaunch {
    static let rows = 10_000
    static let changed = 100
    static let targetRatio = 0.05
    static let id = "items"
    static let query = QueryDescription(table: "items", order: [OrderDescription(column: "id")])

    func run() async -> Int {
        var lines = SyncLines(.w4)
        do {
            try await SyncCluster.with { cluster in
                SyncProgress.phase = "W4: seeding \(Self.rows) rows"
                try await cluster.psql("""
                    CREATE TABLE items(id int8 PRIMARY KEY, title text NOT NULL, rank int4 NOT NULL, done bool NOT NULL, notes text);
                    INSERT INTO items
                    SELECT n, 'Item ' || n || ': ' || (ARRAY['water the plants', 'call the plumber', 'buy oat milk'])[1 + n % 3],
                           (n * 7919) % 100003, n % 7 = 0, CASE WHEN n % 3 = 0 THEN NULL ELSE 'note ' || n END
                    FROM generate_series(1, \(Self.rows)) AS n;
                    """)
                try await SyncNode.with(cluster, tables: ["items"]) { node in
                    try await measure(node: node, cluster: cluster, lines: &lines)
                }
            }
        } catch {
            lines.error("ripple", describe(error))
        }
        return lines.failures
    }

    private func measure(node: SyncNode, cluster: SyncCluster, lines: inout SyncLines) async throws {
        let path = cluster.path("app-w4.sqlite")
        // The first launch: the app syncs the rows, then goes away.
        SyncProgress.phase = "W4: the first launch"
        let first = try await Self.launch(node: node, cluster: cluster, path: path, title: "Item 1:")
        guard first.traffic.snapshots[Self.id] == 1 else { throw SyncBenchError("the first launch got no snapshot: \(first.traffic)") }

        // While it is away, 100 rows change; a socket tells when the node has them all.
        SyncProgress.phase = "W4: changes while the app is away"
        let watcher = try await SyncSocket(url: node.url)
        do {
            try await watcher.hello(try node.token())
            try await watcher.send(.subscribe(id: "watch", query: QueryDescription(
                table: "items", filter: .like(column: "title", pattern: "Changed%"), order: [OrderDescription(column: "id")]), resume: nil))
            Report.note("W4: the first launch synced \(Self.rows) rows in \(JSONValue.number(first.time.seconds).json) s; \(Self.changed) rows change")
            var statements = ""
            for index in 0..<Self.changed {
                statements += "UPDATE items SET title = 'Changed \(index)', rank = rank + 1 WHERE id = \(1 + index * (Self.rows / Self.changed));\n"
            }
            try await cluster.psql(statements)
            // The changed rows, whether the watcher's first result comes before the commit or after it.
            var seen = 0
            while seen < Self.changed {
                guard case .changes(_, let snapshots, let changesets) = try (try await watcher.nextChanges()).message() else { continue }
                seen += (changesets["watch"]?.inserts.count ?? 0) + (snapshots["watch"]?.rows.count ?? 0)
            }
            await watcher.close()
        } catch {
            await watcher.close()
            throw error
        }

        SyncProgress.phase = "W4: the relaunch"
        let relaunch = try await Self.launch(node: node, cluster: cluster, path: path, title: "Changed")
        SyncProgress.phase = "W4: a fresh snapshot"
        let fresh = try await Self.launch(node: node, cluster: cluster, path: cluster.path("fresh-w4.sqlite"), title: "Changed")
        if !relaunch.traffic.snapshots.isEmpty || relaunch.traffic.changesets[Self.id] != 1 {
            lines.error("ripple", "the relaunch did not resume with one changeset: \(relaunch.traffic)")
        }
        let common: [JSONField] = [("rows", .int(Self.rows)), ("changed_rows", .int(Self.changed))]
        lines.impl("ripple-relaunch", [("bytes", .int(relaunch.traffic.bytes)), ("frames", .int(relaunch.traffic.frames)),
                                       ("seconds", .number(relaunch.time.seconds))] + common)
        lines.impl("fresh-snapshot", [("bytes", .int(fresh.traffic.bytes)), ("frames", .int(fresh.traffic.frames)),
                                      ("seconds", .number(fresh.time.seconds))] + common)
        let ratio = Double(relaunch.traffic.bytes) / Double(fresh.traffic.bytes)
        lines.ratio("ripple-relaunch/fresh-snapshot", [("bytes_ratio", .number(ratio)),
                                                       ("seconds_ratio", .number(relaunch.time.seconds / fresh.time.seconds))])
        lines.target("ripple-relaunch/fresh-snapshot bytes_ratio <= 0.05", ratio, met: ratio <= Self.targetRatio)
    }

    /// A launch of the app over the store at `path`: a new client, started and subscribed,
    /// until its local rows equal Postgres's (`title` names the rows the changed ones begin
    /// with); how long that took from the start, and what the client received.
    private static func launch(node: SyncNode, cluster: SyncCluster, path: String,
                               title: String) async throws -> (time: Duration, traffic: SyncClientTraffic) {
        let expected = try await cluster.psql("""
            SELECT count(*) || '|' || sum(rank) || '|' || count(*) FILTER (WHERE title LIKE '\(title)%') FROM items
            """).trimmingCharacters(in: .whitespacesAndNewlines)
        let store = try Store(path: path)
        let token = try node.token()
        let client = SyncClient(url: node.url, store: store) { token }
        let events = SyncMailbox<SyncClientEvent>()
        let listener = Task {
            for await event in client.events { events.put(event) }
        }
        defer { listener.cancel() }
        @Sendable func fresh() throws -> Bool {
            let local = try store.read { db in
                guard try db.fetchValue("SELECT 1 FROM sqlite_schema WHERE name = 'items'", as: Int.self) != nil else { return "" }
                return try db.fetchValue("""
                    SELECT count(*) || '|' || sum(rank) || '|' || count(*) FILTER (WHERE title LIKE '\(title)%') FROM items
                    """, as: String.self) ?? ""
            }
            return local == expected
        }
        do {
            let start = ContinuousClock.now
            try await client.start()
            try await client.subscribe(Self.id, Self.query)
            var done: ContinuousClock.Instant?
            while done == nil {
                guard let event = try await events.take(within: 300) else { throw SyncBenchError("the client's events ended") }
                switch event {
                case .applied(_, let subscriptions) where subscriptions.contains(Self.id):
                    if try fresh() { done = .now }
                case .serverError(let code, let message, _): throw SyncBenchError("the client heard \(code.rawValue): \(message)")
                case .localFailure(let message): throw SyncBenchError("the client failed: \(message)")
                default: continue
                }
            }
            let traffic = await client.traffic()
            try? await withDeadline(10, "stopping the Swift client") { await client.stop() }
            return (done! - start, traffic)
        } catch {
            try? await withDeadline(10, "stopping the Swift client") { await client.stop() }
            throw error
        }
    }
}
