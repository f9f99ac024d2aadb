import Foundation
@testable import Ripple
import Testing
import RippleTesting

@Suite struct ConnectionTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    func makeNotes(_ store: Store) throws {
        try store.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT, score REAL, data BLOB, flag INTEGER)")
        }
    }

    @Test func dataPersistsAcrossReopen() throws {
        let path = directory.path("persist.sqlite")
        do {
            let store = try Store(path: path)
            try makeNotes(store)
            try store.write { db in try db.execute("INSERT INTO notes(body) VALUES (?)", ["kept"]) }
        }
        let reopened = try Store(path: path)
        #expect(try reopened.read { try $0.fetchValue("SELECT body FROM notes", as: String.self) } == "kept")
        #expect(try reopened.read { try $0.fetchValue("PRAGMA journal_mode", as: String.self) } == "wal")
    }

    /// Two SQL texts that Swift finds equal ("\u{e9}" and "e\u{301}" spell the same character)
    /// are two statements to SQLite: each runs its own, not the other's cached one.
    @Test func sqlTextsThatSwiftFindsEqualAreTwoStatements() throws {
        let store = try Store(path: directory.path("texts.sqlite"))
        let composed = "SELECT '\u{e9}'", decomposed = "SELECT 'e\u{301}'"
        #expect(composed == decomposed)
        let results = try store.read { db in
            [try db.fetchValue(composed, as: String.self), try db.fetchValue(decomposed, as: String.self)]
        }
        #expect(results.map { $0.map { Array($0.utf8) } } == [Array("\u{e9}".utf8), Array("e\u{301}".utf8)])
    }

    @Test func everyValueTypeRoundTrips() throws {
        let store = try Store(path: directory.path("values.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE v(i INTEGER, r REAL, t TEXT, b BLOB, n, flag INTEGER, d REAL, u TEXT, data BLOB)")
            let date = Date(timeIntervalSince1970: 1_700_000_000.25)
            let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
            let nothing: Int? = nil
            try db.execute("INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [Int64.max, 3.25, "héllo 'quoted'", [UInt8]([0, 1, 255]), nothing, true, date, uuid, Data([9, 8])])
            let row = try #require(try db.fetchOne("SELECT * FROM v"))
            #expect(try row.value("i", as: Int64.self) == .max)
            #expect(try row.value("r", as: Double.self) == 3.25)
            #expect(try row.value("t", as: String.self) == "héllo 'quoted'")
            #expect(try row.value("b", as: [UInt8].self) == [0, 1, 255])
            #expect(row["n"] == .null)
            #expect(try row.value("n", as: Int?.self) == nil)
            #expect(try row.value("flag", as: Bool.self) == true)
            #expect(try row.value("d", as: Date.self) == date)
            #expect(try row.value("u", as: UUID.self) == uuid)
            #expect(try row.value("data", as: Data.self) == Data([9, 8]))
            #expect(throws: StoreError.self) { try row.value("t", as: Int.self) }
        }
    }

    @Test func readersSeeOneSnapshotWhileTheWriterCommits() throws {
        let store = try Store(path: directory.path("isolation.sqlite"))
        try makeNotes(store)
        try store.write { db in try db.execute("INSERT INTO notes(body) VALUES ('one')") }
        try store.read { (reader: Database) throws in
            #expect(try reader.fetchValue("SELECT count(*) FROM notes", as: Int.self) == 1)
            // The writer commits (on another thread: a read cannot write) while this read
            // transaction is open…
            let committed = DispatchSemaphore(value: 0)
            let failure = Locked<(any Error)?>(nil)
            Thread.detachNewThread {
                do {
                    try store.write { db in try db.execute("INSERT INTO notes(body) VALUES ('two')") }
                } catch {
                    failure.withLock { $0 = error }
                }
                committed.signal()
            }
            try Wait.for(committed, "the writer's commit on another thread")
            #expect(failure.withLock { $0 } == nil)
            // …and the reader still sees the state of its first read.
            #expect(try reader.fetchValue("SELECT count(*) FROM notes", as: Int.self) == 1)
        }
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 2)
    }

    @Test func aThrowingWriteRollsBackEverything() throws {
        struct Cancelled: Error {}
        let store = try Store(path: directory.path("rollback.sqlite"))
        try makeNotes(store)
        #expect(throws: Cancelled.self) {
            try store.write { db in
                try db.execute("INSERT INTO notes(body) VALUES ('lost')")
                throw Cancelled()
            }
        }
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 0)
    }

    @Test func savepointRollbackKeepsTheEnclosingTransaction() throws {
        struct Undo: Error {}
        let store = try Store(path: directory.path("savepoint.sqlite"))
        try makeNotes(store)
        try store.write { db in
            try db.execute("INSERT INTO notes(body) VALUES ('outer')")
            do {
                try db.transaction {
                    try db.execute("INSERT INTO notes(body) VALUES ('inner')")
                    try db.transaction { try db.execute("INSERT INTO notes(body) VALUES ('innermost')") }
                    throw Undo()
                }
                Issue.record("the savepoint did not rethrow")
            } catch {
                #expect(error is Undo)
            }
            try db.transaction { try db.execute("INSERT INTO notes(body) VALUES ('second inner')") }
        }
        let bodies = try store.read { try $0.fetchAll("SELECT body FROM notes ORDER BY id") }.map { $0["body"] }
        #expect(bodies == [.text("outer"), .text("second inner")])
    }

    @Test func sqlErrorsCarryCodeMessageAndSQLButHideArguments() throws {
        let store = try Store(path: directory.path("errors.sqlite"))
        try makeNotes(store)
        try store.write { db in try db.execute("INSERT INTO notes(id, body) VALUES (1, 'a')") }
        do {
            try store.write { db in try db.execute("INSERT INTO notes(id, body) VALUES (?, ?)", [1, "secret"]) }
            Issue.record("a duplicate primary key was accepted")
        } catch let error as DatabaseError {
            #expect(error.code == .constraint)
            #expect(error.extendedCode.rawValue == 1555)   // SQLITE_CONSTRAINT_PRIMARYKEY
            #expect(error.sql == "INSERT INTO notes(id, body) VALUES (?, ?)")
            #expect(error.message.contains("UNIQUE constraint failed"))
            #expect(!error.description.contains("secret"), "arguments are hidden by default")
            #expect(error.arguments == [.integer(1), .text("secret")])
        }
        do {
            try store.write { db in try db.execute("SELEKT nonsense") }
            Issue.record("malformed SQL was accepted")
        } catch let error as DatabaseError {
            #expect(error.code == .error)
            #expect(error.message.contains("syntax error"))
        }
    }

    @Test func argumentsShowWhenTheUserOptsIn() throws {
        var configuration = Store.Configuration()
        configuration.publicStatementArguments = true
        let store = try Store(path: directory.path("public.sqlite"), configuration: configuration)
        try makeNotes(store)
        try store.write { db in try db.execute("INSERT INTO notes(id) VALUES (1)") }
        do {
            try store.write { db in try db.execute("INSERT INTO notes(id, body) VALUES (?, ?)", [1, "visible"]) }
        } catch let error as DatabaseError {
            #expect(error.description.contains("visible"))
        }
    }

    @Test func aCorruptFileIsAnErrorNotACrash() throws {
        let path = directory.path("corrupt.sqlite")
        var random = SystemRandomNumberGenerator()
        let garbage = Data((0..<8192).map { _ in UInt8.random(in: 0...255, using: &random) })
        try garbage.write(to: URL(fileURLWithPath: path))
        do {
            _ = try Store(path: path)
            Issue.record("opened a file of random bytes")
        } catch let error as StoreError {
            #expect(error.kind == .unusableFile)
            #expect(error.underlying?.code == .notADatabase)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage, "the file is left untouched")
    }

    @Test func aReadOnlyStoreRefusesWritesAndStillReads() throws {
        let path = directory.path("readonly.sqlite")
        do {
            let store = try Store(path: path)
            try makeNotes(store)
            try store.write { db in try db.execute("INSERT INTO notes(body) VALUES ('kept')") }
        }
        var configuration = Store.Configuration()
        configuration.readOnly = true
        let store = try Store(path: path, configuration: configuration)
        do {
            try store.write { db in try db.execute("INSERT INTO notes(body) VALUES ('refused')") }
            Issue.record("wrote through a read-only store")
        } catch let error as DatabaseError {
            #expect(error.code == .readOnly)
        }
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 1)
    }

    @Test func aDatabaseLockedPastTheBusyTimeoutFailsWithBusy() throws {
        let path = directory.path("locked.sqlite")
        let holder = try Store(path: path)
        try makeNotes(holder)
        var configuration = Store.Configuration()
        configuration.busyTimeout = 0.05
        let waiter = try Store(path: path, configuration: configuration)
        try holder.write { db in
            try db.execute("INSERT INTO notes(body) VALUES ('holding the write lock')")
            // Another connection (as another process would) wants the write lock meanwhile.
            do {
                try waiter.write { db in try db.execute("INSERT INTO notes(body) VALUES ('waiting')") }
                Issue.record("two writers held the write lock at once")
            } catch let error as DatabaseError {
                #expect(error.code == .busy)
            }
        }
        // Once the lock is released, the waiter writes normally.
        try waiter.write { db in try db.execute("INSERT INTO notes(body) VALUES ('after')") }
        #expect(try waiter.read { try $0.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 2)
    }

    @Test func inMemoryStoresWork() throws {
        let store = try Store.inMemory()
        try makeNotes(store)
        try store.write { db in try db.execute("INSERT INTO notes(body) VALUES ('x')") }
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 1)
    }

    /// Regression: the prepared statement's tail was read after its C string was freed, so valid
    /// SQL of some lengths was refused as "several statements".
    @Test func statementsOfEveryLengthArePrepared() throws {
        let store = try Store.inMemory()
        try store.write { db in
            for length in stride(from: 10, through: 4_000, by: 13) {
                let sql = "SELECT 1 /*" + String(repeating: "x", count: length) + "*/"
                let value = try db.fetchValue(sql, as: Int.self)
                #expect(value == 1, "length \(length)")
            }
        }
    }

    @Test func severalStatementsInOneExecuteAreRefused() throws {
        let store = try Store.inMemory()
        #expect(throws: DatabaseError.self) {
            try store.write { db in try db.execute("CREATE TABLE a(x); DROP TABLE a") }
        }
    }
}
