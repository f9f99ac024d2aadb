import Foundation
import Ripple
import Testing
import RippleTesting

@Suite struct ChangeLogTests {
    let directory: TemporaryDirectory
    let store: Store
    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("log.sqlite"))
    }

    func entries(after version: Int64 = 0) throws -> [String] {
        try store.changes(after: version).map { "v\($0.version) \($0.table) \($0.operation.rawValue) \($0.rowKeys)" }
    }

    @Test func everyCommittedWriteThatChangesRowsOrTheSchemaGetsTheNextVersion() throws {
        #expect(try store.currentVersion() == 0)
        try store.write { db in try db.execute("CREATE TABLE notes(id TEXT PRIMARY KEY, body TEXT)") }
        #expect(try store.currentVersion() == 1, "a schema change may change any query's result")
        try store.write { db in try db.execute("INSERT INTO notes VALUES ('a', 'x')") }
        try store.write { db in _ = try db.fetchAll("SELECT * FROM notes") }
        try store.write { db in try db.execute("UPDATE notes SET body = 'y' WHERE id = 'a'") }
        #expect(try store.currentVersion() == 3, "a transaction that only reads takes no version")
        #expect(try entries() == ["v1 * update []", "v2 notes insert [\"a\"]", "v3 notes update [\"a\"]"])
    }

    @Test func rawSQLAndEveryKindOfKeyAreLogged() throws {
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE plain(body TEXT);
                CREATE TABLE numbered(id INTEGER PRIMARY KEY, body TEXT);
                CREATE TABLE pairs(a TEXT, b INTEGER, body TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID;
                """)
        }
        try store.write { db in
            try db.execute("INSERT INTO plain(body) VALUES ('p')")
            try db.execute("INSERT INTO numbered(id, body) VALUES (42, 'n')")
            try db.execute("INSERT INTO pairs VALUES ('x\"y', 7, 'q')")
            try db.execute("UPDATE numbered SET id = 43 WHERE id = 42")
            try db.execute("DELETE FROM pairs")
        }
        #expect(try entries(after: 1) == [
            "v2 numbered delete [\"42\"]",
            "v2 numbered insert [\"42\", \"43\"]",
            "v2 pairs delete [\"[\\\"x\\\\\\\"y\\\",\\\"7\\\"]\"]",
            "v2 pairs insert [\"[\\\"x\\\\\\\"y\\\",\\\"7\\\"]\"]",
            "v2 plain insert [\"1\"]",
        ])
    }

    @Test func aTableCreatedInTheSameTransactionIsLoggedByItsKey() throws {
        try store.write { db in
            try db.execute("CREATE TABLE fresh(code TEXT PRIMARY KEY, body TEXT) WITHOUT ROWID")
            try db.execute("INSERT INTO fresh VALUES ('k1', 'b')")
        }
        #expect(try entries() == ["v1 * update []", "v1 fresh insert [\"k1\"]"])
    }

    @Test func rolledBackWorkLeavesNoVersionAndNoLog() throws {
        struct Abandon: Error {}
        try store.write { db in try db.execute("CREATE TABLE notes(id TEXT PRIMARY KEY)") }
        #expect(throws: Abandon.self) {
            try store.write { db in
                try db.execute("INSERT INTO notes VALUES ('gone')")
                throw Abandon()
            }
        }
        try store.write { db in
            try db.execute("INSERT INTO notes VALUES ('kept')")
            do {
                try db.transaction {
                    try db.execute("INSERT INTO notes VALUES ('undone')")
                    throw Abandon()
                }
            } catch {}
        }
        #expect(try store.currentVersion() == 2)
        #expect(try entries(after: 1) == ["v2 notes insert [\"kept\"]"])
    }

    @Test func versionsStayMonotonicAcrossReopen() throws {
        let path = directory.path("reopen.sqlite")
        do {
            let first = try Store(path: path)
            try first.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)") }
            for value in 1...3 { try first.write { db in try db.execute("INSERT INTO t VALUES (?)", [value]) } }
        }
        let reopened = try Store(path: path)
        #expect(try reopened.currentVersion() == 4)
        try reopened.write { db in try db.execute("INSERT INTO t VALUES (4)") }
        #expect(try reopened.currentVersion() == 5)
        #expect(try reopened.changes(after: 4).map(\.version) == [5])
    }

    @Test func retentionKeepsTheNewestVersions() throws {
        var configuration = Store.Configuration()
        configuration.changeLogRetention = .versions(3)
        let store = try Store(path: directory.path("retention.sqlite"), configuration: configuration)
        try store.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)") }
        for value in 1...10 { try store.write { db in try db.execute("INSERT INTO t VALUES (?)", [value]) } }
        #expect(try store.changes(after: 0).map(\.version) == [9, 10, 11])
    }

    @Test func oneLogRowPerTableAndOperationHoldsEveryKey() throws {
        try store.write { db in try db.execute("CREATE TABLE t(id TEXT PRIMARY KEY)") }
        try store.write { db in
            for index in 0..<1_000 { try db.execute("INSERT INTO t VALUES (?)", ["key-\(index)"]) }
        }
        let log = try store.changes(after: 1)
        #expect(log.count == 1)
        #expect(log.first?.rowKeys.count == 1_000)
        #expect(log.first?.rowKeys.last == "key-999")
    }
}
