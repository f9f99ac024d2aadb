import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Tables that SQLite accepts in every form — names in another case, no declared key, the rarer
/// spellings of keys and rowids, `WITHOUT ROWID` laid out unusually, generated and hidden
/// columns, virtual tables — observed exactly: after every write, a live query's list equals
/// its query read afresh, and the history at every version equals the state then.
@Suite struct CaptureFidelityTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("fidelity.sqlite"))
    }

    /// A table, a query over it, and writes made with raw SQL.
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var schema: String
        /// The table history rewinds (as written in `schema`, or in another case).
        var table: String
        var query: String
        var identity: String
        var writes: [String]
        /// History over this table is refused with an error that names the reason.
        var historyRefused = false
        /// History over this table is exact, or refused with a reason (it depends on the SQLite
        /// library: see ``PreupdateColumns/misreadsRowidAfterVirtualColumn``).
        var historyMayBeRefused = false
        var testDescription: String { name }
    }

    /// Subscribes `query` live; after each write, its list must equal the query read afresh.
    /// Then the history of every version equals the state read right after its write.
    func check(_ testCase: Case, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try store.write { db in try db.executeScript(testCase.schema) }
        let live = store.liveQuery(sql: testCase.query, identity: testCase.identity)
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: live)
        defer { subscription.cancel() }
        func fresh() throws -> [Row] { try store.read { db in try db.fetchAll(testCase.query) } }
        var states: [(version: Int64, rows: [Row])] = [(try store.currentVersion(), try fresh())]
        #expect(subscriber.items == states[0].rows, "initial", sourceLocation: sourceLocation)
        for write in testCase.writes {
            try store.write { db in try db.executeScript(write) }
            let rows = try fresh()
            #expect(subscriber.items == rows, "after \(write)", sourceLocation: sourceLocation)
            states.append((try store.currentVersion(), rows))
        }
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)", sourceLocation: sourceLocation)
        #expect(subscriber.error == nil, "\(String(describing: subscriber.error))", sourceLocation: sourceLocation)

        let (first, last) = (states[0].version, states[states.count - 1].version)
        do {
            let steps = try store.history(table: testCase.table, sql: testCase.query, identity: testCase.identity,
                                          from: first, to: last)
            #expect(!testCase.historyRefused, "history of \(testCase.table) should be refused", sourceLocation: sourceLocation)
            for (version, rows) in states {
                let snapshot = steps.last { $0.version <= version }?.snapshot ?? []
                #expect(snapshot == rows, "history at version \(version)", sourceLocation: sourceLocation)
            }
        } catch let error as StoreError where testCase.historyRefused || testCase.historyMayBeRefused {
            #expect(error.kind == .history, sourceLocation: sourceLocation)
        }
    }

    static let keyForms: [Case] = [
        Case(name: "a name in another case than the schema's", schema: "CREATE TABLE Items(id INTEGER PRIMARY KEY, v TEXT)",
             table: "ITEMS", query: "SELECT * FROM items ORDER BY id", identity: "id",
             writes: ["INSERT INTO ITEMS VALUES (1, 'a'), (2, 'b')", "UPDATE iTeMs SET v = 'c' WHERE id = 1",
                      "DELETE FROM items WHERE id = 2", "UPDATE Items SET id = 5 WHERE id = 1"]),
        Case(name: "no declared key", schema: "CREATE TABLE loose(a TEXT, b INTEGER)",
             table: "loose", query: "SELECT rowid AS r, a, b FROM loose ORDER BY r", identity: "r",
             writes: ["INSERT INTO loose VALUES ('x', 1), ('x', 1), ('y', 2)", "UPDATE loose SET b = b + 1 WHERE a = 'x'",
                      "DELETE FROM loose WHERE rowid = 2", "UPDATE loose SET rowid = 9 WHERE rowid = 1",
                      "INSERT INTO loose(rowid, a, b) VALUES (2, 'z', 3)"]),
        Case(name: "INTEGER PRIMARY KEY DESC is not the rowid",
             schema: "CREATE TABLE descending(id INTEGER PRIMARY KEY DESC, v TEXT)",
             table: "descending", query: "SELECT * FROM descending ORDER BY id", identity: "id",
             writes: ["INSERT INTO descending VALUES (1, 'a'), (2, 'b')", "UPDATE descending SET id = 7 WHERE id = 1",
                      "UPDATE descending SET v = 'q' WHERE id = 2", "DELETE FROM descending WHERE id = 7"]),
        Case(name: "PRIMARY KEY (id DESC) as a table constraint is the rowid",
             schema: "CREATE TABLE constrained(id INTEGER, v TEXT, PRIMARY KEY (id DESC))",
             table: "constrained", query: "SELECT * FROM constrained ORDER BY id", identity: "id",
             writes: ["INSERT INTO constrained VALUES (1, 'a'), (2, 'b')", "UPDATE constrained SET id = 7 WHERE id = 1",
                      "DELETE FROM constrained WHERE id = 2"]),
        Case(name: "INT PRIMARY KEY is not the rowid", schema: "CREATE TABLE ints(id INT PRIMARY KEY, v TEXT)",
             table: "ints", query: "SELECT * FROM ints ORDER BY id", identity: "id",
             writes: ["INSERT INTO ints VALUES (1, 'a'), (2, 'b')", "UPDATE ints SET id = 3 WHERE id = 1",
                      "UPDATE ints SET v = 'z' WHERE id = 2", "DELETE FROM ints WHERE id = 3"]),
        Case(name: "a lower-case integer primary key is the rowid", schema: "create table lower(id integer primary key, v text)",
             table: "lower", query: "SELECT * FROM lower ORDER BY id", identity: "id",
             writes: ["INSERT INTO lower VALUES (1, 'a'), (2, 'b')", "UPDATE lower SET id = 3 WHERE id = 1",
                      "DELETE FROM lower WHERE id = 2"]),
        Case(name: "WITHOUT ROWID across lines and in lower case",
             schema: "CREATE TABLE spaced(k TEXT PRIMARY KEY, v INTEGER) without\n   rowid",
             table: "spaced", query: "SELECT * FROM spaced ORDER BY k", identity: "k",
             writes: ["INSERT INTO spaced VALUES ('a', 1), ('b', 2)", "UPDATE spaced SET k = 'c' WHERE k = 'a'",
                      "UPDATE spaced SET v = 9 WHERE k = 'b'", "DELETE FROM spaced WHERE k = 'c'"]),
        Case(name: "WITHOUT ROWID after a comment",
             schema: "CREATE TABLE commented(k INTEGER PRIMARY KEY, v INTEGER) /* the key */ WITHOUT/**/ROWID",
             table: "commented", query: "SELECT * FROM commented ORDER BY k", identity: "k",
             writes: ["INSERT INTO commented VALUES (1, 1), (2, 2)", "UPDATE commented SET k = 3 WHERE k = 1",
                      "DELETE FROM commented WHERE k = 2"]),
        Case(name: "a rowid table whose text mentions WITHOUT ROWID",
             schema: "CREATE TABLE mentions(id TEXT PRIMARY KEY, note TEXT DEFAULT 'WITHOUT ROWID')",
             table: "mentions", query: "SELECT rowid AS r, * FROM mentions ORDER BY id", identity: "r",
             writes: ["INSERT INTO mentions(id) VALUES ('a'), ('b')", "UPDATE mentions SET id = 'c' WHERE id = 'a'",
                      "UPDATE mentions SET note = 'x' WHERE id = 'b'", "DELETE FROM mentions WHERE id = 'c'"]),
        Case(name: "columns that take every name of the rowid",
             schema: "CREATE TABLE shadowed(rowid TEXT, oid TEXT, _rowid_ TEXT, v INTEGER PRIMARY KEY)",
             table: "shadowed", query: "SELECT * FROM shadowed ORDER BY v", identity: "v",
             writes: ["INSERT INTO shadowed VALUES ('a', 'b', 'c', 1), ('d', 'e', 'f', 2)",
                      "UPDATE shadowed SET rowid = 'z' WHERE v = 1", "UPDATE shadowed SET v = 3 WHERE v = 2",
                      "DELETE FROM shadowed WHERE v = 1"]),
        Case(name: "generated columns before the key",
             schema: "CREATE TABLE generated(a INTEGER, twice INTEGER AS (a * 2), id TEXT PRIMARY KEY, stored INTEGER AS (a + 1) STORED)",
             table: "generated", query: "SELECT id, a, twice, stored FROM generated ORDER BY id", identity: "id",
             writes: ["INSERT INTO generated(a, id) VALUES (1, 'x'), (2, 'y')", "UPDATE generated SET a = 5 WHERE id = 'x'",
                      "UPDATE generated SET id = 'z' WHERE id = 'y'", "DELETE FROM generated WHERE id = 'x'"]),
        Case(name: "an INTEGER PRIMARY KEY after a VIRTUAL generated column",
             schema: "CREATE TABLE late(v INTEGER, g INTEGER AS (v * 2), id INTEGER PRIMARY KEY, w TEXT)",
             table: "late", query: "SELECT * FROM late ORDER BY id", identity: "id",
             writes: ["INSERT INTO late(v, id, w) VALUES (1, 10, 'a'), (2, 20, 'b')",
                      "UPDATE late SET w = 'c' WHERE id = 10", "UPDATE late SET id = 30 WHERE id = 20",
                      "DELETE FROM late WHERE id = 10"],
             historyMayBeRefused: true),
        Case(name: "a composite key in another order than the columns",
             schema: "CREATE TABLE pairs(v TEXT, b INTEGER, a TEXT, PRIMARY KEY (a, b))",
             table: "pairs", query: "SELECT a || '/' || b AS k, * FROM pairs ORDER BY a, b", identity: "k",
             writes: ["INSERT INTO pairs VALUES ('p', 1, 'x'), ('q', 2, 'x')", "UPDATE pairs SET b = 3 WHERE b = 1",
                      "UPDATE pairs SET v = 'r' WHERE b = 2", "DELETE FROM pairs WHERE b = 3"]),
    ]

    @Test(arguments: keyForms) func everyKeyFormIsObservedExactly(_ testCase: Case) throws {
        try check(testCase)
    }

    static let virtualTables: [Case] = [
        Case(name: "an FTS5 table", schema: "CREATE VIRTUAL TABLE notes USING fts5(title, body)",
             table: "notes", query: "SELECT rowid AS r, title, body FROM notes ORDER BY r", identity: "r",
             writes: ["INSERT INTO notes(title, body) VALUES ('a', 'one two'), ('b', 'three')",
                      "UPDATE notes SET body = 'four' WHERE title = 'a'", "DELETE FROM notes WHERE title = 'b'"],
             historyRefused: true),
        Case(name: "an FTS5 match", schema: "CREATE VIRTUAL TABLE Docs USING fts5(body)",
             table: "docs", query: "SELECT rowid AS r, body FROM docs WHERE docs MATCH 'apple' ORDER BY r", identity: "r",
             writes: ["INSERT INTO docs(body) VALUES ('apple pie'), ('pear')", "UPDATE docs SET body = 'apple tart' WHERE body = 'pear'",
                      "DELETE FROM docs WHERE body = 'apple pie'"],
             historyRefused: true),
    ]

    @Test(arguments: virtualTables) func virtualTablesAreObservedExactly(_ testCase: Case) throws {
        try check(testCase)
    }
}

