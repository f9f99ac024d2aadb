import Foundation
import Ripple
import RippleTesting
import Testing

@Suite struct QueryTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var name: String
        var rank: Int
        var score: Double?
        var done: Bool
        var category: String?

        /// The stored value of each column, for the oracle.
        func value(_ column: String) -> SQLValue {
            switch column {
            case "id": .integer(Int64(id))
            case "name": .text(name)
            case "rank": .integer(Int64(rank))
            case "score": score.map { .real($0) } ?? .null
            case "done": .integer(done ? 1 : 0)
            case "category": category.map { .text($0) } ?? .null
            default: fatalError("no column \(column)")
            }
        }
    }

    static let nameAlphabet: [Character] = ["a", "b", "B", "c", "%", "_", "'", "\"", ";", " "]
    static let categories: [String?] = [nil, "home", "work", "Home", "it's", "50%"]

    static func makeItems(count: Int, random: inout SeededGenerator) -> [Item] {
        (0..<count).map { id in
            let name = String((0..<Int.random(in: 0...4, using: &random)).map { _ in nameAlphabet.randomElement(using: &random)! })
            return Item(id: id, name: name, rank: Int.random(in: -5...15, using: &random),
                        score: Bool.random(using: &random) ? nil : Double(Int.random(in: 0...8, using: &random)) / 2,
                        done: Bool.random(using: &random), category: categories.randomElement(using: &random)!)
        }
    }

    func makeStore(_ name: String, items: [Item]) throws -> (Store, RecordCollection<Item>) {
        let store = try Store(path: directory.path(name))
        let collection = try store.collection("items", of: Item.self)
        try collection.insert(contentsOf: items)
        return (store, collection)
    }

    /// The oracle: the filter evaluated in Swift with SQLite's rules (RippleTesting).
    static func evaluate(_ filter: Filter, _ item: Item) -> Bool? {
        FilterOracle.evaluate(filter, item.value)
    }

    static func randomValue(for column: String, random: inout SeededGenerator) -> SQLValue {
        switch column {
        case "id", "rank": .integer(Int64(Int.random(in: -6...40, using: &random)))
        case "score": Int.random(in: 0..<6, using: &random) == 0 ? .null : .real(Double(Int.random(in: 0...8, using: &random)) / 2)
        case "done": .integer(Int64(Int.random(in: 0...1, using: &random)))
        default:
            Int.random(in: 0..<6, using: &random) == 0
                ? .null
                : .text(categories.compactMap { $0 }.randomElement(using: &random)!
                        + String(nameAlphabet.randomElement(using: &random)!))
        }
    }

    static func randomFilter(depth: Int, random: inout SeededGenerator) -> Filter {
        let columns = ["id", "name", "rank", "score", "done", "category"]
        let column = Column(columns.randomElement(using: &random)!)
        let kind = Int.random(in: 0..<(depth > 0 ? 12 : 9), using: &random)
        let value = randomValue(for: column.name, random: &random)
        switch kind {
        case 0: return column == value
        case 1: return column != value
        case 2: return column < value
        case 3: return column <= value
        case 4: return column > value
        case 5: return column >= value
        case 6:
            let values = (0..<Int.random(in: 0...4, using: &random)).map { _ in randomValue(for: column.name, random: &random) }
            return column.in(values)
        case 7:
            let patterns = ["%", "a%", "%b%", "_", "__", "%'%", "%\"%", "%;%", "B%", "%_", "home", "HOME", "it%", "%\\%"]
            return Column(["name", "category"].randomElement(using: &random)!).like(patterns.randomElement(using: &random)!)
        case 8: return Bool.random(using: &random) ? column.isNull : column.isNotNull
        case 9: return randomFilter(depth: depth - 1, random: &random) && randomFilter(depth: depth - 1, random: &random)
        case 10: return randomFilter(depth: depth - 1, random: &random) || randomFilter(depth: depth - 1, random: &random)
        default: return !randomFilter(depth: depth - 1, random: &random)
        }
    }

    // MARK: Tests

    @Test func everyOperatorMatchesTheSwiftOracle() throws {
        var random = SeededGenerator(seed: 20_240_601)
        let items = Self.makeItems(count: 300, random: &random)
        let (store, collection) = try makeStore("oracle.sqlite", items: items)
        try store.read { db in
            for round in 0..<400 {
                let filter = Self.randomFilter(depth: 3, random: &random)
                let expected = items.filter { Self.evaluate(filter, $0) == true }.map(\.id)
                let found = try collection.filter(filter).fetchAll(in: db).map(\.id)
                let compiled = try collection.filter(filter).compiled()
                #expect(found.sorted() == expected, "round \(round): \(filter) — \(compiled)")
                #expect(try collection.filter(filter).count(in: db) == expected.count, "round \(round)")
            }
        }
    }

    @Test func eachOperatorOnItsOwn() throws {
        var random = SeededGenerator(seed: 7)
        let items = Self.makeItems(count: 120, random: &random)
        let (_, collection) = try makeStore("operators.sqlite", items: items)
        let filters: [Filter] = [
            Column("rank") == 3, Column("rank") != 3, Column("rank") < 3, Column("rank") <= 3, Column("rank") > 3,
            Column("rank") >= 3, Column("rank").in([1, 2, 3]), Column("rank").in([Int]()), Column("name").like("%a%"),
            Column("category").isNull, Column("category").isNotNull, Column("score") == Double?.none,
            Column("score") != Double?.none, Column("done") == true && Column("rank") < 5,
            Column("done") == true || Column("rank") < 5, !(Column("done") == true), !(Column("score") > 1.5),
            Column("category") == "home", Column("name") >= "b", Column("score") <= 2,
        ]
        for filter in filters {
            let expected = items.filter { Self.evaluate(filter, $0) == true }
            #expect(try collection.filter(filter).fetchAll() == expected, "\(filter)")
        }
    }

    @Test func likeWithAnEscapeCharacterMatchesWildcardsLiterally() throws {
        let items = ["100%", "100 percent", "a_b", "axb"].enumerated().map {
            Item(id: $0.offset, name: $0.element, rank: 0, score: nil, done: false, category: nil)
        }
        let (_, collection) = try makeStore("escape.sqlite", items: items)
        #expect(try collection.filter(Column("name").like("100\\%", escape: "\\")).fetchAll().map(\.name) == ["100%"])
        #expect(try collection.filter(Column("name").like("100%")).count() == 2)
        #expect(try collection.filter(Column("name").like("a!_b", escape: "!")).fetchAll().map(\.name) == ["a_b"])
        #expect(try collection.filter(Column("name").like("a_b")).count() == 2)
    }

    @Test func orderingOnSeveralColumnsAscendingAndDescending() throws {
        var random = SeededGenerator(seed: 99)
        let items = Self.makeItems(count: 200, random: &random)
        let (_, collection) = try makeStore("order.sqlite", items: items)

        let sorted = try collection.order(by: Column("done"), Column("rank").descending, Column("name"), Column("id")).fetchAll()
        let expected = items.sorted { a, b in
            if a.done != b.done { return !a.done }
            if a.rank != b.rank { return a.rank > b.rank }
            if a.name != b.name { return a.name.utf8.lexicographicallyPrecedes(b.name.utf8) }
            return a.id < b.id
        }
        #expect(sorted == expected)

        // NULL first ascending, last descending.
        let byScore = try collection.order(by: Column("score").descending, Column("category").ascending, Column("id")).fetchAll()
        let expectedByScore = items.sorted { a, b in
            if a.score != b.score { return (a.score ?? -.infinity) > (b.score ?? -.infinity) }
            if a.category != b.category {
                guard let left = a.category else { return true }
                guard let right = b.category else { return false }
                return left.utf8.lexicographicallyPrecedes(right.utf8)
            }
            return a.id < b.id
        }
        #expect(byScore == expectedByScore)
        #expect(try collection.order(by: Column("id").descending).fetchAll() == items.reversed())
    }

    @Test func limitAndOffsetWindowTheOrderedResult() throws {
        var random = SeededGenerator(seed: 5)
        let items = Self.makeItems(count: 100, random: &random)
        let (_, collection) = try makeStore("window.sqlite", items: items)
        let open = items.filter { !$0.done }.sorted { ($0.rank, $0.id) < ($1.rank, $1.id) }
        let query = collection.filter(Column("done") == false).order(by: Column("rank"), Column("id"))
        for (limit, offset) in [(10, 0), (10, 10), (7, 40), (0, 0), (1_000, 3), (5, 1_000)] {
            let window = Array(open.dropFirst(offset).prefix(limit))
            #expect(try query.limit(limit, offset: offset).fetchAll() == window, "limit \(limit) offset \(offset)")
            #expect(try query.limit(limit, offset: offset).count() == window.count)
        }
        #expect(try query.fetchOne() == open.first)
        #expect(try query.limit(5, offset: 2).fetchOne() == open[2])
        #expect(try collection.filter(Column("rank") > 1_000).fetchOne() == nil)
        #expect(try query.count() == open.count)
        #expect(try collection.limit(3).fetchAll() == Array(items.prefix(3)))
        let negative = try #require(throws: StoreError.self) { try query.limit(-1).fetchAll() }
        #expect(negative.kind == .invalidQuery)
    }

    @Test func queriesCompileToParameterizedSQL() throws {
        let store = try Store(path: directory.path("compiled.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let query = todos
            .filter(Column("done") == false && Column("rank") < 10)
            .filter(Column("title").like("%milk%") || Column("due").isNull)
            .order(by: Column("rank").descending, Column("title"))
            .limit(20, offset: 40)
        let compiled = try query.compiled()
        #expect(compiled.sql == #"SELECT "id", "title", "rank", "done", "tags", "due" FROM "main"."todos" WHERE ("done" = ? AND "rank" < ? AND ("title" LIKE ? OR "due" IS NULL)) ORDER BY "rank" DESC, "title" ASC, "id" ASC LIMIT ? OFFSET ?"#)
        #expect(compiled.arguments == [.integer(0), .integer(10), .text("%milk%"), .integer(20), .integer(40)])
        let inList = try todos.filter(!Column("rank").in([1, 2])).compiled()
        #expect(inList.sql.hasSuffix(#"WHERE NOT ("rank" IN (?, ?))"#))
        #expect(try query.fetchAll().isEmpty)
    }

    @Test func hostileStringsArePlainData() throws {
        let store = try Store(path: directory.path("hostile.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let tablesBefore = try store.read { try $0.fetchValue("SELECT group_concat(name) FROM sqlite_schema WHERE type = 'table'", as: String.self) }
        let hostile = [
            "'); DROP TABLE todos; --", "Robert'); DROP TABLE students;--", "\"quoted\"", "it's", "a;b;c", "100%", "_",
            "\\", "nul\u{0}inside", "' OR '1'='1", "\"; DELETE FROM todos; --", "🎉 ünïcödé", "",
        ]
        let records = hostile.enumerated().map { offset, title in
            Todo(id: UUID(), title: title, rank: offset, done: false, tags: [title, "x"], due: nil)
        }
        try todos.insert(contentsOf: records)
        for record in records {
            #expect(try todos.filter(Column("title") == record.title).fetchAll() == [record], "\(record.title.debugDescription)")
            #expect(try todos.filter(Column("title").in([record.title, "zzz"])).fetchAll() == [record])
            #expect(try todos.fetch(id: record.id) == record)
        }
        #expect(try todos.filter(Column("title").like("%DROP TABLE%")).count() == 2)
        #expect(try todos.filter(Column("title") != "'); DROP TABLE todos; --").count() == records.count - 1)
        let raw = try store.read { db in
            try db.fetchAll(Todo.self, "SELECT * FROM todos WHERE title = ?", ["'); DROP TABLE todos; --"])
        }
        #expect(raw == [records[0]])
        // The table is intact, and no table was dropped or created.
        #expect(try todos.count() == records.count)
        #expect(try store.read { try $0.fetchValue("SELECT group_concat(name) FROM sqlite_schema WHERE type = 'table'", as: String.self) } == tablesBefore)
        #expect(try todos.fetchAll() == records)
    }

    @Test func anUnknownColumnIsAClearError() throws {
        let store = try Store(path: directory.path("unknown.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let filterError = try #require(throws: StoreError.self) { try todos.filter(Column("colour") == "red").fetchAll() }
        #expect(filterError.kind == .invalidQuery)
        #expect(filterError.message.contains(#"no column "colour" in collection "todos""#), "\(filterError)")
        #expect(filterError.message.contains("title"), "\(filterError)")

        let orderError = try #require(throws: StoreError.self) { try todos.order(by: Column("size").descending).fetchAll() }
        #expect(orderError.message.contains(#""size""#), "\(orderError)")

        let injected = try #require(throws: StoreError.self) {
            try todos.filter(Column(#"title" = '' OR 1 = 1; --"#) == "x").count()
        }
        #expect(injected.kind == .invalidQuery)
        let nested = try #require(throws: StoreError.self) {
            try todos.filter(Column("done") == true && !(Column("nope").isNull)).fetchOne()
        }
        #expect(nested.message.contains(#""nope""#), "\(nested)")
    }

    @Test func queriesDeleteTheirMatches() throws {
        var random = SeededGenerator(seed: 11)
        let items = Self.makeItems(count: 80, random: &random)
        let (_, collection) = try makeStore("delete.sqlite", items: items)
        let done = items.filter(\.done)
        #expect(try collection.filter(Column("done") == true).deleteAll() == done.count)
        #expect(try collection.fetchAll() == items.filter { !$0.done })
        let remaining = items.filter { !$0.done }.sorted { ($0.rank, $0.id) > ($1.rank, $1.id) }
        #expect(try collection.order(by: Column("rank").descending, Column("id").descending).limit(3).deleteAll() == 3)
        #expect(try collection.fetchAll().map(\.id) == items.filter { !$0.done }.map(\.id).filter { id in
            !remaining.prefix(3).contains { $0.id == id }
        })
    }
}
