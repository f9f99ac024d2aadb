import Foundation
@testable import Ripple
import RippleSQLite
import RippleTesting
import Testing

/// Issue 14: commits by other connections reach live queries without polling — from the
/// `sqlite3` shell (another process, not Ripple) through a watch on the file, and from another
/// store of this process directly. Every store here has polling off; the file watch is on by default.
@Suite(.timeLimit(.minutes(15))) struct CrossProcessObservationTests {
    let directory: TemporaryDirectory
    let path: String
    let store: Store

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    static var noPolling: Store.Configuration {
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = nil
        return configuration
    }

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("shared.sqlite")
        store = try Store(path: path, configuration: Self.noPolling)
    }

    /// Runs `sql` in the sqlite3 shell, another process.
    func shell(_ sql: String) throws {
        #expect(try SQLiteShell.run(sql, on: path).status == 0)
    }

    @Test func aWriteByTheSqlite3ShellArrivesWithoutPolling() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        defer { subscription.cancel() }
        #expect(store.observation.isWatching)
        try shell("INSERT INTO items(id, title) VALUES (2, 'from the shell')")
        // A safety net only: the event comes when the file changes.
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a"), Item(id: 2, title: "from the shell")]))

        // After a checkpoint that resets the WAL, the watch still hears the next write.
        try store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        try shell("UPDATE items SET title = 'again' WHERE id = 1")
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "again"), Item(id: 2, title: "from the shell")]))
        #expect(subscriber.failures.isEmpty)
    }

    /// A store opened and observed without writing or looking first: the first foreign commit
    /// after its first read is heard (the store knew where it stood among other connections'
    /// commits only from its first look, which took that commit as the starting point).
    @Test func theFirstForeignCommitAfterOpeningArrives() throws {
        try store.collection("items", of: Item.self).insert(Item(id: 1, title: "a"))
        let reopened = try Store(path: path, configuration: Self.noPolling)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: reopened.liveQuery(Item.self, sql: "SELECT id, title FROM items ORDER BY id",
                                                                       identity: "id"))
        defer { subscription.cancel() }
        #expect(subscriber.items == [Item(id: 1, title: "a")])
        try shell("INSERT INTO items(id, title) VALUES (2, 'from the shell')")
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a"), Item(id: 2, title: "from the shell")]))
        #expect(subscriber.failures.isEmpty)

        // Deterministically: nothing watches or polls, the commit is complete before the first look.
        var unwatched = Self.noPolling
        unwatched.watchesFile = false
        let quiet = try Store(path: path, configuration: unwatched)
        let second = ListViewSubscriber<Item>()
        let secondSubscription = second.subscribe(to: quiet.liveQuery(Item.self, sql: "SELECT id, title FROM items ORDER BY id",
                                                                      identity: "id"))
        defer { secondSubscription.cancel() }
        try shell("INSERT INTO items(id, title) VALUES (3, 'later')")
        try quiet.noticeExternalWrites()
        #expect(second.items.last == Item(id: 3, title: "later"))
    }

    /// Another store's commit not yet noticed when this store commits: this store's commit
    /// takes it in (its version comes after), and its rows concern a live query that this
    /// store's own changed rows do not. It must still be told, with the other commit's rows.
    @Test func aForeignCommitTakenInByAnOwnCommitIsHeard() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "mine"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.filter(Column("title") == "theirs").order(by: Column("id")).live())
        defer { subscription.cancel() }
        // Hold this store's looks back (the other store tells it through this queue).
        let held = DispatchSemaphore(value: 0)
        store.observation.noticeQueue.async { _ = try? Wait.for(held, "the test to free the notice queue") }
        defer { held.signal() }
        let other = try Store(path: path, configuration: Self.noPolling)
        try other.collection("items", of: Item.self).insert(Item(id: 2, title: "theirs"))
        try items.insert(Item(id: 3, title: "mine too"))
        #expect(subscriber.waitFor(items: [Item(id: 2, title: "theirs")]))
        #expect(subscriber.failures.isEmpty)
    }

    @Test func aWriteByAnotherStoreInThisProcessArrivesWithoutPolling() throws {
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.all.live())
        defer { subscription.cancel() }
        let other = try Store(path: path, configuration: Self.noPolling)
        try other.collection("items", of: Item.self).insert(Item(id: 7, title: "next door"))
        #expect(subscriber.waitFor(items: [Item(id: 7, title: "next door")]))
        #expect(subscriber.failures.isEmpty)
    }

    @Test func theWatchLivesOnlyWhileLiveQueriesDo() throws {
        let items = try store.collection("items", of: Item.self)
        #expect(!store.observation.isWatching)
        let subscription = try items.all.live().subscribe { _ in }
        #expect(store.observation.isWatching)
        subscription.cancel()
        #expect(!store.observation.isWatching)
        #expect(!(try Store.inMemory()).observation.isWatching)
        // Off when asked.
        var configuration = Store.Configuration()
        configuration.watchesFile = false
        let unwatched = try Store(path: directory.path("unwatched.sqlite"), configuration: configuration)
        let quiet = try unwatched.collection("items", of: Item.self).all.live().subscribe { _ in }
        #expect(!unwatched.observation.isWatching)
        quiet.cancel()
    }

    /// The store's own commits do not wake the watch: it stops hearing writes to the WAL while
    /// the store holds its writer (a wake costs two thread hand-offs and the header's read on
    /// every commit, on the cores the live queries need), nor make the store look for others'
    /// commits (a look takes the writer). Its checkpoints (rare) may wake the watch, which
    /// hears the database file, but do not make it look either. Other connections' commits
    /// still wake it.
    @Test func theStoresOwnCommitsDoNotWakeTheWatchNorMakeItLook() throws {
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        defer { subscription.cancel() }
        var expected: [Item] = []
        for id in 1...40 {
            try items.insert(Item(id: id, title: "own \(id)"))
            expected.append(Item(id: id, title: "own \(id)"))
        }
        #expect(subscriber.waitFor(items: expected))
        // Whatever the watch queued was handled before this runs (its wakes run on this queue).
        store.observation.noticeQueue.sync {}
        #expect(store.observation.diagnostics.withLock { $0.watchWakes } == 0)
        // A checkpoint by the store (it writes the database file, and resets the WAL) is its own too.
        try store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        store.observation.noticeQueue.sync {}
        #expect(store.observation.diagnostics.withLock { $0.looks } == 0)

        try shell("INSERT INTO items(id, title) VALUES (100, 'from the shell')")
        expected.append(Item(id: 100, title: "from the shell"))
        #expect(subscriber.waitFor(items: expected))
        #expect(store.observation.diagnostics.withLock { $0.watchWakes } >= 1)
        let looks = store.observation.diagnostics.withLock { $0.looks }
        #expect(looks >= 1 && looks <= 3, "the store looked for other connections' commits \(looks) times")
        #expect(subscriber.failures.isEmpty)
    }

    /// Row 1 stored, and a live query of the items that received it.
    func subscribedToItemOne() throws -> (ListViewSubscriber<Item>, Subscription) {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a")]))
        return (subscriber, subscription)
    }

    /// Runs `action` once, on the writer, as `call` lets it go, while the watch is still muted (a
    /// commit of another connection then is not heard: the release must notice it). Returns
    /// whether it ran.
    func atTheNextRelease(_ action: @escaping @Sendable () -> Void, during call: () throws -> Void) throws -> Bool {
        let gate = try #require(store.observation.ownCommits?.releaseGate)
        let ran = Locked(false)
        gate.withLock {
            $0 = { if !ran.withLock({ ran in defer { ran = true }; return ran }) { action() } }
        }
        defer { gate.withLock { $0 = nil } }
        try call()
        return ran.withLock { $0 }
    }

    /// A write made without Ripple (the shell), not noticed yet when the store commits a write
    /// that changes no row. The store counts such commits of its own, so that other connections
    /// do not take them for writes made without Ripple; counting this one must not make the
    /// store take the shell's write for one of its own.
    @Test func aForeignWriteBeforeAnOwnWriteThatChangesNothingArrives() throws {
        let (subscriber, subscription) = try subscribedToItemOne()
        defer { subscription.cancel() }
        // Hold the store's looks back until its own write is done.
        let held = DispatchSemaphore(value: 0)
        store.observation.noticeQueue.async { _ = try? Wait.for(held, "the test to free the notice queue") }
        try shell("INSERT INTO items(id, title) VALUES (2, 'from the shell')")
        try store.write { db in try db.execute("UPDATE items SET title = 'none' WHERE id = 99") }
        held.signal()
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a"), Item(id: 2, title: "from the shell")]))
        #expect(subscriber.failures.isEmpty)
    }

    /// Another process commits while the store holds its writer, before the store begins a
    /// transaction (the watch does not hear writes then): the store notices it when it lets the
    /// writer go.
    @Test func aForeignCommitWhileTheStoreHoldsItsWriterArrives() throws {
        let (subscriber, subscription) = try subscribedToItemOne()
        defer { subscription.cancel() }
        try store.writeWithoutTransaction { _ in try shell("INSERT INTO items(id, title) VALUES (2, 'meanwhile')") }
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a"), Item(id: 2, title: "meanwhile")]))
        #expect(subscriber.failures.isEmpty)
    }

    /// Another process commits right after one of the store's own commits, while the store still
    /// holds its writer (the watch does not hear it then). As it lets the writer go, the store
    /// checks for such commits; after a commit of its own it reads the wal-index's count of
    /// transactions instead of `PRAGMA data_version`, and must find it one further than its own
    /// commit left it, and look.
    @Test func aForeignCommitRightAfterAnOwnCommitArrives() throws {
        let (subscriber, subscription) = try subscribedToItemOne()
        defer { subscription.cancel() }
        let ran = try atTheNextRelease({ [path] in
            _ = try? SQLiteShell.run("INSERT INTO items(id, title) VALUES (2, 'right after')", on: path)
        }, during: { try store.collection("items", of: Item.self).update(Item(id: 1, title: "mine")) })
        #expect(ran)
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "mine"), Item(id: 2, title: "right after")]))
        #expect(subscriber.failures.isEmpty)
    }

    /// A write takes a version and then fails to commit (a deferred foreign key: its COMMIT is
    /// refused and rolled back), and another process commits before the store lets its writer
    /// go (the watch does not hear it then). The wal-index's count then stands where the store's
    /// own commit would have put it: the release must not take it for that commit, and look.
    @Test func aForeignCommitAfterAnOwnWriteThatRolledBackArrives() throws {
        let (subscriber, subscription) = try subscribedToItemOne()
        defer { subscription.cancel() }
        try store.write { db in
            try db.execute("CREATE TABLE parent(id INTEGER PRIMARY KEY)")
            try db.execute("CREATE TABLE child(id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
        }
        let ran = try atTheNextRelease({ [path] in
            _ = try? SQLiteShell.run("INSERT INTO items(id, title) VALUES (2, 'meanwhile')", on: path)
        }, during: {
            #expect(throws: (any Error).self) {
                try store.write { db in try db.execute("INSERT INTO child(id, parent) VALUES (1, 99)") }
            }
        })
        #expect(ran)
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a"), Item(id: 2, title: "meanwhile")]))
        #expect(subscriber.failures.isEmpty)
    }

    /// Another connection writes its commit's frames while the store still holds its writer (the
    /// watch does not hear them), and publishes the commit in the wal-index header only after
    /// the store's check as it let the writer go (with `synchronous = FULL` a sync sits between;
    /// here it is paused). No write to a file follows: the store must still come to read it.
    @Test func aForeignCommitPublishedAfterTheReleaseCheckArrives() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        // Opened, and its files too, before the watch began (opening them would be heard).
        let other = try #require(PausingVFS.open(path))
        defer { sqlite3_close_v2(other) }
        #expect(sqlite3_exec(other, "SELECT count(*) FROM items", nil, nil, nil) == SQLITE_OK)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        defer { subscription.cancel() }
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a")]))

        let committed = DispatchSemaphore(value: 0)
        let connection = UncheckedSendable(other)
        let ran = try atTheNextRelease({
            PausingVFS.armSyncPause()
            Thread {
                _ = sqlite3_exec(connection.value, "INSERT INTO items(id, title) VALUES (2, 'late')", nil, nil, nil)
                committed.signal()
            }.start()
            // Its frames are written; the header is not.
            _ = try? Wait.for(PausingVFS.paused, "the other connection to pause in its -wal sync")
        }, during: { try items.update(Item(id: 1, title: "mine")) })
        #expect(ran)
        PausingVFS.resume()
        try Wait.for(committed, "the other connection's commit")
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "mine"), Item(id: 2, title: "late")]))
        #expect(subscriber.failures.isEmpty)
    }

    /// A writer that stays open (no close of the WAL after its commits) is heard commit by commit.
    @Test func eachCommitOfALongLivedOtherProcessArrives() throws {
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        defer { subscription.cancel() }
        let shell = try SQLiteShell.session(on: path)
        defer { shell.end() }
        var expected: [Item] = []
        for id in 1...20 {
            try shell.send("INSERT INTO items(id, title) VALUES (\(id), 'next door \(id)');")
            expected.append(Item(id: id, title: "next door \(id)"))
            #expect(subscriber.waitFor(items: expected), "commit \(id) did not arrive")
        }
        #expect(subscriber.failures.isEmpty)
    }

    /// The file deleted under the store: its live queries end with the typed error, told by the
    /// watch (nothing polls and nothing else reads or writes).
    @Test func aDeletedFileEndsLiveQueriesWithoutPolling() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.all.live())
        defer { subscription.cancel() }
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a")]))
        try FileManager.default.removeItem(atPath: path)
        #expect(subscriber.waitForError())
        #expect((subscriber.error as? StoreError)?.kind == .fileMoved)
    }

    /// Another file renamed over the store's: the same, from the watch.
    @Test func aReplacedFileEndsLiveQueriesWithoutPolling() throws {
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.all.live())
        defer { subscription.cancel() }
        let other = directory.path("other.sqlite")
        #expect(try SQLiteShell.run("CREATE TABLE t(x)", on: other).status == 0)
        #expect(rename(other, path) == 0)
        #expect(subscriber.waitForError())
        #expect((subscriber.error as? StoreError)?.kind == .fileMoved)
    }
}