extension CaptureFidelityTests {
    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    /// A collection named in another case than its table: the same table, observed row by row.
    @Test(arguments: ["ITEMS", "Items", "items"])
    func aCollectionNamedInAnotherCaseIsObserved(_ name: String) throws {
        try store.write { db in try db.execute("CREATE TABLE iTeMs(id INTEGER PRIMARY KEY, title TEXT NOT NULL)") }
        let items = try store.collection(name, of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.filter(Column("title") != "hidden").order(by: Column("id")).live())
        defer { subscription.cancel() }
        try items.insert(Item(id: 1, title: "a"))
        try store.write { db in try db.execute("INSERT INTO ITEMS VALUES (2, 'b')") }
        try store.write { db in try db.execute("UPDATE items SET title = 'c' WHERE id = 1") }
        try items.upsert(Item(id: 2, title: "hidden"))
        #expect(subscriber.items == [Item(id: 1, title: "c")])
        #expect(subscriber.items == (try items.filter(Column("title") != "hidden").order(by: Column("id")).fetchAll()))
        #expect(subscriber.failures.isEmpty)
    }

    /// A virtual table whose module keeps no shadow tables (fts5vocab reads another table's):
    /// no commit would say when its rows change, so a live query over it is refused, clearly.
    @Test func aLiveQueryOverAVirtualTableWithoutShadowTablesIsRefused() throws {
        try store.write { db in
            try db.executeScript("""
                CREATE VIRTUAL TABLE notes USING fts5(body);
                CREATE VIRTUAL TABLE words USING fts5vocab(notes, row);
                INSERT INTO notes VALUES ('apple pie');
                """)
        }
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: "SELECT term FROM words", identity: "term"))
        defer { subscription.cancel() }
        #expect(subscriber.waitForError())
        let message = "\(subscriber.error.map { "\($0)" } ?? "")"
        #expect(message.contains("words") && message.contains("virtual table"), "\(message)")
    }

    /// A write that changes a virtual table inside a savepoint that rolls back takes no version.
    @Test func aVirtualTableWriteRolledBackToASavepointTakesNoVersion() throws {
        try store.write { db in try db.execute("CREATE VIRTUAL TABLE notes USING fts5(body)") }
        let version = try store.currentVersion()
        try store.write { db in
            try? db.savepoint {
                try db.execute("INSERT INTO notes VALUES ('gone')")
                throw CancellationError()
            }
        }
        #expect(try store.currentVersion() == version)
    }
}
