import Foundation
@testable import Ripple
import Testing
import RippleTesting

/// The change capture's byte-level key formatting and grouping, seen through the change log and
/// directly, and the fast paths of the row coders (records read in place, decoded into a buffer).
@Suite struct ChangeCaptureTests {
    let directory: TemporaryDirectory
    let store: Store
    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("capture.sqlite"))
    }

    /// The log entries after `version`, as `table operation keys`.
    func entries(after version: Int64) throws -> [String] {
        try store.changes(after: version).map { "\($0.table) \($0.operation.rawValue) \($0.rowKeys)" }
    }

    /// Each key is written once, exactly (type and bytes): its text is made when the log is read.
    @Test func eachKeyIsWrittenOnceExactly() throws {
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE numbers(id INTEGER PRIMARY KEY, body TEXT);
                CREATE TABLE words(id TEXT PRIMARY KEY, body TEXT);
                """)
        }
        let version = try store.currentVersion()
        try store.write { db in
            for key in 0..<300 { try db.execute("INSERT INTO numbers VALUES (?, 'x')", [key]) }
            try db.execute("INSERT INTO words VALUES ('a', 'x'), ('b', 'y')")
            try db.execute("UPDATE numbers SET body = 'y' WHERE id < 3")
        }
        let rows = try store.read { db in
            try db.fetchAll("SELECT table_name, row_keys, exact_keys FROM ripple_changes WHERE version > ?", [version])
        }
        #expect(rows.count == 3)
        #expect(rows.allSatisfy { $0["row_keys"] == .null })
        #expect(rows.allSatisfy { if case .blob? = $0["exact_keys"] { true } else { false } })
        #expect(try entries(after: version).sorted() == [
            "numbers insert \((0..<300).map(String.init))", "numbers update [\"0\", \"1\", \"2\"]", "words insert [\"a\", \"b\"]",
        ])
    }

    @Test func integerKeysAreWrittenInDecimalAtTheirExtremes() throws {
        try store.write { db in try db.execute("CREATE TABLE numbers(id INTEGER PRIMARY KEY, body TEXT)") }
        let version = try store.currentVersion()
        let keys: [Int64] = [0, 7, -1, 10, -10, 1_234_567_890_123, .max, .min]
        try store.write { db in
            for key in keys { try db.execute("INSERT INTO numbers VALUES (?, 'x')", [key]) }
        }
        #expect(try entries(after: version) == ["numbers insert \(keys.map(String.init))"])
    }

    @Test func textRealBlobAndNullKeysAreWrittenAsTheirKeyText() throws {
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE texts(id TEXT PRIMARY KEY, body TEXT);
                CREATE TABLE reals(id REAL PRIMARY KEY, body TEXT);
                CREATE TABLE blobs(id BLOB PRIMARY KEY, body TEXT);
                """)
        }
        let version = try store.currentVersion()
        let awkward = "quote \" backslash \\ tab \t newline \n bell \u{7} é 🎉"
        try store.write { db in
            try db.execute("INSERT INTO texts VALUES (?, 'a')", [awkward])
            try db.execute("INSERT INTO texts VALUES (NULL, 'b')")   // a TEXT key of a rowid table may be NULL
            try db.execute("INSERT INTO reals VALUES (1.5, 'c')")
            try db.execute("INSERT INTO blobs VALUES (X'00FF10ab', 'd')")
            try db.execute("INSERT INTO blobs VALUES (X'', 'e')")
        }
        let log = try store.changes(after: version)
        #expect(log.first { $0.table == "texts" }?.rowKeys == [awkward, "NULL"])
        #expect(log.first { $0.table == "reals" }?.rowKeys == ["1.5"])
        #expect(log.first { $0.table == "blobs" }?.rowKeys == ["00ff10ab", ""])
    }

    @Test func textThatIsNotValidUTF8IsRepairedLikeAnySwiftString() throws {
        try store.write { db in try db.execute("CREATE TABLE texts(id TEXT PRIMARY KEY, body TEXT)") }
        let version = try store.currentVersion()
        try store.write { db in try db.execute("INSERT INTO texts VALUES (CAST(X'61C3' AS TEXT), 'x')") }
        #expect(try store.changes(after: version).first?.rowKeys == ["a\u{FFFD}"])
    }

    /// SQLite compares keys byte by byte: a key changed to a canonically equivalent spelling (`é`
    /// precomposed, then decomposed) is another row, so the log has a delete and an insert —
    /// Swift's `==` on strings would have called it the same key and logged an update.
    @Test func aKeyChangedToACanonicallyEquivalentSpellingIsADeleteAndAnInsert() throws {
        try store.write { db in
            try db.execute("CREATE TABLE words(id TEXT PRIMARY KEY, body TEXT)")
            try db.execute("INSERT INTO words VALUES (?, 'x')", ["caf\u{E9}"])
        }
        let version = try store.currentVersion()
        try store.write { db in try db.execute("UPDATE words SET id = ? WHERE id = ?", ["cafe\u{301}", "caf\u{E9}"]) }
        let log = try store.changes(after: version)
        #expect(log.map(\.operation) == [.delete, .insert])
        #expect(log.map { $0.rowKeys.map { Array($0.unicodeScalars) } } == [
            [Array("caf\u{E9}".unicodeScalars)], [Array("cafe\u{301}".unicodeScalars)],
        ])
    }

    @Test func updatesKeepingOrChangingACompositeKey() throws {
        try store.write { db in
            try db.execute("CREATE TABLE pairs(a TEXT, b INTEGER, body TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID")
            try db.execute("INSERT INTO pairs VALUES ('x', 1, 'p'), ('y\"', -2, 'q')")
        }
        let version = try store.currentVersion()
        try store.write { db in
            try db.execute("UPDATE pairs SET body = 'r' WHERE a = 'x'")
            try db.execute("UPDATE pairs SET b = 3 WHERE a = 'y\"'")
        }
        #expect(try entries(after: version) == [
            "pairs delete [\"[\\\"y\\\\\\\"\\\",\\\"-2\\\"]\"]",
            "pairs insert [\"[\\\"y\\\\\\\"\\\",\\\"3\\\"]\"]",
            "pairs update [\"[\\\"x\\\",\\\"1\\\"]\"]",
        ])
    }

    @Test func interleavedTablesAndOperationsLogOneRowPerGroupWithKeysInOrder() throws {
        try store.write { db in
            try db.execute("CREATE TABLE a(id TEXT PRIMARY KEY)")
            try db.execute("CREATE TABLE b(id INTEGER PRIMARY KEY)")
        }
        let version = try store.currentVersion()
        try store.write { db in
            try db.execute("INSERT INTO a VALUES ('a1')")
            try db.execute("INSERT INTO b VALUES (1)")
            try db.execute("INSERT INTO a VALUES ('a2')")
            try db.execute("DELETE FROM a WHERE id = 'a1'")
            try db.execute("INSERT INTO b VALUES (2)")
            try db.execute("INSERT INTO a VALUES ('a3')")
        }
        #expect(try entries(after: version) == [
            "a delete [\"a1\"]", "a insert [\"a1\", \"a2\", \"a3\"]", "b insert [\"1\", \"2\"]",
        ])
    }

    @Test func aRolledBackSavepointDropsItsKeysAndLaterKeysFollowOn() throws {
        struct Abandon: Error {}
        try store.write { db in try db.execute("CREATE TABLE t(id TEXT PRIMARY KEY)") }
        let version = try store.currentVersion()
        try store.write { db in
            try db.execute("INSERT INTO t VALUES ('before')")
            _ = try? db.transaction {
                try db.execute("INSERT INTO t VALUES ('undone-1')")
                try db.execute("INSERT INTO t VALUES ('undone-2')")
                throw Abandon()
            }
            try db.execute("INSERT INTO t VALUES ('after')")
        }
        #expect(try entries(after: version) == ["t insert [\"before\", \"after\"]"])
    }

    @Test func groupsAndChangesDescribeTheSameCapture() throws {
        // A capture of our own on a private in-memory store's writer (it replaces the store's hook).
        let capture = ChangeCapture()
        let memory = try Store.inMemory()
        try withExtendedLifetime(capture) {
            try memory.writeWithoutTransaction { db in
                try db.executeScript("CREATE TABLE t(id TEXT PRIMARY KEY); CREATE TABLE n(id INTEGER PRIMARY KEY)")
                capture.install(on: db)
                try capture.refreshSchemaIfNeeded(db)
                capture.reset()
                try db.execute("INSERT INTO t VALUES ('k\"1')")
                try db.execute("INSERT INTO n VALUES (5)")
                try db.execute("INSERT INTO t VALUES ('k2')")
                try db.execute("DELETE FROM n")
                #expect(capture.changes.map { "\($0.table) \($0.operation.rawValue) \($0.key)" } == [
                    "t insert k\"1", "n insert 5", "t insert k2", "n delete 5",
                ])
                func list(_ keys: [SQLValue]) -> [UInt8] {
                    var list: [UInt8] = []
                    for key in keys { RowKey(key).withEncoding { RowKey.appendToList($0, to: &list) } }
                    return list
                }
                #expect(capture.groups() == [
                    ChangeCapture.Group(table: "t", operation: .insert, count: 2, keys: list([.text("k\"1"), .text("k2")])),
                    ChangeCapture.Group(table: "n", operation: .insert, count: 1, keys: list([.integer(5)])),
                    ChangeCapture.Group(table: "n", operation: .delete, count: 1, keys: list([.integer(5)]),
                                        beforeImages: [0]),   // no before-image: the row was inserted in the transaction
                ])
                #expect(RowKey.list(capture.groups()[0].keys) == [RowKey(.text("k\"1")), RowKey(.text("k2"))])
                let mark = capture.mark
                try db.execute("INSERT INTO t VALUES ('k3')")
                capture.rollback(to: mark)
                #expect(capture.changes.count == 4)
                #expect(capture.groups().first.flatMap { RowKey.list($0.keys) } == [RowKey(.text("k\"1")), RowKey(.text("k2"))])
                capture.reset()
                #expect(capture.isEmpty && capture.changes.isEmpty && capture.groups().isEmpty)
            }
        }
    }

    @Test func jsonTextArraysEscapeOnlyWhatJSONRequires() {
        #expect(JSONText.array([]) == "[]")
        #expect(JSONText.array(["a", "", "b c"]) == "[\"a\",\"\",\"b c\"]")
        #expect(JSONText.array(["q\"", "b\\", "\u{1}\n", "é🎉"]) == "[\"q\\\"\",\"b\\\\\",\"\\u0001\\u000a\",\"é🎉\"]")
        let long = String(repeating: "0123456789abcdef", count: 8)   // past the vectorized check's width
        #expect(JSONText.array([long, long + "\""]) == "[\"\(long)\",\"\(long)\\\"\"]")
    }

    // MARK: Keys announced by a collection's inserts

    struct Note: Codable, Sendable, Identifiable, Equatable {
        var id: String
        var body: String
    }

    @Test func aCollectionsInsertsLogTheKeysTheyBound() throws {
        let notes = try store.collection("notes", of: Note.self)
        let version = try store.currentVersion()
        let ids = ["plain", "quote \" and \\", "é🎉", "", String(repeating: "long-", count: 40)]
        try notes.insert(contentsOf: ids.map { Note(id: $0, body: "b") })
        try notes.upsert(contentsOf: [Note(id: "plain", body: "changed"), Note(id: "new", body: "n")])
        try notes.insert(Note(id: "one", body: "o"))
        #expect(try store.changes(after: version).map { "v\($0.version - version) \($0.operation.rawValue) \($0.rowKeys)" } == [
            "v1 insert \(ids)", "v2 insert [\"new\"]", "v2 update [\"plain\"]", "v3 insert [\"one\"]",
        ])
    }

    /// Rows a trigger inserts into the same table are the trigger's, not the statement's: their
    /// keys are read from the rows, before or after the announced one.
    @Test func rowsInsertedByTriggersKeepTheirOwnKeys() throws {
        let notes = try store.collection("notes", of: Note.self)
        try store.write { db in
            try db.executeScript("""
                CREATE TRIGGER before_note BEFORE INSERT ON notes WHEN NEW.id LIKE 'b%'
                BEGIN INSERT INTO notes(id, body) VALUES ('shadow-' || NEW.id, 'x'); END;
                CREATE TRIGGER after_note AFTER INSERT ON notes WHEN NEW.id LIKE 'a%'
                BEGIN INSERT INTO notes(id, body) VALUES ('echo-' || NEW.id, 'x'); END;
                """)
        }
        let version = try store.currentVersion()
        try notes.insert(contentsOf: ["b1", "a1", "c1"].map { Note(id: $0, body: "n") })
        #expect(try store.changes(after: version).first?.rowKeys == ["shadow-b1", "b1", "a1", "echo-a1", "c1"])
    }

    /// A key column whose type converts text (`NUMERIC`: `'007'` is stored as 7) is logged as
    /// stored, not as bound; a collection refuses to write such a key (it would not read back).
    @Test func aKeyColumnThatConvertsTextIsLoggedAsStored() throws {
        try store.write { db in try db.execute("CREATE TABLE coded(id NUMERIC PRIMARY KEY, body TEXT)") }
        let coded = try store.collection("coded", of: Note.self)
        let version = try store.currentVersion()
        #expect(throws: StoreError.self) { try coded.insert(Note(id: "007", body: "b")) }
        try store.write { db in try db.execute("INSERT INTO coded VALUES ('007', 'b')") }
        try coded.insert(contentsOf: [Note(id: "x7", body: "c")])
        #expect(try store.changes(after: version).map(\.rowKeys) == [["7"], ["x7"]])
        #expect(ChangeCapture.storesTextAsGiven(declaredType: "VARCHAR(36)"))
        #expect(ChangeCapture.storesTextAsGiven(declaredType: ""))
        #expect(ChangeCapture.storesTextAsGiven(declaredType: "blob"))
        #expect(!ChangeCapture.storesTextAsGiven(declaredType: "CHARINT"))   // INT wins
        #expect(!ChangeCapture.storesTextAsGiven(declaredType: "NUMERIC"))
        #expect(!ChangeCapture.storesTextAsGiven(declaredType: "REAL"))
    }

    // MARK: The row coders' fast paths

    @Test func manyRowsDecodeInOrderThroughTheGrowingBuffer() throws {
        let todos = try store.collection("todos", of: Todo.self)
        let batch = (0..<1_000).map { CollectionTests.makeTodo($0) }
        try todos.insert(contentsOf: batch)
        #expect(try todos.order(by: Column("rank")).fetchAll() == batch)
        #expect(try todos.limit(65).fetchAll() == Array(batch.prefix(65)))
        #expect(try todos.limit(0).fetchAll().isEmpty)
    }

    @Test func aRowThatDoesNotDecodeMidwayThrowsNamingTheColumn() throws {
        try store.write { db in
            try db.execute("CREATE TABLE todos(id TEXT PRIMARY KEY, title TEXT, rank INTEGER, done INTEGER, tags TEXT, due REAL)")
            for index in 0..<200 {
                try db.execute("INSERT INTO todos VALUES (?, ?, ?, 0, '[]', NULL)",
                               [UUID().uuidString, "t\(index)", index == 150 ? "not a number" : "\(index)"])
            }
        }
        let todos = try store.collection("todos", of: Todo.self)
        let error = try #require(throws: StoreError.self) { try todos.fetchAll() }
        #expect(error.kind == .decoding)
        #expect(error.message.contains("column \"rank\": expected Int, found text 'not a number'"))
    }

    @Test func sequencesThatAreNotArraysInsertLikeArrays() throws {
        let todos = try store.collection("todos", of: Todo.self)
        let batch = (0..<100).map { CollectionTests.makeTodo($0) }
        try todos.insert(contentsOf: batch.lazy.map { $0 })   // no contiguous storage
        try todos.upsert(contentsOf: batch[10..<20])          // an array slice: read in place
        #expect(try todos.order(by: Column("rank")).fetchAll() == batch)
        var changed = batch[5]
        changed.title = "changed"
        try todos.update(contentsOf: CollectionOfOne(changed))
        #expect(try todos.fetch(id: changed.id) == changed)
    }
}
