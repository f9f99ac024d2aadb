#if Sync
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Exactly once has one path: with or without a resolver, a mutation's counter moves and its
/// result is stored by the same step (Postgres's `ripple_sync_apply`); a resolver only decides
/// the operations first, in the same transaction.
@Suite(.serialized, .enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: exactly-once tests skipped"),
       .timeLimit(.minutes(15)))
struct ExactlyOnceTests {
    /// Mutations that reach every outcome: applied (one writing a row twice, one deleting a row
    /// that is not there), each kind of rejection (a unique and a check constraint, the write
    /// rule before and after, a row gone, a key that does not fit its column, an unknown column,
    /// a read-only table), then all of them again (answered from storage) and one out of order.
    static let mutations: [Mutation] = [
        Mutation(id: 1, ops: [MutationOp(.put, table: "counters", values: ["id": .integer(2), "tags": .text("x"), "total": .integer(5), "applied": .integer(0)]),
                              MutationOp(.patch, table: "counters", values: ["id": .integer(2), "total": .integer(7)])]),
        Mutation(id: 2, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "title": .text("bread")])]),
        Mutation(id: 3, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(-1)])]),
        Mutation(id: 4, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(2), "title": .text("mine now")])]),
        Mutation(id: 5, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(99), "done": .bool(true)])]),
        Mutation(id: 6, ops: [MutationOp(.patch, table: "counters", values: ["id": .text("x"), "total": .integer(3)])]),
        Mutation(id: 7, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "password": .text("x")])]),
        Mutation(id: 8, ops: [MutationOp(.delete, table: "readonly", values: ["id": .integer(1)])]),
        Mutation(id: 9, ops: [MutationOp(.delete, table: "notes", values: ["id": .integer(77)])]),
        Mutation(id: 10, ops: [MutationOp(.put, table: "notes", values: ["id": .integer(3), "owner": .text("alice"), "title": .text("eggs"),
                                                                         "body": .null, "done": .bool(false)]),
                               MutationOp(.patch, table: "notes", values: ["id": .integer(3), "owner": .text("bob")])]),
        Mutation(id: 11, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(12)])]),
    ]

    /// What a node with `resolvers` answers to ``mutations`` and what it leaves in Postgres: the
    /// answers, the stored results, the clients' counters and the tables' rows.
    func outcome(_ resolvers: ResolverMode) async throws -> (answers: [[MutationResult]], stored: [String]) {
        var answers: [[MutationResult]] = []
        var stored: [String] = []
        try await SyncWriteTests().withNode(resolvers: resolvers) { postgres, node in
            let (socket, _) = try await SyncWriteTests().socket(node, "alice")
            defer { socket.close() }
            answers.append(try await socket.push(Self.mutations).map(\.withoutLSN))
            answers.append(try await socket.push(Self.mutations).map(\.withoutLSN))
            answers.append(try await socket.push([Mutation(id: 13, ops: [MutationOp(.delete, table: "notes", values: ["id": .integer(1)])])]).map(\.withoutLSN))
            answers.append(try await socket.push([Mutation(id: 12, ops: [
                MutationOp(.patch, table: "counters", values: ["id": .integer(1), "tags": .text("t")]),
                MutationOp(.delete, table: "counters", values: ["id": .integer(2)])])]).map(\.withoutLSN))
            stored += try await postgres.rows("""
                SELECT mutation_id, status, coalesce(code, '-'), coalesce(constraint_name, '-'), coalesce(message, '-')
                FROM ripple_sync_results ORDER BY mutation_id
                """)
            stored += try await postgres.rows("SELECT user_id, last_mutation_id FROM ripple_sync_clients ORDER BY user_id")
            stored += try await postgres.rows("SELECT id, owner, title, coalesce(body, '-'), done FROM notes ORDER BY id")
            stored += try await postgres.rows("SELECT id, coalesce(tags, '-'), total, applied FROM counters ORDER BY id")
            stored += try await postgres.rows("SELECT id FROM readonly ORDER BY id")
        }
        return (answers, stored)
    }

    /// The same pushes to a node without resolvers and to one whose resolvers change nothing:
    /// the same answers, and the same rows in every table the node writes (results, counters,
    /// synced tables).
    @Test func withOrWithoutAResolverResultsAreStoredAndCountersMovedAlike() async throws {
        let plain = try await outcome(.none)
        let resolved = try await outcome(.passThrough)
        #expect(resolved.answers == plain.answers)
        #expect(resolved.stored == plain.stored)
        // What the outcome is, so that the two agreeing means something.
        let first = plain.answers[0]
        #expect(first.map(\.status) == [.applied] + Array(repeating: .rejected, count: 7) + [.applied, .rejected, .applied])
        #expect(first.compactMap(\.code) == ["23505", "23514", "write_rule", "row_gone", "22P02", "bad_mutation", "write_rule", "write_rule"])
        #expect(plain.answers[1] == first)
        #expect(plain.answers[2].map(\.code) == ["out_of_order"])
        #expect(plain.answers[3].map(\.status) == [.applied])
        #expect(plain.stored.contains("alice|12"))
        #expect(plain.stored.contains("1|t|12|2"))
    }

    /// A resolver reads the row as the mutations before its own in the same push left it (the
    /// batch goes to Postgres in runs), and as its own mutation's earlier operations left it;
    /// one that changes the row's key is refused.
    @Test func aResolverSeesTheRowsAsEarlierMutationsAndOperationsLeftThem() async throws {
        let seen = Locked<[String]>([])
        try await SyncWriteTests().withNode(adjust: { configuration in
            // counters.tags: the incoming tags merged into the row's (a set union).
            configuration.resolvers["counters"] = { op, current, _ in
                func text(_ value: WireValue?) -> String { if case .text(let text)? = value { text } else { "-" } }
                seen.withLock { $0.append(current.map { row in "\(text(row["id"])) \(text(row["tags"]))" } ?? "none") }
                guard case .text(let incoming)? = op.values["tags"] else { return .apply(op) }
                if incoming == "rekey" {
                    var moved = op
                    moved.values["id"] = .integer(99)
                    return .apply(moved)
                }
                guard op.kind == .patch, case .text(let existing)? = current?["tags"] else { return .apply(op) }
                var merged = op
                merged.values["tags"] = .text(Set(existing.split(separator: ",")).union(incoming.split(separator: ",")).sorted().joined(separator: ","))
                return .apply(merged)
            }
        }) { postgres, node in
            let (socket, _) = try await SyncWriteTests().socket(node, "alice")
            defer { socket.close() }
            let results = try await socket.push([
                Mutation(id: 1, ops: [MutationOp(.put, table: "counters", values: ["id": .integer(5), "tags": .text("x"), "total": .integer(1), "applied": .integer(0)]),
                                      MutationOp(.patch, table: "counters", values: ["id": .integer(5), "tags": .text("y")])]),
                Mutation(id: 2, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "body": .text("between")])]),
                Mutation(id: 3, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "tags": .text("b")])]),
                Mutation(id: 4, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "tags": .text("c")])]),
                Mutation(id: 5, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "tags": .text("rekey")])]),
            ])
            #expect(results.map(\.status) == [.applied, .applied, .applied, .applied, .rejected])
            #expect(results.last?.code == "resolver")
            #expect(try await postgres.rows("SELECT id, tags FROM counters ORDER BY id") == ["1|a,b,c", "5|x,y"])
            #expect(seen.withLock { $0 } == ["none", "5 x", "1 a", "1 a,b", "1 a,b,c"])
        }
    }
}
#endif
