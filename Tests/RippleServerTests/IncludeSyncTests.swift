#if Sync
import Foundation
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Includes end to end, with a real Postgres, a real node, real sockets and real writers
/// (`psql`, `pgbench`) over ``TeamFixture``'s tables: a user's projects, each with its todos (a
/// sectioned list) and its owner (a to-one include). Every frame a socket receives is checked
/// against Postgres's own account of the position it stands at (``TeamHistory``): no project or
/// todo the user may not read there, nothing missing, each list in order.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: include sync tests skipped"), .timeLimit(.minutes(15)))
struct IncludeSyncTests {
    static let todoColumns = ["id", "project_id", "owner", "title", "done", "rank"]

    /// Each project the user may read, by id, with its todos by rank and its owner.
    static let projects = QueryDescription(
        table: "projects", order: [OrderDescription(column: "id")],
        include: ["todos": .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")]),
                  "owner": .row(of: "users", on: ["owner": "id"])])

    /// A user's socket subscribed to ``projects``: its tree, and every frame that changed it.
    final class TreeReader {
        let user: String
        let socket: TestSocket
        var tree: WireTree?
        var lsn = ""
        var frames: [(lsn: String, tree: WireTree, changeset: WireChangeset?, bytes: Int)] = []

        init(_ user: String, _ socket: TestSocket) { (self.user, self.socket) = (user, socket) }

        func subscribe(_ node: TestNode, _ query: QueryDescription = IncludeSyncTests.projects) async throws {
            _ = try await socket.hello(try node.token(user))
            try await socket.send(.subscribe(id: "p", query: query, resume: nil))
            while tree == nil { try await nextFrame("\(user)'s first result") }
        }

        /// Reads frames until one changes the tree, and returns it.
        @discardableResult
        func nextFrame(_ what: String) async throws -> (lsn: String, tree: WireTree, changeset: WireChangeset?, bytes: Int) {
            while true {
                guard let text = try await socket.nextText() else { throw SyncClientTestError("\(user)'s socket closed waiting for \(what)") }
                let message = try ServerMessage(json: Array(text.utf8))
                switch message {
                case .changes(let lsn, let snapshots, let changesets):
                    self.lsn = lsn
                    if let snapshot = snapshots["p"] {
                        tree = WireTree(snapshot)
                        frames.append((lsn, tree!, nil, text.utf8.count))
                        return frames.last!
                    }
                    if let changeset = changesets["p"] {
                        guard tree != nil else { throw SyncClientTestError("a change before the first result") }
                        try tree!.apply(changeset)
                        frames.append((lsn, tree!, changeset, text.utf8.count))
                        return frames.last!
                    }
                case .error(let code, let text, _):
                    throw SyncClientTestError("\(user): \(code.rawValue): \(text)")
                default:
                    continue
                }
            }
        }

        /// Reads frames until the tree shows `expected`.
        func until(_ expected: Shown, _ what: String) async throws {
            while tree.map(Shown.init) != expected { try await nextFrame(what) }
        }
    }

    /// What a tree of ``projects`` shows, as psql writes rows.
    struct Shown: Equatable, CustomStringConvertible {
        var projects: [String]
        var todos: [[String]]
        var owners: [String]

        init(projects: [String], todos: [[String]], owners: [String]) { (self.projects, self.todos, self.owners) = (projects, todos, owners) }

        init(_ tree: WireTree) {
            projects = tree.rows.map(psqlText)
            todos = (tree.sections(of: "todos") ?? []).map { $0.map(psqlText) }
            owners = (tree.included["owner"]?.rows ?? []).map(psqlText).sorted()
        }

        var description: String { "projects \(projects), todos \(todos), owners \(owners)" }
    }

    /// What Postgres shows `user` now.
    static func expected(_ postgres: ThrowawayPostgres, _ user: String) async throws -> Shown {
        let readable = "id IN (SELECT project_id FROM members WHERE user_id = '\(user)')"
        let projects = try await postgres.rows("SELECT id, name, owner FROM projects WHERE \(readable) ORDER BY id")
        var todos: [[String]] = []
        for project in projects {
            let id = project.split(separator: "|")[0]
            todos.append(try await postgres.rows("""
                SELECT \(TeamFixture.todoColumns) FROM todos WHERE project_id = \(id)
                AND (owner = '\(user)' OR project_id IN (SELECT project_id FROM members WHERE user_id = '\(user)')) ORDER BY rank, id
                """))
        }
        let owners = try await postgres.rows("SELECT id, name FROM users WHERE id IN (SELECT owner FROM projects WHERE \(readable)) ORDER BY id")
        return Shown(projects: projects, todos: todos, owners: owners)
    }

