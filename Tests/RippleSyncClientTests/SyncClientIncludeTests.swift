#if Sync
import Foundation
import Ripple
import RippleDiff
import RippleSync
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// Included rows and sectioned lists end to end: a real Postgres, a real node, real sockets, the
/// client's real write path, over ``TeamFixture``'s tables (alice's projects, each with its todos
/// by rank and its owner).
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: client include tests skipped"), .timeLimit(.minutes(15)))
struct SyncClientIncludeTests {
    static let projects = QueryDescription(
        table: "projects", order: [OrderDescription(column: "id")],
        include: ["todos": .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")]),
                  "owner": .row(of: "users", on: ["owner": "id"])])

    /// A table's rows as `id|project_id` (todos) or `id` (others), by id.
    static func local(_ store: Store, _ sql: String) throws -> [String] {
        try store.read { db in
            try db.fetchAll(sql).map { row in
                row.values.map { value in
                    switch value {
                    case .integer(let integer): String(integer)
                    case .text(let text): text
                    default: "\(value)"
                    }
                }.joined(separator: "|")
            }
        }
    }

    /// What a sectioned list shows: each project's id and its todos' ids.
    static func shown(_ sections: [ListSection<SyncedRow, SyncedRow>]) -> [String] {
        sections.map { section in
            "\(section.model["id"].map { "\($0)" } ?? "?"): " + section.items.map { $0["id"].map { "\($0)" } ?? "?" }.joined(separator: ",")
        }
    }

    /// Postgres's answer for alice, as ``shown(_:)`` writes it.
    static func expected(_ postgres: ThrowawayPostgres) async throws -> [String] {
        var out: [String] = []
        for project in try await postgres.rows("SELECT id FROM projects WHERE id IN (SELECT project_id FROM members WHERE user_id = 'alice') ORDER BY id") {
            let todos = try await postgres.rows("SELECT id FROM todos WHERE project_id = \(project) ORDER BY rank, id")
            out.append("\(project): " + todos.joined(separator: ","))
        }
        return out
    }

    /// The local tables hold alice's projects, their todos and their owner; a todo moved in
    /// Postgres is one move of the sectioned list; a todo the app moves through its local store
    /// is one move at once, reaches Postgres, and never moves back.
    @Test func includedRowsAndASectionedListFollowTheServerAndTheAppsWrites() async throws {
        try await withThrowawayPostgres { postgres in
            try await TeamFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: TeamFixture.tables, rules: TeamFixture.rules, directory: directory) { node in
                let store = try Store(path: directory.path("alice.sqlite"))
                let token = try node.token("alice")
                let client = SyncClient(url: node.url, store: store) { token }
                try await withStarted(client) {
                    try await client.subscribe("p", Self.projects)
                    let collector = IncludedRowsTests.Collector(try await client.sectionedList(of: "p", include: "todos"))
                    // A commit of Postgres's after subscribing: the node sends a subscription with includes its
                    // first result once its replica completes a version after the subscribe (on a quiet
                    // database it waits for the next commit).
                    try await postgres.psql("UPDATE users SET name = 'Carol' WHERE id = 'carol'")
                    let first = try await collector.next("the list's first event")
                    #expect(Self.shown(first.sections) == (try await Self.expected(postgres)))
                    #expect(try Self.local(store, "SELECT id FROM projects ORDER BY id") == ["1", "2"])
                    #expect(try Self.local(store, "SELECT id || '|' || project_id FROM todos ORDER BY id")
                            == (try await postgres.rows("SELECT id || '|' || project_id FROM todos WHERE project_id IN (1, 2) ORDER BY id")))
                    #expect(try Self.local(store, "SELECT id FROM users ORDER BY id") == ["alice"])

                    // Postgres moves todo 2 to the garden: one move.
                    try await postgres.psql("UPDATE todos SET project_id = 2 WHERE id = 2")
                    let moved = try await collector.next("the server's move")
                    #expect(moved.origin == .sync)
                    #expect(moved.changeset.itemMoves.count == 1 && moved.changeset.itemDeletes.isEmpty && moved.changeset.itemInserts.isEmpty,
                            "\(moved.changeset)")
                    #expect(Self.shown(moved.sections) == (try await Self.expected(postgres)))

                    // The app moves todo 6 to the launch in its local store: one move at once.
                    let projectOf6 = store.liveQuery(sql: "SELECT id, project_id FROM todos WHERE id = 6", identity: "id")
                    let seen = Locked<[SQLValue?]>([])
                    let subscription = projectOf6.subscribe(on: .immediate) { event in seen.withLock { $0.append(event.snapshot.first?["project_id"]) } }
                    defer { subscription.cancel() }
                    try store.write { db in try db.execute("UPDATE todos SET project_id = 1 WHERE id = 6") }
                    let local = try await collector.next("the app's move")
                    #expect(local.origin != .sync)
                    #expect(local.changeset.itemMoves.count == 1 && local.changeset.itemDeletes.isEmpty && local.changeset.itemInserts.isEmpty,
                            "\(local.changeset)")
                    try await Wait.until("the app's move to reach Postgres and leave the outbox", pausingAtMost: .milliseconds(250)) {
                        guard try await client.pendingMutations() == 0 else { return false }
                        return try await postgres.rows("SELECT project_id FROM todos WHERE id = 6") == ["1"]
                    }
                    #expect(Self.shown(local.sections) == (try await Self.expected(postgres)))

                    // Nothing moved back: the next event is a later change of Postgres's.
                    try await postgres.psql("UPDATE todos SET title = 'Plant basil' WHERE id = 5")
                    let later = try await collector.next("the title's change")
                    #expect(later.changeset.itemMoves.isEmpty && later.changeset.itemUpdates.count == 1, "\(later.changeset)")
                    #expect(Self.shown(later.sections) == (try await Self.expected(postgres)))
                    var distinct: [SQLValue?] = []
                    for value in seen.withLock({ $0 }) where distinct.last != value { distinct.append(value) }
                    #expect(distinct == [.integer(2), .integer(1)], "todo 6's project never went back")

                    // Unsubscribing releases the tree.
                    try await client.unsubscribe("p")
                    #expect(try Self.local(store, "SELECT id FROM projects").isEmpty)
                    #expect(try Self.local(store, "SELECT id FROM todos").isEmpty)
                    #expect(try Self.local(store, "SELECT id FROM users").isEmpty)
                    #expect(collector.failures.withLock { $0 }.isEmpty, "\(collector.failures.withLock { $0 })")
                }
            }
        }
    }
}
#endif
