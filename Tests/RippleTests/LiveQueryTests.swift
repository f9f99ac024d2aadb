import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Live queries on real database files, delivered immediately (deterministic: each commit's event
/// has arrived when `write` returns). Every subscriber is a ``ListViewSubscriber``: each changeset
/// it receives, applied to the list it held, must give the delivered snapshot.
@Suite struct LiveQueryTests {
    let directory: TemporaryDirectory
    let store: Store
    let todos: RecordCollection<Todo>

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("live.sqlite"))
        todos = try store.collection("todos", of: Todo.self)
    }

    var fetches: Int { store.observation.diagnostics.withLock { $0.fetches } }
    var skips: Int { store.observation.skipCount }

    func openTodos() throws -> LiveQuery<Todo> {
        try todos.filter(Column("done") == false).order(by: Column("rank")).live()
    }

    @Test func theFirstEventIsTheInitialSnapshot() throws {
        let seeded = (0..<5).map { Todo.make($0) }
        try todos.insert(contentsOf: seeded)
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try openTodos())
        defer { subscription.cancel() }

        let first = try #require(subscriber.events.first)
        #expect(first.isInitial && first.previousVersion == nil)
        #expect(first.version == (try store.currentVersion()))
        #expect(first.snapshot == seeded)
        #expect(first.changeset.inserts == Array(0..<5) && first.changeset.deletes.isEmpty)
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func everyKindOfChangeArrivesAsAValidChangeset() throws {
        var seeded = (0..<10).map { Todo.make($0 * 10) }
        try todos.insert(contentsOf: seeded)
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try openTodos())
        defer { subscription.cancel() }

        try todos.insert(Todo.make(35, "new"))                       // insert
        seeded[2].title = "renamed"
        try todos.update(seeded[2])                                  // update
        _ = try todos.delete(id: seeded[4].id)                       // delete
        seeded[0].rank = 95
        try todos.update(seeded[0])                                  // move
        seeded[6].done = true
        try todos.update(seeded[6])                                  // leaves the result
        try store.write { db in                                      // several in one commit
            try db.execute("UPDATE todos SET rank = rank + 1 WHERE rank < 50")
            try db.execute("DELETE FROM todos WHERE rank = 90")
        }

        let events = subscriber.events
        #expect(events.count == 7)
        #expect(events[1].changeset.inserts == [4])
        #expect(events[2].changeset.updates == [.init(old: 2, new: 2)])
        #expect(events[2].updatedColumns == [["title"]])
        #expect(events[3].changeset.deletes == [5])
        #expect(events[4].changeset.moves.count == 1 && events[4].changeset.updates.count == 1)
        #expect(events[4].updatedColumns == [["rank"]])
        #expect(events[5].changeset.deletes.count == 1)
        #expect(subscriber.items == (try todos.filter(Column("done") == false).order(by: Column("rank")).fetchAll()))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func versionsStrictlyIncreaseAndEachEventIsTaggedWithItsCommit() throws {
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try todos.live())
        defer { subscription.cancel() }
        for rank in 0..<20 {
            try todos.insert(Todo.make(rank))
            #expect(subscriber.version == (try store.currentVersion()))
        }
        let versions = subscriber.events.map(\.version)
        #expect(versions == versions.sorted() && Set(versions).count == versions.count)
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func aCommitThatCannotChangeTheResultDoesNotRerunTheQuery() throws {
        var seeded = (0..<10).map { Todo.make($0, done: $0 >= 5) }
        try todos.insert(contentsOf: seeded)
        try store.write { db in try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)") }
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try openTodos())
        defer { subscription.cancel() }
        let afterInitial = fetches
        #expect(afterInitial == 1)

        // Another table: not even looked at.
        try store.write { db in try db.execute("INSERT INTO notes(body) VALUES ('x')") }
        #expect(fetches == afterInitial)
        // A row outside the result that still does not match (done stays true): the filter,
        // evaluated inside the commit's transaction, says so; nothing is read.
        seeded[7].title = "still done"
        try todos.update(seeded[7])
        #expect(fetches == afterInitial)
        #expect(skips == 1)
        // Deleting a row outside the result.
        _ = try todos.delete(id: seeded[8].id)
        #expect(fetches == afterInitial)
        #expect(skips == 2)
        // The same, by another Store on the file: not evaluated in its transaction, so checked
        // against the change log on a reader — still without re-running the query.
        let other = try Store(path: directory.path("live.sqlite"))
        try other.write { db in try db.execute("UPDATE todos SET title = 'other' WHERE id = ?", [seeded[6].id]) }
        try store.noticeExternalWrites()
        #expect(fetches == afterInitial)
        #expect(skips == 2)
        #expect(subscriber.events.count == 1)

        // A row outside the result that matches now: read alone and placed by its rank (no
        // window: it pushes no row out), one insert; the query does not re-run.
        seeded[9].done = false
        try todos.update(seeded[9])
        #expect(fetches == afterInitial)
        #expect(subscriber.events.last?.changeset.inserts == [5])
        // A row inside the result whose rank (the order) did not change: read alone, patched in place.
        seeded[1].title = "changed"
        try todos.update(seeded[1])
        #expect(fetches == afterInitial)
        #expect(subscriber.events.last?.changeset.updates == [.init(old: 1, new: 1)])
        #expect(subscriber.events.last?.updatedColumns == [["title"]])
        // Its rank changed: read alone and placed again, one move.
        seeded[1].rank = 100
        try todos.update(seeded[1])
        #expect(fetches == afterInitial)
        #expect(subscriber.events.last?.changeset.moves.count == 1)
        #expect(subscriber.items == (try todos.filter(Column("done") == false).order(by: Column("rank")).fetchAll()))
        // It leaves the result (no window, so no row takes its place): removed, nothing re-runs.
        seeded[1].done = true
        try todos.update(seeded[1])
        #expect(fetches == afterInitial)
        #expect(subscriber.events.last?.changeset.deletes.count == 1)
        #expect(subscriber.items == (try todos.filter(Column("done") == false).order(by: Column("rank")).fetchAll()))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    /// Random writes (seeded); after each, every subscriber's list equals the query run afresh.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func afterEveryRandomWriteTheListEqualsTheQuery(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var rows = (0..<30).map { Todo.make($0, done: Bool.random(using: &random)) }
        try todos.insert(contentsOf: rows)
        let queries = [
            todos.filter(Column("done") == false).order(by: Column("rank"), Column("id")),
            todos.filter(Column("rank") < 20).order(by: Column("title").descending, Column("id")).limit(8),
            todos.all.order(by: Column("done"), Column("rank"), Column("id")),
        ]
        let subscribers = queries.map { _ in ListViewSubscriber<Todo>() }
        let subscriptions = try zip(queries, subscribers).map { query, subscriber in subscriber.subscribe(to: try query.live()) }
        defer { subscriptions.forEach { $0.cancel() } }
        for step in 0..<150 {
            let index = Int.random(in: 0..<rows.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0: rows[index].title = "t\(step)"; try todos.update(rows[index])
            case 1: rows[index].rank = Int.random(in: 0..<40, using: &random); try todos.update(rows[index])
            case 2: rows[index].done.toggle(); try todos.update(rows[index])
            case 3:
                _ = try todos.delete(id: rows[index].id)
                rows[index] = Todo.make(Int.random(in: 0..<40, using: &random))
                try todos.insert(rows[index])
            case 4:
                try store.write { db in   // several rows, titles only: patched in place when all are in a result
                    for offset in 0..<3 {
                        let other = (index + offset * 7) % rows.count
                        rows[other].title += "+"
                        try todos.update(rows[other], in: db)
                    }
                }
            default:
                try todos.update(rows[index])   // identical values
            }
            for (query, subscriber) in zip(queries, subscribers) {
                #expect(subscriber.items == (try query.fetchAll()), "step \(step)")
            }
        }
        for subscriber in subscribers { #expect(subscriber.failures.isEmpty, "\(subscriber.failures)") }
    }

    @Test func manyRangeQueriesOnlyTheOneHoldingTheRowReads() throws {
        var rows = (0..<100).map { Todo.make($0) }
        try todos.insert(contentsOf: rows)
        let subscribers = (0..<10).map { _ in ListViewSubscriber<Todo>() }
        let subscriptions = try subscribers.enumerated().map { index, subscriber in
            subscriber.subscribe(to: try todos.filter(Column("rank") >= index * 10 && Column("rank") < index * 10 + 10)
                .order(by: Column("rank")).live())
        }
        defer { subscriptions.forEach { $0.cancel() } }
        let before = (fetches, skips)
        rows[42].title = "changed"
        try todos.update(rows[42])
        #expect(skips == before.1 + 9, "the nine queries whose range does not hold rank 42 read nothing")
        #expect(fetches == before.0, "the one that does patches the row in place")
        #expect(subscribers[4].events.last?.updatedColumns == [["title"]])
        #expect(subscribers.map(\.events.count) == [1, 1, 1, 1, 2, 1, 1, 1, 1, 1])
    }

    @Test func integerKeysAreCheckedRowByRowToo() throws {
        struct Item: Codable, Sendable, Identifiable, Equatable {
            var id: Int
            var group: String
        }
        let items = try store.collection("items", of: Item.self)
        try items.insert(contentsOf: (1...6).map { Item(id: $0, group: $0 <= 3 ? "a" : "b") })
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.filter(Column("group") == "a").order(by: Column("id")).live())
        defer { subscription.cancel() }
        let before = fetches
        try items.update(Item(id: 5, group: "c"))
        #expect(fetches == before, "row 5 is neither in the result nor in group a")
        try items.update(Item(id: 6, group: "a"))
        #expect(fetches == before, "row 6 enters: read alone, placed by its id")
        #expect(subscriber.items.map(\.id) == [1, 2, 3, 6])
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func aWriteThatChangesNothingVisibleDeliversNothing() throws {
        let todo = Todo.make(1)
        try todos.insert(todo)
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try openTodos())
        defer { subscription.cancel() }
        try todos.update(todo)   // same values: the row is rewritten, the result is not changed
        #expect(subscriber.events.count == 1)
        try store.write { db in try db.execute("UPDATE todos SET tags = '[]'") }
        #expect(subscriber.events.count == 1)
    }

    @Test func nothingIsDeliveredAfterCancel() throws {
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try todos.live())
        try todos.insert(Todo.make(1))
        subscription.cancel()
        #expect(subscription.isCancelled)
        try todos.insert(Todo.make(2))
        #expect(subscriber.events.count == 2)
        #expect(store.observation.count == 0, "a cancelled subscription is unregistered")
    }

    @Test func releasingTheSubscriptionCancelsIt() throws {
        let subscriber = ListViewSubscriber<Todo>()
        do {
            let subscription = subscriber.subscribe(to: try todos.live())
            _ = subscription
        }
        try todos.insert(Todo.make(1))
        #expect(subscriber.events.count == 1)
        #expect(store.observation.count == 0)
    }

    @Test func aHandlerMayCancelItsOwnSubscriptionOrWrite() throws {
        let holder = Locked<Subscription?>(nil)
        let received = Locked(0)
        let live = try todos.live()
        let subscription = live.subscribe { event in
            received.withLock { $0 += 1 }
            if event.snapshot.count == 1 {
                // A write from inside a handler: delivered after this handler returns.
                try live.store.write { db in try db.execute("UPDATE todos SET title = 'from handler'") }
            }
            if event.snapshot.first?.title == "from handler" {
                holder.withLock { $0?.cancel() }
            }
        }
        holder.withLock { $0 = subscription }
        try todos.insert(Todo.make(1))
        #expect(received.withLock { $0 } == 3, "initial, insert, the handler's own update")
        #expect(subscription.isCancelled)
        try todos.insert(Todo.make(2))
        #expect(received.withLock { $0 } == 3)
    }

    @Test func aThrowingHandlerEndsItsOwnSubscriptionWithTheError() throws {
        struct Refused: Error {}
        let errors = Locked<[String]>([])
        let other = ListViewSubscriber<Todo>()
        let otherSubscription = other.subscribe(to: try todos.live())
        defer { otherSubscription.cancel() }
        let subscription = try todos.live().subscribe(onError: { error in errors.withLock { $0.append("\(error)") } }) { event in
            if !event.isInitial { throw Refused() }
        }
        defer { subscription.cancel() }
        try todos.insert(Todo.make(1))
        try todos.insert(Todo.make(2))
        #expect(errors.withLock { $0 } == ["Refused()"])
        #expect(other.events.count == 3, "other subscribers are unaffected")
    }

    @Test func droppingTheTableEndsTheStreamWithAnError() throws {
        try todos.insert(Todo.make(1))
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try openTodos())
        defer { subscription.cancel() }
        try store.write { db in try db.execute("DROP TABLE todos") }
        let error = try #require(subscriber.error)
        #expect("\(error)".contains("todos"))
        try store.write { db in try db.execute("CREATE TABLE todos(id TEXT PRIMARY KEY)") }
        #expect(subscriber.events.count == 1, "nothing after the error")
    }

    @Test func updatedColumnsNameWhatChanged() throws {
        var todo = Todo.make(1)
        try todos.insert(todo)
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(to: try todos.live())
        defer { subscription.cancel() }
        todo.title = "new title"
        todo.tags = ["a"]
        try todos.update(todo)
        let event = try #require(subscriber.events.last)
        #expect(event.updatedColumns == [["title", "tags"]])
        #expect(event.changedColumns(atNewIndex: 0) == ["title", "tags"])
    }

    @Test func rawSQLQueriesAreLiveOverEveryTableTheyRead() throws {
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE lists(id INTEGER PRIMARY KEY, name TEXT);
                CREATE TABLE entries(id INTEGER PRIMARY KEY, list INTEGER, body TEXT);
                CREATE VIEW list_sizes AS SELECT lists.id, lists.name, count(entries.id) AS size
                    FROM lists LEFT JOIN entries ON entries.list = lists.id GROUP BY lists.id;
                CREATE TABLE unrelated(x);
                INSERT INTO lists VALUES (1, 'home'), (2, 'work');
                """)
        }
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(
            to: store.liveQuery(sql: "SELECT * FROM list_sizes WHERE size >= ? ORDER BY name", arguments: [0], identity: "id"))
        defer { subscription.cancel() }
        let before = fetches
        try store.write { db in try db.execute("INSERT INTO unrelated VALUES (1)") }
        #expect(fetches == before)
        try store.write { db in try db.execute("INSERT INTO entries(list, body) VALUES (2, 'x')") }
        #expect(fetches == before + 1)
        let event = try #require(subscriber.events.last)
        #expect(event.changeset.updates == [.init(old: 1, new: 1)])
        #expect(event.updatedColumns == [["size"]])
        try store.write { db in try db.execute("UPDATE lists SET name = 'a-work' WHERE id = 2") }
        #expect(subscriber.events.last?.changeset.moves.count == 1)
        #expect(subscriber.items.map { $0["name"] } == [.text("a-work"), .text("home")])
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func anUnknownIdentityColumnIsAClearError() throws {
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: "SELECT 1 AS a", identity: "id"))
        defer { subscription.cancel() }
        let error = try #require(subscriber.error as? StoreError)
        #expect(error.kind == .invalidQuery && "\(error)".contains("\"id\""))
    }

    @Test func typedRawSQLQueriesDecodeRecords() throws {
        try todos.insert(contentsOf: [Todo.make(2), Todo.make(1)])
        let subscriber = ListViewSubscriber<Todo>()
        let subscription = subscriber.subscribe(
            to: store.liveQuery(Todo.self, sql: "SELECT * FROM todos ORDER BY rank", identity: "id"))
        defer { subscription.cancel() }
        #expect(subscriber.items.map(\.rank) == [1, 2])
        try todos.insert(Todo.make(0))
        #expect(subscriber.items.map(\.rank) == [0, 1, 2])
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    @Test func aGroupDeliversOneEventPerCommitAtOneVersion() throws {
        var seeded = (0..<4).map { Todo.make($0, done: $0 % 2 == 1) }
        try todos.insert(contentsOf: seeded)
        let group = try LiveQueryGroup([
            try todos.filter(Column("done") == false).order(by: Column("rank")).live(),
            try todos.filter(Column("done") == true).order(by: Column("rank")).live(),
        ])
        let events = Locked<[LiveQueryGroupEvent<Todo>]>([])
        // One list per section, each fed its member's changesets as a list view would be.
        let sections = Locked([BatchUpdateListModel<Todo>(items: []), BatchUpdateListModel<Todo>(items: [])])
        let subscription = group.subscribe { event in
            events.withLock { $0.append(event) }
            try sections.withLock { lists in
                for (index, member) in event.members.enumerated() {
                    try lists[index].apply(member.changeset, dataSource: member.snapshot)
                }
            }
        }
        defer { subscription.cancel() }
        seeded[0].done = true
        try todos.update(seeded[0])
        let received = events.withLock { $0 }
        #expect(received.count == 2)
        let last = try #require(received.last)
        #expect(last.members.allSatisfy { $0.version == last.version && $0.previousVersion == received[0].version })
        #expect(last.members[0].changeset.deletes == [0])
        #expect(last.members[1].changeset.inserts == [0])
        #expect(last.members[1].snapshot.map(\.rank) == [0, 1, 3])

        // A commit that changes one member only: the other's changeset is empty.
        seeded[2].title = "x"
        try todos.update(seeded[2])
        let third = try #require(events.withLock { $0 }.last)
        #expect(third.members[0].changeset.updates.count == 1 && third.members[1].changeset.isEmpty)
        #expect(third.members[1].snapshot.count == 3)
        #expect(sections.withLock { $0.map(\.items) } == third.members.map(\.snapshot), "every changeset applied cleanly")
    }
}
