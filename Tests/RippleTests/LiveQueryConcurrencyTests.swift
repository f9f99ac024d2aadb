import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// A record that counts its live instances, to see how many snapshots a subscriber holds.
final class CountedRecord: Codable, Sendable, Identifiable {
    static let live = Locked(0)
    let id: Int
    let value: Int

    init(id: Int, value: Int) {
        self.id = id
        self.value = value
        Self.live.withLock { $0 += 1 }
    }

    required init(from decoder: any Decoder) throws {
        enum Keys: String, CodingKey { case id, value }
        let container = try decoder.container(keyedBy: Keys.self)
        id = try container.decode(Int.self, forKey: .id)
        value = try container.decode(Int.self, forKey: .value)
        Self.live.withLock { $0 += 1 }
    }

    deinit { Self.live.withLock { $0 -= 1 } }
}

extension CountedRecord: Equatable {
    static func == (lhs: CountedRecord, rhs: CountedRecord) -> Bool { lhs.id == rhs.id && lhs.value == rhs.value }
}

/// Live queries with real threads: asynchronous delivery, concurrent writers, other connections
/// and processes. Synchronization is explicit (conditions signalled by the subscribers), never a
/// sleep; timeouts are only a safety net against hangs.
@Suite struct LiveQueryConcurrencyTests {
    let directory: TemporaryDirectory
    let store: Store
    let todos: RecordCollection<Todo>

    init() throws {
        directory = try TemporaryDirectory()
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = 0.02
        store = try Store(path: directory.path("live.sqlite"), configuration: configuration)
        todos = try store.collection("todos", of: Todo.self)
    }

