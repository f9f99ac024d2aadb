#if Sync
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ripple
import RippleDiff
import RippleDiffTesting
import RippleSync
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// A subscription's included rows in the local store, and a to-many include as a sectioned list
/// read from it, against a scripted server: a model of projects, their todos, and users computes
/// the tree a node would send (with RippleSync's own wire constructors) and its frames are handed
/// to the client as if they came on its connection.
@Suite(.timeLimit(.minutes(10)))
struct IncludedRowsTests {
    // MARK: The scripted server

    /// Projects (ordered by name), each with its owner (to-one) and its first three todos by rank
    /// (to-many), each todo with its assignee (to-one inside the to-many).
    struct Server {
        var projects: [Int64: (name: String, owner: Int64?)] = [:]
        var todos: [Int64: (project: Int64, title: String, rank: Int64, assignee: Int64?)] = [:]
        var users: [Int64: String] = [:]
        var position = 0x100

        static let limit = 3
        static let query = QueryDescription(table: "projects", order: [OrderDescription(column: "name")])
            .including("owner", .row(of: "users", on: ["owner_id": "id"]))
            .including("todos", IncludeDescription.rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")],
                                                        limit: limit)
                .including("assignee", .row(of: "users", on: ["assignee": "id"])))
        static let projectColumns = ["id", "name", "owner_id"]
        static let todoColumns = ["id", "project_id", "title", "rank", "assignee"]
        static let userColumns = ["id", "name"]

        /// What the subscription holds.
        struct Tree: Equatable {
            var root: [[WireValue]] = []
            var owner: [[WireValue]] = []
            var sections: [[[WireValue]]] = []
            var assignee: [[WireValue]] = []
        }

        static func value(_ integer: Int64?) -> WireValue { integer.map { .integer($0) } ?? .null }

        func tree() -> Tree {
            var tree = Tree()
            let ordered = projects.sorted { ($0.value.name, $0.key) < ($1.value.name, $1.key) }
            tree.root = ordered.map { [.integer($0.key), .text($0.value.name), Self.value($0.value.owner)] }
            tree.sections = ordered.map { project in
                todos.filter { $0.value.project == project.key }.sorted { ($0.value.rank, $0.key) < ($1.value.rank, $1.key) }
                    .prefix(Self.limit)
                    .map { [.integer($0.key), .integer($0.value.project), .text($0.value.title), .integer($0.value.rank), Self.value($0.value.assignee)] }
            }
            func referenced(_ ids: [WireValue]) -> [[WireValue]] {
                Set(ids.compactMap { value -> Int64? in if case .integer(let id) = value { id } else { nil } })
                    .filter { users[$0] != nil }.sorted().map { [.integer($0), .text(users[$0]!)] }
            }
            tree.owner = referenced(tree.root.map { $0[2] })
            tree.assignee = referenced(tree.sections.flatMap { $0.map { $0[4] } })
            return tree
        }

        mutating func nextLSN() -> String {
            position += 0x10
            return "0/" + String(position, radix: 16, uppercase: true)
        }

        static func snapshot(_ tree: Tree) -> WireSnapshot {
            WireSnapshot(basis: "b1", columns: projectColumns, types: ["int8", "text", "int8"], key: [0], rows: tree.root, included: [
                "owner": WireIncludedSnapshot(columns: userColumns, types: ["int8", "text"], key: [0], rows: tree.owner),
                "todos": WireIncludedSnapshot(columns: todoColumns, types: ["int8", "int8", "text", "int8", "int8"], key: [0],
                                              rows: tree.sections.flatMap { $0 }, counts: tree.sections.map(\.count)),
                "todos.assignee": WireIncludedSnapshot(columns: userColumns, types: ["int8", "text"], key: [0], rows: tree.assignee),
            ])
        }

