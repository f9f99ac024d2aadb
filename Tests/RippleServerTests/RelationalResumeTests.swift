#if Sync
import Foundation
import Ripple
@testable import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// A resume of a subscription whose query reads a second table (a membership sub-query): the
/// rows the client held are read with every table the query reads as it was, so a membership
/// revoked while the client was away deletes the rows it gave — none is left behind.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: relational resume tests skipped"),
       .timeLimit(.minutes(10)))
struct RelationalResumeTests {
    /// A client's rows for one subscription, built from what it received.
    typealias Client = SubscriptionHubTests.Client

    /// Alice's todos: those of the projects she is a member of (`members`, a second replica
    /// table), by an `IN` sub-query and by a correlated `EXISTS`.
    static let aliceTodos = [
        CompiledQuery(sql: #"SELECT "id", "project_id", "title" FROM "todos" WHERE "project_id" IN "#
                          + #"(SELECT "project_id" FROM "members" WHERE "user_id" = ?) ORDER BY "id" ASC"#,
                      arguments: [.text("alice")], identity: "id", columns: ["id", "project_id", "title"]),
        CompiledQuery(sql: #"SELECT "id", "project_id", "title" FROM "todos" WHERE EXISTS (SELECT 1 FROM "members" "#
                          + #"WHERE "members"."project_id" = "todos"."project_id" AND "members"."user_id" = ?) ORDER BY "id" ASC"#,
                      arguments: [.text("alice")], identity: "id", columns: ["id", "project_id", "title"]),
    ]

    @Test(arguments: [0, 1])
    func aResumeAcrossARevokedMembershipDeletesTheRowsItGave(query: Int) async throws {
        let aliceTodos = Self.aliceTodos[query]
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE todos(id int8 PRIMARY KEY, project_id int8 NOT NULL, title text NOT NULL);
                CREATE TABLE members(user_id text NOT NULL, project_id int8 NOT NULL, PRIMARY KEY (user_id, project_id));
                INSERT INTO members VALUES ('alice', 1), ('alice', 2), ('bob', 2), ('bob', 3);
                INSERT INTO todos VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 2, 'c'), (4, 3, 'd');
                """)
            let directory = try TemporaryDirectory()
            let store = try Store(path: directory.path("replica.sqlite"))
            let rules = try SyncRules(json: Data(#"{"tables": {"todos": {"read": true}, "members": {"read": true}}}"#.utf8))
            let hub = SubscriptionHub(store: store, rules: rules)
            let client = postgres.makeClient()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: ["todos", "members"]))
                try await feed.prepare()
                let schema = try #require(await feed.schema(of: "todos"))

                // A client follows the subscription, then goes away at version `left`.
                let away = Client()
                let token = hub.subscribe(aliceTodos, basis: "b", schema: schema) { away.receive($0) }
                try await Wait.until("the subscription's first result") { away.lastVersion != nil }
                token.cancel()
                let held = away.rows
                let left = try #require(away.lastVersion)
                #expect(away.problems.isEmpty, "\(away.problems)")
                #expect(held.map(\.first) == [.integer(1), .integer(2), .integer(3)])

                // While it is away, alice leaves project 2, and project 1 gets a todo.
                try await postgres.psql("DELETE FROM members WHERE user_id = 'alice' AND project_id = 2")
                try await postgres.psql("INSERT INTO todos VALUES (5, 1, 'e')")
                _ = try await feed.catchUp()

                // The rows at `left`, with the memberships of `left`: what the client holds.
                let old = try await hub.asyncRows(of: aliceTodos, schema: schema, at: left)
                #expect(old == held)

                let resumed = Client(rows: held)
                let again = hub.subscribe(aliceTodos, basis: "b", schema: schema, resumingFrom: old) { resumed.receive($0) }
                defer { again.cancel() }
                try await Wait.until("the resume's first event") { resumed.lastVersion != nil }
                #expect(resumed.problems.isEmpty, "\(resumed.problems)")
                guard case .changes(let changeset)? = resumed.events.first else {
                    Issue.record("a resume from rows the replica still has is a changeset: \(resumed.events)")
                    return
                }
                // Todos 2 and 3 (project 2's) deleted, todo 5 inserted: applied, Postgres's answer.
                #expect(changeset.deletes == [1, 2])
                #expect(changeset.inserts.map(\.row) == [[.integer(5), .integer(1), .text("e")]])
                let expected = try await postgres.psql("""
                    SELECT string_agg(id::text, ',' ORDER BY id) FROM todos
                    WHERE project_id IN (SELECT project_id FROM members WHERE user_id = 'alice')
                    """)
                #expect(resumed.rows == [[.integer(1), .integer(1), .text("a")], [.integer(5), .integer(1), .text("e")]])
                #expect(resumed.rows.compactMap { if case .integer(let id)? = $0.first { id } else { nil } }.map(String.init)
                            .joined(separator: ",") == expected.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
    }
}
#endif
