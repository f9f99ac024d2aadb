import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// The tour of live queries (Ripple.docc/LiveQueryTour.md), kept true when run (delivery on private queues or
/// immediate instead of `.main`, which a test process does not run).
@Suite struct ReadmeLiveQueryTourTests {
    @Test func liveQueryTour() async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("todos.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        try todos.insert(Todo.make(1, "Milk"))

        let open = try todos.filter(Column("done") == false).order(by: Column("rank")).live()

        let received = Locked<[LiveQueryEvent<Todo>]>([])
        let subscription = open.subscribe(on: .immediate, onError: { error in Issue.record("ended: \(error)") }) { event in
            _ = event.version
            _ = event.updatedColumns
            received.withLock { $0.append(event) }
        }
        try todos.insert(Todo.make(0, "Tea"))
        #expect(received.withLock { $0.map { $0.snapshot.count } } == [1, 2])
        subscription.cancel()

        let rendered = try await Wait.value("two events of the sequence") {
            var rendered: [[Todo]] = []
            for try await event in open.events() {
                rendered.append(event.snapshot)
                if rendered.count == 2 { break }
                _ = try todos.filter(Column("title") == "Tea").deleteAll()
            }
            return rendered
        }
        #expect(rendered.map { $0.map(\.title) } == [["Tea", "Milk"], ["Milk"]])

        let list = Locked(BatchUpdateListModel<Todo>(items: []))   // stands in for a table view
        let feed = open.subscribe(on: .immediate) { event in
            try list.withLock { list in
                for batch in event.changeset.stages {
                    try list.performBatchUpdates(batch, dataSource: event.snapshot)
                }
            }
        }
        let sizes = store.liveQuery(sql: "SELECT done, count(*) AS n FROM todos GROUP BY done", identity: "done")
        let screen = try LiveQueryGroup([open, try todos.filter(Column("done") == true).live()])
        let sections = Locked<[[Changeset]]>([])
        let sectionsSubscription = screen.subscribe { event in sections.withLock { $0.append(event.members.map(\.changeset)) } }
        let sizesSubscriber = ListViewSubscriber<Row>()
        let sizesSubscription = sizesSubscriber.subscribe(to: sizes)
        try store.write { db in try db.execute("UPDATE todos SET done = 1") }
        #expect(sections.withLock { $0.last?.map(\.inserts.count) } == [0, 1])
        #expect(sizesSubscriber.items.map { $0["n"] } == [.integer(1)])
        #expect(list.withLock { $0.items }.isEmpty, "Milk is done: it left the open list")
        feed.cancel()
        sectionsSubscription.cancel()
        sizesSubscription.cancel()

        // Time travel.
        let openQuery = todos.filter(Column("done") == false).order(by: Column("rank"))
        let then = try store.snapshot(of: openQuery, at: 2)
        #expect(then.map(\.title) == ["Milk"])
        var steps: [HistoryStep<Todo>] = []
        try store.history(of: openQuery, from: 2, to: try store.currentVersion()) { step in steps.append(step) }
        #expect(steps.map { $0.snapshot.map(\.title) } == [["Milk"], ["Tea", "Milk"], ["Milk"], []])
        #expect(steps.map(\.version) == (try store.history(of: openQuery, from: 2, to: try store.currentVersion())).map(\.version))
        #expect(steps.dropFirst().allSatisfy { !$0.changeset.isEmpty })
    }
}
