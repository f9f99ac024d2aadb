#if Sync
import Foundation
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// The server's half of writes, against a real Postgres and real sockets: mutations applied
/// exactly once (retries and two sockets of one client), per-column last writer wins, write
/// rules before and after, rejections with their SQLSTATE and constraint and nothing applied,
/// client ids per user, and a resolver that merges.
@Suite(.serialized, .timeLimit(.minutes(15))) struct SyncWriteTests {
    static let rules = NotesFixture.rules

    static func prepare(_ postgres: ThrowawayPostgres) async throws { try await NotesFixture.prepare(postgres) }

    /// A throwaway Postgres with the tables above and a node following them (with `resolvers`,
    /// after `adjust`), for `body`; both stopped after it.
    func withNode(resolvers: ResolverMode = .none, adjust: (inout SyncServerConfiguration) -> Void = { _ in },
                  _ body: (ThrowawayPostgres, TestNode) async throws -> Void) async throws {
        try await NotesFixture.withNode(resolvers: resolvers, adjust: adjust, body)
    }

    /// A socket that said hello as `user` meaning to write (claiming `client`; `""`: a new id),
    /// and its welcome.
    func socket(_ node: TestNode, _ user: String, client: String = "") async throws -> (TestSocket, ServerMessage.Welcome) {
        let socket = try await TestSocket(url: node.url)
        do {
            return (socket, try await socket.hello(try node.token(user), client: client))
        } catch {
            socket.close()
            throw error
        }
    }

    @Test(arguments: ResolverMode.allCases) func mutationsApplyInOrderAndARetryTakesEffectOnce(_ resolvers: ResolverMode) async throws {
        try await withNode(resolvers: resolvers) { postgres, node in
            let (socket, welcome) = try await self.socket(node, "alice")
            defer { socket.close() }
            let client = try #require(welcome.client)
            #expect(welcome.lastMutation == 0)
            let mutations = [
                Mutation(id: 1, ops: [MutationOp(.put, table: "notes", values: ["id": .integer(3), "owner": .text("alice"),
                                                                                "title": .text("eggs"), "body": .null, "done": .bool(false)])]),
                Mutation(id: 2, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "done": .bool(true)]),
                                      MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(11)])]),
                Mutation(id: 3, ops: [MutationOp(.delete, table: "notes", values: ["id": .integer(3)])]),
            ]
            let results = try await socket.push(mutations)
            #expect(results.map(\.withoutLSN) == mutations.map { MutationResult(id: $0.id, status: .applied) })
            #expect(results.allSatisfy { $0.lsn != nil })
            #expect(try await postgres.rows("SELECT id, title, done FROM notes ORDER BY id") == ["1|milk|t", "2|bread|f"])
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["11|1"])
            // The same mutations again (a retry after a lost answer): the same results (at a
            // later position), applied once.
            #expect(try await socket.push(mutations).map(\.withoutLSN) == results.map(\.withoutLSN))
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["11|1"])
            // A mutation beyond the next one is refused and not applied.
            let gap = try await socket.push([Mutation(id: 5, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(99)])])])
            #expect(gap.first?.code == "out_of_order")
            #expect(try await postgres.rows("SELECT total FROM counters") == ["11"])
            // The device reconnecting with its id goes on from where it was.
            let (again, resumed) = try await self.socket(node, "alice", client: client)
            defer { again.close() }
            #expect(resumed.client == client)
            #expect(resumed.lastMutation == 3)
            // Another user cannot take that id: a new one is minted.
            let (other, bob) = try await self.socket(node, "bob", client: client)
            defer { other.close() }
            #expect(bob.client != client)
            #expect(bob.lastMutation == 0)
            // Results are durable rows of Postgres.
            #expect(try await postgres.rows("SELECT mutation_id, status FROM ripple_sync_results WHERE client_id = '\(client)' ORDER BY 1")
                    == ["1|applied", "2|applied", "3|applied"])
            // A socket that only reads gets no client id, cannot push, and adds no client row.
            let clients = try await postgres.rows("SELECT count(*) FROM ripple_sync_clients")
            let reader = try await TestSocket(url: node.url)
            defer { reader.close() }
            #expect(try await reader.hello(try node.token("alice")).client == nil)
            await #expect(throws: SyncClientTestError.self) {
                _ = try await reader.push([Mutation(id: 1, ops: [MutationOp(.delete, table: "notes", values: ["id": .integer(1)])])])
            }
            #expect(try await postgres.rows("SELECT count(*) FROM ripple_sync_clients") == clients)
            #expect(try await postgres.rows("SELECT count(*) FROM notes WHERE id = 1") == ["1"])
        }
    }

    /// A result's `lsn`: every result has one, the socket's position reaches it, and the frames
    /// up to it hold what the mutation did (an applied one's effect; nothing of a rejected one);
    /// a mutation pushed again gets its stored result with a position too.
    @Test(arguments: ResolverMode.allCases) func framesUpToAResultsPositionHoldWhatTheMutationDid(_ resolvers: ResolverMode) async throws {
        try await withNode(resolvers: resolvers) { postgres, node in
            let (socket, _) = try await self.socket(node, "alice")
            defer { socket.close() }
            try await socket.send(.subscribe(id: "counters", query: QueryDescription(table: "counters"), resume: nil))
            var rows = ClientRows()
            try await rows.readFirstResult(from: socket, id: "counters")
            #expect(rows.rows.map(psqlText) == ["1|a|10|0"])
            let applied = Mutation(id: 1, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(11)])])
            // A check constraint rejects it.
            let rejected = Mutation(id: 2, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(-1)])])

            let results = try await pushReadingFrames([applied, rejected], on: socket, into: &rows, id: "counters", postgres: postgres)
            #expect(results.map(\.status) == [.applied, .rejected])
            // At the results' positions: mutation 1's effect, and nothing of mutation 2.
            #expect(rows.rows.map(psqlText) == ["1|a|11|1"])

            // Pushed again: the stored results, at positions at or past the first ones.
            let again = try await pushReadingFrames([applied, rejected], on: socket, into: &rows, id: "counters", postgres: postgres)
            #expect(again.map(\.withoutLSN) == results.map(\.withoutLSN))
            for (first, second) in zip(results, again) {
                #expect(try Self.position(second) >= Self.position(first))
            }
            #expect(rows.rows.map(psqlText) == ["1|a|11|1"])
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["11|1"])
        }
    }

    /// A result's `lsn` as a position.
    static func position(_ result: MutationResult) throws -> PGOutput.LSN {
        try #require(result.lsn.flatMap(PGOutput.LSN.init), "mutation \(result.id) has no lsn")
    }

    /// Pushes `mutations` on `socket` and reads its frames into `rows` (subscription `id`) until
    /// the `pushed` answer came (frames of the push may come before it) and the socket's
    /// position reached every result's `lsn`, with no other writer (the node answers with a
    /// position its frames reach); returns the results.
    func pushReadingFrames(_ mutations: [Mutation], on socket: TestSocket, into rows: inout ClientRows, id: String,
                           postgres: ThrowawayPostgres) async throws -> [MutationResult] {
        try await socket.send(.push(mutations: mutations))
        var results: [MutationResult]?
        while true {
            if let results, let position = PGOutput.LSN(rows.lsn), try results.allSatisfy({ try Self.position($0) <= position }) {
                return results
            }
            guard let message = try await socket.next(within: 20) else { throw SyncClientTestError("the socket closed") }
            switch message {
            case .pushed(let answer):
                #expect(answer.allSatisfy { $0.lsn != nil }, "every result has a position")
                results = answer
            case .error(let code, let text, _):
                throw SyncClientTestError("\(code.rawValue): \(text)")
            default:
                _ = try rows.take(message, id: id)
            }
        }
    }

    @Test(arguments: ResolverMode.allCases) func twoSocketsOfOneClientApplyAMutationOnce(_ resolvers: ResolverMode) async throws {
        try await withNode(resolvers: resolvers) { postgres, node in
            let (first, welcome) = try await self.socket(node, "alice")
            defer { first.close() }
            let client = try #require(welcome.client)
            let (second, _) = try await self.socket(node, "alice", client: client)
            defer { second.close() }
            let mutations = (1...20).map { id in
                Mutation(id: Int64(id), ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(Int64(100 + id))])])
            }
            async let a = first.push(mutations)
            async let b = second.push(mutations)
            let (fromFirst, fromSecond) = try await (a, b)
            #expect(fromFirst.allSatisfy { $0.status == .applied })
            #expect(fromSecond.allSatisfy { $0.status == .applied })
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["120|20"])
        }
    }

    /// A long outbox (several batches of one transaction each, with rejections among them):
    /// every mutation once, in order, each with its own result.
    @Test(arguments: ResolverMode.allCases) func aLongPushAppliesEveryMutationOnceInBatches(_ resolvers: ResolverMode) async throws {
        try await withNode(resolvers: resolvers) { postgres, node in
            let (socket, _) = try await self.socket(node, "alice")
            defer { socket.close() }
            // Every 7th mutation sets a negative total, which the check constraint rejects.
            let mutations = (1...1_000).map { id in
                Mutation(id: Int64(id), ops: [MutationOp(.patch, table: "counters",
                                                         values: ["id": .integer(1), "total": .integer(id % 7 == 0 ? -1 : Int64(id))])])
            }
            let results = try await socket.push(mutations)
            #expect(results.map(\.id) == mutations.map(\.id))
            let rejected: [Int64] = results.filter { $0.status == .rejected }.map(\.id)
            let refusedByTheCheck: [Int64] = mutations.map(\.id).filter { $0 % 7 == 0 }
            #expect(rejected == refusedByTheCheck)
            let appliedCount = 1_000 - 1_000 / 7
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["1000|\(appliedCount)"])
            #expect(try await postgres.rows("SELECT count(*), max(mutation_id) FROM ripple_sync_results") == ["1000|1000"])
        }
    }

    /// A mutation pushed before the one it follows (a push on a new socket while the old
    /// socket's push is still applying) is answered `out_of_order` without a position — not
    /// stored, so not its fate: the client sends it again.
    @Test(arguments: ResolverMode.allCases) func anOutOfOrderAnswerCarriesNoPosition(_ resolvers: ResolverMode) async throws {
        try await withNode(resolvers: resolvers) { postgres, node in
            let (socket, _) = try await self.socket(node, "alice")
            defer { socket.close() }
            let early = try await socket.push([
                Mutation(id: 2, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "body": .text("early")])])])
            #expect(early.map(\.code) == ["out_of_order"])
            #expect(early.first?.lsn == nil)
            let earlyOnAnotherTable = try await socket.push([
                Mutation(id: 2, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(11)])])])
            #expect(earlyOnAnotherTable.map(\.code) == ["out_of_order"])
            #expect(earlyOnAnotherTable.first?.lsn == nil)
            #expect(try await postgres.rows("SELECT count(*) FROM ripple_sync_results") == ["0"])
            // In order, both apply.
            let results = try await socket.push([
                Mutation(id: 1, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "body": .text("first")])]),
                Mutation(id: 2, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(11)])])])
            #expect(results.map(\.status) == [.applied, .applied])
            #expect(results.allSatisfy { $0.lsn != nil })
        }
    }

    /// A mutation that keeps failing for a reason that passes (here a serialization failure,
    /// every attempt) is not rejected for good: no result is stored, its counter stays, it is
    /// answered `unavailable` without a position (send it again), and the push stops there. Sent
    /// again once the failure passed, it applies.
    @Test(arguments: ResolverMode.allCases) func aMutationThatKeepsFailingForAPassingReasonIsNotRejectedForGood(_ resolvers: ResolverMode) async throws {
        try await withNode(resolvers: resolvers) { postgres, node in
            try await postgres.psql("""
                CREATE TABLE busy(refusing bool NOT NULL);
                INSERT INTO busy VALUES (true);
                CREATE FUNCTION refuse_while_busy() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF (SELECT refusing FROM busy) THEN RAISE EXCEPTION 'busy' USING ERRCODE = '40001'; END IF;
                        RETURN NEW;
                    END $$;
                CREATE TRIGGER counters_busy BEFORE UPDATE ON counters FOR EACH ROW EXECUTE FUNCTION refuse_while_busy();
                GRANT SELECT ON busy TO \(ThrowawayPostgres.nodeRole);
                """)
            let (socket, _) = try await self.socket(node, "alice")
            defer { socket.close() }
            let mutations = [11, 12].map { total in
                Mutation(id: Int64(total - 10), ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(Int64(total))])])
            }
            let first = try await socket.push(mutations)
            #expect(first.map(\.id) == [1])
            #expect(first.first?.status == .rejected)
            #expect(first.first?.code == "unavailable")
            #expect(first.first?.lsn == nil)
            #expect(try await postgres.rows("SELECT count(*) FROM ripple_sync_results") == ["0"])
            #expect(try await postgres.rows("SELECT last_mutation_id FROM ripple_sync_clients") == ["0"])

            try await postgres.psql("UPDATE busy SET refusing = false")
            let again = try await socket.push(mutations)
            #expect(again.map(\.status) == [.applied, .applied])
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["12|2"])
        }
    }

    /// A node stopping while a push waits on Postgres (here on a lock another session holds)
    /// stops at once: the push's statement is given up (its connection closed, so nothing of
    /// the batch commits), and no attempt is made again. Before, the stop waited for the
    /// statement's answer limit (15 s) and then tried the batch again.
    @Test func aNodeStopsAtOnceWhileAPushWaitsOnPostgres() async throws {
        try await withNode { postgres, node in
            try await node.untilReady()
            let (socket, _) = try await self.socket(node, "alice")
            defer { socket.close() }
            try await postgres.withTableLocked("counters") {
                try await socket.send(.push(mutations: [Mutation(id: 1, ops: [MutationOp(.patch, table: "counters",
                                                                                            values: ["id": .integer(1), "total": .integer(11)])])]))
                try await Wait.until("the push to wait on the lock") {
                    try await postgres.rows("SELECT count(*) FROM pg_locks WHERE relation = 'counters'::regclass AND NOT granted") == ["1"]
                }
                let start = ContinuousClock.now
                try await node.shutDown()
                let took = ContinuousClock.now - start
                #expect(took < .seconds(5), "the node took \(took) to stop while a push waited on Postgres")
            }
            try await Wait.until("the push's session to end") {
                try await postgres.rows("SELECT count(*) FROM pg_locks WHERE relation = 'counters'::regclass") == ["0"]
            }
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["10|0"])
            #expect(try await postgres.rows("SELECT count(*) FROM ripple_sync_results") == ["0"])
        }
    }

    @Test(arguments: ResolverMode.allCases) func rejectedMutationsSayWhyAndChangeNothing(_ resolvers: ResolverMode) async throws {
        try await withNode(resolvers: resolvers) { postgres, node in
            let (socket, _) = try await self.socket(node, "alice")
            defer { socket.close() }
            let results = try await socket.push([
                // A unique constraint: its SQLSTATE and name, not the other row's values.
                Mutation(id: 1, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(12)]),
                                      MutationOp(.patch, table: "notes", values: ["id": .integer(1), "title": .text("bread")])]),
                // A check constraint.
                Mutation(id: 2, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .integer(-1)])]),
                // Another user's row (the write rule before), and a row moved to another user (after).
                Mutation(id: 3, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(2), "title": .text("mine now")])]),
                Mutation(id: 4, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "owner": .text("bob")])]),
                // A row that is gone; a table the rules keep read-only; the server's own tables.
                Mutation(id: 5, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(99), "done": .bool(true)])]),
                Mutation(id: 6, ops: [MutationOp(.delete, table: "readonly", values: ["id": .integer(1)])]),
                Mutation(id: 7, ops: [MutationOp(.patch, table: "ripple_sync_clients", values: ["user_id": .text("alice")])]),
                // A value that does not fit; an unknown column.
                Mutation(id: 8, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "total": .text("lots")])]),
                Mutation(id: 9, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "password": .text("x")])]),
                // Still applied after all that.
                Mutation(id: 10, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "body": .text("three litres")])]),
            ])
            #expect(results.map(\.status) == Array(repeating: .rejected, count: 9) + [.applied])
            #expect(results[0].code == "23505")
            #expect(results[0].constraint == "notes_title_key")
            #expect(results[0].message?.contains("bread") == false)
            #expect(results[1].code == "23514")
            #expect(results[1].constraint == "counters_total_check")
            #expect(results[2].code == "write_rule")
            #expect(results[3].code == "write_rule")
            #expect(results[4].code == "row_gone")
            #expect(results[5].code == "write_rule")
            #expect(results[6].code == "write_rule")
            #expect(results[7].code == "22P02")
            #expect(results[8].code == "bad_mutation")
            // Nothing of the rejected ones reached Postgres (not even mutation 1's first operation).
            #expect(try await postgres.rows("SELECT total, applied FROM counters") == ["10|0"])
            #expect(try await postgres.rows("SELECT id, owner, title, body FROM notes ORDER BY id") == ["1|alice|milk|three litres", "2|bob|bread|"])
            #expect(try await postgres.rows("SELECT count(*) FROM readonly") == ["1"])
        }
    }

    @Test(arguments: ResolverMode.allCases)
    func concurrentPatchesOfDifferentColumnsBothSurviveAndAResolverCanMerge(_ resolvers: ResolverMode) async throws {
        // counters.tags: a resolver merges the incoming tags into the row's (a set union).
        try await withNode(resolvers: resolvers, adjust: { configuration in
            configuration.resolvers["counters"] = { op, current, _ in
                guard op.kind == .patch, case .text(let incoming)? = op.values["tags"], case .text(let existing)? = current?["tags"] else {
                    return .apply(op)
                }
                var merged = op
                let tags = Set(existing.split(separator: ",")).union(incoming.split(separator: ","))
                merged.values["tags"] = .text(tags.sorted().joined(separator: ","))
                return .apply(merged)
            }
        }) { postgres, node in
            let (phone, _) = try await self.socket(node, "alice")
            defer { phone.close() }
            let (laptop, _) = try await self.socket(node, "alice")
            defer { laptop.close() }
            // Offline edits of one note: the phone its title, the laptop its body; both survive.
            _ = try await phone.push([Mutation(id: 1, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "title": .text("oat milk")])])])
            _ = try await laptop.push([Mutation(id: 1, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "body": .text("one litre")])])])
            #expect(try await postgres.rows("SELECT title, body FROM notes WHERE id = 1") == ["oat milk|one litre"])
            // The same column: the later arrival wins.
            _ = try await phone.push([Mutation(id: 2, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "body": .text("phone")])])])
            _ = try await laptop.push([Mutation(id: 2, ops: [MutationOp(.patch, table: "notes", values: ["id": .integer(1), "body": .text("laptop")])])])
            #expect(try await postgres.rows("SELECT body FROM notes WHERE id = 1") == ["laptop"])
            // The resolver merges the tags both devices added.
            _ = try await phone.push([Mutation(id: 3, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "tags": .text("b")])])])
            _ = try await laptop.push([Mutation(id: 3, ops: [MutationOp(.patch, table: "counters", values: ["id": .integer(1), "tags": .text("c")])])])
            #expect(try await postgres.rows("SELECT tags FROM counters") == ["a,b,c"])
        }
    }
}

extension MutationResult {
    /// The result without its position (two answers about one mutation have different ones).
    var withoutLSN: MutationResult {
        var result = self
        result.lsn = nil
        return result
    }
}
#endif
