import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Regression tests for issue 11: store calls nested in writes and reads, transaction control in
/// closures and migrations, and the file changing under the store. Each failed (trapped, hung, or
/// answered wrongly) before its fix.
@Suite struct TransactionTrustTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    /// A file store and an in-memory store: the rule is the same for both.
    func stores() throws -> [(String, Store)] {
        [("file", try Store(path: directory.path("nested.sqlite"))), ("memory", try Store.inMemory())]
    }

    // MARK: 1. Store calls inside a write join it

    /// The first thing a newcomer writes: a collection insert inside `store.write`. It trapped.
    @Test func collectionWritesInsideAWriteJoinIt() throws {
        for (kind, store) in try stores() {
            let items = try store.collection("items", of: Item.self)
            let before = try store.currentVersion()
            try store.write { _ in
                try items.insert(Item(id: 1, title: "a"))
                try items.insert(contentsOf: [Item(id: 2, title: "b"), Item(id: 3, title: "c")])
                try items.delete(id: 3)
            }
            #expect(try items.fetchAll() == [Item(id: 1, title: "a"), Item(id: 2, title: "b")], "\(kind)")
            #expect(try store.currentVersion() == before + 1, "\(kind): one write, one version")
        }
    }

    /// Reads inside a write see the write's own changes; they answered from before the write.
    @Test func readsInsideAWriteSeeItsChanges() throws {
        for (kind, store) in try stores() {
            let items = try store.collection("items", of: Item.self)
            let seen = try store.write { db in
                try items.insert(Item(id: 1, title: "a"), in: db)
                return (try items.count(), try items.fetchAll(), try items.fetch(id: 1),
                        try store.read { db in try db.fetchValue("SELECT count(*) FROM items", as: Int.self) })
            }
            #expect(seen.0 == 1, "\(kind)")
            #expect(seen.1 == [Item(id: 1, title: "a")], "\(kind)")
            #expect(seen.2 == Item(id: 1, title: "a"), "\(kind)")
            #expect(seen.3 == 1, "\(kind)")
        }
    }

    /// The version inside a write is the last committed one; the write takes the next.
    @Test func currentVersionInsideAWriteIsTheCommittedOne() throws {
        for (kind, store) in try stores() {
            let items = try store.collection("items", of: Item.self)
            let before = try store.currentVersion()
            let inside = try store.write { _ in
                try items.insert(Item(id: 1, title: "a"))
                return try store.currentVersion()
            }
            #expect(inside == before, "\(kind)")
            #expect(try store.currentVersion() == before + 1, "\(kind)")
        }
    }

    /// A nested write that throws undoes only itself (a savepoint); the outer write goes on.
    @Test func aNestedWriteThatThrowsUndoesOnlyItself() throws {
        struct Refused: Error {}
        for (kind, store) in try stores() {
            let items = try store.collection("items", of: Item.self)
            try store.write { _ in
                try items.insert(Item(id: 1, title: "kept"))
                #expect(throws: Refused.self) {
                    try store.write { _ in
                        try items.insert(Item(id: 2, title: "undone"))
                        throw Refused()
                    }
                }
                #expect(try items.count() == 1, "\(kind)")
            }
            #expect(try items.fetchAll() == [Item(id: 1, title: "kept")], "\(kind)")
            let logged = try store.changes(after: 0).filter { $0.table == "items" }.flatMap(\.rowKeys)
            #expect(logged == ["1"], "\(kind): the undone insert is not logged")
        }
    }

    /// A read nested in a write cannot write (as any read), and its failure leaves the write whole.
    @Test func aReadInsideAWriteCannotWrite() throws {
        for (kind, store) in try stores() {
            let items = try store.collection("items", of: Item.self)
            try store.write { db in
                try items.insert(Item(id: 1, title: "a"), in: db)
                #expect(throws: DatabaseError.self, "\(kind)") {
                    try store.read { db in try db.execute("INSERT INTO items(id, title) VALUES (2, 'b')") }
                }
                try items.insert(Item(id: 3, title: "c"), in: db)
            }
            #expect(try items.fetchAll().map(\.id) == [1, 3], "\(kind)")
        }
    }

    /// A write inside a read is refused with a typed error on every kind of store (a read is one
    /// committed state; it cannot change it). On an in-memory store it trapped.
    @Test func aWriteInsideAReadIsRefused() throws {
        for (kind, store) in try stores() {
            let items = try store.collection("items", of: Item.self)
            let error = #expect(throws: StoreError.self, "\(kind)") {
                try store.read { _ in try items.insert(Item(id: 1, title: "a")) }
            }
            #expect(error?.kind == .nesting, "\(kind)")
            #expect(error?.message.contains("store.write") == true, "\(kind): \(String(describing: error))")
            #expect(try items.count() == 0, "\(kind)")
            // The store is unharmed.
            try items.insert(Item(id: 1, title: "a"))
            #expect(try items.count() == 1, "\(kind)")
        }
    }

    /// Migrations and `writeWithoutTransaction` commit on their own: inside a write or a read they
    /// are refused with a typed error, before anything runs.
    @Test func callsThatCommitOnTheirOwnAreRefusedInsideAWriteOrARead() throws {
        for (kind, store) in try stores() {
            var migrator = try Migrator(domain: "app")
            try migrator.register(name: "0001_t", sql: "CREATE TABLE t(x)")
            let insideWrite = #expect(throws: StoreError.self) { try store.write { _ in try store.migrate(migrator) } }
            let insideRead = #expect(throws: StoreError.self) { try store.read { _ in try store.migrate(migrator) } }
            let raw = #expect(throws: StoreError.self) {
                try store.write { _ in try store.writeWithoutTransaction { db in try db.execute("CREATE TABLE u(x)") } }
            }
            #expect([insideWrite?.kind, insideRead?.kind, raw?.kind] == [.nesting, .nesting, .nesting], "\(kind)")
            let tables = try store.read { db in
                try db.fetchAll("SELECT name FROM sqlite_schema WHERE name IN ('t', 'u')").count
            }
            #expect(tables == 0, "\(kind)")
            try store.migrate(migrator)
            #expect(try migrator.appliedMigrations(in: store) == ["0001_t"], "\(kind)")
        }
    }

    /// A subscription made inside a write starts when the write ends: its first event holds the
    /// committed result (on an in-memory store it trapped). Inside a read likewise: reusing the
    /// read's older snapshot would miss commits made before the subscription was registered.
    @Test func subscriptionsMadeInsideAWriteOrAReadStartWhenItEnds() throws {
        for (kind, store) in try stores() {
            let items = try store.collection("items", of: Item.self)
            let live = try items.order(by: Column("id")).live()
            let subscriber = ListViewSubscriber<Item>()
            var subscription: Subscription?
            try store.write { _ in
                try items.insert(Item(id: 1, title: "a"))
                subscription = subscriber.subscribe(to: live)
                #expect(subscriber.events.isEmpty, "\(kind): no event before the write ends")
                try items.insert(Item(id: 2, title: "b"))
            }
            #expect(subscriber.items == [Item(id: 1, title: "a"), Item(id: 2, title: "b")], "\(kind)")
            #expect(subscriber.version == (try store.currentVersion()), "\(kind)")

            let reading = ListViewSubscriber<Item>()
            var readSubscription: Subscription?
            try store.read { _ in
                readSubscription = reading.subscribe(to: live)
                #expect(reading.events.isEmpty, "\(kind)")
            }
            #expect(reading.items == (try items.order(by: Column("id")).fetchAll()), "\(kind)")
            try items.insert(Item(id: 3, title: "c"))
            #expect(subscriber.items.map(\.id) == [1, 2, 3], "\(kind)")
            #expect(reading.items.map(\.id) == [1, 2, 3], "\(kind)")
            #expect(subscriber.failures.isEmpty && reading.failures.isEmpty, "\(kind)")
            subscription?.cancel()
            readSubscription?.cancel()
        }
    }

    // MARK: 2. Nested reads reuse their connection

    /// More threads than readers, each nesting a read in a read: every outer read holds a
    /// reader, so a nested read that waited for another reader deadlocked for good.
    @Test(.timeLimit(.minutes(1))) func nestedReadsOnMoreThreadsThanReadersFinish() throws {
        var configuration = Store.Configuration()
        configuration.readerCount = 2
        let store = try Store(path: directory.path("readers.sqlite"), configuration: configuration)
        let items = try store.collection("items", of: Item.self)
        try items.insert(contentsOf: (1...10).map { Item(id: $0, title: "\($0)") })
        // The first `readerCount` threads meet inside their outer reads, so every reader is held
        // when they nest.
        let meeting = Rendezvous(count: configuration.readerCount)
        let threads = 5
        let finished = DispatchGroup()
        let counts = Locked<[Int]>([])
        for _ in 0..<threads {
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                let count = try? store.read { _ in
                    meeting.arrive()
                    return try store.read { _ in try items.fetchAll().count }
                }
                counts.withLock { $0.append(count ?? -1) }
            }
        }
        try Wait.for(finished, "the nested reads (a deadlock never ends them)")
        #expect(counts.withLock { $0 } == Array(repeating: 10, count: threads))
    }

    // MARK: 3. Ripple owns transaction control

    /// `COMMIT` inside a write committed the row without a version or an event, then threw.
    /// Now it is refused before it runs and the write rolls back whole.
    @Test func transactionControlInsideAWriteIsRefusedBeforeItRuns() throws {
        let store = try Store(path: directory.path("control.sqlite"))
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.all.live())
        defer { subscription.cancel() }
        let before = try store.currentVersion()
        for statement in ["COMMIT", "ROLLBACK", "END", "BEGIN", "BEGIN IMMEDIATE", "SAVEPOINT mine", "RELEASE ripple_savepoint_1",
                          "ROLLBACK TO SAVEPOINT ripple_savepoint_1", "COMMIT TRANSACTION",
                          "ATTACH DATABASE ':memory:' AS other", "DETACH DATABASE main"] {
            let error = #expect(throws: DatabaseError.self, "\(statement)") {
                try store.write { db in
                    try items.insert(Item(id: 1, title: "a"), in: db)
                    try db.execute(statement)
                }
            }
            #expect(error?.code == .authorization, "\(statement): \(String(describing: error))")
            #expect(error?.message.contains("Ripple") == true, "\(statement): \(String(describing: error))")
            #expect(try items.count() == 0, "\(statement): nothing applied")
            #expect(try store.currentVersion() == before, "\(statement): no version taken")
            #expect(try store.changes(after: before).isEmpty, "\(statement): nothing logged")
        }
        // In a script too, and inside a read.
        #expect(throws: DatabaseError.self) {
            try store.write { db in try db.executeScript("INSERT INTO items(id, title) VALUES (1, 'a'); COMMIT") }
        }
        #expect(throws: DatabaseError.self) { try store.read { db in try db.execute("COMMIT") } }
        #expect(throws: DatabaseError.self) { try store.read { db in try db.execute("BEGIN") } }
        #expect(try items.count() == 0)
        // VACUUM cannot run inside a transaction: refused by SQLite, nothing applied.
        #expect(throws: DatabaseError.self) {
            try store.write { db in
                try items.insert(Item(id: 1, title: "a"), in: db)
                try db.execute("VACUUM")
            }
        }
        #expect(try items.count() == 0)
        // Writes after the refusals work and are heard.
        try items.insert(Item(id: 7, title: "after"))
        #expect(subscriber.items == [Item(id: 7, title: "after")])
        #expect(subscriber.failures.isEmpty)
        // A closure that catches the refusal commits normally, with its version and event.
        try store.write { db in
            try items.insert(Item(id: 8, title: "caught"), in: db)
            _ = try? db.execute("COMMIT")
        }
        #expect(try items.count() == 2)
        #expect(subscriber.items.map(\.id).sorted() == [7, 8])
    }

    /// The store's own transactions and savepoints, and `writeWithoutTransaction`'s maintenance
    /// statements, still run.
    @Test func theStoresOwnTransactionsAndMaintenanceStillRun() throws {
        let store = try Store(path: directory.path("own.sqlite"))
        let items = try store.collection("items", of: Item.self)
        try store.write { db in
            try db.transaction { try items.insert(Item(id: 1, title: "a"), in: db) }
            try db.savepoint { try items.insert(Item(id: 2, title: "b"), in: db) }
        }
        try store.writeWithoutTransaction { db in
            try db.execute("VACUUM")
            try db.execute("ATTACH DATABASE ? AS other", [directory.path("other.sqlite")])
            try db.execute("DETACH DATABASE other")
        }
        #expect(try items.count() == 2)
        // A cached statement prepared where maintenance was allowed is not reused where it is not.
        #expect(throws: DatabaseError.self) {
            try store.write { db in try db.execute("ATTACH DATABASE ? AS other", [directory.path("other.sqlite")]) }
        }
    }

    /// A migration holding `COMMIT` committed the tables before it, was not recorded, and could
    /// never run again ("table already exists"). Now nothing of it is applied.
    @Test func aMigrationWithTransactionControlAppliesNothing() throws {
        let store = try Store(path: directory.path("migration.sqlite"))
        for control in ["COMMIT", "ROLLBACK", "BEGIN", "SAVEPOINT s", "RELEASE s", "END TRANSACTION"] {
            var migrator = try Migrator(domain: "app")
            try migrator.register(name: "0001_tables", sql: "CREATE TABLE a(x); \(control); CREATE TABLE b(x);")
            let error = #expect(throws: StoreError.self) { try store.migrate(migrator) }
            #expect(error?.kind == .migration, "\(control)")
            #expect(error?.underlying?.code == .authorization, "\(control): \(String(describing: error))")
            let tables = try store.read { db in try db.fetchAll("SELECT name FROM sqlite_schema WHERE name IN ('a', 'b')").count }
            #expect(tables == 0, "\(control): nothing applied")
            #expect(try migrator.appliedMigrations(in: store).isEmpty, "\(control)")
        }
        var fixed = try Migrator(domain: "app")
        try fixed.register(name: "0001_tables", sql: "CREATE TABLE a(x); CREATE TABLE b(x);")
        try store.migrate(fixed)
        #expect(try fixed.appliedMigrations(in: store) == ["0001_tables"])
    }

    // MARK: 4. The file changes under the store

    /// Deleting the database (and its `-wal` and `-shm`) while a store has it open: writes
    /// reported success and were lost, live queries died with error 14. Now writes fail with a
    /// typed error naming the file, and live queries end with it.
    @Test func aDeletedFileFailsWritesAndEndsLiveQueries() throws {
        let path = directory.path("deleted.sqlite")
        let store = try Store(path: path)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.all.live())
        defer { subscription.cancel() }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

        let error = #expect(throws: StoreError.self) { try items.insert(Item(id: 2, title: "lost?")) }
        #expect(error?.kind == .fileMoved)
        #expect(error?.message.contains(path) == true, "\(String(describing: error))")
        #expect((subscriber.error as? StoreError)?.kind == .fileMoved, "\(String(describing: subscriber.error))")
        #expect(subscription.isFinished)
        #expect((try? store.read { _ in 0 }) == nil, "reads of a deleted file fail too")
        // A second store at the path would silently start an empty database beside the first.
        let second = #expect(throws: StoreError.self) { try Store(path: path) }
        #expect(second?.kind == .fileMoved)
    }

    /// A live query ends on a deleted file even when nothing writes: the look for other writers
    /// notices.
    @Test func aDeletedFileEndsLiveQueriesWithoutAWrite() throws {
        let path = directory.path("quiet.sqlite")
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = nil
        configuration.watchesFile = false   // the explicit look tells (the watch would, on its own thread)
        let store = try Store(path: path, configuration: configuration)
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.all.live())
        defer { subscription.cancel() }
        try FileManager.default.removeItem(atPath: path)
        #expect(throws: StoreError.self) { try store.noticeExternalWrites() }
        #expect((subscriber.error as? StoreError)?.kind == .fileMoved)
    }

    /// Replacing the file (another file renamed over it) is the same as deleting it.
    @Test func aReplacedFileFailsWrites() throws {
        let path = directory.path("replaced.sqlite")
        let store = try Store(path: path)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let other = directory.path("other.sqlite")
        try Store(path: other).write { db in try db.execute("CREATE TABLE other(x)") }
        #expect(rename(other, path) == 0)
        let error = #expect(throws: StoreError.self) { try items.insert(Item(id: 2, title: "b")) }
        #expect(error?.kind == .fileMoved)
    }

    /// Truncated by another program while open: with the file mapped into memory, the process
    /// died of SIGBUS inside SQLite. The default maps nothing, so the store reports errors.
    @Test func aTruncatedFileGivesErrorsNotACrash() throws {
        #expect(Store.Configuration().memoryMapSize == 0)
        let path = directory.path("truncated.sqlite")
        let store = try Store(path: path)
        let items = try store.collection("items", of: Item.self)
        try items.insert(contentsOf: (1...2_000).map { Item(id: $0, title: String(repeating: "x", count: 100)) })
        try store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        #expect(truncate(path, 8_192) == 0)
        #expect(throws: (any Error).self) { _ = try items.fetchAll() }
    }

    // MARK: 6. Errors a user can act on

    /// "unable to open database file" said nothing of why: now the message names the path and
    /// the reason.
    @Test func openFailuresSayWhy() throws {
        let missing = directory.path("no-such-directory/app.sqlite")
        let noDirectory = #expect(throws: StoreError.self) { try Store(path: missing) }
        #expect(noDirectory?.message.contains("directory") == true, "\(String(describing: noDirectory))")
        #expect(noDirectory?.message.contains(directory.path("no-such-directory")) == true)

        let folder = directory.path("a-folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let isDirectory = #expect(throws: StoreError.self) { try Store(path: folder) }
        #expect(isDirectory?.message.contains("is a directory") == true, "\(String(describing: isDirectory))")
    }

    /// A file the process may not read: the message says permission is denied. (As root, which
    /// reads anything, the check runs the `ripple` tool as the unprivileged user `nobody`.)
    @Test func anUnreadableFileSaysPermission() throws {
        let path = directory.path("private.sqlite")
        try Store(path: path).write { db in try db.execute("CREATE TABLE t(x)") }
        #expect(chmod(path, 0) == 0)
        if geteuid() != 0 {
            let error = #expect(throws: StoreError.self) { try Store(path: path) }
            #expect(error?.message.contains("permission") == true, "\(String(describing: error))")
            return
        }
        #expect(chmod(directory.url.path, 0o755) == 0)
        let ripple = try #require(RippleExecutable.url(), "the ripple executable is not built")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", ripple.path,
                             "history", path, "--table", "t", "--from", "0", "--to", "0"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let message = try Wait.run(process, "`ripple history` as nobody") {
            String(decoding: errors.fileHandleForReading.readToEndRetryingInterrupts(), as: UTF8.self)
        }
        #expect(process.terminationStatus != 0)
        #expect(message.contains("permission"), "\(message)")
        #expect(message.contains(path), "\(message)")
    }

    /// SQLite's double-quoted-string fallback turned a misspelt `"column"` into a string literal.
    @Test func doubleQuotedIdentifiersAreNeverStrings() throws {
        for (kind, store) in try stores() {
            try store.write { db in try db.execute("CREATE TABLE t(x)") }
            #expect(throws: DatabaseError.self, "\(kind)") {
                try store.read { db in try db.fetchAll("SELECT \"nosuchcol\" FROM t") }
            }
            #expect(throws: DatabaseError.self, "\(kind)") {
                try store.write { db in try db.execute("INSERT INTO t(x) VALUES (\"text\")") }
            }
            #expect(throws: DatabaseError.self, "\(kind)") {
                try store.write { db in try db.execute("CREATE INDEX i ON t(\"nosuchcol\")") }
            }
        }
    }
}

/// Lets `count` threads wait until all of them arrived (or the tests' deadline passed).
final class Rendezvous: @unchecked Sendable {   // `arrived` is guarded by `condition`
    private let condition = NSCondition()
    private var arrived = 0
    private let count: Int

    init(count: Int) { self.count = count }

    func arrive() {
        condition.lock()
        defer { condition.unlock() }
        arrived += 1
        condition.broadcast()
        let deadline = Date() + TimeInterval(Wait.limit.components.seconds)
        while arrived < count && condition.wait(until: deadline) {}
    }
}
