import Foundation
@testable import Ripple
import RippleDiff
import Testing
import RippleTesting

/// A store file written by the code of 2026-11-23 (before typed tables and the compact change
/// log), committed as `Fixtures/legacy-2026-11-23.sqlite`: today's code must open it, read it,
/// write to it, and travel back through its history exactly.
@Suite struct LegacyStoreTests {
    /// The record type the fixture's `todos` collection was made with.
    struct LegacyTodo: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
        var rank: Int
        var done: Bool
        var note: String?
        var payload: Data
    }

    /// The writes that made the fixture, in order; each is one version after the collection's
    /// creation (version 1). Replayed on a model to know every version's contents.
    static func script() -> [(String, (inout [Int: LegacyTodo]) -> Void)] {
        var steps: [(String, (inout [Int: LegacyTodo]) -> Void)] = []
        steps.append(("insert 1…12", { todos in
            for id in 1...12 {
                todos[id] = LegacyTodo(id: id, title: "todo \(id)", rank: id % 5, done: id % 3 == 0,
                                       note: id % 2 == 0 ? "note \(id)" : nil, payload: Data((0..<UInt8(id)).map { $0 &* 37 }))
            }
        }))
        for round in 0..<6 {
            steps.append(("retitle \(round)", { todos in todos[round + 1]!.title += " (edited \(round))" }))
            steps.append(("payload \(round)", { todos in todos[12 - round]!.payload = Data([0xFF, 0x00, UInt8(round)]) }))
        }
        steps.append(("delete 4", { todos in todos[4] = nil }))
        steps.append(("done 5, note 7", { todos in
            todos[5]!.done = true
            todos[7]!.note = "late note"
        }))
        steps.append(("insert 20", { todos in
            todos[20] = LegacyTodo(id: 20, title: "ünïcode ✓", rank: 1, done: false, note: nil, payload: Data())
        }))
        steps.append(("delete 1, 2", { todos in
            todos[1] = nil
            todos[2] = nil
        }))
        return steps
    }

    /// The model's contents after each version, from the collection's creation (index 0).
    static func states() -> [[LegacyTodo]] {
        var todos: [Int: LegacyTodo] = [:]
        var states: [[LegacyTodo]] = [[]]
        for (_, step) in script() {
            step(&todos)
            states.append(todos.values.sorted { $0.id < $1.id })
        }
        return states
    }

    /// Writes the fixture (run once with the old code: `RIPPLE_WRITE_FIXTURE=path swift test --filter writeFixture`).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["RIPPLE_WRITE_FIXTURE"] != nil))
    func writeFixture() throws {
        let path = ProcessInfo.processInfo.environment["RIPPLE_WRITE_FIXTURE"]!
        let store = try Store(path: path)
        let todos = try store.collection("todos", of: LegacyTodo.self)
        var model: [Int: LegacyTodo] = [:]
        for (_, step) in Self.script() {
            var next = model
            step(&next)
            try store.write { db in
                for id in Set(model.keys).subtracting(next.keys) { try todos.delete(id: id, in: db) }
                for (id, todo) in next.sorted(by: { $0.key < $1.key }) where model[id] != todo {
                    try todos.upsert(todo, in: db)
                }
            }
            model = next
        }
        try store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// A copy of the fixture in a temporary directory (opening writes to it).
    static func openCopy(in directory: TemporaryDirectory) throws -> Store {
        let fixture = try #require(Bundle.module.url(forResource: "legacy-2026-11-23", withExtension: "sqlite",
                                                     subdirectory: "Fixtures"))
        let path = directory.path("legacy.sqlite")
        try FileManager.default.copyItem(atPath: fixture.path, toPath: path)
        return try Store(path: path)
    }

    @Test func theLegacyFileOpensAndReads() throws {
        let directory = try TemporaryDirectory()
        let store = try Self.openCopy(in: directory)
        let todos = try store.collection("todos", of: LegacyTodo.self)
        #expect(try todos.order(by: Column("id")).fetchAll() == Self.states().last)
    }

    struct RankIsText: Codable, Sendable, Identifiable {
        var id: Int
        var title: String
        var rank: String
        var done: Bool
        var note: String?
        var payload: Data
    }

    /// A table made before tables were typed is compared with the record type too.
    @Test func theLegacyTableIsComparedWithTheType() throws {
        let directory = try TemporaryDirectory()
        let store = try Self.openCopy(in: directory)
        let error = #expect(throws: StoreError.self) { try store.collection("todos", of: RankIsText.self) }
        #expect(error?.kind == .schemaMismatch)
    }

    @Test func theLegacyHistoryTravelsBackExactly() throws {
        let directory = try TemporaryDirectory()
        let store = try Self.openCopy(in: directory)
        let todos = try store.collection("todos", of: LegacyTodo.self)
        let states = Self.states()
        let current = try store.currentVersion()
        // Version 1 created the table; version 1 + n is the state after step n.
        let first = current - Int64(states.count - 1)
        for (index, state) in states.enumerated() {
            #expect(try store.snapshot(of: todos.order(by: Column("id")), at: first + Int64(index)) == state, "step \(index)")
        }
    }

    @Test func theLegacyFileTakesWritesAndLiveQueries() throws {
        let directory = try TemporaryDirectory()
        let store = try Self.openCopy(in: directory)
        let todos = try store.collection("todos", of: LegacyTodo.self)
        let subscriber = ListViewSubscriber<LegacyTodo>()
        let subscription = subscriber.subscribe(to: try todos.order(by: Column("id")).live())
        defer { subscription.cancel() }
        let before = try store.currentVersion()
        try todos.update(LegacyTodo(id: 3, title: "new", rank: 0, done: false, note: nil, payload: Data([1])))
        try todos.insert(LegacyTodo(id: 30, title: "thirty", rank: 2, done: true, note: "n", payload: Data()))
        #expect(subscriber.items == (try todos.order(by: Column("id")).fetchAll()))
        #expect(subscriber.failures.isEmpty)
        var expected = Self.states().last!
        #expect(try store.snapshot(of: todos.order(by: Column("id")), at: before) == expected)
        expected[expected.firstIndex { $0.id == 3 }!] = LegacyTodo(id: 3, title: "new", rank: 0, done: false, note: nil, payload: Data([1]))
        #expect(try store.snapshot(of: todos.order(by: Column("id")), at: before + 1) == expected)
    }
}