        /// The changeset from `old` to `new`, as a node makes it.
        static func changeset(from old: Tree, to new: Tree) -> WireChangeset {
            let root = Changeset(from: old.root, to: new.root, identifiedBy: { [$0[0]] }, contentEqual: ==)
            var changeset = WireChangeset(root, from: old.root, to: new.root)
            var included: [String: WireIncludedChange] = [:]
            let owner = WireKeyedChange(from: old.owner, to: new.owner, key: [0])
            if !owner.isEmpty { included["owner"] = .keyed(owner) }
            let todos = WireSectionedChangeset(from: old.sections, parents: old.root.map { [$0[0]] },
                                               to: new.sections, parents: new.root.map { [$0[0]] }, key: [0])
            if !todos.isEmpty { included["todos"] = .sectioned(todos) }
            let assignee = WireKeyedChange(from: old.assignee, to: new.assignee, key: [0])
            if !assignee.isEmpty { included["todos.assignee"] = .keyed(assignee) }
            changeset.included = included.isEmpty ? nil : included
            return changeset
        }

        static func frame(lsn: String, snapshots: [String: WireSnapshot] = [:], changesets: [String: WireChangeset] = [:]) -> String {
            String(decoding: ServerMessage.changes(lsn: lsn, snapshots: snapshots, changesets: changesets).json, as: UTF8.self)
        }