/// What a live query reading at a version is told of a commit that stands for several: other
/// connections' commits taken in by one of the store's own, or noticed together.
@Suite struct ToldRangeTests {
    final class Target: ObservationTarget, @unchecked Sendable {
        let observerID = ObservationCenter.makeObserverID()
        func storeDidCommit(_ summary: CommitSummary, batch: RefreshBatch) {}
        func routed(_ version: Int64) {}
        func awaitDelivery(of version: Int64) {}
    }

    /// A reader at a version inside the range sees part of what the commit tells: it must be
    /// told of it (and read that part from the change log), and the next read of the rest.
    /// Before, the commit waited for a read at its own version, while routing had gone past
    /// this one: the part this read saw counted as not concerning it, and its list kept the
    /// rows' old values for good (found by `ripple stress --processes 3`).
    @Test func aReadInsideTheRangeOfATakenInCommitIsToldOfIt() throws {
        let store = try Store.inMemory()
        let center = store.observation
        let target = Target()
        let interest = RowInterest(table: "items", quotedTable: "\"items\"", quotedKey: "\"id\"", filterSQL: "",
                                   filterArguments: [], filter: nil)
        center.register(target, store: store, interest: interest)
        defer { center.unregister(target) }
        // Versions 11 to 14 were other connections' commits, taken in by this store's own 15.
        let summary = CommitSummary(version: 15, coveredFrom: 11, tables: ["items"])
        _ = center.route(summary, FilterMatches())

        // A read at 12 sees 11 and 12: told, and the commit stays for the next read.
        let atTwelve = center.told(target.observerID, through: 12)
        #expect(atTwelve.commits.map(\.version) == [15])
        #expect(atTwelve.commits.first?.keys == nil)
        // A read at 15 sees the rest: told again, and then no more.
        #expect(center.told(target.observerID, through: 15).commits.map(\.version) == [15])
        #expect(center.told(target.observerID, through: 16).commits.isEmpty)

        // A commit of its own version only is not told to a read before it.
        _ = center.route(CommitSummary(version: 20, tables: ["items"]), FilterMatches())
        #expect(center.told(target.observerID, through: 19).commits.isEmpty)
        #expect(center.told(target.observerID, through: 20).commits.map(\.version) == [20])
    }
}