    @Test func aBlockedSubscriberGetsOneCombinedChangesetAndHoldsAtMostTwoSnapshots() throws {
        let counted = try store.collection("counted", of: CountedRecord.self)
        try counted.insert(contentsOf: (0..<10).map { CountedRecord(id: $0, value: 0) })
        let gate = DispatchSemaphore(value: 0)
        let blocked = DispatchSemaphore(value: 0)
        let subscriber = ListViewSubscriber<CountedRecord>()
        let queue = DispatchQueue(label: "slow subscriber")
        let subscription = try counted.live().subscribe(on: .queue(queue)) { event in
            subscriber.receive(event)
            if subscriber.events.count == 2 {   // the first change: block through every later commit
                blocked.signal()
                _ = try? Wait.for(gate, "the test to let the blocked subscriber go")
            }
        }
        defer { subscription.cancel() }
        #expect(subscriber.waitFor(version: try store.currentVersion()))
        try counted.update(CountedRecord(id: 0, value: 1))
        try Wait.for(blocked, "the subscriber to block in its second event")

        let baseline = subscriber.events.count
        for commit in 1...10_000 {
            try counted.update(CountedRecord(id: commit % 10, value: commit))
        }
        // Everything the subscriber can hold: the snapshot it is handling, and at most one more.
        #expect(CountedRecord.live.withLock { $0 } <= 20)
        gate.signal()
        let final = try store.currentVersion()
        #expect(subscriber.waitFor(version: final))
        #expect(subscriber.events.count == baseline + 1, "one combined event for 10,000 commits")
        #expect(subscriber.events.last?.changeset.updates.count == 10)
        #expect(subscriber.items.map(\.value) == (try counted.order(by: Column("id")).fetchAll()).map(\.value))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func everySnapshotIsReadAtOneVersion() throws {
        try store.write { db in
            try db.executeScript("CREATE TABLE pair(id INTEGER PRIMARY KEY, value INTEGER); INSERT INTO pair VALUES (1, 0), (2, 0)")
        }
        let base = try store.currentVersion()
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: "SELECT id, value FROM pair ORDER BY id", identity: "id"),
                                                on: .queue(DispatchQueue(label: "pair subscriber")))
        defer { subscription.cancel() }
        let writer = Thread { [store] in
            for _ in 0..<300 {
                try? store.write { db in
                    try db.execute("UPDATE pair SET value = value + 1 WHERE id = 1")
                    try db.execute("UPDATE pair SET value = value + 1 WHERE id = 2")
                }
            }
        }
        writer.start()
        #expect(subscriber.waitFor(version: base + 300))
        for event in subscriber.events {
            let values = event.snapshot.map { $0["value"] }
            #expect(values[0] == values[1], "a snapshot mixes two commits at v\(event.version)")
            #expect(values[0] == .integer(event.version - base), "the snapshot is not the one of v\(event.version)")
        }
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func anotherStoreOnTheSameFileIsNoticed() throws {
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try todos.live(), on: .queue(DispatchQueue(label: "sub")))
        defer { subscription.cancel() }
        let other = try Store(path: directory.path("live.sqlite"))
        let otherTodos = try other.collection("todos", of: Todo.self)
        let todo = Todo.make(1)
        try otherTodos.insert(todo)
        let version = try other.currentVersion()
        // No call here: the store's poll notices the other connection's commit by itself.
        #expect(subscriber.waitFor(version: version))
        #expect(subscriber.items == [todo])
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func aWriteByAnotherProcessWithoutRippleIsDeliveredUnderANewVersion() throws {
        let first = Todo.make(1)
        try todos.insert(first)
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try todos.live())   // immediate: delivered by noticeExternalWrites()
        defer { subscription.cancel() }
        let before = try store.currentVersion()

        #expect(try SQLiteShell.run("UPDATE todos SET title = 'from the shell'", on: directory.path("live.sqlite")).status == 0)

        // The store's own poll may notice the write first (then it is delivered on the poll's
        // thread): wait for the version either way.
        try store.noticeExternalWrites()
        #expect(subscriber.waitFor(version: before + 1))
        let event = try #require(subscriber.events.last)
        #expect(event.version == before + 1)
        #expect(event.snapshot.map(\.title) == ["from the shell"])
        #expect(event.updatedColumns == [["title"]])
        #expect(try store.changes(after: before).map(\.table) == ["*"])
        try store.noticeExternalWrites()
        #expect(try store.currentVersion() == before + 1, "noticed once")
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func theAsyncSequenceDeliversAndCancelsWhenDropped() async throws {
        try todos.insert(Todo.make(1))
        let todos = todos
        let received = try await Wait.value("three events of the sequence") {
            var received: [LiveQueryEvent<Todo>] = []
            for try await event in try todos.live().events() {
                received.append(event)
                if received.count == 3 { break }
                try todos.insert(Todo.make(received.count + 1))
            }
            return received
        }
        #expect(received.map(\.snapshot.count) == [1, 2, 3])
        #expect(received[1].previousVersion == received[0].version)
        #expect(store.observation.count == 0, "dropping the iterator cancelled the subscription")
    }

    @Test func theAsyncSequenceThrowsTheStreamsError() async throws {
        try todos.insert(Todo.make(1))
        let (todos, store) = (todos, store)
        let count = try await Wait.value("the sequence to end with the dropped table's error") {
            var count = 0
            do {
                for try await _ in try todos.live().events() {
                    count += 1
                    try store.write { db in try db.execute("DROP TABLE todos") }
                }
                Issue.record("the sequence ended without an error")
            } catch let error as DatabaseError {
                #expect(error.message.contains("todos"))
            }
            return count
        }
        #expect(count == 1)
    }

    @Test func cancellingTheIteratingTaskEndsTheSequence() async throws {
        let started = AsyncStream<Void>.makeStream()
        let live = try todos.live()
        let task = Task {
            var count = 0
            for try await _ in live.events() {
                count += 1
                started.continuation.yield()
            }
            return count
        }
        try await Wait.value("the first event") { for await _ in started.stream { break } }
        task.cancel()
        #expect(try await Wait.value("the cancelled task to end") { try await task.value } == 1)
    }

    /// 4 writers × 500 random writes; 20 subscribers over 5 queries, some slow, some cancelled
    /// midway. Every changeset is validated against the list it was applied to; every surviving
    /// subscriber ends on the final state; nothing arrives after a cancel returns.
    @Test func stress() throws {
        try todos.insert(contentsOf: (0..<50).map { Todo.make($0, done: $0 % 3 == 0) })
        let queries: [RecordQuery<Todo>] = [
            todos.filter(Column("done") == false).order(by: Column("rank"), Column("id")),
            todos.all.order(by: Column("title"), Column("id")),
            todos.filter(Column("done") == true).order(by: Column("rank").descending, Column("id")).limit(10),
            todos.filter(Column("rank") < 40).order(by: Column("id")),
            todos.filter(Column("title").like("%7%") || Column("rank") >= 90).order(by: Column("rank"), Column("id")),
        ]
        struct Running {
            let subscriber: ListViewSubscriber<Todo>
            let subscription: Subscription
            let query: RecordQuery<Todo>
        }
        var running: [Running] = []
        for index in 0..<20 {
            let query = queries[index % queries.count]
            let subscriber = ListViewSubscriber<Todo>()
            let slow = index % 4 == 1
            let queue = DispatchQueue(label: "subscriber \(index)")
            let subscription = try query.live().subscribe(on: .queue(queue), onError: { subscriber.fail($0) }) { event in
                if slow {   // a deliberately slow handler: busy for a while on every event
                    var spin = 0
                    for value in 0..<200_000 { spin &+= value }
                    precondition(spin != 1)
                }
                subscriber.receive(event)
            }
            running.append(Running(subscriber: subscriber, subscription: subscription, query: query))
        }

        let progress = Locked(0)
        let writersDone = DispatchGroup()
        for writer in 0..<4 {
            writersDone.enter()
            let todos = self.todos
            Thread {
                defer { writersDone.leave() }
                var random = SeededGenerator(seed: UInt64(writer + 1))
                var mine: [Todo] = []
                for step in 0..<500 {
                    do {
                        switch Int.random(in: 0..<10, using: &random) {
                        case 0..<3 where true:
                            let todo = Todo.make(Int.random(in: 0..<100, using: &random), "w\(writer)-\(step)",
                                                 done: Bool.random(using: &random))
                            try todos.insert(todo)
                            mine.append(todo)
                        case 3..<5 where !mine.isEmpty:
                            var todo = mine.remove(at: Int.random(in: 0..<mine.count, using: &random))
                            todo.rank = Int.random(in: 0..<100, using: &random)
                            todo.title += "'"
                            try todos.update(todo)
                            mine.append(todo)
                        case 5..<7 where !mine.isEmpty:
                            var todo = mine.remove(at: Int.random(in: 0..<mine.count, using: &random))
                            todo.done.toggle()
                            try todos.update(todo)
                            mine.append(todo)
                        case 7 where !mine.isEmpty:
                            let todo = mine.remove(at: Int.random(in: 0..<mine.count, using: &random))
                            _ = try todos.delete(id: todo.id)
                        default:
                            try todos.store.write { db in   // a raw SQL write over many rows
                                try db.execute("UPDATE todos SET rank = rank + 1 WHERE rank BETWEEN ? AND ?",
                                               [Int.random(in: 0..<100, using: &random), Int.random(in: 0..<100, using: &random)])
                            }
                        }
                    } catch {
                        Issue.record("writer \(writer): \(error)")
                    }
                    progress.withLock { $0 += 1 }
                }
            }.start()
        }

        // Cancel every fifth subscriber about midway, from this thread.
        var cancelled: Set<Int> = []
        try Wait.blockingUntil("the writers' first 1000 writes") { progress.withLock { $0 } >= 1_000 }
        for index in stride(from: 2, to: running.count, by: 5) {
            running[index].subscription.cancel()
            running[index].subscriber.markCancelled()
            cancelled.insert(index)
        }
        #expect(writersDone.wait(timeout: .now() + 120) == .success)

        for (index, entry) in running.enumerated() {
            #expect(entry.subscriber.failures.isEmpty, "subscriber \(index): \(entry.subscriber.failures.prefix(5))")
            #expect(entry.subscriber.error == nil, "subscriber \(index): \(String(describing: entry.subscriber.error))")
            guard !cancelled.contains(index) else { continue }
            #expect(entry.subscriber.events.count > 10, "subscriber \(index) saw \(entry.subscriber.events.count) events")
            let expected = try entry.query.fetchAll()
            #expect(entry.subscriber.waitFor(items: expected), "subscriber \(index) did not reach the final state")
        }
        for entry in running { entry.subscription.cancel() }
        #expect(store.observation.count == 0)
    }
}
