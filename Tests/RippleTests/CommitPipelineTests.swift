import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Issue 24: every path that commits (a write, a write without a transaction, a migration, a
/// commit of another connection noticed) reaches every live query the same way, through one
/// pipeline. Each test here failed before the pipeline existed.
@Suite struct CommitPipelineTests {
    let directory: TemporaryDirectory
    let path: String

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("pipeline.sqlite")
    }

    func makeItems(_ store: Store) throws {
        try store.write { db in try db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, title TEXT NOT NULL)") }
    }

    func items(of store: Store) -> LiveQuery<Item> {
        store.liveQuery(Item.self, sql: "SELECT id, title FROM items ORDER BY id", identity: "id")
    }

    /// Runs `call` on a thread of its own, which must not return while `gate` is shut: waits
    /// for it half a second (a bounded wait for something that must not happen; the defects these
    /// tests pin returned within microseconds), then opens the gate and waits for it. Returns
    /// what `call` saw once it returned (`false` when it returned early).
    static func returnsOnlyOnceOpened(_ gate: DispatchSemaphore, _ call: @escaping @Sendable () -> Bool,
                                      sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let returned = DispatchSemaphore(value: 0)
        let saw = Locked(false)
        Thread.detachNewThread {
            let result = call()
            saw.withLock { $0 = result }
            returned.signal()
        }
        let returnedEarly = returned.wait(timeout: .now() + 0.5) == .success
        #expect(!returnedEarly, "it returned while the gate was shut", sourceLocation: sourceLocation)
        gate.signal()
        if returnedEarly { return false }
        #expect(throws: Never.self, sourceLocation: sourceLocation) { try Wait.for(returned, "the call to return once the gate opened") }
        return saw.withLock { $0 }
    }

    // MARK: Other stores of the process

    /// The two calls that commit outside a `write`.
    enum CommitOutsideAWrite: CaseIterable, Sendable {
        case writeWithoutTransaction, migration

        /// Commits the row (7, 'seeded') to `store`'s items.
        func commit(on store: Store) throws {
            let sql = "INSERT INTO items(id, title) VALUES (7, 'seeded')"
            switch self {
            case .writeWithoutTransaction:
                try store.writeWithoutTransaction { db in try db.execute(sql) }
            case .migration:
                var migrator = try Migrator(domain: "app")
                try migrator.register(name: "0001_seed", sql: sql)
                try store.migrate(migrator)
            }
        }
    }

    @Test(arguments: CommitOutsideAWrite.allCases)
    func anotherStoreOfTheProcessHearsACommitOutsideAWrite(_ call: CommitOutsideAWrite) throws {
        let writer = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(writer)
        let observer = try Store(path: path, configuration: Store.Configuration.unwatched)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: items(of: observer))
        defer { subscription.cancel() }
        try call.commit(on: writer)
        // A safety net only: the other store is told directly after the commit.
        #expect(subscriber.waitFor(items: [Item(id: 7, title: "seeded")]))
        #expect(subscriber.failures.isEmpty)
    }

    // MARK: What the log says

    @Test func aWriteWithoutTransactionIsLoggedRowByRow() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(store)
        let before = try store.currentVersion()
        try store.writeWithoutTransaction { db in
            try db.execute("INSERT INTO items(id, title) VALUES (1, 'a')")
            try db.execute("INSERT INTO items(id, title) VALUES (2, 'b')")
        }
        let entries = try store.changes(after: before)
        #expect(entries.map(\.table) == ["items"])
        #expect(entries.first?.rowKeys == ["1", "2"])
        #expect(try store.currentVersion() == before + 1)
    }

    /// Another store of the process looks for foreign commits while a write without a
    /// transaction is under way: its statements have committed, their version not yet. The look
    /// must not take them for a write made without Ripple (logged as a change to every table,
    /// which makes every live query re-read and history stop there).
    ///
    ///     writer:   INSERT (commits alone) ─► waits for the look (at most 0.5 s) ─► records v+1
    ///     observer:                  look: data_version moved, no version ─► adopt as "*"?
    @Test func anotherStoresLookDuringAWriteWithoutTransactionDoesNotAdoptIt() throws {
        let writer = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(writer)
        let observer = try Store(path: path, configuration: Store.Configuration.unwatched)
        try observer.noticeExternalWrites()
        let before = try writer.currentVersion()
        try writer.writeWithoutTransaction { db in
            try db.execute("INSERT INTO items(id, title) VALUES (1, 'a')")
            let looked = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                try? observer.noticeExternalWrites()
                looked.signal()
            }
            // A bounded wait for something that must not happen before this write is recorded.
            _ = looked.wait(timeout: .now() + 0.5)
        }
        try observer.noticeExternalWrites()
        let entries = try writer.changes(after: before)
        #expect(entries.map(\.table) == ["items"])
        #expect(try writer.currentVersion() == before + 1)
    }

    /// While a write without a transaction runs, another Ripple store commits and, in one case,
    /// the `sqlite3` shell too. Its version must take in the shell's write (a change to every
    /// table) and nothing else: its own statements and the other store's commit are not writes
    /// made without Ripple.
    @Test(arguments: [false, true])
    func aWriteWithoutTransactionTellsItsOwnCommitsFromForeignOnes(whileTheShellWrites: Bool) throws {
        let writer = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(writer)
        try writer.write { db in try db.execute("CREATE TABLE other(id INTEGER PRIMARY KEY)") }
        let other = try Store(path: path, configuration: Store.Configuration.unwatched)
        let before = try writer.currentVersion()
        try writer.writeWithoutTransaction { db in
            try db.execute("INSERT INTO items(id, title) VALUES (1, 'a')")
            try other.write { db in try db.execute("INSERT INTO other(id) VALUES (1)") }
            if whileTheShellWrites { try SQLiteShell.run("INSERT INTO items(id, title) VALUES (5, 'shell')", on: path) }
            try db.execute("INSERT INTO items(id, title) VALUES (2, 'b')")
        }
        let entries = try writer.changes(after: before)
        #expect(entries.filter { $0.table == "*" }.count == (whileTheShellWrites ? 1 : 0))
        #expect(entries.filter { $0.table == "other" }.map(\.origin) == [.write])
        #expect(entries.filter { $0.table == "items" }.map(\.origin) == [.maintenance])
        #expect(try other.currentVersion() == before + 2)
    }

    // MARK: Immediate delivery

    /// Threads write at once, each into its own key; with `.immediate` delivery, when a write
    /// returns its row is in the list (the event was delivered inside it, or before).
    @Test func anImmediateWriteReturnsOnlyOnceItsEventWasDelivered() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(store)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: items(of: store))
        defer { subscription.cancel() }
        let late = Locked<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for step in 0..<150 {
                let id = thread * 1_000 + step
                try? store.write { db in try db.execute("INSERT INTO items(id, title) VALUES (?, 'x')", [id]) }
                if !subscriber.items.contains(where: { $0.id == id }) { late.withLock { $0.append(id) } }
            }
        }
        #expect(late.withLock { $0 } == [])
        #expect(subscriber.items.count == 600)
        #expect(subscriber.failures.isEmpty)
    }

    /// The schedule, drawn:
    ///
    ///     first thread:   write 1 ─► handler(1) … blocked on the gate … ─► refresh ─► handler(1, 2)
    ///     second thread:              write 2 (the observer is busy: marked stale) ─► returns?
    ///     this thread:                         waits for the second write to return … opens the gate
    ///
    /// The second write must not return before the event showing its row was delivered (by the
    /// first thread): before, it returned at once, with its row in no list.
    @Test func anImmediateWriteWaitsForItsEventDeliveredByAnotherThread() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(store)
        let subscriber = ListViewSubscriber<Item>()
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let blocksNext = Locked(false)
        let subscription = items(of: store).subscribe(on: .immediate, onError: { subscriber.fail($0) }) { event in
            subscriber.receive(event)
            if blocksNext.withLock({ blocks in defer { blocks = false }; return blocks }) {
                entered.signal()
                _ = try? Wait.for(gate, "the test to open the handler's gate")
            }
        }
        defer { subscription.cancel() }
        blocksNext.withLock { $0 = true }
        let firstDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? store.write { db in try db.execute("INSERT INTO items(id, title) VALUES (1, 'first')") }
            firstDone.signal()
        }
        try Wait.for(entered, "the first write's event to reach the handler")
        // The second write cannot return while the gate is shut.
        let sawOwnRow = Self.returnsOnlyOnceOpened(gate) {
            try? store.write { db in try db.execute("INSERT INTO items(id, title) VALUES (2, 'second')") }
            return subscriber.items.contains { $0.id == 2 }
        }
        try Wait.for(firstDone, "the first write to return")
        #expect(sawOwnRow)
        #expect(subscriber.items == [Item(id: 1, title: "first"), Item(id: 2, title: "second")])
        #expect(subscriber.failures.isEmpty)
    }

    /// A live query's event names the origin and tag of the commit it read at: one of its own
    /// store (known in memory) and one of another store on the file (read from the change log).
    @Test func eventsNameTheOriginAndTagOfTheCommitTheyReadAt() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        let other = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(store)
        let seen = Locked<[(CommitOrigin?, String?)]>([])
        let subscription = items(of: store).subscribe(on: .immediate, onError: { Issue.record($0) }) { event in
            seen.withLock { $0.append((event.origin, event.tag)) }
        }
        defer { subscription.cancel() }
        try store.write(tag: "edit") { db in try db.execute("INSERT INTO items(id, title) VALUES (1, 'a')") }
        try other.write(tag: "import") { db in try db.execute("INSERT INTO items(id, title) VALUES (2, 'b')") }
        try store.noticeExternalWrites()
        try store.writeWithoutTransaction(tag: "tidy") { db in try db.execute("UPDATE items SET title = 'c' WHERE id = 2") }
        let events = seen.withLock { $0 }.dropFirst()   // the initial event
        #expect(events.map(\.0) == [.write, .write, .maintenance])
        #expect(events.map(\.1) == ["edit", "import", "tidy"])
    }

    /// The file watch notices a shell's write first and delivers it, slowly; a test that calls
    /// `noticeExternalWrites()` to be deterministic must not get back before that event was
    /// delivered (before, it found nothing new and returned at once).
    ///
    ///     watch thread:  look ─► adopt ─► handler(shell row) … blocked on the gate …
    ///     other thread:          noticeExternalWrites() (nothing new) ─► returns?
    @Test func noticeExternalWritesReturnsOnceTheWatchsEventsWereDelivered() throws {
        var configuration = Store.Configuration.unwatched
        configuration.watchesFile = true
        let store = try Store(path: path, configuration: configuration)
        try makeItems(store)
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = items(of: store).subscribe(on: .immediate, onError: { subscriber.fail($0) }) { event in
            subscriber.receive(event)
            if event.origin == .foreign {
                entered.signal()
                _ = try? Wait.for(gate, "the test to open the handler's gate")
            }
        }
        defer { subscription.cancel() }
        #expect(store.observation.isWatching)
        try SQLiteShell.run("INSERT INTO items(id, title) VALUES (5, 'shell')", on: path)
        try Wait.for(entered, "the shell's commit to reach the handler")   // the watch hears the shell at once
        let sawRow = Self.returnsOnlyOnceOpened(gate) {
            try? store.noticeExternalWrites()
            return subscriber.items.contains { $0.id == 5 }
        }
        #expect(sawRow)
        #expect(subscriber.failures.isEmpty)
    }

    // MARK: All or nothing

    /// SQLite ends the transaction itself (`OR ROLLBACK`, a trigger's `RAISE(ROLLBACK, …)`); the
    /// closure catches the error and goes on (or swallows every error after it). Nothing of the
    /// write may commit, no version is taken, and the store goes on.
    @Test(arguments: ["INSERT OR ROLLBACK INTO items(id, title) VALUES (1, 'again')",
                      "INSERT INTO items(id, title) VALUES (99, 'trigger')"], [false, true])
    func aTransactionThatSQLiteRolledBackCommitsNothing(failing statement: String, swallowingEverything: Bool) throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(store)
        try store.write { db in
            try db.execute("""
                CREATE TRIGGER refuse BEFORE INSERT ON items WHEN NEW.id = 99
                BEGIN SELECT RAISE(ROLLBACK, 'refused'); END
                """)
            try db.execute("INSERT INTO items(id, title) VALUES (1, 'first')")
        }
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: items(of: store))
        defer { subscription.cancel() }
        let version = try store.currentVersion()
        var caught = false
        let error = #expect(throws: DatabaseError.self) {
            try store.write { db in
                try db.execute("INSERT INTO items(id, title) VALUES (2, 'before')")
                do { try db.execute(statement) } catch { caught = true }
                if swallowingEverything {
                    try? db.execute("INSERT INTO items(id, title) VALUES (3, 'after')")
                    _ = try? db.fetchAll("SELECT * FROM items")
                    try? db.savepoint { try db.execute("INSERT INTO items(id, title) VALUES (5, 'nested')") }
                } else {
                    try db.execute("INSERT INTO items(id, title) VALUES (3, 'after')")
                }
            }
        }
        #expect(caught)
        #expect(error?.code == .abort)
        #expect(error?.message.contains("rolled back") == true)
        #expect(try store.read { db in try db.fetchValue("SELECT group_concat(id) FROM items", as: String.self) } == "1")
        #expect(try store.currentVersion() == version)
        #expect(subscriber.items == [Item(id: 1, title: "first")])
        // The store goes on.
        try store.write { db in try db.execute("INSERT INTO items(id, title) VALUES (4, 'later')") }
        #expect(subscriber.items == [Item(id: 1, title: "first"), Item(id: 4, title: "later")])
        #expect(try store.changes(after: version).flatMap(\.rowKeys) == ["4"])
        #expect(subscriber.failures.isEmpty)
    }

    // MARK: Writes made without Ripple

    /// Three stores on one file, none watching: a commit of the `sqlite3` shell lands right after
    /// a commit of the first store, and `data_version` cannot tell it apart (Ripple's counters
    /// moved too). The third store's live query must show it, whether the second store commits
    /// next (it had not noticed the first's commit) or the third looks first.
    @Test(arguments: [true, false])
    func aShellWriteBetweenTwoOtherStoresCommitsIsNotMissed(secondCommitsFirst: Bool) throws {
        let first = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(first)
        try first.write { db in try db.execute("CREATE TABLE other(id INTEGER PRIMARY KEY)") }
        let second = try Store(path: path, configuration: Store.Configuration.unwatched)
        let third = try Store(path: path, configuration: Store.Configuration.unwatched)
        try second.noticeExternalWrites()
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: items(of: third))
        defer { subscription.cancel() }
        // The first store tells the third of its commit at once (another store of the process):
        // that look is held until the shell has written, so that it sees both commits together.
        let arrived = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holdsNext = Locked(!secondCommitsFirst)
        third.noticeGate.withLock { $0 = {
            guard holdsNext.withLock({ holds in defer { holds = false }; return holds }) else { return }
            arrived.signal()
            _ = try? Wait.for(release, "the test to release the held look")
        } }
        try first.write { db in try db.execute("INSERT INTO other(id) VALUES (1)") }
        if !secondCommitsFirst { try Wait.for(arrived, "the first store's look to reach the gate") }
        try SQLiteShell.run("INSERT INTO items(id, title) VALUES (5, 'shell')", on: path)
        if secondCommitsFirst {
            try second.write { db in try db.execute("INSERT INTO other(id) VALUES (2)") }
        }
        release.signal()
        try third.noticeExternalWrites()   // after the held look (it waits for the writer)
        // The held look delivers on its own thread: a safety net only.
        #expect(subscriber.waitFor(items: [Item(id: 5, title: "shell")]))
        #expect(subscriber.failures.isEmpty)
    }

    /// Ripple stores committing in turn, none noticing the others' commits first, are never
    /// taken for writes made without Ripple (which would make every live query re-read), and
    /// take one version each, in turn (a store whose last version is not the newest does not
    /// take it again).
    @Test func interleavedCommitsOfSeveralStoresAreNotMistakenForWritesWithoutRipple() throws {
        let stores = try (0..<3).map { _ in try Store(path: path, configuration: Store.Configuration.unwatched) }
        try makeItems(stores[0])
        let before = try stores[0].currentVersion()
        for round in 0..<30 {
            try stores[round % 3].write { db in try db.execute("INSERT INTO items(id, title) VALUES (?, 'x')", [round]) }
            if round % 7 == 0 { try stores[(round + 1) % 3].noticeExternalWrites() }
        }
        for store in stores { try store.noticeExternalWrites() }
        let entries = try stores[0].changes(after: before)
        #expect(!entries.contains { $0.table == "*" })
        #expect(entries.count == 30)
        #expect(entries.map(\.version) == Array(before + 1...before + 30))
        #expect(try stores.map { try $0.currentVersion() } == Array(repeating: before + 30, count: 3))
    }

    // MARK: Transient read failures

    /// A reader cannot be opened for a while (descriptors exhausted, say): the write that
    /// triggers the live query's refresh does not wait out the busy timeout for it, the stream
    /// does not end, and once readers open again the list shows the right rows.
    @Test func aLiveQueryOutlivesAReaderThatCannotOpenForAWhile() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        try makeItems(store)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: items(of: store))
        defer { subscription.cancel() }
        let attempts = Locked(0)
        let failing = Locked(true)
        store.pool.openFault.withLock { $0 = {
            attempts.withLock { $0 += 1 }
            if failing.withLock({ $0 }) {
                throw DatabaseError(code: .cannotOpen, message: "unable to open database file (injected)")
            }
        } }
        try whileAnotherThreadReads(store) {   // the idle reader stays checked out: a refresh needs a new one
            try store.write { db in try db.execute("INSERT INTO items(id, title) VALUES (1, 'a')") }
            // The write tried once, then left the retries to the background (it did not spin for
            // the busy timeout of 5 s: that would be dozens of attempts).
            #expect(attempts.withLock { $0 } <= 2)
            #expect(subscriber.error == nil)
            failing.withLock { $0 = false }
            #expect(subscriber.waitFor(items: [Item(id: 1, title: "a")]))
        }
        #expect(subscriber.error == nil)
        #expect(subscription.error == nil)
        #expect(subscriber.failures.isEmpty)
    }
}
