import Foundation
import Ripple
import Testing
import RippleTesting

@Suite struct RecordCodingTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    struct Address: Codable, Sendable, Equatable {
        var street: String
        var zip: Int
        var tags: [String]
    }

    enum Status: String, Codable, Sendable, CaseIterable {
        case active, archived
    }

    /// An enum with raw values starting at 1, not CaseIterable: placeholder 0 does not decode.
    enum Priority: Int, Codable, Sendable {
        case low = 1, high = 2
    }

    /// An enum with payloads (synthesized Codable, keyed).
    enum Shape: Codable, Sendable, Equatable {
        case circle(radius: Double)
        case square(side: Double)
    }

    /// Every kind of property a record can have.
    struct Everything: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var text: String
        var emptyText: String
        var int8: Int8
        var int64: Int64
        var uint32: UInt32
        var double: Double
        var float: Float
        var flag: Bool
        var date: Date
        var uuid: UUID
        var data: Data
        var emptyData: Data
        var bytes: [UInt8]
        var url: URL
        var tags: [String]
        var counts: [String: Int]
        var address: Address
        var addresses: [Address]
        var status: Status
        var priority: Priority
        var shape: Shape
        var optionalText: String?
        var optionalInt: Int?
        var optionalDate: Date?
        var optionalUUID: UUID?
        var optionalAddress: Address?
        var optionalStatus: Status?
        var optionalTags: [String]?

        static func sample(id: Int, filled: Bool) -> Everything {
            Everything(
                id: id, text: "héllo 'quoted' \"double\" ; -- 🎉", emptyText: "", int8: -128, int64: .max, uint32: .max,
                double: -0.1 * Double(id), float: 1.5, flag: id % 2 == 0,
                date: Date(timeIntervalSince1970: 1_700_000_000.25 + Double(id)),
                uuid: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!, data: Data([0, 1, 2, 255]), emptyData: Data(),
                bytes: [9, 8, 7], url: URL(string: "https://example.com/a?b=c&d=%20e")!,
                tags: ["a", "b \"quoted\"", "back\\slash", "new\nline", "tab\t", "ünï", "/slash/", "\u{1}"],
                counts: ["x": 1, "y": 2], address: Address(street: "Main St", zip: 12345, tags: ["home"]),
                addresses: [Address(street: "A", zip: 1, tags: []), Address(street: "B", zip: 2, tags: ["x", "y"])],
                status: .archived, priority: .high, shape: .square(side: 2.5),
                optionalText: filled ? "present" : nil, optionalInt: filled ? 42 : nil,
                optionalDate: filled ? Date(timeIntervalSince1970: 86_400) : nil,
                optionalUUID: filled ? UUID() : nil,
                optionalAddress: filled ? Address(street: "Side", zip: 9, tags: ["w"]) : nil,
                optionalStatus: filled ? .active : nil, optionalTags: filled ? [] : nil)
        }
    }

    @Test func everyPropertyKindRoundTrips() throws {
        let store = try Store(path: directory.path("everything.sqlite"))
        let collection = try store.collection("everything", of: Everything.self)
        let records = [Everything.sample(id: 1, filled: true), Everything.sample(id: 2, filled: false)]
        try collection.insert(contentsOf: records)
        #expect(try collection.fetchAll() == records)
        #expect(try collection.fetch(id: 1) == records[0])
        #expect(try collection.fetch(id: 2) == records[1])
        #expect(try collection.fetch(id: 3) == nil)
    }

    @Test func columnsFollowTheRecordsPropertiesAndTypes() throws {
        let store = try Store(path: directory.path("schema.sqlite"))
        let collection = try store.collection("everything", of: Everything.self)
        let columns = try store.read { db in
            try db.fetchAll("SELECT name, type, pk FROM pragma_table_info('everything') ORDER BY cid")
        }
        let types = Dictionary(uniqueKeysWithValues: columns.map { row in
            (try! row.value("name", as: String.self), try! row.value("type", as: String.self))
        })
        #expect(collection.columnNames == columns.map { try! $0.value("name", as: String.self) })
        #expect(collection.columnNames.first == "id")
        #expect(collection.columnNames.count == 29)
        let expected: [String: String] = [
            "id": "INTEGER", "text": "TEXT", "int8": "INTEGER", "int64": "INTEGER", "uint32": "INTEGER",
            "double": "REAL", "float": "REAL", "flag": "INTEGER", "date": "ANY", "uuid": "TEXT",
            "data": "BLOB", "bytes": "BLOB", "url": "TEXT", "tags": "TEXT", "counts": "TEXT", "address": "TEXT",
            "status": "TEXT", "priority": "INTEGER", "shape": "TEXT", "optionalText": "TEXT", "optionalInt": "INTEGER",
            "optionalDate": "ANY", "optionalUUID": "TEXT", "optionalAddress": "TEXT", "optionalStatus": "TEXT",
        ]
        for (name, type) in expected { #expect(types[name] == type, "column \(name)") }
        #expect(columns.first.map { try! $0.value("pk", as: Int.self) } == 1)
    }

    @Test func storedFormsAreReadableSQL() throws {
        let store = try Store(path: directory.path("forms.sqlite"))
        let collection = try store.collection("everything", of: Everything.self)
        try collection.insert(Everything.sample(id: 7, filled: false))
        let row = try #require(try store.read { db in
            try db.fetchOne("""
                SELECT typeof(flag), flag, typeof(date), date, uuid, tags, address, status, priority, typeof(data),
                       typeof(emptyData), length(emptyData), typeof(optionalText), url, counts, shape
                FROM everything
                """)
        })
        #expect(row.values[0] == .text("integer"))
        #expect(row.values[1] == .integer(0))
        #expect(row.values[2] == .text("text"))
        #expect(row.values[3] == .text("001700000007.25"))
        #expect(row.values[4] == .text("E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(row.values[5] == .text(#"["a","b \"quoted\"","back\\slash","new\nline","tab\t","ünï","/slash/","\u0001"]"#))
        #expect(row.values[6] == .text(#"{"street":"Main St","tags":["home"],"zip":12345}"#))
        #expect(row.values[7] == .text("archived"))
        #expect(row.values[8] == .integer(2))
        #expect(row.values[9] == .text("blob"))
        #expect(row.values[10] == .text("blob"))
        #expect(row.values[11] == .integer(0))
        #expect(row.values[12] == .text("null"))
        #expect(row.values[13] == .text("https://example.com/a?b=c&d=%20e"))
        #expect(row.values[14] == .text(#"{"x":1,"y":2}"#))
        #expect(row.values[15] == .text(#"{"square":{"side":2.5}}"#))
        // The JSON is SQLite's JSON: json_extract reads it.
        #expect(try store.read { try $0.fetchValue("SELECT json_extract(address, '$.zip') FROM everything", as: Int.self) } == 12345)
    }

    @Test func stringArraysWrittenByFoundationOrByHandDecode() throws {
        let store = try Store(path: directory.path("json.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let id = UUID()
        try todos.insert(Todo(id: id, title: "t", rank: 1, done: false, tags: [], due: nil))
        let variants: [(String, [String])] = [
            (#" [ "a" , "b" ] "#, ["a", "b"]),
            (#"["\u00e9\ud83c\udf89","\/"]"#, ["é🎉", "/"]),
            ("[]", []),
        ]
        for (json, expected) in variants {
            try store.write { try $0.execute("UPDATE todos SET tags = ?", [json]) }
            #expect(try todos.fetch(id: id)?.tags == expected, "\(json)")
        }
        try store.write { try $0.execute("UPDATE todos SET tags = ?", ["[1, 2]"]) }
        let error = try #require(throws: StoreError.self) { try todos.fetch(id: id) }
        #expect(error.kind == .decoding)
        #expect(error.message.contains("column \"tags\""), "\(error)")
    }

    @Test func aDecodingMismatchNamesTheColumnAndTheExpectedType() throws {
        let store = try Store(path: directory.path("mismatch.sqlite"))
        // A table made by hand without types (a collection's own table would refuse these values).
        try store.write { db in try db.execute("CREATE TABLE todos (id PRIMARY KEY, title, rank, done, tags, due)") }
        let todos = try store.collection("todos", of: Todo.self)
        let todo = Todo(id: UUID(), title: "Buy milk", rank: 3, done: false, tags: ["home"], due: nil)
        try todos.insert(todo)
        try store.write { db in try db.execute("UPDATE todos SET rank = 'abc'") }
        let error = try #require(throws: StoreError.self) { try todos.fetchAll() }
        #expect(error.kind == .decoding)
        #expect(error.message.contains(#"column "rank": expected Int, found text 'abc'"#), "\(error)")

        try store.write { db in try db.execute("UPDATE todos SET rank = 1, title = NULL") }
        let nullError = try #require(throws: StoreError.self) { try todos.fetch(id: todo.id) }
        #expect(nullError.message.contains(#"column "title": expected String, found NULL"#), "\(nullError)")

        try store.write { db in try db.execute("UPDATE todos SET title = 'x', done = 2.5") }
        let boolError = try #require(throws: StoreError.self) { try todos.fetchAll() }
        #expect(boolError.message.contains(#"column "done": expected Bool, found real 2.5"#), "\(boolError)")

        try store.write { db in try db.execute("UPDATE todos SET done = 0, due = 'soon'") }
        let dateError = try #require(throws: StoreError.self) { try todos.fetchAll() }
        #expect(dateError.message.contains(#"column "due": expected Date, found text 'soon'"#), "\(dateError)")
    }

    @Test func badEnumValuesAndOutOfRangeIntegersNameTheColumn() throws {
        let store = try Store(path: directory.path("enums.sqlite"))
        let collection = try store.collection("everything", of: Everything.self)
        try collection.insert(Everything.sample(id: 1, filled: true))
        try store.write { try $0.execute("UPDATE everything SET status = 'deleted'") }
        let statusError = try #require(throws: StoreError.self) { try collection.fetchAll() }
        #expect(statusError.message.contains(#"column "status": expected Status"#), "\(statusError)")
        #expect(statusError.message.contains("'deleted'"), "\(statusError)")

        try store.write { try $0.execute("UPDATE everything SET status = 'active', int8 = 300") }
        let rangeError = try #require(throws: StoreError.self) { try collection.fetchAll() }
        #expect(rangeError.message.contains(#"column "int8": expected Int8, found integer 300 (out of range)"#), "\(rangeError)")

        try store.write { try $0.execute("UPDATE everything SET int8 = 1, address = '{not json'") }
        let jsonError = try #require(throws: StoreError.self) { try collection.fetchAll() }
        #expect(jsonError.message.contains(#"column "address": expected Address"#), "\(jsonError)")
    }

    @Test func valuesSQLiteCannotHoldAreEncodingErrors() throws {
        struct Reading: Codable, Sendable, Identifiable { var id: Int; var value: Double; var big: UInt64 }
        let store = try Store(path: directory.path("encoding.sqlite"))
        let readings = try store.collection("readings", of: Reading.self)
        let nan = try #require(throws: StoreError.self) { try readings.insert(Reading(id: 1, value: .nan, big: 1)) }
        #expect(nan.kind == .encoding)
        #expect(nan.message.contains(#"column "value""#), "\(nan)")
        let big = try #require(throws: StoreError.self) { try readings.insert(Reading(id: 1, value: 1, big: .max)) }
        #expect(big.kind == .encoding)
        #expect(big.message.contains(#"column "big""#), "\(big)")
        #expect(try readings.count() == 0)
        try readings.insert(Reading(id: 1, value: .infinity, big: UInt64(Int64.max)))
        #expect(try readings.fetch(id: 1)?.value == .infinity)
        #expect(try readings.fetch(id: 1)?.big == UInt64(Int64.max))
    }

    @Test func rawSQLDecodesRecordsByColumnName() throws {
        struct Summary: Decodable, Equatable { var title: String; var doubled: Int; var note: String? }
        let store = try Store(path: directory.path("raw.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let milk = Todo(id: UUID(), title: "Buy milk", rank: 2, done: false, tags: ["shop"], due: Date(timeIntervalSince1970: 10))
        let bread = Todo(id: UUID(), title: "Buy bread", rank: 5, done: true, tags: [], due: nil)
        try todos.insert(contentsOf: [milk, bread])

        let found = try store.read { db in try db.fetchAll(Todo.self, "SELECT * FROM todos WHERE title LIKE ?", ["%milk%"]) }
        #expect(found == [milk])
        // Columns in another order, computed columns, a missing optional column.
        let summaries = try store.read { db in
            try db.fetchAll(Summary.self, "SELECT rank * 2 AS doubled, title FROM todos ORDER BY rank")
        }
        #expect(summaries == [Summary(title: "Buy milk", doubled: 4, note: nil), Summary(title: "Buy bread", doubled: 10, note: nil)])
        let reordered = try store.read { db in
            try db.fetchOne(Todo.self, "SELECT due, tags, done, rank, title, id FROM todos WHERE rank > ?", [3])
        }
        #expect(reordered == bread)
        #expect(try store.read { db in try db.fetchAll(String.self, "SELECT title FROM todos ORDER BY title") } == ["Buy bread", "Buy milk"])
        #expect(try store.read { db in try db.fetchOne(Todo.self, "SELECT * FROM todos WHERE rank > 100") } == nil)

        let missing = try #require(throws: StoreError.self) {
            try store.read { db in try db.fetchAll(Todo.self, "SELECT id, title FROM todos") }
        }
        #expect(missing.kind == .decoding)
        #expect(missing.message.contains(#"no column "rank""#), "\(missing)")
    }

    @Test func aPropertyTypeThatRefusesPlaceholdersIsReportedByName() throws {
        enum Label: Codable, Sendable { case named(String), unnamed }
        struct Labelled: Codable, Sendable, Identifiable { var id: Int; var label: Label }
        let store = try Store(path: directory.path("probe.sqlite"))
        let error = try #require(throws: StoreError.self) { try store.collection("labelled", of: Labelled.self) }
        #expect(error.kind == .encoding)
        #expect(error.message.contains(#"column "label""#), "\(error)")
        #expect(error.message.contains("create the table yourself"), "\(error)")

        // An existing table is adopted without deriving columns, and the values go to JSON.
        try store.write { try $0.execute("CREATE TABLE labelled (id INTEGER PRIMARY KEY, label TEXT)") }
        let labelled = try store.collection("labelled", of: Labelled.self)
        try labelled.insert(Labelled(id: 1, label: .named("x")))
        guard case .named("x") = try labelled.fetch(id: 1)?.label else {
            Issue.record("label did not round-trip")
            return
        }
    }

    @Test func customCodingKeysAndKeyOrderAreFollowed() throws {
        struct Renamed: Codable, Sendable, Identifiable, Equatable {
            var id: String
            var displayName: String
            var count: Int
            enum CodingKeys: String, CodingKey {
                case id
                case displayName = "display name"
                case count
            }
            // Encodes in an order different from decoding, and skips nothing.
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(count, forKey: .count)
                try container.encode(displayName, forKey: .displayName)
                try container.encode(id, forKey: .id)
            }
        }
        let store = try Store(path: directory.path("keys.sqlite"))
        let collection = try store.collection("renamed", of: Renamed.self)
        #expect(collection.columnNames == ["id", "display name", "count"])
        let records = (0..<50).map { Renamed(id: "r\($0)", displayName: "Name \($0)", count: $0) }
        try collection.insert(contentsOf: records)
        #expect(try collection.fetchAll() == records)
        #expect(try collection.filter(Column("display name") == "Name 7").fetchOne() == records[7])
    }
}
