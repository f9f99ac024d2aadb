import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Time travel: the result of a query as of any version, rebuilt from the change log's
/// before-images, must equal what a live subscriber received at that version.
@Suite struct HistoryTests {
    /// A small deterministic generator (SplitMix64), so that a failing seed can be replayed.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// The snapshot a subscriber held at `version`: the last event at or before it.
    static func expected<Element>(_ events: [LiveQueryEvent<Element>], at version: Int64) -> [Element]? {
        events.last(where: { $0.version <= version })?.snapshot
    }

    static func randomTodo(_ rng: inout SeededGenerator, id: UUID = UUID()) -> Todo {
        Todo(id: id, title: "t\(Int.random(in: 0..<50, using: &rng))", rank: Int.random(in: 0..<20, using: &rng),
             done: Bool.random(using: &rng), tags: Bool.random(using: &rng) ? ["x"] : [],
             due: Bool.random(using: &rng) ? Date(timeIntervalSince1970: Double.random(in: 0..<1e6, using: &rng)) : nil)
    }

    static func randomValue(_ rng: inout SeededGenerator) -> SQLValue {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: .null
        case 1: .integer(Int64.random(in: -5...5, using: &rng))
        case 2: .real(Double.random(in: -1...1, using: &rng))
        case 3: .text("v\"\\\n\(Int.random(in: 0..<5, using: &rng))é")
        default: .blob((0..<Int.random(in: 0..<4, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func timeTravelMatchesWhatLiveSubscribersReceived(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("history.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        try store.write { db in
            try db.execute("CREATE TABLE kv (a TEXT, b INTEGER, v, PRIMARY KEY (a, b)) WITHOUT ROWID")
            try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body)")
            try db.execute("CREATE INDEX notes_by_body ON notes (body)")
        }
        let start = try store.currentVersion()
        let open = todos.filter(Column("done") == false).order(by: Column("rank"))
        let queries = [open, todos.all]
        let subscribers = queries.map { _ in ListViewSubscriber<Todo>() }
        var subscriptions = try zip(queries, subscribers).map { query, subscriber in subscriber.subscribe(to: try query.live()) }
        let kvSQL = "SELECT a || ':' || b AS k, a, b, v FROM kv ORDER BY v, k"
        let notesSQL = "SELECT id, body FROM notes WHERE body IS NOT NULL"
        let rawSubscribers = [ListViewSubscriber<Row>(), ListViewSubscriber<Row>()]
        subscriptions.append(rawSubscribers[0].subscribe(to: store.liveQuery(sql: kvSQL, identity: "k")))
        subscriptions.append(rawSubscribers[1].subscribe(to: store.liveQuery(sql: notesSQL, identity: "id")))
        defer { subscriptions.forEach { $0.cancel() } }

        var rng = SeededGenerator(state: seed)
        var existing: [Todo] = []
        for _ in 0..<60 {
            try store.write { db in
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    switch Int.random(in: 0..<8, using: &rng) {
                    case 0, 1:
                        let todo = Self.randomTodo(&rng)
                        try todos.insert(todo, in: db)
                        existing.append(todo)
                    case 2 where !existing.isEmpty:
                        let index = Int.random(in: existing.indices, using: &rng)
                        existing[index] = Self.randomTodo(&rng, id: existing[index].id)
                        try todos.update(existing[index], in: db)
                    case 3 where !existing.isEmpty:
                        let index = Int.random(in: existing.indices, using: &rng)
                        _ = try todos.delete(id: existing.remove(at: index).id, in: db)
                    case 4:   // inserted and deleted in the same transaction
                        let todo = Self.randomTodo(&rng)
                        try todos.insert(todo, in: db)
                        _ = try todos.delete(id: todo.id, in: db)
                    case 5 where !existing.isEmpty:   // deleted and inserted again
                        let index = Int.random(in: existing.indices, using: &rng)
                        _ = try todos.delete(id: existing[index].id, in: db)
                        existing[index] = Self.randomTodo(&rng, id: existing[index].id)
                        try todos.insert(existing[index], in: db)
                    case 6:
                        let a = "k\(Int.random(in: 0..<3, using: &rng))", b = Int64.random(in: 0..<3, using: &rng)
                        if Bool.random(using: &rng) {
                            try db.execute("INSERT OR REPLACE INTO kv (a, b, v) VALUES (?, ?, ?)", [a, b, Self.randomValue(&rng)])
                        } else {
                            try db.execute("DELETE FROM kv WHERE a = ? AND b = ?", [a, b])
                        }
                    default:
                        let id = Int64.random(in: 0..<6, using: &rng)
                        switch Int.random(in: 0..<3, using: &rng) {
                        case 0: try db.execute("INSERT OR REPLACE INTO notes (id, body) VALUES (?, ?)", [id, Self.randomValue(&rng)])
                        case 1: try db.execute("UPDATE OR REPLACE notes SET id = (id + 3) % 8 WHERE id = ?", [id])
                        default: try db.execute("DELETE FROM notes WHERE id = ?", [id])
                        }
                    }
                }
            }
        }
        let current = try store.currentVersion()
        for subscriber in subscribers { #expect(subscriber.failures.isEmpty, "\(subscriber.failures)") }

        for version in start...current {
            for (query, subscriber) in zip(queries, subscribers) {
                let snapshot = try store.snapshot(of: query, at: version)
                #expect(snapshot == Self.expected(subscriber.events, at: version), "seed \(seed), version \(version)")
            }
            for (sql, identity, subscriber) in [(kvSQL, "k", rawSubscribers[0]), (notesSQL, "id", rawSubscribers[1])] {
                let table = identity == "k" ? "kv" : "notes"
                let steps = try store.history(table: table, sql: sql, identity: identity, from: version, to: version)
                #expect(steps.count == 1)
                #expect(steps.first?.snapshot == Self.expected(subscriber.events, at: version),
                        "seed \(seed), \(table) at version \(version)")
            }
        }

        // The history over the whole range: each changeset applies, each step is what was received.
        for (query, subscriber) in zip(queries, subscribers) {
            let steps = try store.history(of: query, from: start, to: current)
            var list: [Todo] = []
            for step in steps {
                #expect(step.changeset.apply(to: list, using: step.snapshot) == step.snapshot)
                #expect(step.snapshot == Self.expected(subscriber.events, at: step.version))
                list = step.snapshot
            }
            let changed = subscriber.events.dropFirst().filter { !$0.changeset.isEmpty }.map(\.version)
            #expect(steps.dropFirst().map(\.version) == changed, "seed \(seed)")
        }
    }

    @Test func versionRetentionRefusesPrunedVersions() throws {
        let directory = try TemporaryDirectory()
        var configuration = Store.Configuration()
        configuration.changeLogRetention = .versions(5)
        let store = try Store(path: directory.path("retention.sqlite"), configuration: configuration)
        let todos = try store.collection("todos", of: Todo.self)
        var ids: [UUID] = []
        for rank in 0..<20 {
            let todo = Todo.make(rank)
            try todos.insert(todo)
            ids.append(todo.id)
        }
        let current = try store.currentVersion()
        let oldest = current - 5
        let atOldest = try store.snapshot(of: todos.all, at: oldest)
        #expect(atOldest.count == 15)
        #expect(try store.snapshot(of: todos.all, at: current).count == 20)
        let pruned = #expect(throws: StoreError.self) { try store.snapshot(of: todos.all, at: oldest - 1) }
        #expect(pruned?.kind == .history)
        let future = #expect(throws: StoreError.self) { try store.snapshot(of: todos.all, at: current + 1) }
        #expect(future?.kind == .history)
    }

    @Test func durationRetentionRefusesVersionsOutsideTheWindow() throws {
        let directory = try TemporaryDirectory()
        var configuration = Store.Configuration()
        configuration.changeLogRetention = .duration(60)
        let store = try Store(path: directory.path("window.sqlite"), configuration: configuration)
        let todos = try store.collection("todos", of: Todo.self)
        for rank in 0..<5 { try todos.insert(Todo.make(rank)) }
        let early = try store.currentVersion()
        #expect(try store.snapshot(of: todos.all, at: early - 2).count == 3)
        // Two minutes pass (for the store's commit times; no waiting): the next commit prunes
        // every version committed before its window.
        try store.write { db in try db.execute("UPDATE ripple_versions SET committed_at = committed_at - 120") }
        #expect(try store.currentVersion() == early, "the store's own tables take no version")
        try todos.insert(Todo.make(5))
        let late = try store.currentVersion()
        // The last version before the window is still answerable: nothing after it was pruned.
        #expect(try store.snapshot(of: todos.all, at: early).count == 5)
        #expect(try store.snapshot(of: todos.all, at: late).count == 6)
        let error = #expect(throws: StoreError.self) { try store.snapshot(of: todos.all, at: early - 1) }
        #expect(error?.kind == .history)
    }

    @Test func aSchemaChangeCannotBeCrossed() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("schema.sqlite"))
        try store.write { db in try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)") }
        try store.write { db in try db.execute("INSERT INTO notes (body) VALUES ('a'), ('b')") }
        let beforeAlter = try store.currentVersion()
        try store.write { db in
            try db.execute("UPDATE notes SET body = 'c' WHERE id = 1")
            try db.execute("ALTER TABLE notes ADD COLUMN extra TEXT")
        }
        let altered = try store.currentVersion()
        try store.write { db in try db.execute("DELETE FROM notes WHERE id = 2") }
        let sql = "SELECT id, body FROM notes ORDER BY id"
        let steps = try store.history(table: "notes", sql: sql, identity: "id", from: altered, to: altered + 1)
        #expect(steps.map(\.version) == [altered, altered + 1])
        #expect(steps.map(\.snapshot.count) == [2, 1])
        let error = #expect(throws: StoreError.self) {
            try store.history(table: "notes", sql: sql, identity: "id", from: beforeAlter, to: altered)
        }
        #expect(error?.kind == .history)
    }

    /// History rewinds a copy of the table in `temp`, which the query reads by the table's bare
    /// name: SQL that names `main.notes` would read today's rows at every version, so it is
    /// refused, saying why (found by the capture fuzzer); the bare name is rewound.
    @Test func rawSQLNamingTheMainTableIsRefusedByHistory() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("qualified.sqlite"))
        try store.write { db in try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)") }
        let empty = try store.currentVersion()
        try store.write { db in try db.execute("INSERT INTO notes (body) VALUES ('a')") }
        let error = #expect(throws: StoreError.self) {
            try store.history(table: "notes", sql: "SELECT id, body FROM main.notes ORDER BY id", identity: "id",
                              from: empty, to: empty + 1)
        }
        #expect(error?.kind == .history)
        #expect(error?.message.contains("main.notes") == true, "\(String(describing: error))")
        let steps = try store.history(table: "notes", sql: "SELECT id, body FROM notes ORDER BY id", identity: "id",
                                      from: empty, to: empty + 1)
        #expect(steps.map(\.snapshot.count) == [0, 1])
    }

    @Test func aWriteMadeWithoutRippleIsNeverRewoundWrongly() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("untracked.sqlite")
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = nil
        let store = try Store(path: path, configuration: configuration)
        try store.write { db in try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)") }
        try store.write { db in try db.execute("INSERT INTO notes (body) VALUES ('a')") }
        let before = try store.currentVersion()
        try SQLiteShell.run("UPDATE notes SET body = 'from the shell'", on: path)
        // Not noticed yet; asking for the past notices it first, and refuses to cross it.
        let error = #expect(throws: StoreError.self) {
            try store.history(table: "notes", sql: "SELECT id, body FROM notes", identity: "id", from: before, to: before)
        }
        #expect(error?.kind == .history)
        #expect(try store.currentVersion() == before + 1)
    }
}
