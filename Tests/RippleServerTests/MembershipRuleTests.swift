#if Sync
import Foundation
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// A membership rules file, end to end on a node: a todo is readable and writable by the
/// members of its project (a read rule with `in`, a write rule with `exists`), checked before
/// and after each operation on Postgres; a subscription follows memberships granted.
@Suite(.serialized, .timeLimit(.minutes(15))) struct MembershipRuleTests {
    static let rules = #"""
        {"tables": {
            "members": {"read": {"column": "user_id", "op": "=", "value": {"user": true}}},
            "todos": {"read": {"column": "project_id", "op": "in", "query": {"table": "members", "columns": ["project_id"],
                               "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}},
                      "write": {"exists": {"table": "members", "on": {"project_id": "project_id"},
                                           "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}}
        }}
        """#

    func withNode(_ body: (ThrowawayPostgres, TestNode) async throws -> Void) async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE members(id int8 PRIMARY KEY, project_id int4, user_id text);
                CREATE TABLE todos(id int8 PRIMARY KEY, project_id int8, title text NOT NULL);
                INSERT INTO members VALUES (1, 1, 'alice'), (2, 2, 'bob'), (3, NULL, 'alice');
                INSERT INTO todos VALUES (1, 1, 'a'), (2, 2, 'b'), (3, NULL, 'nowhere');
                """)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["members", "todos"], rules: Self.rules, directory: directory) { node in
                try await body(postgres, node)
            }
        }
    }

    @Test func aTodoIsWritableByTheMembersOfItsProjectOnly() async throws {
        try await withNode { postgres, node in
            let socket = try await TestSocket(url: node.url)
            defer { socket.close() }
            _ = try await socket.hello(try node.token("alice"), client: "")
            func todo(_ id: Int64, _ project: Int64?, _ title: String) -> [String: WireValue] {
                ["id": .integer(id), "project_id": project.map(WireValue.integer) ?? .null, "title": .text(title)]
            }
            let results = try await socket.push([
                // Alice's project: a patch and a new todo.
                Mutation(id: 1, ops: [MutationOp(.patch, table: "todos", values: ["id": .integer(1), "title": .text("a2")])]),
                Mutation(id: 2, ops: [MutationOp(.put, table: "todos", values: todo(4, 1, "new"))]),
                // Bob's project: patch, delete, and a put over his todo (the rule before).
                Mutation(id: 3, ops: [MutationOp(.patch, table: "todos", values: ["id": .integer(2), "title": .text("mine")])]),
                Mutation(id: 4, ops: [MutationOp(.delete, table: "todos", values: ["id": .integer(2)])]),
                Mutation(id: 5, ops: [MutationOp(.put, table: "todos", values: todo(2, 1, "taken"))]),
                // Moving her todo to bob's project, a new todo there (the rule after).
                Mutation(id: 6, ops: [MutationOp(.patch, table: "todos", values: ["id": .integer(1), "project_id": .integer(2)])]),
                Mutation(id: 7, ops: [MutationOp(.put, table: "todos", values: todo(5, 2, "sneaked"))]),
                // A todo of no project: alice's NULL membership relates to nothing.
                Mutation(id: 8, ops: [MutationOp(.patch, table: "todos", values: ["id": .integer(3), "title": .text("mine")])]),
                // Still applied after all that: a delete in her project.
                Mutation(id: 9, ops: [MutationOp(.delete, table: "todos", values: ["id": .integer(4)])]),
            ])
            #expect(results.map(\.status) == [.applied, .applied] + Array(repeating: .rejected, count: 6) + [.applied])
            #expect(results[2...7].allSatisfy { $0.code == "write_rule" }, "\(results)")
            #expect(try await postgres.rows("SELECT id, project_id, title FROM todos ORDER BY id") == ["1|1|a2", "2|2|b", "3||nowhere"])
        }
    }

    @Test func aSubscriptionUnderAMembershipRuleFollowsMembershipsGrantedAndRevoked() async throws {
        try await withNode { postgres, node in
            let socket = try await TestSocket(url: node.url)
            defer { socket.close() }
            _ = try await socket.hello(try node.token("alice"))
            try await socket.send(.subscribe(id: "todos", query: QueryDescription(table: "todos"), resume: nil))
            var rows = ClientRows()
            try await rows.readFirstResult(from: socket, id: "todos")
            #expect(rows.rows.map { $0[0] } == [.integer(1)])
            func read(until ids: [Int64]) async throws {
                while rows.rows.map({ $0[0] }) != ids.map(WireValue.integer) {
                    guard let message = try await socket.nextSkippingHeartbeats(what: "todos \(ids)") else {
                        throw SyncClientTestError("the socket closed before todos were \(ids); they are \(rows.rows)")
                    }
                    _ = try rows.take(message, id: "todos")
                }
            }
            try await postgres.psql("INSERT INTO members VALUES (4, 2, 'alice')")
            try await read(until: [1, 2])
            try await postgres.psql("UPDATE todos SET project_id = 1 WHERE id = 3")
            try await read(until: [1, 2, 3])
            try await postgres.psql("DELETE FROM members WHERE id = 1")
            try await read(until: [2])
            // Resumed on a new socket from a point before a membership was granted: the resume
            // rewinds members with todos (rewinding todos alone, under today's members, would
            // make the change from that point empty, and the resumed rows would miss the granted
            // project's todos).
            let point = rows
            try await postgres.psql("INSERT INTO members VALUES (5, 1, 'alice')")
            try await read(until: [1, 2, 3])   // the replica has the grant
            try await withSocket(node.url) { again in
                _ = try await again.hello(try node.token("alice"))
                try await again.send(.subscribe(id: "todos", query: QueryDescription(table: "todos"),
                                                resume: ResumePoint(basis: point.basis, lsn: point.lsn)))
                var resumed = point
                while resumed.rows.map({ $0[0] }) != [.integer(1), .integer(2), .integer(3)] {
                    guard let message = try await again.nextSkippingHeartbeats(what: "the resumed subscription's todos 1, 2, 3") else {
                        throw SyncClientTestError("the socket closed before the resumed todos were 1, 2, 3; they are \(resumed.rows)")
                    }
                    _ = try resumed.take(message, id: "todos")
                }
            }
            try await postgres.psql("DELETE FROM members WHERE id = 5")
            try await read(until: [2])
            // A client filter over members sees only alice's own memberships.
            try await socket.send(.subscribe(id: "bobs", query: QueryDescription(table: "todos", filter: .exists(ExistsDescription(
                table: "members", on: ["project_id": "project_id"], filter: .compare(column: "user_id", op: .equal, value: .text("bob"))))),
                resume: nil))
            var bobs = ClientRows()
            try await bobs.readFirstResult(from: socket, id: "bobs")
            #expect(bobs.rows.isEmpty)
            // A sub-query over a table that is not synced is refused.
            try await socket.send(.subscribe(id: "bad", query: QueryDescription(table: "todos", filter: .inQuery(
                column: "id", query: SubqueryDescription(table: "ripple_sync_clients", column: "id"))), resume: nil))
            var refused: ServerMessage?
            while refused == nil {
                guard let message = try await socket.nextSkippingHeartbeats(what: "the refusal") else { break }
                if case .error(_, _, "bad"?) = message { refused = message }
            }
            guard case .error(let code, let text, _)? = refused else { Issue.record("no refusal"); return }
            #expect(code == .invalidQuery && text.contains("no synced table ripple_sync_clients"), "\(code): \(text)")
        }
    }
}
#endif
