import Foundation
@testable import Ripple
import Testing
import RippleTesting

/// A statement that SQLite stops part-way, inside a write that catches its error and commits:
/// the change log names exactly what SQLite kept of it — nothing when SQLite undid the statement
/// (`ABORT`, the default, whether from a constraint, an upsert or a trigger's `RAISE(ABORT)`),
/// the rows before the failure when it kept them (`FAIL`, `RAISE(FAIL)`).
@Suite struct StatementRollbackCaptureTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("statements.sqlite"))
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE items(id INTEGER PRIMARY KEY, code TEXT UNIQUE, n INTEGER CHECK (n < 100));
                CREATE TABLE words(id TEXT PRIMARY KEY, n INTEGER CHECK (n < 100)) WITHOUT ROWID;
                CREATE TABLE audit(id INTEGER PRIMARY KEY, what TEXT);
                CREATE TABLE counters(name TEXT PRIMARY KEY, n INTEGER);
                INSERT INTO counters VALUES ('items', 0);
                INSERT INTO items VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3);
                INSERT INTO words VALUES ('x', 1), ('y', 2), ('z', 3);
                """)
        }
    }

    /// One case: triggers to add, a statement that fails part-way, and the log entries of the
    /// write that ran it (caught), then inserted `('after')` into `audit`.
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var triggers = ""
        var statement: String
        var logged: [String]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "a UNIQUE failure on the third row undoes the statement",
             statement: "INSERT INTO items(id, code, n) VALUES (10, 'p', 1), (11, 'q', 1), (12, 'a', 1)",
             logged: ["audit insert [\"100\"]"]),
        Case(name: "OR FAIL keeps the rows before the failure",
             statement: "INSERT OR FAIL INTO items(id, code, n) VALUES (10, 'p', 1), (11, 'q', 1), (12, 'a', 1)",
             logged: ["items insert [\"10\", \"11\"]", "audit insert [\"100\"]"]),
        Case(name: "a CHECK failure on the third row of an update undoes it",
             statement: "UPDATE items SET n = n * 40",
             logged: ["audit insert [\"100\"]"]),
        Case(name: "UPDATE OR FAIL keeps the rows updated before the failure",
             statement: "UPDATE OR FAIL items SET n = n * 40",
             logged: ["items update [\"1\", \"2\"]", "audit insert [\"100\"]"]),
        Case(name: "a WITHOUT ROWID table's update undone by a CHECK",
             statement: "UPDATE words SET n = n * 40",
             logged: ["audit insert [\"100\"]"]),
        Case(name: "a WITHOUT ROWID table's UPDATE OR FAIL keeps the rows before the failure",
             statement: "UPDATE OR FAIL words SET n = n * 40",
             logged: ["words update [\"x\", \"y\"]", "audit insert [\"100\"]"]),
        Case(name: "an upsert that fails with FAIL on its third row keeps its first two",
             statement: """
                INSERT OR FAIL INTO items(id, code, n) VALUES (10, 'p', 1), (1, 'a', 5), (2, 'b', 500)
                ON CONFLICT(id) DO UPDATE SET n = excluded.n
                """,
             logged: ["items insert [\"10\"]", "items update [\"1\"]", "audit insert [\"100\"]"]),
        Case(name: "an upsert whose third row fails undoes its inserts and updates",
             statement: """
                INSERT INTO items(id, code, n) VALUES (10, 'p', 1), (1, 'a', 5), (2, 'b', 500)
                ON CONFLICT(id) DO UPDATE SET n = excluded.n
                """,
             logged: ["audit insert [\"100\"]"]),
        Case(name: "RAISE(ABORT) in a trigger undoes the statement and its triggers' writes",
             triggers: """
                CREATE TRIGGER items_audit AFTER INSERT ON items BEGIN
                    INSERT INTO audit(what) VALUES ('added ' || NEW.code);
                    SELECT RAISE(ABORT, 'no') WHERE NEW.code = 'r';
                END;
                """,
             statement: "INSERT INTO items(id, code, n) VALUES (10, 'p', 1), (11, 'q', 1), (12, 'r', 1)",
             logged: ["audit insert [\"100\"]"]),
        Case(name: "RAISE(FAIL) in a trigger keeps what came before it",
             triggers: """
                CREATE TRIGGER items_audit AFTER INSERT ON items BEGIN
                    INSERT INTO audit(id, what) VALUES (NEW.id + 50, 'added ' || NEW.code);
                    SELECT RAISE(FAIL, 'no') WHERE NEW.code = 'r';
                END;
                """,
             statement: "INSERT INTO items(id, code, n) VALUES (10, 'p', 1), (11, 'q', 1), (12, 'r', 1)",
             logged: ["items insert [\"10\", \"11\", \"12\"]", "audit insert [\"60\", \"61\", \"62\", \"100\"]"]),
        Case(name: "a BEFORE trigger's update undone with the first row's CHECK failure",
             triggers: "CREATE TRIGGER count_items BEFORE INSERT ON items BEGIN UPDATE counters SET n = n + 1; END;",
             statement: "INSERT INTO items(id, code, n) VALUES (10, 'p', 500)",
             logged: ["audit insert [\"100\"]"]),
        Case(name: "a BEFORE trigger's update kept when the first row fails with FAIL",
             triggers: "CREATE TRIGGER count_items BEFORE INSERT ON items BEGIN UPDATE counters SET n = n + 1; END;",
             statement: "INSERT OR FAIL INTO items(id, code, n) VALUES (10, 'p', 500)",
             logged: ["counters update [\"items\"]", "audit insert [\"100\"]"]),
        Case(name: "a BEFORE trigger's insert undone with the first row's failure",
             triggers: "CREATE TRIGGER audit_items BEFORE INSERT ON items BEGIN INSERT INTO audit(id) VALUES (NEW.id + 50); END;",
             statement: "INSERT INTO items(id, code, n) VALUES (10, 'a', 1)",
             logged: ["audit insert [\"100\"]"]),
        Case(name: "a BEFORE trigger's insert kept when the first row fails with FAIL",
             triggers: "CREATE TRIGGER audit_items BEFORE INSERT ON items BEGIN INSERT INTO audit(id) VALUES (NEW.id + 50); END;",
             statement: "INSERT OR FAIL INTO items(id, code, n) VALUES (10, 'a', 1)",
             logged: ["audit insert [\"60\", \"100\"]"]),
        Case(name: "a BEFORE trigger's insert kept when the first row an UPDATE OR FAIL reaches fails its CHECK",
             triggers: "CREATE TRIGGER audit_n BEFORE UPDATE OF n ON items BEGIN INSERT INTO audit(id) VALUES (NEW.id + 50); END;",
             statement: "UPDATE OR FAIL items SET n = CASE id WHEN 1 THEN 500 ELSE 5 END WHERE id IN (3, 2, 1)",
             logged: ["audit insert [\"51\", \"100\"]"]),
        Case(name: "a delete stopped on its third row by RAISE(ABORT)",
             triggers: "CREATE TRIGGER keep_c BEFORE DELETE ON items BEGIN SELECT RAISE(ABORT, 'kept') WHERE OLD.code = 'c'; END;",
             statement: "DELETE FROM items",
             logged: ["audit insert [\"100\"]"]),
        Case(name: "a delete stopped on its third row by RAISE(FAIL) keeps the first two",
             triggers: "CREATE TRIGGER keep_c BEFORE DELETE ON items BEGIN SELECT RAISE(FAIL, 'kept') WHERE OLD.code = 'c'; END;",
             statement: "DELETE FROM items",
             logged: ["items delete [\"1\", \"2\"]", "audit insert [\"100\"]"]),
        Case(name: "REPLACE's deletes undone with the statement",
             statement: "INSERT OR REPLACE INTO items(id, code, n) VALUES (10, 'a', 1), (11, 'q', 500)",
             logged: ["audit insert [\"100\"]"]),
    ]

    @Test(arguments: cases)
    func theLogNamesWhatSQLiteKept(_ testCase: Case) throws {
        if !testCase.triggers.isEmpty { try store.write { db in try db.executeScript(testCase.triggers) } }
        let before = try store.read { db in try snapshot(db) }
        let version = try store.currentVersion()
        try store.write { db in
            #expect(throws: DatabaseError.self) { try db.execute(testCase.statement) }
            try db.execute("INSERT INTO audit(id, what) VALUES (100, 'after')")
        }
        let logged = try store.changes(after: version).map { "\($0.table) \($0.operation.rawValue) \($0.rowKeys)" }
        #expect(logged.sorted() == testCase.logged.sorted())
        // The log agrees with the data: the tables it does not name are as they were.
        let after = try store.read { db in try snapshot(db) }
        let named = Set(testCase.logged.map { String($0.prefix { $0 != " " }) })
        for (table, rows) in before where !named.contains(table) {
            #expect(after[table] == rows, "\(table) changed but is not in the log")
        }
    }

    /// The same through ``Database/executeScript(_:)``: the script's earlier statements are kept
    /// and logged, the failing one's rows are not.
    @Test func aScriptStoppedByAFailingStatementLogsItsEarlierStatementsOnly() throws {
        let version = try store.currentVersion()
        try store.write { db in
            #expect(throws: DatabaseError.self) {
                try db.executeScript("""
                    INSERT INTO audit(id, what) VALUES (7, 'kept');
                    INSERT INTO items(id, code, n) VALUES (10, 'p', 1), (11, 'a', 1);
                    INSERT INTO audit(id, what) VALUES (8, 'never run');
                    """)
            }
            try db.execute("INSERT INTO audit(id, what) VALUES (100, 'after')")
        }
        let logged = try store.changes(after: version).map { "\($0.table) \($0.operation.rawValue) \($0.rowKeys)" }
        #expect(logged == ["audit insert [\"7\", \"100\"]"])
    }

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var code: String
        var n: Int
    }

    /// A collection's insert whose trigger writes and then raises: the trigger's write is undone
    /// with the insert.
    @Test func aCollectionInsertUndoneByItsTriggerLogsNothingOfIt() throws {
        let items = try store.collection("items", of: Item.self)
        try store.write { db in
            try db.execute("""
                CREATE TRIGGER items_audit AFTER INSERT ON items BEGIN
                    INSERT INTO audit(what) VALUES ('added ' || NEW.code);
                    SELECT RAISE(ABORT, 'no') WHERE NEW.code = 'r';
                END
                """)
        }
        let version = try store.currentVersion()
        try store.write { db in
            #expect(throws: DatabaseError.self) { try items.insert(Item(id: 12, code: "r", n: 1), in: db) }
            try items.insert(Item(id: 13, code: "s", n: 1), in: db)
        }
        let logged = try store.changes(after: version).map { "\($0.table) \($0.operation.rawValue) \($0.rowKeys)" }
        #expect(logged.sorted() == ["audit insert [\"1\"]", "items insert [\"13\"]"])
    }

    /// A live query over a table the undone statement touched is not told of it, and one over
    /// the rows kept by `FAIL` is.
    @Test func liveQueriesSeeWhatSQLiteKept() throws {
        let live = store.liveQuery(sql: "SELECT id, code FROM items ORDER BY id", identity: "id")
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: live)
        defer { subscription.cancel() }
        try store.write { db in
            _ = try? db.execute("INSERT OR FAIL INTO items(id, code, n) VALUES (10, 'p', 1), (11, 'a', 1)")
            _ = try? db.execute("INSERT INTO items(id, code, n) VALUES (20, 'q', 1), (21, 'b', 1)")
        }
        let fresh = try store.read { db in try db.fetchAll("SELECT id, code FROM items ORDER BY id") }
        #expect(fresh.count == 4)
        #expect(subscriber.items == fresh)
        #expect(subscriber.failures.isEmpty)
    }

    private func snapshot(_ db: Database) throws -> [String: [Row]] {
        var tables: [String: [Row]] = [:]
        for table in ["items", "words", "audit", "counters"] {
            tables[table] = try db.fetchAll("SELECT * FROM \(table) ORDER BY 1")
        }
        return tables
    }
}

extension StatementRollbackCaptureTests {
    /// A capture-fuzzer find: a BEFORE trigger's write kept by `UPDATE OR FAIL` whose first row
    /// fails a CHECK, in a write that wrote an FTS5 table before (whose module flushes its rows,
    /// with statements of its own, when the next statement begins).
    @Test func aTriggerWriteKeptByFailAfterAFullTextInsert() throws {
        try store.write { db in
            try db.executeScript("""
                CREATE VIRTUAL TABLE notes USING fts5(body);
                CREATE TABLE guarded(id INTEGER PRIMARY KEY, v INTEGER, w TEXT CHECK (w IS NOT 'res-bad'),
                    s TEXT AS (coalesce(w, '') || '!') STORED);
                CREATE TABLE trail(n INTEGER PRIMARY KEY, what TEXT);
                CREATE TRIGGER trail_update BEFORE UPDATE OF w ON guarded WHEN new.w LIKE 'res%' BEGIN
                    INSERT INTO trail(what) VALUES (new.w); SELECT RAISE(FAIL, 'refused') WHERE new.w LIKE '%!'; END;
                INSERT INTO guarded VALUES (35, NULL, 'res-35'), (55, NULL, 'res-55'), (56, NULL, 'res-56');
                INSERT INTO trail(what) VALUES ('a'), ('b');
                """)
        }
        let version = try store.currentVersion()
        try store.write { db in
            try db.execute("INSERT INTO notes(body) VALUES ('apple')")
            try db.execute("INSERT INTO audit(id, what) VALUES (100, 'first')")
            #expect(throws: DatabaseError.self) {
                try db.execute("UPDATE OR FAIL guarded SET w = CASE id WHEN 35 THEN 'res-bad' ELSE 'res-u' END WHERE id IN (56, 55, 35)")
            }
        }
        let logged = try store.changes(after: version).map { "\($0.table) \($0.operation.rawValue) \($0.rowKeys)" }
        #expect(logged.sorted() == ["audit insert [\"100\"]", "notes update []", "trail insert [\"3\"]"])
    }
}
