import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// What a layer above the store (a sync client's outbox) builds on: SQL can ask which origin
/// the commit it runs in has (`ripple_origin()`), and work can join every commit before its
/// version is recorded, committing with it or not at all.
@Suite struct CommitParticipantTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("participants.sqlite")
    }

    @Test func sqlReadsTheOriginOfTheCommitItRunsIn() throws {
        let store = try Store(path: path)
        #expect(try store.write { db in try db.fetchValue("SELECT ripple_origin()", as: String.self) } == "write")
        #expect(try store.write(origin: .sync, tag: nil) { db in try db.fetchValue("SELECT ripple_origin()", as: String.self) } == "sync")
        #expect(try store.writeWithoutTransaction { db in try db.fetchValue("SELECT ripple_origin()", as: String.self) } == "maintenance")
        // Outside a commit: NULL.
        #expect(try store.read { db in try db.fetchValue("SELECT ripple_origin() IS NULL", as: Bool.self) } == true)
    }

    /// A trigger that asks for the origin records it, and makes its table unwritable by a
    /// connection that is not Ripple's (the `sqlite3` shell fails, and changes nothing).
    @Test func aTriggerTellsWritersApartAndRefusesTheShell() throws {
        let store = try Store(path: path)
        try store.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
            try db.execute("CREATE TABLE ripple_test_audit(id INTEGER, origin TEXT)")
            try db.execute("""
                CREATE TRIGGER notes_audit AFTER INSERT ON notes
                BEGIN INSERT INTO ripple_test_audit VALUES (NEW.id, ripple_origin()); END
                """)
        }
        try store.write { db in try db.execute("INSERT INTO notes VALUES (1, 'mine')") }
        try store.write(origin: .sync, tag: nil) { db in try db.execute("INSERT INTO notes VALUES (2, 'theirs')") }
        let audit = try store.read { db in
            try db.fetchAll("SELECT id, origin FROM ripple_test_audit ORDER BY id").map { "\(try $0.value("id", as: Int.self)) \(try $0.value("origin", as: String.self))" }
        }
        #expect(audit == ["1 write", "2 sync"])

        let shell = try SQLiteShell.run("INSERT INTO notes VALUES (3, 'around')", on: path)
        #expect(shell.status != 0)
        #expect(shell.errors.contains("ripple_origin"))
        #expect(try store.read { db in try db.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 2)
    }

    @Test func aParticipantCommitsWithTheCommitOrNotAtAll() throws {
        let store = try Store(path: path)
        try store.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
            try db.execute("CREATE TABLE ripple_test_outbox(version_origin TEXT, notes INTEGER)")
        }
        let token = store.addCommitParticipant { db, origin in
            let count = try db.fetchValue("SELECT count(*) FROM notes", as: Int.self) ?? 0
            if count > 2 { throw StoreError(.invalidQuery, "too many notes") }
            try db.execute("INSERT INTO ripple_test_outbox VALUES (?, ?)", [origin.rawValue, count])
        }
        let events = Locked<[Int]>([])
        let live = store.liveQuery(sql: "SELECT 1 AS one, count(*) AS n FROM notes", identity: "one")
        let subscription = live.subscribe(on: .immediate) { event in
            let count = (try? event.snapshot.first?.value("n", as: Int.self)) ?? -1
            events.withLock { $0.append(count) }
        }
        defer { subscription.cancel() }

        try store.write { db in try db.execute("INSERT INTO notes VALUES (1, 'a')") }
        try store.write(origin: .sync, tag: nil) { db in try db.execute("INSERT INTO notes VALUES (2, 'b')") }
        // The participant refuses: the note it saw is not committed either, and no version taken.
        let before = try store.currentVersion()
        #expect(throws: StoreError.self) { try store.write { db in try db.execute("INSERT INTO notes VALUES (3, 'c')") } }
        #expect(try store.currentVersion() == before)
        store.removeCommitParticipant(token)
        try store.write { db in try db.execute("INSERT INTO notes VALUES (4, 'd')") }

        let outbox = try store.read { db in
            try db.fetchAll("SELECT version_origin, notes FROM ripple_test_outbox ORDER BY notes").map {
                "\(try $0.value("version_origin", as: String.self)) \(try $0.value("notes", as: Int.self))"
            }
        }
        #expect(outbox == ["write 1", "sync 2"])
        #expect(try store.read { db in try db.fetchValue("SELECT group_concat(id) FROM notes", as: String.self) } == "1,2,4")
        #expect(events.withLock { $0 } == [0, 1, 2, 3])
    }
}
