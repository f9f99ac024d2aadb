import Foundation
import Ripple
import Testing
import RippleTesting

@Suite struct CollectionTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    func makeTodo(_ number: Int) -> Todo { Self.makeTodo(number) }

    /// A record whose encoding fails for a chosen element (NaN cannot be stored).
    struct Measure: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var value: Double
    }

    static func makeTodo(_ number: Int) -> Todo {
        Todo(id: UUID(), title: "Todo \(number)", rank: number, done: number % 3 == 0,
             tags: number % 2 == 0 ? ["even", "n\(number)"] : [], due: number % 4 == 0 ? Date(timeIntervalSince1970: Double(number)) : nil)
    }

    @Test func insertFetchCountAndDelete() throws {
        let store = try Store(path: directory.path("crud.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        #expect(todos.name == "todos")
        #expect(todos.primaryKey == "id")
        #expect(todos.columnNames == ["id", "title", "rank", "done", "tags", "due"])
        let first = makeTodo(1), second = makeTodo(2)
        try todos.insert(first)
        try todos.insert(second)
        #expect(try todos.count() == 2)
        #expect(try todos.fetch(id: first.id) == first)
        #expect(try todos.fetchAll() == [first, second])
        #expect(try todos.delete(id: first.id) == true)
        #expect(try todos.delete(id: first.id) == false)
        #expect(try todos.fetch(id: first.id) == nil)
        #expect(try todos.fetchAll() == [second])
    }

    @Test func insertingADuplicateIDFailsAndLosesNothing() throws {
        let store = try Store(path: directory.path("duplicate.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let original = makeTodo(1)
        try todos.insert(original)
        var impostor = makeTodo(2)
        impostor.id = original.id
        let error = try #require(throws: DatabaseError.self) { try todos.insert(impostor) }
        #expect(error.code == .constraint)
        #expect(try todos.fetchAll() == [original])
    }

    @Test func upsertInsertsThenReplacesInPlace() throws {
        let store = try Store(path: directory.path("upsert.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        var todo = makeTodo(4)
        try todos.upsert(todo)
        #expect(try todos.fetchAll() == [todo])
        let rowid = try store.read { try $0.fetchValue("SELECT rowid FROM todos", as: Int.self) }
        todo.title = "renamed"
        todo.due = nil
        todo.tags = ["changed"]
        try todos.upsert(todo)
        #expect(try todos.fetchAll() == [todo])
        // A true update: the row keeps its rowid (REPLACE would delete and re-insert it).
        #expect(try store.read { try $0.fetchValue("SELECT rowid FROM todos", as: Int.self) } == rowid)

        let others = (10..<20).map(makeTodo)
        todo.rank = 99
        try todos.upsert(contentsOf: others + [todo])
        #expect(try todos.count() == 11)
        #expect(try todos.fetch(id: todo.id)?.rank == 99)
    }

    @Test func updatingAMissingRecordThrowsNotFound() throws {
        let store = try Store(path: directory.path("update.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        var todo = makeTodo(1)
        let error = try #require(throws: StoreError.self) { try todos.update(todo) }
        #expect(error.kind == .notFound)
        #expect(error.message.contains("todos"), "\(error)")
        #expect(try todos.count() == 0)

        try todos.insert(todo)
        todo.done.toggle()
        todo.due = Date(timeIntervalSince1970: 1234)
        try todos.update(todo)
        #expect(try todos.fetch(id: todo.id) == todo)

        // A batch update is all or nothing.
        var changed = todo
        changed.title = "changed"
        #expect(throws: StoreError.self) { try todos.update(contentsOf: [changed, makeTodo(2)]) }
        #expect(try todos.fetch(id: todo.id) == todo)
    }

    @Test func aBatchOfAThousandInsertsInOneTransaction() throws {
        let store = try Store(path: directory.path("batch.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let batch = (0..<1_000).map(makeTodo)
        try todos.insert(contentsOf: batch)
        #expect(try todos.count() == 1_000)
        #expect(try todos.fetchAll() == batch)

        let ids = batch.prefix(300).map(\.id)
        #expect(try todos.delete(ids: ids + [UUID()]) == 300)
        #expect(try todos.count() == 700)
        #expect(try todos.deleteAll() == 700)
        #expect(try todos.count() == 0)
    }

    @Test func aFailingElementRollsBackTheWholeBatch() throws {
        let store = try Store(path: directory.path("rollback.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        var batch = (0..<1_000).map(makeTodo)
        batch[500].id = batch[499].id   // a duplicate id in the middle
        let error = try #require(throws: DatabaseError.self) { try todos.insert(contentsOf: batch) }
        #expect(error.code == .constraint)
        #expect(try todos.count() == 0)

        // An element that does not encode, in the middle.
        let measures = try store.collection("measures", of: Measure.self)
        let values = (0..<1_000).map { Measure(id: $0, value: $0 == 500 ? .nan : Double($0)) }
        let encoding = try #require(throws: StoreError.self) { try measures.insert(contentsOf: values) }
        #expect(encoding.kind == .encoding)
        #expect(try measures.count() == 0)
        #expect(throws: StoreError.self) { try measures.upsert(contentsOf: values) }
        #expect(try measures.count() == 0)
    }

    @Test func operationsComposeInOneWriteTransaction() throws {
        struct Cancelled: Error {}
        let store = try Store(path: directory.path("compose.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let kept = makeTodo(1)
        try todos.insert(kept)
        #expect(throws: Cancelled.self) {
            try store.write { db in
                try todos.insert(makeTodo(2), in: db)
                try todos.delete(id: kept.id, in: db)
                #expect(try todos.count(in: db) == 1)
                throw Cancelled()
            }
        }
        #expect(try todos.fetchAll() == [kept])

        // A failing batch inside a larger write rolls back only itself when the error is caught.
        try store.write { db in
            try todos.insert(makeTodo(3), in: db)
            var bad = (4..<10).map(makeTodo)
            bad[3].id = kept.id
            #expect(throws: DatabaseError.self) { try todos.insert(contentsOf: bad, in: db) }
            #expect(try todos.count(in: db) == 2)
        }
        #expect(try todos.count() == 2)
    }

    @Test func tableAndColumnNamesAreValidatedAndQuoted() throws {
        let store = try Store(path: directory.path("names.sqlite"))
        for name in ["", "sqlite_master", "bad\u{0}name", "line\nbreak", " padded"] {
            let error = try #require(throws: StoreError.self) { try store.collection(name, of: Todo.self) }
            #expect(error.kind == .invalidQuery, "\(name.debugDescription)")
        }
        let missingKey = try #require(throws: StoreError.self) {
            try store.collection("todos", of: Todo.self, primaryKey: "code")
        }
        #expect(missingKey.kind == .invalidQuery)
        #expect(missingKey.message.contains("\"code\""), "\(missingKey)")

        // An odd but valid name is quoted, never spliced.
        let odd = #"to"dos'); DROP TABLE x; --"#
        let todos = try store.collection(odd, of: Todo.self)
        try todos.insert(makeTodo(1))
        #expect(try todos.count() == 1)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = ?", [odd], as: Int.self) } == 1)
    }

    @Test func aCollectionAdoptsAnExistingTableAndAComputedIdentity() throws {
        struct Country: Codable, Sendable, Identifiable, Equatable {
            var code: String
            var name: String
            var population: Int?
            var id: String { code }
        }
        let path = directory.path("adopt.sqlite")
        do {
            let store = try Store(path: path)
            try store.write { db in
                try db.execute("CREATE TABLE countries (code TEXT PRIMARY KEY, name TEXT NOT NULL, population INTEGER, extra TEXT)")
                try db.execute("INSERT INTO countries (code, name, extra) VALUES ('FR', 'France', 'x')")
            }
            // `extra`, which the type does not know, takes NULL: inserts leave it empty, updates keep it.
            let countries = try store.collection("countries", of: Country.self, primaryKey: "code")
            #expect(countries.columnNames == ["code", "name", "population"])
            #expect(try countries.fetch(id: "FR") == Country(code: "FR", name: "France", population: nil))
            try countries.insert(Country(code: "DE", name: "Germany", population: 83_000_000))
            try countries.update(Country(code: "FR", name: "France", population: 68_000_000))
        }
        // Reopened: the data and the table are as they were.
        let store = try Store(path: path)
        let countries = try store.collection("countries", of: Country.self, primaryKey: "code")
        #expect(try countries.fetchAll() == [Country(code: "FR", name: "France", population: 68_000_000),
                                             Country(code: "DE", name: "Germany", population: 83_000_000)])
        #expect(try store.read { try $0.fetchValue("SELECT extra FROM countries WHERE code = 'FR'", as: String.self) } == "x")
    }

    @Test func aRecordPropertyMissingFromAnAdoptedTableIsAClearError() throws {
        let store = try Store(path: directory.path("missing-column.sqlite"))
        try store.write { try $0.execute("CREATE TABLE todos (id TEXT PRIMARY KEY, title TEXT)") }
        let error = try #require(throws: StoreError.self) { try store.collection("todos", of: Todo.self) }
        #expect(error.kind == .schemaMismatch)
        #expect(error.message.contains(#"property "rank""#), "\(error)")
    }

    @Test func collectionsAreSendableAcrossTasks() async throws {
        let store = try Store(path: directory.path("tasks.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let makeTodo = Self.makeTodo
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    try todos.insert(contentsOf: (0..<50).map { makeTodo(worker * 100 + $0) })
                    _ = try todos.fetchAll()
                }
            }
            try await group.waitForAll()
        }
        #expect(try todos.count() == 200)
    }
}
