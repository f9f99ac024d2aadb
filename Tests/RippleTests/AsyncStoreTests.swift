import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// `Store.asyncWrite` and `Store.asyncRead`: the store's work runs on threads of its own while
/// the calling task suspends, so no thread of Swift's cooperative pool waits for a connection;
/// results, errors, live-query events and the commit feed are those of the blocking calls; a
/// cancelled call commits nothing.
@Suite(.timeLimit(.minutes(5))) struct AsyncStoreTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    func makeStore(_ name: String = "async.sqlite") throws -> Store {
        let store = try Store(path: directory.path(name), configuration: .unwatched)
        try store.write { db in try db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE)") }
        return store
    }

    /// A gate that bodies running on the store's threads wait at until a test opens it (bounded).
    final class Gate: Sendable {
        private let semaphore = DispatchSemaphore(value: 0)
        let arrived = Locked(0)

        /// Counts the caller in, then waits until the gate is open.
        func pass() throws {
            arrived.withLock { $0 += 1 }
            try Wait.for(semaphore, "the test to open the gate")
            semaphore.signal()   // the next one passes too
        }

        func open() { semaphore.signal() }
    }

    /// More async writes than the cooperative pool has threads (the machine's cores) wait for
    /// the writer, the first of them held inside its transaction by a gate: meanwhile an async
    /// read answers and other tasks run to their end. (With the blocking `write`, the waiting
    /// writers would hold every cooperative thread, and nothing else would run until the gate
    /// opened.) Then every write commits once.
    @Test func asyncWritesWaitingForTheWriterLeaveTheCooperativePoolFree() async throws {
        let store = try makeStore()
        let start = try store.currentVersion()
        let writers = max(8, 4 * ProcessInfo.processInfo.activeProcessorCount)
        let gate = Gate()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for id in 1...writers {
                group.addTask {
                    try await store.asyncWrite(tag: "w\(id)") { db in
                        try gate.pass()
                        try db.execute("INSERT INTO items(id, title) VALUES (?, ?)", [id, "item \(id)"])
                    }
                }
            }
            try await Wait.until("the first async write to hold the writer") { gate.arrived.withLock { $0 } == 1 }
            // The writers wait holding no thread: reads and other tasks go on.
            let count = try await Wait.value("an async read while the writers wait") {
                try await store.asyncRead { db in try db.fetchValue("SELECT count(*) FROM items", as: Int.self) }
            }
            #expect(count == 0)
            let finished = try await Wait.value("other tasks to finish while the writers wait") {
                await withTaskGroup(of: Int.self) { others in
                    for n in 0..<(2 * writers) {
                        others.addTask {
                            await Task.yield()
                            return n
                        }
                    }
                    return await others.reduce(0) { $0 + $1 }
                }
            }
            #expect(finished == (0..<(2 * writers)).reduce(0, +))
            #expect(gate.arrived.withLock { $0 } == 1)
            gate.open()
            try await group.waitForAll()
        }
        #expect(try store.read { db in try db.fetchValue("SELECT count(*) FROM items", as: Int.self) } == writers)
        let tags = try store.changes(after: start).compactMap(\.tag)
        #expect(Set(tags) == Set((1...writers).map { "w\($0)" }))
    }

    /// The same work through the blocking and the async calls, on two stores: the same values
    /// returned, the same rows and versions, the same errors (from SQLite, from the body, a
    /// write inside a read).
    @Test func asyncCallsReturnAndThrowWhatTheBlockingCallsDo() async throws {
        struct BodyFailed: Error, Equatable { let step: Int }
        let blocking = try makeStore("blocking.sqlite")
        let suspending = try makeStore("suspending.sqlite")

        let insert: @Sendable (Database) throws -> Int64 = { db in
            try db.execute("INSERT INTO items(title) VALUES ('milk'), ('bread')")
            return db.lastInsertedRowID
        }
        let inserted = try blocking.write(insert)
        let insertedAsync = try await suspending.asyncWrite(insert)
        #expect(insertedAsync == inserted)
        let duplicate: @Sendable (Database) throws -> Void = { db in
            try db.execute("INSERT INTO items(title) VALUES ('eggs')")
            try db.execute("INSERT INTO items(title) VALUES ('milk')")
        }
        let syncError = #expect(throws: DatabaseError.self) { try blocking.write(duplicate) }
        let asyncError = await #expect(throws: DatabaseError.self) { try await suspending.asyncWrite(duplicate) }
        #expect(syncError?.code == .constraint)
        #expect(asyncError?.code == syncError?.code)
        #expect(asyncError?.extendedCode == syncError?.extendedCode)
        #expect(asyncError?.description == syncError?.description)
        let failing: @Sendable (Database) throws -> Void = { db in
            try db.execute("INSERT INTO items(title) VALUES ('eggs')")
            throw BodyFailed(step: 2)
        }
        #expect(throws: BodyFailed(step: 2)) { try blocking.write(failing) }
        await #expect(throws: BodyFailed(step: 2)) { try await suspending.asyncWrite(failing) }

        let readAll: @Sendable (Database) throws -> [String] = { db in
            try db.fetchAll("SELECT id, title FROM items ORDER BY id").map { row in
                try "\(row.value("id", as: Int.self)) \(row.value("title", as: String.self))"
            }
        }
        let readAsync = try await suspending.asyncRead(readAll)
        #expect(try blocking.read(readAll) == readAsync)
        #expect(readAsync == ["1 milk", "2 bread"])
        #expect(try blocking.currentVersion() == (try suspending.currentVersion()))
        let writeInRead: @Sendable (Database) throws -> Void = { db in try db.execute("DELETE FROM items") }
        let syncRefusal = #expect(throws: (any Error).self) { try blocking.read(writeInRead) }
        let asyncRefusal = await #expect(throws: (any Error).self) { try await suspending.asyncRead(writeInRead) }
        #expect(asyncRefusal.map { String(describing: $0) } == syncRefusal.map { String(describing: $0) })
    }

    /// A live query and the commit feed of a store written by async writes hear what those of
    /// a store written by the same blocking writes hear: the same events (versions, snapshots,
    /// changesets, origin, tag), each delivered (immediate delivery) before the write returned,
    /// and the same commits.
    @Test func asyncWritesTellLiveQueriesAndTheCommitFeedWhatBlockingWritesDo() async throws {
        let blocking = try makeStore("blocking.sqlite")
        let suspending = try makeStore("suspending.sqlite")
        let start = try blocking.currentVersion()
        #expect(try suspending.currentVersion() == start)
        func live(_ store: Store) -> EventRecorder<Row> {
            EventRecorder(store.liveQuery(sql: "SELECT id, title FROM items WHERE title <> 'hidden' ORDER BY title", identity: "id"))
        }
        let heardBlocking = live(blocking)
        let heardSuspending = live(suspending)
        let writes: [(tag: String?, sql: String)] = [
            ("first", "INSERT INTO items(id, title) VALUES (1, 'milk'), (2, 'bread')"),
            (nil, "UPDATE items SET title = 'oat milk' WHERE id = 1"),
            ("hide", "INSERT INTO items(id, title) VALUES (3, 'hidden')"),
            ("last", "DELETE FROM items WHERE id = 2"),
        ]
        for (step, write) in writes.enumerated() {
            try blocking.write(tag: write.tag) { db in try db.execute(write.sql) }
            try await suspending.asyncWrite(tag: write.tag) { db in try db.execute(write.sql) }
            #expect(heardSuspending.events.count == heardBlocking.events.count, "after write \(step)")
        }
        func summary(_ recorder: EventRecorder<Row>) -> [String] {
            recorder.events.map { event in
                "\(event.version) \(event.previousVersion.map(String.init) ?? "-") \(event.origin?.rawValue ?? "-") \(event.tag ?? "-") "
                    + "\(event.snapshot.map(\.description)) \(event.changeset)"
            }
        }
        #expect(summary(heardSuspending) == summary(heardBlocking))
        #expect(heardBlocking.events.count == 4)   // the first result, and three writes that change it
        let logged = try blocking.changes(after: start)
        #expect(try suspending.changes(after: start) == logged)
        #expect(Set(logged.map(\.version)).count == writes.count)
        #expect(logged.allSatisfy { $0.origin == .write })
    }

    /// An async write cancelled while it waits for the writer never runs its body; one cancelled
    /// while its body runs a statement has the statement interrupted and the transaction rolled
    /// back. Both throw `CancellationError`, and nothing of theirs is committed.
    @Test func aCancelledAsyncWriteCommitsNothing() async throws {
        let store = try makeStore()
        let gate = Gate()
        let holder = Task {
            try await store.asyncWrite { db in
                try db.execute("INSERT INTO items(id, title) VALUES (1, 'holder')")
                try gate.pass()
            }
        }
        try await Wait.until("the first write to hold the writer") { gate.arrived.withLock { $0 } == 1 }
        let ran = Locked(false)
        let waiting = Task {
            try await store.asyncWrite { db in
                ran.withLock { $0 = true }
                try db.execute("INSERT INTO items(id, title) VALUES (2, 'waiting')")
            }
        }
        waiting.cancel()
        gate.open()
        try await holder.value
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(ran.withLock { $0 } == false)

        let started = Locked(false)
        let long = Task {
            try await store.asyncWrite { db in
                try db.execute("INSERT INTO items(id, title) VALUES (3, 'long')")
                started.withLock { $0 = true }
                // Runs for minutes unless interrupted.
                _ = try db.fetchValue("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n", as: Int.self)
            }
        }
        try await Wait.until("the long write's body to start") { started.withLock { $0 } }
        long.cancel()
        await #expect(throws: CancellationError.self) { try await Wait.value("the interrupted write to end") { try await long.value } }
        #expect(try store.read { db in try db.fetchAll("SELECT title FROM items ORDER BY id").map { try $0.value("title", as: String.self) } }
                == ["holder"])
        // The writer is free and works on.
        try await store.asyncWrite { db in try db.execute("INSERT INTO items(id, title) VALUES (4, 'after')") }
        #expect(try store.read { db in try db.fetchValue("SELECT count(*) FROM items", as: Int.self) } == 2)
    }

    /// An async read cancelled while its statement runs is interrupted and throws
    /// `CancellationError`; the reader is then used again as usual.
    @Test func aCancelledAsyncReadIsInterrupted() async throws {
        let store = try makeStore()
        let started = Locked(false)
        let long = Task {
            try await store.asyncRead { db -> Int? in
                started.withLock { $0 = true }
                return try db.fetchValue("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n", as: Int.self)
            }
        }
        try await Wait.until("the long read to start") { started.withLock { $0 } }
        long.cancel()
        await #expect(throws: CancellationError.self) { try await Wait.value("the interrupted read to end") { try await long.value } }
        for _ in 0..<(2 * store.configuration.readerCount) {
            let count = try await store.asyncRead { db in try db.fetchValue("SELECT count(*) FROM items", as: Int.self) }
            #expect(count == 0)
        }
    }
}
