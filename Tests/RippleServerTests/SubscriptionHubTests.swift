#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Subscriptions over the replica: equal queries under equal rules share one live query, and a
/// subscriber that applies each change to its rows always holds the query's result on Postgres.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: subscription tests skipped"), .timeLimit(.minutes(15)))
struct SubscriptionHubTests {
    /// A client's rows for one subscription, built from what it received.
    final class Client: @unchecked Sendable {   // every access holds `lock`
        private let lock = NSLock()
        private var received: [[WireValue]]
        private var failures: [String] = []
        private var versions: [Int64] = []
        private var kinds: [SubscriptionEvent.Kind] = []

        /// A client holding `rows` (a resume's).
        init(rows: [[WireValue]] = []) { received = rows }

        func receive(_ event: SubscriptionEvent) {
            lock.withLock {
                if let last = versions.last, event.version <= last { failures.append("version \(event.version) after \(last)") }
                versions.append(event.version)
                kinds.append(event.kind)
                switch event.kind {
                case .snapshot(let snapshot): received = snapshot.rows
                case .changes(let changeset):
                    do { received = try changeset.apply(to: received) } catch { failures.append("\(error)") }
                case .ended(let reason, _): failures.append("ended: \(reason)")
                case .refused(let reason): failures.append("refused: \(reason)")
                }
            }
        }

        var rows: [[WireValue]] { lock.withLock { received } }
        var problems: [String] { lock.withLock { failures } }
        /// The kinds of the events received, in order.
        var events: [SubscriptionEvent.Kind] { lock.withLock { kinds } }
        var lastVersion: Int64? { lock.withLock { versions.last } }
    }

    @Test func sharedQueriesStayEqualToPostgres() async throws {
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        let directory = try TemporaryDirectory()
        try await postgres.psql("""
            CREATE TABLE todos(id int8 PRIMARY KEY, owner text NOT NULL, rank int4, done bool NOT NULL DEFAULT false, big int8);
            INSERT INTO todos VALUES (1, 'alice', 3, false, 9007199254740993), (2, 'bob', 1, false, 1), (3, 'alice', 2, true, NULL);
            """)
        let rules = try SyncRules(json: Data(#"{"tables": {"todos": {"read": {"column": "owner", "op": "=", "value": {"user": true}}}}}"#.utf8))
        let store = try Store(path: directory.path("replica.sqlite"))
        let hub = SubscriptionHub(store: store, rules: rules)
        let client = postgres.makeClient()
        let query = QueryDescription(table: "todos", filter: .compare(column: "done", op: .equal, value: .bool(false)),
                                     order: [OrderDescription(column: "rank")])
        let clients = (alice: Client(), aliceAgain: Client(), bob: Client())
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: ["todos"]))
            try await feed.prepare()
            let schema = try #require(await feed.schema(of: "todos"))
            let tokens = [
                try hub.subscribe(query, user: "alice", schema: schema) { clients.alice.receive($0) },
                try hub.subscribe(query, user: "alice", schema: schema) { clients.aliceAgain.receive($0) },
                try hub.subscribe(query, user: "bob", schema: schema) { clients.bob.receive($0) },
            ]
            defer { tokens.forEach { $0.cancel() } }
            #expect(hub.liveQueryCount == 2)   // alice's two share one; bob's rule makes another
            for change in [
                "UPDATE todos SET rank = 0 WHERE id = 1",
                "INSERT INTO todos VALUES (4, 'alice', 1, false, -9007199254740993), (5, 'bob', 5, false, NULL)",
                "UPDATE todos SET done = true WHERE id = 4",
                "UPDATE todos SET owner = 'bob' WHERE id = 1",
                "UPDATE todos SET done = false WHERE id = 3",
            ] {
                try await postgres.psql(change)
                try await feed.catchUp()
            }
        }
        for (user, subscriber) in [("alice", clients.alice), ("alice", clients.aliceAgain), ("bob", clients.bob)] {
            #expect(subscriber.problems.isEmpty, "\(subscriber.problems)")
            let text = try await postgres.psql("""
                SELECT json_agg(json_build_array(id::text, owner, rank, done, big::text) ORDER BY rank NULLS LAST, id)
                FROM todos WHERE owner = '\(user)' AND NOT done
                """)
            let expected = try (JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[Any]] ?? []).map { row -> [WireValue] in
                [.integer(Int64(row[0] as! String)!), .text(row[1] as! String), (row[2] as? NSNumber).map { .integer($0.int64Value) } ?? .null,
                 .bool(row[3] as! Bool), (row[4] as? String).map { Int64($0)!.magnitude > 1 << 53 ? .text($0) : .integer(Int64($0)!) } ?? .null]
            }
            #expect(subscriber.rows == expected, "\(user)")
        }
        #expect(clients.alice.rows == clients.aliceAgain.rows)
    }
}
#endif
