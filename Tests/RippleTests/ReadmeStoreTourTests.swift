import Foundation
import Ripple
import Testing
import RippleTesting

/// The store tour's code (Ripple.docc/StoreTour.md), kept true when run.
@Suite struct ReadmeStoreTourTests {
    struct Todo: Codable, Sendable, Identifiable, Equatable {
        var id: UUID
        var title: String
        var rank: Int
        var done: Bool
        var tags: [String]   // nested values are stored as JSON text
    }

    @Test func storeTour() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("todos.sqlite"))   // WAL: one writer, a pool of readers
        let todos = try store.collection("todos", of: Todo.self)       // a table with a column per property

        var migrator = try Migrator(domain: "app")                     // or Migrator(domain:directory:) over NNNN_name.sql
        try migrator.register(name: "0001_index_rank", sql: "CREATE INDEX todos_by_rank ON todos(rank)")
        try store.migrate(migrator)                                     // each migration once, in its own transaction

        let milk = Todo(id: UUID(), title: "Milk", rank: 2, done: false, tags: ["shop"])
        try todos.insert(milk)
        try todos.insert(contentsOf: [Todo(id: UUID(), title: "Tea", rank: 1, done: false, tags: []),
                                      Todo(id: UUID(), title: "Jam", rank: 3, done: true, tags: [])])   // one transaction
        let open = try todos.filter(Column("done") == false && Column("title").like("%a%"))
            .order(by: Column("rank").descending)
            .limit(20)
            .fetchAll()
        #expect(open.map(\.title) == ["Tea"])

        try store.write { db in                                         // raw SQL: values are always bound
            try db.execute("UPDATE todos SET done = 1 WHERE rank < ?", [3])
        }
        #expect(try todos.fetch(id: milk.id)?.done == true)
        let remaining = try store.write { _ in                          // store calls inside a write join it:
            try todos.insert(Todo(id: UUID(), title: "Bread", rank: 4, done: false, tags: []))
            return try todos.filter(Column("done") == false).count()    // reads see the write's own changes
        }
        #expect(remaining == 1)
        #expect(try store.currentVersion() == 6)                        // every committed write (rows or schema) gets a version
        #expect(try store.changes(after: 4).first?.rowKeys.count == 2)  // …and the rows it changed are logged
    }
}
