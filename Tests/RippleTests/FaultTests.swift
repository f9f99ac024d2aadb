import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Faults, on real files in temporary directories: a full disk, a read-only file, a file locked by
/// another process, a corrupt file, a migration failing halfway, and subscribers that throw,
/// block, cancel or subscribe from inside their handlers. Each must fail with a typed error (or
/// end only its own subscription), apply nothing halfway, and leave the store usable.
/// Deterministic: semaphores order the threads, nothing sleeps.
@Suite(.timeLimit(.minutes(15))) struct FaultTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    struct Setup {
        let store: Store
        let todos: RecordCollection<Todo>
        let live: LiveQuery<Todo>
    }

    /// A store with three todos and a live query over them, ordered by rank.
    func makeStore(_ name: String, configuration: Store.Configuration = Store.Configuration()) throws -> Setup {
        let store = try Store(path: directory.path(name), configuration: configuration)
        let todos = try store.collection("todos", of: Todo.self)
        try todos.insert(contentsOf: (1...3).map { Todo.make($0 * 10) })
        return Setup(store: store, todos: todos, live: try todos.order(by: Column("rank")).live())
    }

    /// Makes the store of `makeStore` and closes it with everything in the main file (closing a
    /// store whose readers were used leaves the data in the `-wal` file: the last connection to
    /// close is a read-only reader, which does not checkpoint).
    func makeClosedFile(_ name: String) throws -> Int64 {
        let setup = try makeStore(name)
        try setup.store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        return try setup.store.currentVersion()
    }

    func count(_ store: Store, _ table: String = "todos") throws -> Int {
        try store.read { try $0.fetchValue("SELECT count(*) FROM \(table)", as: Int.self) } ?? -1
    }

    /// Waits for `semaphore`, failing the test (instead of hanging) after ``Wait/limit``.
    func expectSignal(_ semaphore: DispatchSemaphore, _ what: String,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(throws: Never.self, sourceLocation: sourceLocation) { try Wait.for(semaphore, what) }
    }

    // MARK: The disk

    @Test func aFullDiskFailsWithFullAndAppliesNothing() throws {
        let setup = try makeStore("full.sqlite")
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: setup.live)
        defer { subscription.cancel() }
        let version = try setup.store.currentVersion()
        let pages = try #require(try setup.store.read { try $0.fetchValue("PRAGMA page_count", as: Int.self) })
        // The writer may grow the file by two pages: far less than 500 todos of 2 kB need.
        try setup.store.writeWithoutTransaction { db in try db.execute("PRAGMA max_page_count = \(pages + 2)") }
        #expect(try setup.store.currentVersion() == version, "a pragma takes no version")

        let big = (0..<500).map { Todo.make(1_000 + $0, String(repeating: "x", count: 2_000)) }
        let error = try #require(throws: DatabaseError.self) { try setup.todos.insert(contentsOf: big) }
        #expect(error.code == .full, "\(error)")
        // Also through raw SQL, in a transaction that wrote a row first.
        let raw = try #require(throws: DatabaseError.self) {
            try setup.store.write { db in
                try db.execute("UPDATE todos SET title = 'changed'")
                try db.execute("INSERT INTO todos(id, title, rank, done, tags) SELECT value, hex(zeroblob(2000)), 1, 0, '[]' "
                               + "FROM json_each(?)", [JSONText.array((0..<500).map { _ in UUID().uuidString })])
            }
        }
        #expect(raw.code == .full, "\(raw)")

        // Nothing half-applied: the rows, the version, the log and the live query are as before.
        #expect(try count(setup.store) == 3)
        #expect(try setup.todos.fetchAll().allSatisfy { $0.title != "changed" })
        #expect(try setup.store.currentVersion() == version)
        #expect(try setup.store.changes(after: version).isEmpty)
        #expect(subscriber.events.count == 1)
        #expect(try setup.store.read { try $0.fetchValue("PRAGMA integrity_check", as: String.self) } == "ok")

        // Room again: the same insert succeeds, under the next version, and is delivered.
        try setup.store.writeWithoutTransaction { db in try db.execute("PRAGMA max_page_count = 1073741823") }
        try setup.todos.insert(contentsOf: big)
        #expect(try count(setup.store) == 503)
        #expect(try setup.store.currentVersion() == version + 1)
        #expect(try setup.store.changes(after: version).map(\.rowKeys.count).reduce(0, +) == 500)
        #expect(subscriber.version == version + 1)
        #expect(subscriber.items.count == 503)
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    // MARK: The file

    @Test func aReadOnlyFileRefusesWritesAndStaysUntouched() throws {
        let path = directory.path("readonly.sqlite")
        let version = try makeClosedFile("readonly.sqlite")
        #expect(chmod(path, 0o444) == 0)
        defer { chmod(path, 0o644) }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))

        // Root writes through 0444: the store is then told to open the file read-only.
        var configuration = Store.Configuration()
        configuration.readOnly = geteuid() == 0
        let store: Store
        do {
            store = try Store(path: path, configuration: configuration)
        } catch {
            // Not root: refusing to open a file it cannot write is fine, with a typed error.
            #expect(error is DatabaseError || error is StoreError, "\(error)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
            return
        }
        let todos = try store.collection("todos", of: Todo.self)
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try todos.order(by: Column("rank")).live())
        defer { subscription.cancel() }
        #expect(subscriber.items.map(\.rank) == [10, 20, 30])

        let error = try #require(throws: DatabaseError.self) { try todos.insert(Todo.make(40)) }
        #expect(error.code == .readOnly, "\(error)")
        let raw = try #require(throws: DatabaseError.self) {
            try store.write { db in try db.execute("DELETE FROM todos") }
        }
        #expect(raw.code == .readOnly, "\(raw)")
        #expect(try count(store) == 3)
        #expect(try store.currentVersion() == version)
        #expect(subscriber.events.count == 1)
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the file is untouched")
    }

    @Test func explicitlyReadOnlyStoresRefuseWritesEvenForRoot() throws {
        let path = directory.path("explicit.sqlite")
        let version = try makeClosedFile("explicit.sqlite")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        var configuration = Store.Configuration()
        configuration.readOnly = true
        let store = try Store(path: path, configuration: configuration)
        let todos = try store.collection("todos", of: Todo.self)
        #expect(try todos.count() == 3)
        let error = try #require(throws: DatabaseError.self) { try todos.update(Todo.make(99)) }
        #expect(error.code == .readOnly, "\(error)")
        #expect(try store.currentVersion() == version)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }

    @Test func aFileLockedByAnotherProcessFailsWithBusyThenRecovers() throws {
        let shellPath = "/usr/bin/sqlite3"
        try #require(FileManager.default.isExecutableFile(atPath: shellPath), "the sqlite3 shell (Debian package sqlite3) is needed")
        var configuration = Store.Configuration()
        configuration.busyTimeout = 0.2
        // The shell's write is noticed when the test says (no poll, no watch).
        configuration.externalWritePollInterval = nil
        configuration.watchesFile = false
        let setup = try makeStore("locked.sqlite", configuration: configuration)
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: setup.live)
        defer { subscription.cancel() }
        let version = try setup.store.currentVersion()

        // Another process takes the write lock and keeps it until told to commit.
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: shellPath)
        shell.arguments = [directory.path("locked.sqlite")]
        let input = Pipe(), output = Pipe()
        shell.standardInput = input
        shell.standardOutput = output
        try ProcessLaunch.run(shell)
        defer { if shell.isRunning { shell.terminate() } }
        input.fileHandleForWriting.write(Data("BEGIN EXCLUSIVE;\nUPDATE todos SET title = 'shell';\nSELECT 'locked';\n".utf8))
        var said = Data()
        while !String(decoding: said, as: UTF8.self).contains("locked\n") {
            let chunk = output.fileHandleForReading.availableData
            try #require(!chunk.isEmpty, "the sqlite3 shell ended before taking the lock")
            said += chunk
        }

        let error = try #require(throws: DatabaseError.self) { try setup.todos.insert(Todo.make(40)) }
        #expect(error.code == .busy, "\(error)")
        // Readers are not blocked (WAL), and see neither write.
        #expect(try setup.todos.fetchAll().map(\.rank) == [10, 20, 30])
        #expect(try setup.todos.fetchAll().allSatisfy { $0.title != "shell" })
        #expect(try setup.store.currentVersion() == version)
        // Another store opens the locked file: opening needs no write lock.
        #expect(throws: Never.self) { _ = try Store(path: directory.path("locked.sqlite"), configuration: configuration) }

        // The other process commits and quits: writing works again, its write is noticed.
        input.fileHandleForWriting.write(Data("COMMIT;\n.quit\n".utf8))
        try input.fileHandleForWriting.close()
        try Wait.exit(of: shell, "the sqlite3 shell to commit and quit") {
            _ = output.fileHandleForReading.readToEndRetryingInterrupts()
        }
        #expect(shell.terminationStatus == 0)
        try setup.store.noticeExternalWrites()
        try setup.todos.insert(Todo.make(40))
        #expect(try setup.todos.fetchAll().map(\.rank) == [10, 20, 30, 40])
        #expect(try setup.todos.fetchAll().filter { $0.title == "shell" }.count == 3)
        #expect(try setup.store.currentVersion() == version + 2, "the shell's write adopted, then ours")
        #expect(subscriber.items.map(\.rank) == [10, 20, 30, 40])
        #expect(subscriber.items.filter { $0.title == "shell" }.count == 3)
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func aFileOfRandomBytesIsUnusableAndLeftUntouched() throws {
        let path = directory.path("random.sqlite")
        var random = SeededGenerator(seed: 6)
        let bytes = Data((0..<16_384).map { _ in UInt8.random(in: 0...255, using: &random) })
        try bytes.write(to: URL(fileURLWithPath: path))
        for readOnly in [false, true] {
            var configuration = Store.Configuration()
            configuration.readOnly = readOnly
            let error = try #require(throws: StoreError.self) { try Store(path: path, configuration: configuration) }
            #expect(error.kind == .unusableFile, "\(error)")
            #expect(error.underlying?.code == .notADatabase, "\(error)")
            #expect(error.message.contains(path))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the file is untouched")
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func aStoreWhosePagesAreGarbageFailsWithATypedError() throws {
        let path = directory.path("pages.sqlite")
        _ = try makeClosedFile("pages.sqlite")
        // Page 1 (the header and the schema's root) stays; every later page is random bytes.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
        try #require(bytes.count > pageSize)
        var random = SeededGenerator(seed: 7)
        for index in pageSize..<bytes.count { bytes[index] = UInt8.random(in: 0...255, using: &random) }
        try bytes.write(to: URL(fileURLWithPath: path))

        let error = try #require(throws: StoreError.self) { try Store(path: path) }
        #expect(error.underlying?.code == .corrupt, "\(error)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the file is untouched")
        #expect(error.kind == .unusableFile, "\(error)")
    }

    @Test func releasingAStoreLeavesItsDataInTheMainFile() throws {
        let path = directory.path("released.sqlite")
        do {
            let store = try Store(path: path)
            let todos = try store.collection("todos", of: Todo.self)
            try todos.insert(contentsOf: (1...3).map { Todo.make($0) })
            #expect(try todos.count() == 3)   // a read: a reader connection is opened
        }
        // The last connection to close checkpoints the WAL into the file and deletes it — unless
        // that connection is a read-only reader, which cannot.
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        // The data is safe either way: reopening reads the WAL.
        #expect(try Store(path: path).collection("todos", of: Todo.self).count() == 3)
    }

    // MARK: The files beside it

    /// The ranks of the todos in the file at `path`, read by a store opened afresh.
    func ranksInAFreshStore(_ path: String) throws -> [Int] {
        try Store(path: path).collection("todos", of: Todo.self).fetchAll().map(\.rank).sorted()
    }

    /// Another program holding the file open (here a connection of its own, which has read): the
    /// store's writer is then not the last connection to close, which alone folds the `-wal`
    /// file back into the database file when it closes.
    func openAnotherConnection(_ path: String) throws -> Database {
        let other = try Database(path: path, readOnly: false, configuration: Store.Configuration())
        _ = try? other.fetchValue("SELECT count(*) FROM sqlite_schema", as: Int.self)
        return other
    }

    /// The commit's file check looks at the directory alone while its stamp is the one of the
    /// last time every file was found in place (one `stat` instead of three): a `-wal` file
    /// deleted, or another file renamed over the database file, once that stamp is trusted still
    /// fails the next write.
    @Test(arguments: ["delete the -wal file", "rename a file over the database"])
    func aLossIsCaughtWhileTheDirectoryIsTrusted(_ loss: String) throws {
        let path = directory.path("trusted-\(loss.count).sqlite")
        let store = try Store(path: path)
        let todos = try store.collection("todos", of: Todo.self)
        try todos.insert(Todo.make(1))
        // The stamp is trusted once the directory's last change is old enough (see
        // DirectoryStamp.isSettled): wait for that condition, then commit once more.
        let folder = (path as NSString).deletingLastPathComponent
        try Wait.blockingUntil("the directory's stamp to settle") { DirectoryStamp(path: folder)?.isSettled == true }
        try todos.insert(Todo.make(2))
        #expect(store.openedFiles?.trustsDirectories == true)
        if loss.hasPrefix("delete") {
            #expect(unlink(path + "-wal") == 0)
        } else {
            let other = directory.path("other-\(loss.count).sqlite")
            try Store(path: other).write { db in try db.execute("CREATE TABLE other(x)") }
            #expect(rename(other, path) == 0)
        }
        let error = #expect(throws: StoreError.self) { try todos.insert(Todo.make(3)) }
        #expect(error?.kind == .fileMoved)
    }

    /// A directory's stamp is trusted as soon as the clock that stamps changes has moved past its
    /// last change (a later change cannot take the same time), not a tenth of a second later:
    /// until then every commit looks at each file (three more `stat`s), which a directory where
    /// an app keeps other files changing would make the rule.
    @Test func aDirectoryIsTrustedOnceTheStampingClockMovedOn() throws {
        let folder = directory.path("stamped")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: folder + "/entry", contents: Data()))
        let stamp = try #require(DirectoryStamp(path: folder))
        #if os(Linux)
        // The kernel stamps changes with the coarse real-time clock (a tick is a few ms).
        var now = timespec()
        repeat { clock_gettime(CLOCK_REALTIME_COARSE, &now) } while (now.tv_sec, now.tv_nsec) <= (stamp.changed.tv_sec, stamp.changed.tv_nsec)
        #expect(stamp.isSettled)
        #expect(FileManager.default.createFile(atPath: folder + "/another", contents: Data()))
        #expect(DirectoryStamp(path: folder) != stamp, "a later change takes a later time")
        #endif
    }

    /// The `-wal` file deleted under a running store (a user's `rm`, a cleaning tool): the
    /// commits since the last checkpoint, which only that file held, were lost once the store
    /// closed while another connection had the file open — and the store went on reporting
    /// writes that it made to the deleted file. Now the next write fails with a typed error
    /// naming the file, so do reads and a second store at the path, and the commits the deleted
    /// file held are copied into the database file through the handle the store still has.
    @Test func aDeletedWalFileFailsWritesAndLosesNoCommit() throws {
        let path = directory.path("wal.sqlite")
        var other: Database?
        do {
            let store = try Store(path: path)
            let todos = try store.collection("todos", of: Todo.self)
            try todos.insert(contentsOf: (1...3).map { Todo.make($0) })
            #expect(unlink(path + "-wal") == 0)
            other = try openAnotherConnection(path)

            let error = #expect(throws: StoreError.self) { try todos.insert(Todo.make(4)) }
            #expect(error?.kind == .fileMoved)
            #expect(error?.message.contains(path + "-wal") == true, "\(String(describing: error))")
            let read = #expect(throws: StoreError.self) { try todos.count() }
            #expect(read?.kind == .fileMoved)
            #expect(read?.message.contains("were copied into the database file") == true, "\(String(describing: read))")
            let second = #expect(throws: StoreError.self) { try Store(path: path) }
            #expect(second?.kind == .fileMoved, "\(String(describing: second))")
        }
        #expect(other != nil)
        other = nil   // closes last
        #expect(try ranksInAFreshStore(path) == [1, 2, 3])
    }

    /// The same when nothing calls the store after the deletion: releasing it copies the commits
    /// the deleted file held into the database file.
    @Test func aStoreReleasedAfterItsWalFileWasDeletedLosesNoCommit() throws {
        let path = directory.path("released-wal.sqlite")
        var other: Database?
        do {
            let store = try Store(path: path)
            try store.collection("todos", of: Todo.self).insert(contentsOf: (1...3).map { Todo.make($0) })
            #expect(unlink(path + "-wal") == 0)
            other = try openAnotherConnection(path)
        }
        #expect(other != nil)
        other = nil   // closes last
        #expect(try ranksInAFreshStore(path) == [1, 2, 3])
    }

    /// The `-shm` file (the index of the `-wal` file, shared by every connection) deleted under
    /// a running store: the store kept the index it had mapped in memory, another program made a
    /// new one, and each wrote its commits over the other's in the `-wal` file — the other
    /// program's commit, reported done, was lost. Now the store's next write fails with a typed
    /// error naming the file, and every commit reported done is in the file.
    @Test func aDeletedShmFileFailsWritesAndLosesNoCommit() throws {
        let path = directory.path("shm.sqlite")
        do {
            let store = try Store(path: path)
            try store.write { db in
                try db.execute("CREATE TABLE notes(body TEXT)")
                try db.execute("INSERT INTO notes VALUES ('store')")
            }
            #expect(unlink(path + "-shm") == 0)
            #expect(try SQLiteShell.run("INSERT INTO notes VALUES ('sqlite3 shell')", on: path).status == 0)

            let error = #expect(throws: StoreError.self) {
                try store.write { db in try db.execute("INSERT INTO notes VALUES ('store again')") }
            }
            #expect(error?.kind == .fileMoved)
            #expect(error?.message.contains(path + "-shm") == true, "\(String(describing: error))")
        }
        let bodies = try Store(path: path).read { db in
            try db.fetchAll("SELECT body FROM notes ORDER BY rowid").map { try $0.value("body", as: String.self) }
        }
        #expect(bodies == ["store", "sqlite3 shell"])
    }

    /// Checkpoints, the `-wal` file truncated by one, and other stores and programs opening and
    /// closing the file are no loss: the store goes on.
    @Test func checkpointsAndOtherConnectionsComingAndGoingAreNoLoss() throws {
        let path = directory.path("kept.sqlite")
        let store = try Store(path: path)
        let todos = try store.collection("todos", of: Todo.self)
        try todos.insert(Todo.make(1))
        try store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        try todos.insert(Todo.make(2))
        do {
            let second = try Store(path: path)
            try second.collection("todos", of: Todo.self).insert(Todo.make(3))
        }
        #expect(try SQLiteShell.run("SELECT count(*) FROM todos", on: path).status == 0)
        try todos.insert(Todo.make(4))
        #expect(try todos.fetchAll().map(\.rank).sorted() == [1, 2, 3, 4])
    }

    // MARK: Migrations

    @Test func aMigrationFailingHalfwayAppliesNothing() throws {
        let setup = try makeStore("migration.sqlite")
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: setup.live)
        defer { subscription.cancel() }
        let version = try setup.store.currentVersion()

        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_half", sql: """
            UPDATE todos SET title = 'migrated';
            INSERT INTO no_such_table VALUES (1)
            """)
        let error = try #require(throws: StoreError.self) { try setup.store.migrate(migrator) }
        #expect(error.kind == .migration)
        #expect(error.message.contains("0001_half"), "\(error)")
        #expect(try migrator.appliedMigrations(in: setup.store).isEmpty)
        #expect(try migrator.pendingMigrations(in: setup.store) == ["0001_half"])
        #expect(try setup.todos.fetchAll().allSatisfy { $0.title != "migrated" })
        #expect(try setup.store.currentVersion() == version)
        #expect(try setup.store.changes(after: version).isEmpty)
        #expect(subscriber.events.count == 1)

        // The same in Swift: a closure that writes, then throws.
        struct Halfway: Error {}
        var closure = try Migrator(domain: "code")
        try closure.register(name: "0001_half") { db in
            try db.execute("CREATE TABLE created_halfway(x)")
            try db.execute("UPDATE todos SET title = 'migrated'")
            throw Halfway()
        }
        #expect(throws: StoreError.self) { try setup.store.migrate(closure) }
        #expect(try setup.store.read {
            try $0.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = 'created_halfway'", as: Int.self)
        } == 0)
        #expect(try setup.todos.fetchAll().allSatisfy { $0.title != "migrated" })
        #expect(try setup.store.currentVersion() == version)

        // The store is usable, and a corrected migration applies.
        try setup.todos.insert(Todo.make(40))
        var fixed = try Migrator(domain: "app")
        try fixed.register(name: "0001_half", sql: "UPDATE todos SET title = 'migrated'")
        try setup.store.migrate(fixed)
        #expect(try setup.todos.fetchAll().allSatisfy { $0.title == "migrated" })
        #expect(try setup.store.currentVersion() == version + 2)
        #expect(subscriber.items.map(\.title) == Array(repeating: "migrated", count: 4))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func migrationsAppliedBeforeAFailingOneTakeAVersion() throws {
        let setup = try makeStore("partial.sqlite")
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: setup.live)
        defer { subscription.cancel() }
        let version = try setup.store.currentVersion()

        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_rename", sql: "UPDATE todos SET title = 'renamed'")
        try migrator.register(name: "0002_broken", sql: "INSERT INTO no_such_table VALUES (1)")
        #expect(throws: StoreError.self) { try setup.store.migrate(migrator) }
        // 0001 is applied (each migration commits on its own), 0002 is not.
        #expect(try migrator.appliedMigrations(in: setup.store) == ["0001_rename"])
        #expect(try setup.todos.fetchAll().allSatisfy { $0.title == "renamed" })
        // What 0001 changed took a version, logged row by row, and live queries heard of it…
        #expect(try setup.store.currentVersion() == version + 1)
        #expect(try setup.store.changes(after: version).map(\.table) == ["todos"])
        #expect(try setup.store.changes(after: version).map(\.origin) == [.migration])
        #expect(subscriber.items.map(\.title) == ["renamed", "renamed", "renamed"])
        // …so that after a later update, which re-reads only the row it wrote, the list is right.
        var first = try #require(try setup.todos.order(by: Column("rank")).fetchOne())
        first.done = true
        try setup.todos.update(first)
        #expect(subscriber.items == (try setup.todos.order(by: Column("rank")).fetchAll()))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    // MARK: Subscribers

    struct Boom: Error {}

    @Test func aThrowingHandlerEndsOnlyItsOwnSubscription() throws {
        let setup = try makeStore("throwing.sqlite")
        let calls = Locked(0)
        let errors = Locked<[any Error]>([])
        let throwing = setup.live.subscribe(on: .immediate, onError: { error in errors.withLock { $0.append(error) } }) { _ in
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            if call == 2 { throw Boom() }
        }
        defer { throwing.cancel() }
        let before = ListViewSubscriber<Todo>(), queued = ListViewSubscriber<Todo>()
        let first = before.subscribe(to: setup.live)
        let second = queued.subscribe(to: setup.live, on: .queue(DispatchQueue(label: "queued")))
        defer {
            first.cancel()
            second.cancel()
        }

        try setup.todos.insert(Todo.make(40))   // the throwing handler's second event
        try setup.todos.insert(Todo.make(50))
        let version = try setup.store.currentVersion()
        #expect(calls.withLock { $0 } == 2, "no event after the handler threw")
        #expect(errors.withLock { $0.count } == 1)
        #expect(errors.withLock { $0.first } is Boom)
        #expect(before.events.count == 3)
        #expect(queued.waitFor(version: version))
        for subscriber in [before, queued] {
            #expect(subscriber.items.map(\.rank) == [10, 20, 30, 40, 50])
            #expect(subscriber.error == nil)
            #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        }
    }

    @Test func aBlockedHandlerHoldsUpNoOtherSubscriberNorWriter() throws {
        let setup = try makeStore("blocking.sqlite")
        let slow = ListViewSubscriber<Todo>()
        let blocked = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let slowSubscription = setup.live.subscribe(on: .queue(DispatchQueue(label: "slow")),
                                                    onError: { slow.fail($0) }) { event in
            slow.receive(event)
            if slow.events.count == 2 {
                blocked.signal()
                _ = release.wait(timeout: .now() + 30)
            }
        }
        defer { slowSubscription.cancel() }
        let fast = ListViewSubscriber<Todo>(), immediate = ListViewSubscriber<Todo>()
        let fastSubscription = fast.subscribe(to: setup.live, on: .queue(DispatchQueue(label: "fast")))
        let immediateSubscription = immediate.subscribe(to: setup.live)
        defer {
            fastSubscription.cancel()
            immediateSubscription.cancel()
        }
        let initial = try setup.store.currentVersion()
        #expect(slow.waitFor(version: initial) && fast.waitFor(version: initial), "the initial snapshots")

        try setup.todos.insert(Todo.make(40))
        expectSignal(blocked, "the slow handler's second event")
        // The slow handler is blocked: writes go on, and the other subscribers hear of them.
        for rank in [50, 60, 70] { try setup.todos.insert(Todo.make(rank)) }
        try setup.todos.update(Todo(id: try #require(setup.todos.fetchAll().first).id, title: "first",
                                    rank: 10, done: false, tags: [], due: nil))
        let version = try setup.store.currentVersion()
        #expect(immediate.version == version)
        #expect(fast.waitFor(version: version))
        #expect(slow.events.count == 2)
        release.signal()

        // Released, the slow subscriber gets one combined changeset to the newest snapshot.
        #expect(slow.waitFor(version: version))
        #expect(slow.events.count == 3, "one event for the four commits made while blocked")
        for subscriber in [slow, fast, immediate] {
            #expect(subscriber.items.map(\.rank) == [10, 20, 30, 40, 50, 60, 70])
            #expect(subscriber.items.first?.title == "first")
            #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        }
    }

    @Test(arguments: [false, true])
    func aHandlerCancellingItsOwnSubscriptionStopsOnlyIt(queued: Bool) throws {
        let setup = try makeStore("self-cancel-\(queued).sqlite")
        let delivery: Delivery = queued ? .queue(DispatchQueue(label: "self")) : .immediate
        let own = ListViewSubscriber<Todo>()
        let box = Locked<Subscription?>(nil)
        let cancelled = DispatchSemaphore(value: 0)
        let subscription = setup.live.subscribe(on: delivery, onError: { own.fail($0) }) { event in
            own.receive(event)
            guard !event.isInitial, let subscription = box.withLock({ $0 }) else { return }
            subscription.cancel()   // from inside its own handler: returns at once
            own.markCancelled()
            cancelled.signal()
        }
        box.withLock { $0 = subscription }
        let other = ListViewSubscriber<Todo>()
        let otherSubscription = other.subscribe(to: setup.live, on: delivery)
        defer { otherSubscription.cancel() }
        #expect(own.waitFor(version: try setup.store.currentVersion()))

        try setup.todos.insert(Todo.make(40))
        expectSignal(cancelled, "the handler cancelled its subscription")
        try setup.todos.insert(Todo.make(50))
        try setup.todos.insert(Todo.make(60))
        #expect(other.waitFor(version: try setup.store.currentVersion()))
        #expect(subscription.isCancelled)
        #expect(own.events.count == 2)
        #expect(other.items.map(\.rank) == [10, 20, 30, 40, 50, 60])
        #expect(own.failures.isEmpty, "\(own.failures)")
        #expect(other.failures.isEmpty, "\(other.failures)")
    }

    @Test func aHandlerCancellingAnotherSubscriptionStopsItAtOnce() throws {
        let setup = try makeStore("cancel-other.sqlite")
        let victim = ListViewSubscriber<Todo>()
        let victimSubscription = victim.subscribe(to: setup.live)
        let killer = ListViewSubscriber<Todo>()
        let killerSubscription = setup.live.subscribe(on: .immediate, onError: { killer.fail($0) }) { event in
            killer.receive(event)
            if !event.isInitial && !victimSubscription.isCancelled {
                victimSubscription.cancel()
                victim.markCancelled()   // any later event of the victim is a failure
            }
        }
        defer { killerSubscription.cancel() }
        try setup.todos.insert(Todo.make(40))
        try setup.todos.insert(Todo.make(50))
        #expect(victimSubscription.isCancelled)
        #expect(victim.events.count <= 2)
        #expect(killer.items.map(\.rank) == [10, 20, 30, 40, 50])
        #expect(victim.failures.isEmpty, "\(victim.failures)")
        #expect(killer.failures.isEmpty, "\(killer.failures)")
        #expect(setup.store.observation.count == 1)
    }

    @Test func cancellingFromOutsideAHandlerWaitsForTheRunningHandler() throws {
        let setup = try makeStore("cancel-running.sqlite")
        let log = Locked<[String]>([])
        let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let victim = ListViewSubscriber<Todo>()
        let subscription = setup.live.subscribe(on: .queue(DispatchQueue(label: "victim")),
                                                onError: { victim.fail($0) }) { event in
            victim.receive(event)
            guard !event.isInitial else { return }
            inside.signal()
            _ = release.wait(timeout: .now() + 30)
            log.withLock { $0.append("handler returned") }
        }
        #expect(victim.waitFor(version: try setup.store.currentVersion()), "the initial snapshot")
        try setup.todos.insert(Todo.make(40))
        expectSignal(inside, "the victim's second event")
        // Released from another thread, whether before or while cancel() waits.
        DispatchQueue.global().async { release.signal() }
        subscription.cancel()
        log.withLock { $0.append("cancel returned") }
        victim.markCancelled()
        try setup.todos.insert(Todo.make(50))
        #expect(log.withLock { $0 } == ["handler returned", "cancel returned"])
        #expect(victim.events.count == 2)
        #expect(victim.failures.isEmpty, "\(victim.failures)")
    }

    /// Cancelling another subscription from inside a handler does not wait for that
    /// subscription's running handler (documented: it might be waiting for this one), so two
    /// handlers waiting on each other cannot deadlock; no later event of it starts.
    @Test func cancellingAnotherSubscriptionFromAHandlerCannotDeadlock() throws {
        let setup = try makeStore("cancel-cross.sqlite")
        let log = Locked<[String]>([])
        let victimInside = DispatchSemaphore(value: 0), cancelReturned = DispatchSemaphore(value: 0)
        let victimDone = DispatchSemaphore(value: 0)
        let victim = ListViewSubscriber<Todo>()
        let victimSubscription = setup.live.subscribe(on: .queue(DispatchQueue(label: "victim")),
                                                      onError: { victim.fail($0) }) { event in
            victim.receive(event)
            guard !event.isInitial else { return }
            victimInside.signal()
            // Waits for the killer's cancel() to return: had cancel() waited for this handler, a deadlock.
            let returned = cancelReturned.wait(timeout: .now() + 30) == .success
            log.withLock { $0.append(returned ? "victim handler returned" : "victim handler timed out") }
            victimDone.signal()
        }
        let killer = ListViewSubscriber<Todo>()
        let killerSubscription = setup.live.subscribe(on: .queue(DispatchQueue(label: "killer")),
                                                      onError: { killer.fail($0) }) { event in
            killer.receive(event)
            guard !event.isInitial, !victimSubscription.isCancelled else { return }
            _ = victimInside.wait(timeout: .now() + 30)
            victimSubscription.cancel()
            log.withLock { $0.append("cancel returned") }
            victim.markCancelled()   // no event of the victim may start from now on
            cancelReturned.signal()
        }
        defer { killerSubscription.cancel() }
        let initial = try setup.store.currentVersion()
        #expect(victim.waitFor(version: initial) && killer.waitFor(version: initial), "the initial snapshots")

        try setup.todos.insert(Todo.make(40))
        expectSignal(victimDone, "the victim's handler returning")
        try setup.todos.insert(Todo.make(50))
        #expect(killer.waitFor(version: try setup.store.currentVersion()))
        #expect(log.withLock { $0 } == ["cancel returned", "victim handler returned"])
        #expect(victimSubscription.isCancelled)
        #expect(victim.events.count == 2)
        #expect(victim.failures.isEmpty, "\(victim.failures)")
        #expect(killer.items.map(\.rank) == [10, 20, 30, 40, 50])
        #expect(killer.failures.isEmpty, "\(killer.failures)")
    }

    @Test(arguments: [false, true])
    func aHandlerSubscribingFromInsideGetsItsOwnInitialEvent(queued: Bool) throws {
        let setup = try makeStore("nested-\(queued).sqlite")
        let delivery: Delivery = queued ? .queue(DispatchQueue(label: "outer")) : .immediate
        let openTodos = try setup.todos.filter(Column("done") == false).order(by: Column("rank")).live()
        let inner = ListViewSubscriber<Todo>()
        let innerBox = Locked<Subscription?>(nil)
        let initialInside = Locked<Bool?>(nil)
        let subscribed = DispatchSemaphore(value: 0)
        let outer = ListViewSubscriber<Todo>()
        let outerSubscription = setup.live.subscribe(on: delivery, onError: { outer.fail($0) }) { event in
            outer.receive(event)
            guard !event.isInitial, innerBox.withLock({ $0 }) == nil else { return }
            let subscription = inner.subscribe(to: openTodos, on: delivery)
            innerBox.withLock { $0 = subscription }
            // Immediate delivery: the initial event came inside `subscribe`, here, in this handler.
            initialInside.withLock { $0 = inner.events.count == 1 }
            subscribed.signal()
        }
        defer {
            outerSubscription.cancel()
            innerBox.withLock { $0 }?.cancel()
        }
        #expect(outer.waitFor(version: try setup.store.currentVersion()), "the initial snapshot")

        try setup.todos.insert(Todo.make(40))
        expectSignal(subscribed, "the outer handler subscribing")
        if !queued { #expect(initialInside.withLock { $0 } == true) }
        #expect(inner.waitFor(version: try setup.store.currentVersion()))
        #expect(inner.events.first?.isInitial == true)
        #expect(inner.events.first?.snapshot.map(\.rank) == [10, 20, 30, 40])

        try setup.todos.insert(Todo.make(50))
        try setup.todos.insert(Todo.make(60, done: true))
        let version = try setup.store.currentVersion()
        #expect(outer.waitFor(version: version))
        #expect(inner.waitFor(items: try setup.todos.filter(Column("done") == false).order(by: Column("rank")).fetchAll()))
        #expect(inner.items.map(\.rank) == [10, 20, 30, 40, 50])
        #expect(outer.items.map(\.rank) == [10, 20, 30, 40, 50, 60])
        #expect(inner.failures.isEmpty, "\(inner.failures)")
        #expect(outer.failures.isEmpty, "\(outer.failures)")
    }
}
