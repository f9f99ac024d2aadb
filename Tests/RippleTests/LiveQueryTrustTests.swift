import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Regression tests for the ways a live query's events went stale (issue 10). Every check is the
/// universal one: the last delivered snapshot equals the query read afresh, and every changeset
/// applies (``ListViewSubscriber`` checks that for each event).
@Suite struct LiveQueryTrustTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("trust.sqlite"))
    }

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var owner: Int
        var val: Int
    }

    /// A record keyed by text, compared by the bytes of its text (as SQLite compares), never by
    /// Swift's canonical equivalence.
    struct Named: Codable, Sendable, Identifiable, Equatable {
        var id: String
        var val: Int
        var note = ""
        static func == (lhs: Named, rhs: Named) -> Bool {
            Array(lhs.id.utf8) == Array(rhs.id.utf8) && lhs.val == rhs.val && lhs.note == rhs.note
        }
    }

    struct Blobbed: Codable, Sendable, Identifiable, Equatable {
        var id: Data
        var val: Int
    }

    /// Subscribes `query` immediately; after each of `writes`, the delivered list must equal `fresh()`.
    func expectLive<Element: Equatable & Sendable>(_ query: LiveQuery<Element>, fresh: () throws -> [Element],
                                                   writes: [() throws -> Void],
                                                   sourceLocation: SourceLocation = #_sourceLocation) throws {
        let subscriber = ListViewSubscriber<Element>()
        let subscription = subscriber.subscribe(to: query)
        defer { subscription.cancel() }
        #expect(subscriber.items == (try fresh()), "initial", sourceLocation: sourceLocation)
        for (index, write) in writes.enumerated() {
            try write()
            #expect(subscriber.items == (try fresh()), "after write \(index)", sourceLocation: sourceLocation)
            #expect((subscriber.version ?? .max) <= (try store.currentVersion()), "after write \(index)", sourceLocation: sourceLocation)
        }
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)", sourceLocation: sourceLocation)
        #expect(subscriber.error == nil, sourceLocation: sourceLocation)
    }

    // MARK: 1. Observer identity

    /// A cancelled observer's memory may be reused by the next one: its compiled filter must never
    /// be applied to the newcomer (which then missed inserts, or made the write fail with
    /// SQLite error 25 when the two filters bound a different number of values).
    @Test func aCancelledObserversFilterIsNeverUsedForTheNextOne() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, owner: 1, val: 600))
        for round in 0..<30 {
            do {
                let a = try items.filter(Column("val") >= 500).live().subscribe { _ in }
                try items.upsert(Item(id: 1, owner: 1, val: 700 + round))
                a.cancel()
            }
            let owner = 1000 + round
            let received = Locked(0)
            let b = try items.filter(Column("owner") == owner).live().subscribe { event in
                received.withLock { $0 = event.snapshot.count }
            }
            try items.insert(Item(id: 2 + round, owner: owner, val: 1))
            #expect(received.withLock { $0 } == 1, "round \(round)")
            #expect(try items.filter(Column("owner") == owner).fetchAll().count == 1)
            b.cancel()
        }
    }

    /// Writers on four threads while subscriptions with filters of different shapes come and go:
    /// no write fails, and every subscription still open at the end shows a fresh read.
    @Test func subscribeAndCancelChurnNeverFailsAWrite() throws {
        let items = try store.collection("items", of: Item.self)
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for writer in 0..<4 {
            DispatchQueue.global().async(group: group) {
                for step in 0..<150 {
                    do {
                        try items.upsert(Item(id: writer * 1000 + step % 40, owner: step % 7, val: step * 13 % 1000))
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        var kept: [(ListViewSubscriber<Item>, Subscription, RecordQuery<Item>)] = []
        for round in 0..<120 {
            let query = switch round % 3 {
            case 0: items.filter(Column("val") >= round * 7 % 1000).order(by: Column("val"))
            case 1: items.filter(Column("owner") == round % 7 && Column("val") < 500)
            default: items.filter(Column("owner").in([1, 2, round % 7]))
            }
            let subscriber = ListViewSubscriber<Item>()
            let subscription = subscriber.subscribe(to: try query.live())
            if round % 10 == 0 { kept.append((subscriber, subscription, query)) } else { subscription.cancel() }
        }
        try Wait.for(group, "the writers")
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        try items.upsert(Item(id: 99_999, owner: 1, val: 1))   // delivered immediately to every subscriber
        for (subscriber, subscription, query) in kept {
            #expect(subscriber.items == (try query.fetchAll()))
            #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
            subscription.cancel()
        }
    }

    /// SQLite allows 2,000 result columns: the filters of many subscribers are evaluated in
    /// batches, and however many there are, a write never fails because of them.
    @Test func thousandsOfSubscribersNeverMakeAWriteFail() throws {
        let items = try store.collection("items", of: Item.self)
        let delivered = Locked(0)
        let subscriptions = try (0..<2_500).map { owner in
            try items.filter(Column("owner") == owner && Column("val") >= 0).live().subscribe { event in
                if !event.isInitial { delivered.withLock { $0 += 1 } }
            }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        try items.insert(Item(id: 1, owner: 2_499, val: 5))
        try items.insert(Item(id: 2, owner: 7, val: 5))
        #expect(delivered.withLock { $0 } == 2)
        #expect(try items.count() == 2)
    }

    /// A cancelled subscription that is still referenced (held by the object its handler
    /// captures, say) lets go of the observer, its handler and its snapshots.
    @Test func aCancelledSubscriptionReleasesItsHandler() throws {
        final class Screen: Sendable {}
        let items = try store.collection("items", of: Item.self)
        weak var released: Screen?
        let subscription: Subscription
        do {
            let screen = Screen()
            released = screen
            subscription = try items.live().subscribe { _ in withExtendedLifetime(screen) {} }
        }
        #expect(released != nil)
        subscription.cancel()
        #expect(released == nil)
        #expect(subscription.isCancelled && subscription.isFinished)
    }

    // MARK: 2. Keys compared as SQLite compares them

    @Test func collectionsKeyedByBlobsStayLive() throws {
        let blobs = try store.collection("blobs", of: Blobbed.self)
        try blobs.insert(Blobbed(id: Data([1, 2]), val: 5))
        var next: UInt8 = 10
        let writes: [() throws -> Void] = (0..<6).map { step in {
            next += 1
            switch step % 3 {
            case 0: try blobs.insert(Blobbed(id: Data([next, 0, next]), val: Int(next) % 4))
            case 1: try blobs.update(Blobbed(id: Data([1, 2]), val: Int(next)))
            default: _ = try blobs.delete(id: Data([next - 1, 0, next - 1]))
            }
        } }
        try expectLive(try blobs.live(), fresh: { try blobs.fetchAll() }, writes: writes)
        let ordered = blobs.filter(Column("val") >= 0).order(by: Column("val"))
        try expectLive(try ordered.live(), fresh: { try ordered.fetchAll() }, writes: writes)
        let window = blobs.order(by: Column("val").descending).limit(2)
        try expectLive(try window.live(), fresh: { try window.fetchAll() }, writes: writes)
    }

    @Test func textKeysHoldingNULAreSeen() throws {
        let named = try store.collection("named", of: Named.self)
        let query = named.filter(Column("val") > 0).order(by: Column("val"))
        try expectLive(try query.live(), fresh: { try query.fetchAll() }, writes: [
            { try named.insert(Named(id: "a\0b", val: 1)) },
            { try named.insert(Named(id: "a", val: 2)) },
            { try named.update(Named(id: "a\0b", val: 3)) },
            { _ = try named.delete(id: "a\0b") },
        ])
    }

    /// "\u{e9}" and "e\u{301}" are equal Swift strings but two keys in SQLite: two rows.
    @Test func canonicallyEquivalentKeysAreTwoRows() throws {
        let named = try store.collection("named", of: Named.self)
        let query = named.filter(Column("val") >= 0).order(by: Column("val"))
        try expectLive(try query.live(), fresh: { try query.fetchAll() }, writes: [
            { try named.insert(Named(id: "\u{e9}", val: 1)) },
            { try named.insert(Named(id: "e\u{301}", val: 2)) },
            { try named.update(Named(id: "\u{e9}", val: 1, note: "precomposed")) },     // patched in place
            { try named.update(Named(id: "e\u{301}", val: 2, note: "combining")) },
            { try named.update(Named(id: "\u{e9}", val: 5)) },
            { try named.update(Named(id: "e\u{301}", val: 7)) },
            { _ = try named.delete(id: "\u{e9}") },
        ])
        let all = try named.fetchAll()
        #expect(all.count == 1 && Array(all[0].id.utf8) == Array("e\u{301}".utf8))
        // Raw SQL live queries identify rows the same way.
        let raw = store.liveQuery(sql: "SELECT id, val FROM named ORDER BY val, id", identity: "id")
        let fresh = { try self.store.read { db in try db.fetchAll("SELECT id, val FROM named ORDER BY val, id") } }
        try expectLive(raw, fresh: fresh, writes: [
            { try named.insert(Named(id: "\u{e9}", val: 1)) },
            { try named.update(Named(id: "e\u{301}", val: 0)) },
            { try named.update(Named(id: "\u{e9}", val: 9)) },
        ])
    }

    /// TEXT that is not UTF-8, written by raw SQL: the key's bytes identify the row.
    @Test func nonUTF8TextKeysWrittenByRawSQLAreSeen() throws {
        let named = try store.collection("named", of: Named.self)
        let query = named.filter(Column("val") >= 0).order(by: Column("val"))
        let count = { try self.store.read { db in try db.fetchValue("SELECT count(*) FROM named WHERE val >= 0", as: Int.self) } }
        let subscriber = ListViewSubscriber<Named>()
        let subscription = subscriber.subscribe(to: try query.live())
        defer { subscription.cancel() }
        try store.write { db in try db.execute("INSERT INTO named(id, val, note) VALUES (CAST(x'ff61' AS TEXT), 1, '')") }
        #expect(subscriber.items.count == (try count()))
        try store.write { db in try db.execute("INSERT INTO named(id, val, note) VALUES (CAST(x'fe61' AS TEXT), 2, '')") }
        #expect(subscriber.items.count == 2)
        try store.write { db in try db.execute("UPDATE named SET val = 9 WHERE id = CAST(x'ff61' AS TEXT)") }
        #expect(subscriber.items.map(\.val) == [2, 9])
        try store.write { db in try db.execute("DELETE FROM named WHERE id = CAST(x'fe61' AS TEXT)") }
        #expect(subscriber.items.map(\.val) == [9])
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        #expect(subscriber.error == nil, "\(String(describing: subscriber.error))")
    }

    /// Time travel undoes a version by deleting the keys it inserted: the blob `x'6161'` and the
    /// text `'6161'` (the same key text in the log) are two rows, and only the right one goes.
    @Test func historyTellsKeysOfDifferentTypesApart() throws {
        try store.write { db in try db.execute("CREATE TABLE k(id PRIMARY KEY, v INTEGER)") }
        try store.write { db in try db.execute("INSERT INTO k VALUES ('6161', 1)") }
        let first = try store.currentVersion()
        try store.write { db in try db.execute("INSERT INTO k VALUES (x'6161', 2)") }
        try store.write { db in try db.execute("INSERT INTO k VALUES (CAST(x'ff' AS TEXT), 3)") }
        let steps = try store.history(table: "k", sql: "SELECT typeof(id) AS type, hex(id) AS hid, v FROM k ORDER BY v",
                                      identity: "hid", from: first, to: try store.currentVersion())
        #expect(steps.map { $0.snapshot.map { try! $0.value("v", as: Int.self) } } == [[1], [1, 2], [1, 2, 3]])
        #expect(steps.first?.snapshot.first.map { try! $0.value("type", as: String.self) } == "text")
    }

    /// A bulk import logs its keys as text only when the text tells them exactly: blob keys keep
    /// their exact list, and time travel across the import stays exact.
    @Test func bulkImportsOfBlobKeysStayExactInHistory() throws {
        // A table without declared types, which holds text and blob keys side by side.
        try store.write { db in try db.execute("CREATE TABLE blobs (id PRIMARY KEY, val)") }
        let blobs = try store.collection("blobs", of: Blobbed.self)
        try blobs.insert(Blobbed(id: Data("00".utf8), val: -1))   // the blob x'3030': key text "3030"
        let before = try store.currentVersion()
        try blobs.insert(contentsOf: (0..<300).map { Blobbed(id: Data([0x30, 0x30, UInt8($0 % 256), UInt8($0 / 256)]), val: $0) })
        try store.write { db in try db.execute("INSERT INTO blobs VALUES ('3030', 1000)") }   // text, same key text
        let back = try store.snapshot(of: blobs.order(by: Column("val")), at: before)
        #expect(back.map(\.val) == [-1])
        let all = try store.snapshot(of: blobs.order(by: Column("val")), at: before + 1)
        #expect(all.count == 301)
    }

    /// A database that stores text as UTF-16: snapshot keys and logged keys are both the UTF-8
    /// of the text, so changed rows are still recognized (and patched) in the result.
    @Test func keysOfAUTF16DatabaseAreRecognized() throws {
        let path = directory.path("utf16.sqlite")
        #expect(try SQLiteShell.run("PRAGMA encoding = 'UTF-16le'; CREATE TABLE seed(x)", on: path).status == 0)
        let store = try Store(path: path)
        #expect(try store.read { db in try db.fetchValue("PRAGMA encoding", as: String.self) } == "UTF-16le")
        let named = try store.collection("named", of: Named.self)
        let query = named.filter(Column("val") >= 0).order(by: Column("val"))
        let subscriber = ListViewSubscriber<Named>()
        let subscription = subscriber.subscribe(to: try query.live())
        defer { subscription.cancel() }
        for (index, id) in ["é", "e\u{301}", "a\0b", "z"].enumerated() { try named.insert(Named(id: id, val: index)) }
        try named.update(Named(id: "e\u{301}", val: 1, note: "patched"))   // in the result, order unchanged
        try named.update(Named(id: "z", val: -1))                          // leaves the result
        #expect(subscriber.items == (try query.fetchAll()))
        #expect(subscriber.items.map(\.note) == ["", "patched", ""])
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    // MARK: 3. Reserved names

    @Test func reservedCollectionNamesAreRefused() throws {
        for name in ["ripple_posts", "RIPPLE_x", "*", "sqlite_things"] {
            #expect(throws: StoreError.self, "\(name)") { _ = try store.collection(name, of: Item.self) }
        }
        #expect(try store.read { db in
            try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name IN ('ripple_posts', 'RIPPLE_x', '*')", as: Int.self)
        } == 0)
    }

    // MARK: 4. Ties

    struct Task: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
        var priority: Int
        var rank: Int
        var done: Bool
    }

    /// With ties in the ORDER BY and a LIMIT, which rows are in the window must not depend on the
    /// query plan or on what was patched in place: the key breaks ties.
    @Test func tiesInAnOrderedWindowAreBrokenByTheKey() throws {
        let tasks = try store.collection("tasks", of: Task.self)
        try store.write { db in try db.execute("CREATE INDEX tasks_by_done_rank ON tasks(done, rank)") }
        var random = SeededGenerator(seed: 10)
        try tasks.insert(contentsOf: (0..<600).map { id in
            Task(id: id, title: "t\(id)", priority: Int.random(in: 0...2, using: &random),
                 rank: Int.random(in: 0..<1000, using: &random), done: Bool.random(using: &random))
        })
        let window = tasks.filter(Column("done") == false).order(by: Column("priority").descending).limit(50)
        let writes: [() throws -> Void] = (0..<60).map { _ in {
            let current = try window.fetchAll()
            var task = current[Int.random(in: 0..<current.count, using: &random)]
            if Bool.random(using: &random) { task.rank = Int.random(in: 0..<1000, using: &random) } else { task.title += "!" }
            try tasks.update(task)
        } }
        try expectLive(try window.live(), fresh: { try window.fetchAll() }, writes: writes)
    }

    // MARK: 5. No phantom versions

    /// The poll must remember `PRAGMA data_version` as of its own transaction: read before
    /// the lock, it could predate another store's commit, which a later write then mistook for
    /// a write made without Ripple (an untracked `"*"` version).
    @Test func anotherStoresCommitsAreNeverMistakenForUntrackedWrites() throws {
        let path = directory.path("shared.sqlite")
        let a = try Store(path: path)
        let b = try Store(path: path)
        let itemsA = try a.collection("items", of: Item.self)
        let itemsB = try b.collection("items", of: Item.self)
        try a.noticeExternalWrites()
        try itemsB.insert(Item(id: 1, owner: 1, val: 1))

        let reached = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let gate = a.noticeGate
        gate.withLock { $0 = { reached.signal(); _ = try? Wait.for(proceed, "the test to let the poll go on") } }
        defer { gate.withLock { $0 = nil } }
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            try? a.noticeExternalWrites()
            done.signal()
        }
        try Wait.for(reached, "the poll to reach the gate")
        gate.withLock { $0 = nil }
        try itemsB.insert(Item(id: 2, owner: 1, val: 1))   // commits between the poll's look and its lock
        proceed.signal()
        try Wait.for(done, "the poll to end")

        try itemsA.insert(Item(id: 3, owner: 1, val: 1))
        let untracked = try a.changes(after: 0).filter { $0.table == ChangeLog.everyTable }
        let created = try a.changes(after: 0).filter { $0.table == ChangeLog.everyTable && $0.version == 1 }
        #expect(untracked == created, "\(untracked)")   // only the collection's creation
    }

    /// A Ripple write whose statements all failed or were rolled back to a savepoint changes no
    /// row and takes no version, yet SQLite writes pages, which other connections see in
    /// `PRAGMA data_version`: it must not be adopted as a write made without Ripple.
    @Test func aRippleCommitThatChangedNothingIsNotAnUntrackedWrite() throws {
        let path = directory.path("shared.sqlite")
        let a = try Store(path: path)
        let b = try Store(path: path)
        let itemsB = try b.collection("items", of: Item.self)
        try itemsB.insert(Item(id: 1, owner: 1, val: 1))
        try a.noticeExternalWrites()
        let before = try a.currentVersion()
        try b.write { db in
            struct Undo: Error {}
            try? db.transaction { try itemsB.insert(Item(id: 2, owner: 1, val: 1), in: db); throw Undo() }
            #expect(throws: DatabaseError.self) { try itemsB.insert(Item(id: 1, owner: 1, val: 1), in: db) }
        }
        try a.noticeExternalWrites()
        #expect(try a.currentVersion() == before)
        try a.write { db in try db.execute("UPDATE items SET val = 2 WHERE id = 1") }
        #expect(try a.changes(after: before).map(\.table) == ["items"])
    }

    // MARK: 6. A transient failure to open a reader

    @Test func aReaderThatFailsToOpenOnceIsRetried() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, owner: 1, val: 1))
        let failures = Locked(3)
        store.pool.openFault.withLock { $0 = {
            try failures.withLock { remaining in
                guard remaining > 0 else { return }
                remaining -= 1
                throw DatabaseError(code: .cannotOpen, message: "unable to open database file (injected)")
            }
        } }
        let query = items.order(by: Column("id"))
        // A second concurrent reader is needed: the first one stays checked out. The failed
        // refreshes are retried in the background (the write that started one does not wait
        // the busy timeout for a reader): the list shows each state once readers open.
        let subscriber = ListViewSubscriber<Item>()
        try whileAnotherThreadReads(store) {
            let subscription = subscriber.subscribe(to: try query.live())
            defer { subscription.cancel() }
            #expect(subscriber.waitFor(items: try query.fetchAll()))
            try items.insert(Item(id: 2, owner: 1, val: 1))
            #expect(subscriber.waitFor(items: try query.fetchAll()))
        }
        #expect(subscriber.failures.isEmpty)
        #expect(subscriber.error == nil)
        #expect(failures.withLock { $0 } == 0)
    }

    /// A reader that cannot be opened is a reason that may pass: the stream does not end; the
    /// refresh is retried (backing off) until readers open again. (A moved file, a query that
    /// no longer fits the schema, end it: see `TransactionTrustTests.aDeletedFileFailsWritesAndEndsLiveQueries`.)
    @Test func aReaderThatCannotOpenDoesNotEndTheStream() throws {
        var configuration = Store.Configuration()
        configuration.busyTimeout = 0.2
        let store = try Store(path: directory.path("unopenable.sqlite"), configuration: configuration)
        let items = try store.collection("items", of: Item.self)
        let attempts = Locked(0)
        store.pool.openFault.withLock { $0 = {
            let attempt = attempts.withLock { count in
                count += 1
                return count
            }
            if attempt <= 5 { throw DatabaseError(code: .cannotOpen, message: "unable to open database file (injected)") }
        } }
        let subscriber = ListViewSubscriber<Item>()
        try whileAnotherThreadReads(store) {   // the one idle reader stays checked out: the query needs a new one
            let subscription = subscriber.subscribe(to: try items.live())
            defer { subscription.cancel() }
            #expect(subscriber.waitFor(version: 0))
            #expect(subscription.error == nil)
        }
        #expect(subscriber.error == nil)
        #expect(attempts.withLock { $0 } > 5)
        #expect(subscriber.events.first?.isInitial == true)
    }

    // MARK: 7. Errors that end a stream are visible

    @Test func aStreamThatEndsWithoutAnErrorHandlerReportsWhy() throws {
        let reported = Locked<[String]>([])
        var configuration = Store.Configuration()
        configuration.unhandledLiveQueryError = { error, query in reported.withLock { $0.append("\(query): \(error)") } }
        let store = try Store(path: directory.path("errors.sqlite"), configuration: configuration)
        try store.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)") }
        let subscription = store.liveQuery(sql: "SELECT id FROM t", identity: "nope").subscribe { _ in }
        #expect(subscription.error != nil)
        #expect(subscription.isFinished)
        let messages = reported.withLock { $0 }
        #expect(messages.count == 1 && messages[0].contains("nope"), "\(messages)")
    }
}