        /// Three projects with owners, todos in each, users.
        static func fixture() -> Server {
            var server = Server()
            server.users = [1: "ann", 2: "bob", 3: "cy", 4: "dee"]
            server.projects = [1: ("Alpha", 1), 2: ("Beta", 2), 3: ("Gamma", 1)]
            server.todos = [
                10: (1, "a1", 1, 3), 11: (1, "a2", 2, nil), 12: (1, "a3", 3, 4),
                20: (2, "b1", 1, 3),
                30: (3, "c1", 5, nil), 31: (3, "c2", 6, 2),
            ]
            return server
        }
    }

    // MARK: Helpers

    /// A started client whose connection never opens (its address refuses), and its store: the
    /// test hands it frames with `receive(frame:)`.
    static func withScriptedClient(_ body: (SyncClient, Store) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("device.sqlite"))
        let client = SyncClient(url: "ws://127.0.0.1:\(try closedPort())/sync", store: store) { "a token" }
        await client.setBackoff(min: .seconds(60), max: .seconds(60))
        try await withStarted(client) { try await body(client, store) }
    }

    /// A local port nothing listens on.
    static func closedPort() throws -> Int {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        try #require(bound)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A local table's rows by key, values as text.
    static func localRows(_ table: String, _ store: Store) throws -> [[SQLValue]] {
        try store.read { db in
            guard try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = ?", [table], as: Int.self) == 1 else { return [] }
            let columns = switch table {
            case "projects": Server.projectColumns
            case "todos": Server.todoColumns
            default: Server.userColumns
            }
            return try db.fetchAll("SELECT \(columns.joined(separator: ", ")) FROM \(table) ORDER BY id").map(\.values)
        }
    }

    static func local(_ value: WireValue) -> SQLValue {
        switch value {
        case .integer(let integer): .integer(integer)
        case .text(let text): .text(text)
        case .null: .null
        case .bool(let bool): .integer(bool ? 1 : 0)
        case .real(let real): .real(real)
        }
    }

    /// The rows the local tables should hold for `trees` (of subscriptions holding them) and
    /// `extra` rows of other subscriptions.
    static func expectLocalTables(_ store: Store, _ tree: Server.Tree, extraTodos: [[WireValue]] = [],
                                  sourceLocation: SourceLocation = #_sourceLocation) throws {
        func byID(_ rows: [[WireValue]]) -> [[SQLValue]] {
            var seen: [WireValue: [WireValue]] = [:]
            for row in rows { seen[row[0]] = row }
            return seen.values.sorted { a, b in
                if case .integer(let x) = a[0], case .integer(let y) = b[0] { return x < y }
                return false
            }.map { $0.map(local) }
        }
        #expect(try localRows("projects", store) == byID(tree.root), sourceLocation: sourceLocation)
        #expect(try localRows("todos", store) == byID(tree.sections.flatMap { $0 } + extraTodos), sourceLocation: sourceLocation)
        #expect(try localRows("users", store) == byID(tree.owner + tree.assignee), sourceLocation: sourceLocation)
    }

    /// The sections a sectioned list of `tree` shows.
    static func sections(_ tree: Server.Tree) -> [ListSection<SyncedRow, SyncedRow>] {
        zip(tree.root, tree.sections).map { project, todos in
            ListSection(model: SyncedRow(columns: Server.projectColumns, values: project.map(local), key: [local(project[0])]),
                        items: todos.map { SyncedRow(columns: Server.todoColumns, values: $0.map(local), key: [local($0[0])]) })
        }
    }

    /// Iterates `list` in a task of its own, handing each event on; each changeset is performed
    /// on a `SectionedListModel`, which must accept it and show the event's sections.
    final class Collector: Sendable {
        let events: AsyncStream<SectionedListEvent>
        let task: Task<Void, Never>
        let failures = Locked<[String]>([])

        init(_ list: SectionedLiveList) {
            let (events, sink) = AsyncStream<SectionedListEvent>.makeStream()
            self.events = events
            let failures = self.failures
            task = Task {
                var model = SectionedListModel<SyncedRow, SyncedRow>(sections: [])
                do {
                    for try await event in list {
                        do {
                            try model.apply(event.changeset, dataSource: event.sections)
                        } catch {
                            failures.withLock { $0.append("\(error) for \(event.changeset)") }
                        }
                        sink.yield(event)
                    }
                } catch {
                    failures.withLock { $0.append("the list failed: \(error)") }
                }
                sink.finish()
            }
        }

        func next(_ what: String) async throws -> SectionedListEvent {
            let event = try await Wait.next(events, what)
            return try #require(event, "the list ended while waiting for \(what)")
        }

        deinit { task.cancel() }
    }

    // MARK: Tests

    /// A snapshot with to-one and to-many includes (nested too): the local tables hold exactly
    /// the tree's rows; the sectioned list shows its sections.
    @Test func aSnapshotsIncludedRowsFillTheirLocalTables() async throws {
        try await Self.withScriptedClient { client, store in
            var server = Server.fixture()
            try await client.subscribe("p", Server.query)
            let list = try await client.sectionedList(of: "p", include: "todos")
            let collector = Collector(list)
            let tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), snapshots: ["p": Server.snapshot(tree)]))
            try Self.expectLocalTables(store, tree)
            #expect(await client.includedRows(of: "p", include: "todos")?.counts == [3, 1, 2])
            #expect(await client.includedRows(of: "p", include: "todos.assignee")?.rows.count == 3)
            let first = try await collector.next("the list's first event")
            #expect(first.sections == Self.sections(tree))
            // The app's own query joins the included tables.
            let joined = try store.read { db in
                try db.fetchAll("""
                    SELECT t.title, p.name AS project, u.name AS assignee FROM todos t JOIN projects p ON p.id = t.project_id
                    LEFT JOIN users u ON u.id = t.assignee ORDER BY t.id
                    """).map { try "\($0.value("title", as: String.self))@\($0.value("project", as: String.self))" }
            }
            #expect(joined == ["a1@Alpha", "a2@Alpha", "a3@Alpha", "b1@Beta", "c1@Gamma", "c2@Gamma"])
            #expect(collector.failures.withLock { $0 }.isEmpty)
        }
    }

    /// A frame that moves a todo to another project: the local tables change in one write (the
    /// app's live query over a join fires once), and the sectioned list's event is one move.
    @Test func aChildMovedToAnotherParentIsOneWriteAndOneMove() async throws {
        try await Self.withScriptedClient { client, store in
            var server = Server.fixture()
            try await client.subscribe("p", Server.query)
            let collector = Collector(try await client.sectionedList(of: "p", include: "todos"))
            var tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), snapshots: ["p": Server.snapshot(tree)]))
            _ = try await collector.next("the list's first event")
            let joined = store.liveQuery(sql: "SELECT t.id, t.title, p.name FROM todos t JOIN projects p ON p.id = t.project_id ORDER BY t.id",
                                         identity: "id")
            let seen = Locked<[[Row]]>([])
            let subscription = joined.subscribe(on: .immediate) { event in seen.withLock { $0.append(event.snapshot) } }
            defer { subscription.cancel() }
            #expect(seen.withLock { $0.count } == 1)

            server.todos[11]!.project = 2
            let old = tree
            tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), changesets: ["p": Server.changeset(from: old, to: tree)]))
            try Self.expectLocalTables(store, tree)
            #expect(seen.withLock { $0.count } == 2, "one event of the join for the frame")
            #expect(seen.withLock { $0.last }?.first { $0["id"] == .integer(11) }?["name"] == .text("Beta"))
            let event = try await collector.next("the move's event")
            #expect(event.sections == Self.sections(tree))
            #expect(event.changeset.itemMoves.count == 1)
            #expect(event.changeset.itemMoves.map { [$0.old, $0.new] } == [[ItemPath(section: 0, item: 1), ItemPath(section: 1, item: 1)]])
            #expect(event.changeset.itemDeletes.isEmpty && event.changeset.itemInserts.isEmpty && event.changeset.sections.isEmpty)
            #expect(collector.failures.withLock { $0 }.isEmpty)
        }
    }

    /// A root row deleted takes its included rows with it, except those another subscription
    /// holds; unsubscribing releases every part of the tree.
    @Test func aDeletedRootRowAndAnUnsubscribeReleaseTheirIncludedRows() async throws {
        try await Self.withScriptedClient { client, store in
            var server = Server.fixture()
            try await client.subscribe("p", Server.query)
            // Another subscription holds todo 10 (of project Alpha) and user 1.
            try await client.subscribe("mine", QueryDescription(table: "todos"))
            let mine = WireSnapshot(basis: "b2", columns: Server.todoColumns, types: ["int8", "int8", "text", "int8", "int8"], key: [0],
                                    rows: [[.integer(10), .integer(1), .text("a1"), .integer(1), .integer(3)]])
            var tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), snapshots: ["p": Server.snapshot(tree), "mine": mine]))
            try Self.expectLocalTables(store, tree)

            server.projects[1] = nil
            let old = tree
            tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), changesets: ["p": Server.changeset(from: old, to: tree)]))
            try Self.expectLocalTables(store, tree, extraTodos: mine.rows)
            #expect(try Self.localRows("todos", store).map { $0[0] } == [.integer(10), .integer(20), .integer(30), .integer(31)])
            // User 4 (assignee of a3 only) left; user 1 still owns Gamma.
            #expect(try Self.localRows("users", store).map { $0[0] } == [.integer(1), .integer(2), .integer(3)])

            try await client.unsubscribe("p")
            #expect(try Self.localRows("projects", store).isEmpty)
            #expect(try Self.localRows("users", store).isEmpty)
            #expect(try Self.localRows("todos", store).map { $0[0] } == [.integer(10)])
            let holders = try store.read { db in
                try db.fetchAll("SELECT DISTINCT subscription FROM ripple_sync_holds ORDER BY 1").map { try $0.value("subscription", as: String.self) }
            }
            #expect(holders == ["mine"])
        }
    }

    /// A changeset that does not fit the tree (an include's change at a path beyond its
    /// sections): the client subscribes afresh, and the next snapshot replaces every part.
    @Test func aChangeThatDoesNotFitStartsTheTreeAfresh() async throws {
        try await Self.withScriptedClient { client, store in
            var server = Server.fixture()
            try await client.subscribe("p", Server.query)
            let tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), snapshots: ["p": Server.snapshot(tree)]))
            let misfit = WireChangeset(included: ["todos": .sectioned(WireSectionedChangeset(deletes: [WirePath(section: 9, item: 0)]))])
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), changesets: ["p": misfit]))
            #expect(await client.rows(of: "p") == nil, "the subscription waits for a new snapshot")
            // The new snapshot: project Beta gone, and no `todos.assignee` part any more.
            server.projects[2] = nil
            var next = server.tree()
            next.assignee = []
            var snapshot = Server.snapshot(next)
            snapshot.included?["todos.assignee"] = nil
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), snapshots: ["p": snapshot]))
            try Self.expectLocalTables(store, next)
            #expect(await client.includedRows(of: "p", include: "todos.assignee") == nil)
        }
    }

    /// An offline write that moves a todo to another project shows at once as one move; the
    /// server's frame that contains it (after the push's result) changes nothing on screen, and
    /// the todo's project never goes back and forth in the local store.
    @Test func anOfflineMoveShowsAtOnceAndStaysWithoutFlicker() async throws {
        try await Self.withScriptedClient { client, store in
            var server = Server.fixture()
            try await client.subscribe("p", Server.query)
            let collector = Collector(try await client.sectionedList(of: "p", include: "todos"))
            var tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), snapshots: ["p": Server.snapshot(tree)]))
            _ = try await collector.next("the list's first event")
            let projectOf11 = store.liveQuery(sql: "SELECT id, project_id FROM todos WHERE id = 11", identity: "id")
            let seen = Locked<[SQLValue?]>([])
            let subscription = projectOf11.subscribe(on: .immediate) { event in seen.withLock { $0.append(event.snapshot.first?["project_id"]) } }
            defer { subscription.cancel() }

            try store.write { db in try db.execute("UPDATE todos SET project_id = 2 WHERE id = 11") }
            let local = try await collector.next("the local move's event")
            #expect(local.origin != .sync)
            #expect(local.changeset.itemMoves.map { [$0.old, $0.new] } == [[ItemPath(section: 0, item: 1), ItemPath(section: 1, item: 1)]])
            #expect(local.changeset.itemDeletes.isEmpty && local.changeset.itemInserts.isEmpty)
            #expect(try await client.pendingMutations() == 1)

            // The node applied it: its result, then the frame that contains it.
            server.todos[11]!.project = 2
            let old = tree
            tree = server.tree()
            let lsn = server.nextLSN()
            await client.receive(frame: String(decoding: ServerMessage.pushed(results: [MutationResult(id: 1, status: .applied, lsn: lsn)]).json,
                                               as: UTF8.self))
            await client.receive(frame: Server.frame(lsn: lsn, changesets: ["p": Server.changeset(from: old, to: tree)]))
            try Self.expectLocalTables(store, tree)
            try await Wait.until("the mutation to leave the outbox") { try await client.pendingMutations() == 0 }
            // A later frame (another todo's title): the list's next event is that one alone.
            server.todos[30]!.title = "c1!"
            let before = tree
            tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), changesets: ["p": Server.changeset(from: before, to: tree)]))
            let marker = try await collector.next("the title's event")
            #expect(marker.changeset.itemMoves.isEmpty && marker.changeset.itemUpdates.map(\.new) == [ItemPath(section: 2, item: 0)])
            #expect(marker.sections == Self.sections(tree))
            var distinct: [SQLValue?] = []
            for value in seen.withLock({ $0 }) where distinct.last != value { distinct.append(value) }
            #expect(distinct == [.integer(1), .integer(2)], "the todo's project never went back")
            #expect(collector.failures.withLock { $0 }.isEmpty)
        }
    }

    /// Seeded random frames (todos moved, ranked, added and removed; projects renamed, added and
    /// removed; owners and assignees changed; users renamed): after each frame the local tables
    /// hold exactly the tree and the sectioned list shows its sections, every changeset accepted.
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64]) func randomFramesKeepTheLocalTablesAndTheListEqualToTheTree(seed: UInt64) async throws {
        try await Self.withScriptedClient { client, store in
            var random = SeededGenerator(seed: seed)
            var server = Server.fixture()
            try await client.subscribe("p", Server.query)
            let collector = Collector(try await client.sectionedList(of: "p", include: "todos"))
            var tree = server.tree()
            await client.receive(frame: Server.frame(lsn: server.nextLSN(), snapshots: ["p": Server.snapshot(tree)]))
            var shown = try await collector.next("the list's first event").sections
            var nextID: Int64 = 100
            var (frames, crossMoves) = (0, 0)
            for step in 0..<200 {
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let projects = server.projects.keys.sorted()
                    let todos = server.todos.keys.sorted()
                    let users = server.users.keys.sorted()
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0 where !todos.isEmpty && !projects.isEmpty:
                        server.todos[todos.randomElement(using: &random)!]!.project = projects.randomElement(using: &random)!
                    case 1 where !todos.isEmpty:
                        server.todos[todos.randomElement(using: &random)!]!.rank = Int64.random(in: 0..<8, using: &random)
                    case 2 where !projects.isEmpty:
                        nextID += 1
                        server.todos[nextID] = (projects.randomElement(using: &random)!, "t\(nextID)", Int64.random(in: 0..<8, using: &random),
                                                Bool.random(using: &random) ? users.randomElement(using: &random) : nil)
                    case 3 where !todos.isEmpty:
                        server.todos[todos.randomElement(using: &random)!] = nil
                    case 4 where !projects.isEmpty:
                        server.projects[projects.randomElement(using: &random)!]!.name = ["Alpha", "Beta", "Delta", "Gamma", "Omega"].randomElement(using: &random)!
                    case 5:
                        nextID += 1
                        server.projects[nextID] = ("P\(nextID)", users.randomElement(using: &random))
                    case 6 where projects.count > 1:
                        server.projects[projects.randomElement(using: &random)!] = nil
                    case 7 where !todos.isEmpty:
                        server.todos[todos.randomElement(using: &random)!]!.assignee = Bool.random(using: &random) ? users.randomElement(using: &random) : nil
                    case 8 where !projects.isEmpty:
                        server.projects[projects.randomElement(using: &random)!]!.owner = users.randomElement(using: &random)
                    default:
                        guard let user = users.randomElement(using: &random) else { break }
                        if Int.random(in: 0..<4, using: &random) == 0 {
                            // The user becomes unreadable: the references stay, the row goes.
                            server.users[user] = nil
                        } else {
                            server.users[user] = "u\(Int.random(in: 0..<100, using: &random))"
                        }
                    }
                }
                let old = tree
                tree = server.tree()
                guard tree != old else { continue }
                await client.receive(frame: Server.frame(lsn: server.nextLSN(), changesets: ["p": Server.changeset(from: old, to: tree)]))
                #expect(await client.rows(of: "p") == tree.root, "step \(step): the subscription kept its tree")
                try Self.expectLocalTables(store, tree)
                let expected = Self.sections(tree)
                frames += 1
                if expected != shown {
                    let event = try await collector.next("step \(step)'s event")
                    shown = event.sections
                    #expect(shown == expected, "step \(step)")
                    // A move across sections: an item whose parent changed.
                    crossMoves += event.changeset.itemMoves.filter { $0.old.section != $0.new.section }.count
                }
            }
            #expect(frames > 100 && crossMoves > 3, "the sequence has \(frames) frames and \(crossMoves) moves across sections")
            #expect(collector.failures.withLock { $0 }.isEmpty, "\(collector.failures.withLock { $0 })")
        }
    }
}
#endif
