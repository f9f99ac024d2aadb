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

/// Who may read what: signed tokens, and read rules ANDed into every subscription.
@Suite struct SyncTokenTests {
    let secret = Array("a secret of thirty-two bytes or more!".utf8)
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aSignedTokenVerifiesUntilItExpires() throws {
        let token = try SyncToken.sign(user: "alice", expires: now.addingTimeInterval(60), secret: secret)
        #expect(try SyncToken.verify(token, secret: secret, now: now).user == "alice")
        #expect(throws: SyncToken.Failure.expired(now.addingTimeInterval(60))) {
            try SyncToken.verify(token, secret: secret, now: now.addingTimeInterval(60))
        }
    }

    @Test func aTokenSignedWithAnotherSecretOrChangedIsRefused() throws {
        let token = try SyncToken.sign(user: "alice", expires: now.addingTimeInterval(60), secret: secret)
        #expect(throws: SyncToken.Failure.badSignature) {
            try SyncToken.verify(token, secret: Array("another secret of thirty-two bytes!!".utf8), now: now)
        }
        // Bob's payload under Alice's signature.
        let bob = try SyncToken.sign(user: "bob", expires: now.addingTimeInterval(60), secret: secret)
        let forged = bob.split(separator: ".")[0...1].joined(separator: ".") + "." + token.split(separator: ".")[2]
        #expect(throws: SyncToken.Failure.badSignature) { try SyncToken.verify(forged, secret: secret, now: now) }
    }

    @Test(arguments: ["", "v1", "v1.a", "v2.a.b", "v1.a.b.c", "v1.e30.!!!", "v1..", "' OR 1=1 --"])
    func malformedTokensAreRefused(token: String) {
        #expect(throws: SyncToken.Failure.self) { try SyncToken.verify(token, secret: secret, now: now) }
    }

    @Test func aShortSecretIsRefused() {
        #expect(throws: SyncToken.Failure.weakSecret) { try SyncToken.sign(user: "a", expires: now, secret: [1, 2, 3]) }
    }
}

@Suite struct SyncRulesTests {
    static let json = """
        {"tables": {
            "todos": {"read": {"or": [{"column": "owner", "op": "=", "value": {"user": true}}, {"column": "shared", "op": "=", "value": true}]}},
            "news": {"read": true}
        }}
        """

    @Test func aRuleIsAndedIntoTheQueryForItsUser() throws {
        let rules = try SyncRules(json: Data(Self.json.utf8))
        let query = QueryDescription(table: "todos", filter: .compare(column: "done", op: .equal, value: .bool(false)))
        let restricted = try rules.restrict(query, to: "alice")
        #expect(restricted.filter == .and([
            .or([.compare(column: "owner", op: .equal, value: .text("alice")), .compare(column: "shared", op: .equal, value: .bool(true))]),
            .compare(column: "done", op: .equal, value: .bool(false)),
        ]))
        #expect(try rules.restrict(QueryDescription(table: "news"), to: "bob") == QueryDescription(table: "news"))
        #expect(throws: RulesError.self) { try rules.restrict(QueryDescription(table: "secrets"), to: "alice") }
    }

    @Test func aMalformedRulesFileIsRefused() {
        #expect(throws: RulesError.self) { try SyncRules(json: Data(#"{"tables": {"t": {"read": {"column": "a", "op": "~", "value": 1}}}}"#.utf8)) }
        #expect(throws: RulesError.self) { try SyncRules(json: Data(#"{"tables": {"t": {}}}"#.utf8)) }
        #expect(throws: RulesError.self) { try SyncRules(json: Data("not json".utf8)) }
    }
}

/// Two users, rows moving in and out of their rules: no event of one user's live query ever
/// holds a row the rule excludes, and each ends equal to the rule's query on Postgres.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: rule tests against it skipped"), .timeLimit(.minutes(15)))
struct ReadRuleTests {
    final class Events: @unchecked Sendable {   // every access holds `lock`
        private let lock = NSLock()
        private var received: [[Row]] = []
        func append(_ rows: [Row]) { lock.withLock { received.append(rows) } }
        var all: [[Row]] { lock.withLock { received } }
    }

    @Test func aRowOutsideAUsersRuleNeverReachesThatUser() async throws {
        try await withThrowawayPostgres { postgres in
            let directory = try TemporaryDirectory()
            try await postgres.psql("""
                CREATE TABLE todos(id int8 PRIMARY KEY, owner text NOT NULL, shared bool NOT NULL DEFAULT false, title text);
                INSERT INTO todos VALUES (1, 'alice', false, 'a1'), (2, 'bob', false, 'b1'), (3, 'bob', true, 'b2 shared');
                """)
            let rules = try SyncRules(json: Data(SyncRulesTests.json.utf8))
            let store = try Store(path: directory.path("replica.sqlite"))
            let client = postgres.makeClient()
            let seen = ["alice": Events(), "bob": Events()]
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: ["todos"]))
                try await feed.prepare()
                let schema = try #require(await feed.schema(of: "todos"))
                var subscriptions: [Subscription] = []
                defer { subscriptions.forEach { $0.cancel() } }
                for (user, events) in seen {
                    let query = try rules.restrict(QueryDescription(table: "todos", order: [OrderDescription(column: "title")]), to: user)
                    let compiled = try QueryCompiler.compile(query, for: schema)
                    subscriptions.append(store.liveQuery(sql: compiled.sql, arguments: compiled.arguments, identity: compiled.identity)
                        .subscribe(on: .immediate) { events.append($0.snapshot) })
                }
                for change in [
                    "UPDATE todos SET owner = 'alice' WHERE id = 2",              // into alice's, out of bob's
                    "UPDATE todos SET shared = false WHERE id = 3",               // out of alice's
                    "INSERT INTO todos VALUES (4, 'bob', false, 'b3'), (5, 'alice', true, 'a2 shared')",
                    "UPDATE todos SET owner = 'bob', title = 'moved' WHERE id = 1",  // out of alice's with a change
                    "DELETE FROM todos WHERE id = 5",
                ] {
                    try await postgres.psql(change)
                    try await feed.catchUp()
                }
            }
            for (user, events) in seen {
                let allowed = { (row: Row) in row["owner"] == .text(user) || row["shared"] == .integer(1) }
                #expect(events.all.count >= 4, "\(user): \(events.all.count) events")
                #expect(events.all.allSatisfy { $0.allSatisfy(allowed) }, "\(user) received a row outside the rule")
                let expected = try await postgres.psql("""
                    SELECT id FROM todos WHERE owner = '\(user)' OR shared ORDER BY title COLLATE "C", id
                    """).split(separator: "\n").map { Int64($0)! }
                #expect(events.all.last?.map { $0["id"] } == expected.map { SQLValue.integer($0) })
            }
        }
    }
}
#endif
