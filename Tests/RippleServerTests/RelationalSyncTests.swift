#if Sync
import Foundation
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Membership rules end to end, with a real Postgres, a real node, real sockets and real
/// writers (`psql`, `pgbench`): the ``TeamFixture`` tables, where a user reads the todos they
/// own and those of the projects they are a member of. Every frame a socket receives is checked
/// against Postgres's own account of the position it stands at (``TeamHistory``, read from a
/// logical slot of the test's own), not only against Postgres now.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: relational sync tests skipped"), .timeLimit(.minutes(15)))
struct RelationalSyncTests {
    static let columns = ["id", "project_id", "owner", "title", "done", "rank"]

    /// The fixture's tables (seeded with `seed`) followed by a history and a node, for `body`.
    func withTeam(seed: String = TeamFixture.seed, isolation: isolated (any Actor)? = #isolation,
                  _ body: (ThrowawayPostgres, TestNode, TeamHistory) async throws -> Void) async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql(TeamFixture.schema)
            let history = try await TeamHistory.start(postgres)
            try await postgres.psql(seed)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: TeamFixture.tables, rules: TeamFixture.rules, directory: directory) { node in
                try await body(postgres, node, history)
            }
        }
    }

    /// A user's socket subscribed to every todo they may read: its rows, and every frame that
    /// changed them (position, rows after it, the changeset).
    final class Reader {
        let user: String
        let socket: TestSocket
        /// The subscription: every todo the user may read, or a narrower query with its model.
        let query: QueryDescription
        /// What the subscription holds at a position of Postgres's history, as psql writes the rows.
        let model: @Sendable (TeamHistory.State, String) -> [[String]]
        var rows = ClientRows()
        var frames: [(lsn: String, rows: [[String]], changeset: WireChangeset?)] = []

        init(_ user: String, _ socket: TestSocket, query: QueryDescription = TeamFixture.allTodos,
             model: @escaping @Sendable (TeamHistory.State, String) -> [[String]] = { state, user in
                 state.readableTodos(of: user, columns: RelationalSyncTests.columns)
             }) {
            (self.user, self.socket, self.query, self.model) = (user, socket, query, model)
        }

        var shown: [[String]] { rows.rows.map { $0.map(\.psqlText) } }

        func subscribe(_ node: TestNode) async throws {
            _ = try await socket.hello(try node.token(user))
            try await socket.send(.subscribe(id: "todos", query: query, resume: nil))
            try await rows.readFirstResult(from: socket, id: "todos")
            frames.append((rows.lsn, shown, nil))
        }

        /// Reads frames until one changes the todos, and returns it.
        @discardableResult
        func nextFrame(_ what: String) async throws -> (lsn: String, rows: [[String]], changeset: WireChangeset?) {
            while true {
                guard let message = try await socket.nextSkippingHeartbeats(what: "\(user)'s frame: \(what)") else {
                    throw SyncClientTestError("\(user)'s socket closed waiting for \(what)")
                }
                var changeset: WireChangeset?
                if case .changes(_, _, let changesets) = message { changeset = changesets["todos"] }
                guard try rows.take(message, id: "todos") else { continue }
                frames.append((rows.lsn, shown, changeset))
                return frames.last!
            }
        }

        /// Reads frames until the rows are `expected`.
        func until(_ expected: [[String]], _ what: String) async throws {
            while shown != expected { try await nextFrame(what) }
        }
    }

    func readable(_ postgres: ThrowawayPostgres, _ user: String) async throws -> [[String]] {
        try await postgres.rows(TeamFixture.readableTodosSQL(user)).map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
    }

    /// Every frame `reader` received holds exactly what its user could read at the frame's
    /// position, by Postgres's history: nothing they could not read (a leak), nothing missing,
    /// nothing stale. Returns how many rows were leaked.
    @discardableResult
    func checkFrames(_ reader: Reader, _ history: TeamHistory) async throws -> Int {
        try await history.catchUp()
        var leaked = 0
        for frame in reader.frames {
            let state = try #require(history.state(at: frame.lsn), "\(frame.lsn) is a position")
            let expected = reader.model(state, reader.user)
            let ids = Set(expected.map { $0[0] })
            let strangers = frame.rows.filter { !ids.contains($0[0]) }
            leaked += strangers.count
            #expect(strangers.isEmpty, "\(reader.user)'s frame at \(frame.lsn) carries \(strangers), which they cannot read there")
            #expect(frame.rows == expected, "\(reader.user)'s frame at \(frame.lsn) shows \(frame.rows) where Postgres had \(expected)")
        }
        // A changeset stands at the commit of the transaction it carries.
        let commits = Set(history.commits.map(\.lsn.description))
        let elsewhere = reader.frames.filter { $0.changeset != nil && !commits.contains($0.lsn) }.map(\.lsn)
        #expect(elsewhere.isEmpty, "\(reader.user)'s frames at \(elsewhere) stand at no commit of the team's tables")
        let positions = reader.frames.compactMap { PGOutput.LSN($0.lsn) }
        #expect(zip(positions, positions.dropFirst()).allSatisfy { $0 < $1 }, "\(reader.user)'s frames come in commit order")
        return leaked
    }

    /// The checker's own model: at each position Postgres stood at between writes, the history's
    /// state gives each user the todos Postgres gave them then (no node involved).
    @Test func theHistoryGivesWhatPostgresGaveAtEachPosition() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql(TeamFixture.schema)
            let history = try await TeamHistory.start(postgres)
            try await postgres.psql(TeamFixture.seed)
            var seen: [(lsn: String, readable: [String: [[String]]])] = []
            let writes = [
                "INSERT INTO members(project_id, user_id) VALUES (2, 'bob')",
                "UPDATE todos SET project_id = 3, title = 'moved' WHERE id = 1",
                "BEGIN; DELETE FROM members WHERE project_id = 1 AND user_id = 'bob'; INSERT INTO members(project_id, user_id) VALUES (1, 'carol'); COMMIT;",
                "DELETE FROM todos WHERE id = 5",
                "UPDATE members SET user_id = 'carol' WHERE project_id = 3",
            ]
            for write in [""] + writes {
                if !write.isEmpty { try await postgres.psql(write) }
                let lsn = try #require(try await postgres.rows("SELECT pg_current_wal_lsn()").first)
                var readable: [String: [[String]]] = [:]
                for user in ["alice", "bob", "carol"] { readable[user] = try await self.readable(postgres, user) }
                seen.append((lsn, readable))
            }
            try await history.catchUp()
            #expect(history.commits.count == 1 + writes.count, "one state per transaction")
            for (lsn, readable) in seen {
                let state = try #require(history.state(at: lsn))
                for (user, rows) in readable {
                    #expect(state.readableTodos(of: user, columns: Self.columns) == rows, "\(user) at \(lsn)")
                }
            }
        }
    }

    /// bob is made a member of alice's Garden: its three todos arrive in one frame. The
    /// membership revoked, they leave in one frame, and no later frame carries them — not the
    /// one of a Garden todo changing (bob gets none), not the one of his own todo changing.
    @Test func grantingBringsAProjectsTodosInOneFrameAndRevokingTakesThemInOne() async throws {
        try await withTeam { postgres, node, history in
            try await withSocket(node.url) { socket in
                let bob = Reader("bob", socket)
                try await bob.subscribe(node)
                #expect(bob.shown.map { $0[0] } == ["1", "2", "3", "4", "8", "9", "10"])

                try await postgres.psql("INSERT INTO members(project_id, user_id) VALUES (2, 'bob')")
                let granted = try await bob.nextFrame("the grant")
                #expect(granted.changeset?.inserts.count == 3 && granted.changeset?.deletes.isEmpty == true, "\(String(describing: granted.changeset))")
                let expected1 = try await readable(postgres, "bob")
                #expect(granted.rows == expected1, "the grant's frame holds all of Garden's todos")
                #expect(Set(granted.rows.map { $0[0] }).isSuperset(of: ["5", "6", "7"]))

                try await postgres.psql("DELETE FROM members WHERE project_id = 2 AND user_id = 'bob'")
                let revoked = try await bob.nextFrame("the revoke")
                #expect(revoked.changeset?.deletes.count == 3 && revoked.changeset?.inserts.isEmpty == true, "\(String(describing: revoked.changeset))")
                let expected2 = try await readable(postgres, "bob")
                #expect(revoked.rows == expected2, "the revoke's frame takes all of Garden's todos")

                // A Garden todo changes (nothing for bob), then one of his own (his next frame).
                try await postgres.psql("UPDATE todos SET title = 'Fix the gate' WHERE id = 6")
                try await postgres.psql("UPDATE todos SET title = 'Tune the bass' WHERE id = 9")
                let later = try await bob.nextFrame("his own todo's change")
                #expect(later.changeset?.updates.count == 1 && later.changeset?.inserts.isEmpty == true, "\(String(describing: later.changeset))")
                #expect(later.rows.contains { $0[0] == "9" && $0[3] == "Tune the bass" }, "the next frame bob gets is his own todo's")
                #expect(!later.rows.contains { ["5", "6", "7"].contains($0[0]) })

                #expect(try await checkFrames(bob, history) == 0)
            }
        }
    }

    /// A todo whose project changes moves between users' results in the frame of that
    /// transaction: the socket that loses it and the one that gains it get it at the same
    /// position, which is the transaction's commit.
    @Test func aTodoChangingProjectMovesBetweenUsersInItsTransactionsFrame() async throws {
        try await withTeam { postgres, node, history in
            try await withSockets { sockets in
                let alice = Reader("alice", try await sockets.open(node.url))
                let bob = Reader("bob", try await sockets.open(node.url))
                let carol = Reader("carol", try await sockets.open(node.url))
                for reader in [alice, bob, carol] { try await reader.subscribe(node) }
                try await postgres.psql("INSERT INTO members(project_id, user_id) VALUES (3, 'carol')")
                try await carol.until(try await readable(postgres, "carol"), "carol's grant to Band")
                #expect(carol.shown.map { $0[0] } == ["8", "9", "10"])

                // Alice's todo 1 leaves Launch (bob's too) for Garden (hers alone).
                try await postgres.psql("UPDATE todos SET project_id = 2 WHERE id = 1")
                let lost = try await bob.nextFrame("todo 1 leaving Launch")
                let kept = try await alice.nextFrame("todo 1 moving to Garden")
                let expected3 = try await readable(postgres, "bob")
                #expect(lost.changeset?.deletes.count == 1 && lost.rows == expected3)
                let expected4 = try await readable(postgres, "alice")
                #expect(kept.changeset?.updates.count == 1 && kept.rows == expected4)
                #expect(lost.lsn == kept.lsn, "one transaction, one position")

                // Bob's todo 8 leaves Band (carol's too) for Launch (alice's too): carol loses it,
                // alice gains it, bob keeps it (his own) — all at one position.
                try await postgres.psql("UPDATE todos SET project_id = 1 WHERE id = 8")
                let gained = try await alice.nextFrame("todo 8 arriving in Launch")
                let left = try await carol.nextFrame("todo 8 leaving Band")
                let moved = try await bob.nextFrame("todo 8 changing project")
                let expected5 = try await readable(postgres, "alice")
                #expect(gained.changeset?.inserts.count == 1 && gained.rows == expected5)
                let expected6 = try await readable(postgres, "carol")
                #expect(left.changeset?.deletes.count == 1 && left.rows == expected6)
                let expected7 = try await readable(postgres, "bob")
                #expect(moved.changeset?.updates.count == 1 && moved.rows == expected7)
                #expect(gained.lsn == left.lsn && left.lsn == moved.lsn)

                try await history.catchUp()
                #expect(history.commits.contains { $0.lsn.description == gained.lsn }, "the frame stands at the transaction's commit")
                for reader in [alice, bob, carol] { #expect(try await checkFrames(reader, history) == 0) }
            }
        }
    }

    /// One transaction that grants, revokes, moves and inserts arrives whole, in one frame per
    /// socket, all at its position.
    @Test func aTransactionArrivesWholeInOneFrame() async throws {
        try await withTeam { postgres, node, history in
            try await withSockets { sockets in
                let readers = [Reader("alice", try await sockets.open(node.url)), Reader("bob", try await sockets.open(node.url)),
                               Reader("carol", try await sockets.open(node.url))]
                for reader in readers { try await reader.subscribe(node) }
                try await postgres.psql("""
                    BEGIN;
                    INSERT INTO members(project_id, user_id) VALUES (1, 'carol');
                    DELETE FROM members WHERE project_id = 1 AND user_id = 'bob';
                    UPDATE todos SET project_id = 1 WHERE id = 9;
                    INSERT INTO todos VALUES (11, 1, 'alice', 'Send the invitations', false, 5);
                    COMMIT;
                    """)
                var positions = Set<String>()
                for reader in readers {
                    let frame = try await reader.nextFrame("the transaction")
                    let expected8 = try await readable(postgres, reader.user)
                    #expect(frame.rows == expected8, "\(reader.user) gets the whole transaction in one frame")
                    positions.insert(frame.lsn)
                }
                #expect(positions.count == 1)
                // carol: all of Launch, todo 9 and 11 among them; bob: his own two of Launch and todo 9.
                #expect(readers[2].shown.map { $0[0] } == ["1", "2", "3", "4", "9", "11"])
                #expect(readers[1].shown.map { $0[0] } == ["2", "4", "8", "9", "10"])
                for reader in readers { #expect(try await checkFrames(reader, history) == 0) }
            }
        }
    }

    /// Writes through the client protocol under the membership write rule: bob (a member of
    /// Launch) may change alice's Launch todo; carol (a member of nothing) may not, nor put a
    /// todo of alice's into Launch. Her own todo is hers to write (the rule's owner half).
    @Test func aMembersWriteIsAcceptedAndANonMembersRefused() async throws {
        try await withTeam { postgres, node, _ in
            try await withSockets { sockets in
                let bob = try await sockets.open(node.url)
                _ = try await bob.hello(try node.token("bob"), client: "")
                let accepted = try await bob.push([Mutation(id: 1, ops: [
                    MutationOp(.patch, table: "todos", values: ["id": .integer(1), "done": .bool(true)]),
                ])])
                #expect(accepted.map(\.status) == [.applied], "\(accepted)")

                let carol = try await sockets.open(node.url)
                _ = try await carol.hello(try node.token("carol"), client: "")
                let refused = try await carol.push([
                    Mutation(id: 1, ops: [MutationOp(.patch, table: "todos", values: ["id": .integer(1), "title": .text("mine now")])]),
                    Mutation(id: 2, ops: [MutationOp(.put, table: "todos", values: [
                        "id": .integer(20), "project_id": .integer(1), "owner": .text("alice"), "title": .text("planted"),
                        "done": .bool(false), "rank": .integer(9)])]),
                    Mutation(id: 3, ops: [MutationOp(.put, table: "todos", values: [
                        "id": .integer(21), "project_id": .integer(1), "owner": .text("carol"), "title": .text("her own"),
                        "done": .bool(false), "rank": .integer(9)])]),
                ])
                #expect(refused.map(\.status) == [.rejected, .rejected, .applied], "\(refused)")
                #expect(refused.prefix(2).allSatisfy { $0.code == "write_rule" }, "\(refused)")
                #expect(try await postgres.rows("SELECT id, title, done FROM todos WHERE id IN (1, 20, 21) ORDER BY id")
                        == ["1|Write the announcement|t", "21|her own|f"])

                // bob's frame shows his write (the node's own replica, by the rule).
                let reader = Reader("bob", try await sockets.open(node.url))
                try await reader.subscribe(node)
                try await reader.until(try await readable(postgres, "bob"), "bob's rows with his write and carol's todo")
                #expect(reader.shown.contains { $0[0] == "1" && $0[4] == "t" } && reader.shown.contains { $0[0] == "21" })
            }
        }
    }

    /// The todos of the projects u1 is a member of: `exists` over members.
    static let u1Shares = QueryDescription(
        table: "todos",
        filter: .exists(ExistsDescription(table: "members", on: ["project_id": "project_id"],
                                          filter: .compare(column: "user_id", op: .equal, value: .text("u1")))),
        order: [OrderDescription(column: "id")])

    /// pgbench runs a relational workload — memberships granted and revoked, todos changing
    /// project, todos edited, several of these in one transaction — beside four users'
    /// subscriptions (and, for each user, `exists` over members). Once it ends every user's rows
    /// equal the rule on Postgres, and every frame any of them received held exactly what that
    /// user could read at the frame's position (``TeamHistory``): no row they could not read
    /// there, nothing missing.
    @Test func pgbenchsRelationalWorkloadBesideFourUsers() async throws {
        let users = ["u1", "u2", "u3", "u4"]
        try await withTeam(seed: TeamFixture.pgbenchSeed) { postgres, node, history in
            let scripts = try TemporaryDirectory()
            let workload: [(name: String, weight: Int, sql: String)] = [
                ("grant", 3, "INSERT INTO members(project_id, user_id) VALUES (:p, 'u' || :u) ON CONFLICT DO NOTHING;"),
                ("revoke", 3, "DELETE FROM members WHERE project_id = :p AND user_id = 'u' || :u;"),
                ("move", 3, "UPDATE todos SET project_id = :p WHERE id = :t;"),
                ("edit", 3, "UPDATE todos SET title = 'edit ' || :t || ' by ' || :client_id, done = NOT done, rank = :r WHERE id = :t;"),
                ("many", 2, """
                    BEGIN;
                    UPDATE todos SET project_id = :p, rank = :r WHERE id = :t;
                    DELETE FROM members WHERE project_id = :p AND user_id = 'u' || :u;
                    INSERT INTO members(project_id, user_id) VALUES (1 + :p % 6, 'u' || :u) ON CONFLICT DO NOTHING;
                    COMMIT;
                    """),
            ]
            let arguments = try TeamFixture.pgbenchArguments(workload, transactions: 120, in: scripts)
            try await withSockets { sockets in
                var readers: [Reader] = []
                for user in users {
                    let reader = Reader(user, try await sockets.open(node.url))
                    try await reader.subscribe(node)
                    readers.append(reader)
                }
                // And on sockets of their own, `exists` over a related table: the todos of the
                // projects u1 is a member of (members' read rule applies: u1's memberships the
                // subscriber shares).
                var sharers: [Reader] = []
                for user in users {
                    let reader = Reader(user, try await sockets.open(node.url), query: Self.u1Shares) { state, user in
                        let shared = state.memberships(of: "u1").intersection(state.memberships(of: user))
                        return state.readableTodos(of: user, columns: RelationalSyncTests.columns).filter { shared.contains($0[1]) }
                    }
                    try await reader.subscribe(node)
                    sharers.append(reader)
                }
                // The sockets take every frame as it comes (a task each reads them into a buffer);
                // they are read here once pgbench ended.
                let membership = "SELECT project_id || ':' || user_id FROM members ORDER BY 1"
                let before = try await postgres.rows(membership)
                _ = try await postgres.pgbench(arguments)
                // The workload moved memberships (how many remain is chance: grants and revokes
                // come as often).
                #expect(try await postgres.rows(membership) != before, "pgbench granted or revoked memberships")
                for reader in readers {
                    try await reader.until(try await readable(postgres, reader.user), "\(reader.user)'s rows to equal Postgres's once pgbench ended")
                }
                for reader in sharers {
                    let sql = TeamFixture.readableTodosSQL(reader.user).replacingOccurrences(of: " ORDER BY id", with: "")
                    let expected = try await postgres.rows("SELECT * FROM (\(sql)) AS readable WHERE EXISTS (SELECT 1 FROM members m "
                        + "WHERE m.project_id = readable.project_id AND m.user_id = 'u1' "
                        + "AND m.project_id IN (SELECT project_id FROM members WHERE user_id = '\(reader.user)')) ORDER BY id")
                    try await reader.until(expected.map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) },
                                           "\(reader.user)'s todos shared with u1 to equal Postgres's once pgbench ended")
                }
                var leaked = 0
                for reader in readers + sharers { leaked += try await checkFrames(reader, history) }
                #expect(leaked == 0)
                let frames = readers.map { $0.frames.count - 1 }
                #expect(frames.reduce(0, +) > 100, "\(frames) frames")
                let shared = sharers.map { $0.frames.count - 1 }
                #expect(shared.reduce(0, +) > 20, "\(shared) frames of todos shared with u1")
            }
        }
    }
}
#endif