    /// What the history says `user` could read at a position (users are not in it: owners are
    /// not checked per frame, only at the end).
    static func model(_ state: TeamHistory.State, _ user: String) -> (projects: [String], todos: [[String]]) {
        let mine = state.memberships(of: user)
        let projects = state.projects.values.filter { ($0["id"] ?? nil).map(mine.contains) ?? false }
            .sorted { Int64(($0["id"] ?? "") ?? "")! < Int64(($1["id"] ?? "") ?? "")! }
        let readable = state.readableTodos(of: user, columns: todoColumns)
        let todos = projects.map { project in
            readable.filter { $0[1] == (project["id"] ?? "") }
                .sorted { (Int($0[5])!, Int64($0[0])!) < (Int($1[5])!, Int64($1[0])!) }
                .map { $0.joined(separator: "|") }
        }
        return (projects.map { project in ["id", "name", "owner"].map { (project[$0] ?? nil) ?? "" }.joined(separator: "|") }, todos)
    }

    /// Every frame `reader` received holds exactly what its user could read at its position:
    /// returns how many rows it carried that the user could not read there.
    @discardableResult
    func checkFrames(_ reader: TreeReader, _ history: TeamHistory) async throws -> Int {
        try await history.catchUp()
        var leaked = 0
        for frame in reader.frames {
            let state = try #require(history.state(at: frame.lsn), "\(frame.lsn) is a position")
            let shown = Shown(frame.tree)
            let expected = Self.model(state, reader.user)
            let readableTodos = Set(state.readableTodos(of: reader.user, columns: Self.todoColumns).map { $0.joined(separator: "|") })
            let strangers = shown.todos.joined().filter { !readableTodos.contains($0) } + shown.projects.filter { !expected.projects.contains($0) }
            leaked += strangers.count
            #expect(strangers.isEmpty, "\(reader.user)'s frame at \(frame.lsn) carries \(strangers), which they cannot read there")
            #expect(shown.projects == expected.projects && shown.todos == expected.todos,
                    "\(reader.user)'s frame at \(frame.lsn) shows \(shown) where Postgres had \(expected)")
        }
        let positions = reader.frames.compactMap { PGOutput.LSN($0.lsn) }
        #expect(zip(positions, positions.dropFirst()).allSatisfy { $0 < $1 }, "\(reader.user)'s frames come in commit order")
        return leaked
    }

    func withTeam(seed: String = TeamFixture.seed, _ body: (ThrowawayPostgres, TestNode, TeamHistory) async throws -> Void) async throws {
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

    /// A todo moved to another of alice's projects is one frame holding one cross-section move
    /// (and the column that changed), in under 200 bytes; a new todo is one insert; a project
    /// renamed is one root update; alice's tree equals Postgres's answer throughout.
    @Test func aMoveIsOneCrossSectionMoveInOneSmallFrame() async throws {
        try await withTeam { postgres, node, history in
            try await withSocket(node.url) { socket in
                let alice = TreeReader("alice", socket)
                try await alice.subscribe(node)
                #expect(Shown(alice.tree!) == (try await Self.expected(postgres, "alice")))
                #expect(alice.tree?.sections(of: "todos")?.map(\.count) == [4, 3])

                try await postgres.psql("UPDATE todos SET project_id = 2, rank = 0 WHERE id = 2")
                let moved = try await alice.nextFrame("the move")
                guard case .sectioned(let todos)? = moved.changeset?.included?["todos"] else {
                    Issue.record("the move's frame has no sectioned change: \(String(describing: moved.changeset))")
                    return
                }
                #expect(todos.moves.count == 1 && todos.inserts.isEmpty && todos.deletes.isEmpty, "\(todos)")
                #expect(moved.changeset?.deletes.isEmpty == true && moved.changeset?.inserts.isEmpty == true)
                #expect(moved.bytes <= 200, "the move's frame is \(moved.bytes) bytes")
                #expect(Shown(moved.tree) == (try await Self.expected(postgres, "alice")))

                try await postgres.psql("INSERT INTO todos VALUES (11, 1, 'bob', 'Hire a band', false, 9)")
                let inserted = try await alice.nextFrame("the insert")
                if case .sectioned(let todos)? = inserted.changeset?.included?["todos"] {
                    #expect(todos.inserts.map(\.path) == [WirePath(section: 0, item: 3)] && todos.moves.isEmpty)
                } else {
                    Issue.record("the insert's frame has no sectioned change")
                }
                try await postgres.psql("UPDATE projects SET name = 'Big launch' WHERE id = 1")
                let renamed = try await alice.nextFrame("the rename")
                #expect(renamed.changeset?.updates.count == 1 && renamed.changeset?.included == nil, "\(String(describing: renamed.changeset))")
                try await postgres.psql("UPDATE users SET name = 'Alice B.' WHERE id = 'alice'")
                let owner = try await alice.nextFrame("the owner's rename")
                guard case .keyed(let owners)? = owner.changeset?.included?["owner"] else {
                    Issue.record("the owner's rename is not a keyed put: \(String(describing: owner.changeset))")
                    return
                }
                #expect(owners.puts == [[0: .text("alice"), 1: .text("Alice B.")]] && owners.deletes.isEmpty)
                #expect(Shown(owner.tree) == (try await Self.expected(postgres, "alice")))
                #expect(try await checkFrames(alice, history) == 0)
            }
        }
    }

    /// bob loses Launch: one frame removes the project, its todos and (no other project of his
    /// has her as owner) alice as an owner; no later frame carries any of them. Granted again,
    /// all come back in one frame.
    @Test func revokingRemovesAProjectWithEverythingIncludedInOneFrame() async throws {
        try await withTeam { postgres, node, history in
            try await withSocket(node.url) { socket in
                let bob = TreeReader("bob", socket)
                try await bob.subscribe(node)
                #expect(Shown(bob.tree!).projects.count == 2)
                #expect(Shown(bob.tree!).owners == ["alice|Alice", "bob|Bob"])

                try await postgres.psql("DELETE FROM members WHERE project_id = 1 AND user_id = 'bob'")
                let revoked = try await bob.nextFrame("the revoke")
                #expect(revoked.changeset?.deletes == [0])
                #expect(Shown(revoked.tree) == Shown(projects: ["3|Band|bob"], todos: [(try await Self.expected(postgres, "bob")).todos[0]],
                                                      owners: ["bob|Bob"]))
                guard case .keyed(let owners)? = revoked.changeset?.included?["owner"] else {
                    Issue.record("alice is not deleted as an owner in the revoke's frame")
                    return
                }
                #expect(owners.deletes == [[.text("alice")]])
                // Launch's todos change: nothing for bob; then one of his own.
                try await postgres.psql("UPDATE todos SET title = 'Book the hall' WHERE id = 2")
                try await postgres.psql("UPDATE todos SET title = 'Tune the bass' WHERE id = 9")
                let later = try await bob.nextFrame("his own todo's change")
                #expect(!Shown(later.tree).todos.joined().contains { $0.hasPrefix("2|") })
                try await postgres.psql("INSERT INTO members(project_id, user_id) VALUES (1, 'bob')")
                let granted = try await bob.nextFrame("the grant")
                #expect(Shown(granted.tree) == (try await Self.expected(postgres, "bob")))
                #expect(try await checkFrames(bob, history) == 0)
            }
        }
    }

    /// pgbench runs a relational workload beside four users' trees: memberships granted and
    /// revoked, todos changing project and rank, projects renamed and changing owner, several in
    /// one transaction. Once it ends every tree equals Postgres's answer, and every frame held
    /// exactly what its user could read at its position.
    @Test func pgbenchsWorkloadBesideFourUsersTrees() async throws {
        let users = ["u1", "u2", "u3", "u4"]
        try await withTeam(seed: TeamFixture.pgbenchSeed) { postgres, node, history in
            let scripts = try TemporaryDirectory()
            let workload: [(name: String, weight: Int, sql: String)] = [
                ("grant", 3, "INSERT INTO members(project_id, user_id) VALUES (:p, 'u' || :u) ON CONFLICT DO NOTHING;"),
                ("revoke", 3, "DELETE FROM members WHERE project_id = :p AND user_id = 'u' || :u;"),
                ("move", 4, "UPDATE todos SET project_id = :p, rank = :r WHERE id = :t;"),
                ("rank", 3, "UPDATE todos SET rank = :r, title = 'edit ' || :t WHERE id = :t;"),
                ("project", 1, "UPDATE projects SET name = 'renamed ' || :r, owner = 'u' || :u WHERE id = :p;"),
                ("many", 2, """
                    BEGIN;
                    UPDATE todos SET project_id = :p, rank = :r WHERE id = :t;
                    DELETE FROM members WHERE project_id = :p AND user_id = 'u' || :u;
                    INSERT INTO members(project_id, user_id) VALUES (1 + :p % 6, 'u' || :u) ON CONFLICT DO NOTHING;
                    COMMIT;
                    """),
            ]
            let arguments = try TeamFixture.pgbenchArguments(workload, transactions: 100, in: scripts)
            try await withSockets { sockets in
                var readers: [TreeReader] = []
                for user in users {
                    let reader = TreeReader(user, try await sockets.open(node.url))
                    try await reader.subscribe(node)
                    readers.append(reader)
                }
                _ = try await postgres.pgbench(arguments)
                for reader in readers {
                    try await reader.until(try await Self.expected(postgres, reader.user), "\(reader.user)'s tree to equal Postgres's once pgbench ended")
                }
                var leaked = 0
                for reader in readers { leaked += try await checkFrames(reader, history) }
                #expect(leaked == 0)
                let frames = readers.map { $0.frames.count - 1 }
                #expect(frames.reduce(0, +) > 100, "\(frames) frames")
                let moves = readers.flatMap(\.frames).compactMap { frame -> Int? in
                    guard case .sectioned(let todos)? = frame.changeset?.included?["todos"] else { return nil }
                    return todos.moves.count
                }
                #expect(moves.reduce(0, +) > 0, "no frame moved a todo between sections")
            }
        }
    }
}
#endif
