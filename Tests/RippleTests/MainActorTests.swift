import Foundation
import Observation
@testable import Ripple
import Testing
import RippleTesting

/// A view model isolated to the main actor, as a Swift 6 app writes it: it sets its state in the
/// handler directly (no `MainActor.assumeIsolated`, nothing `@unchecked`).
@MainActor final class TodoListModel {
    private(set) var titles: [String] = []
    private var subscription: Subscription?
    /// For the test: told after each update.
    var updated: (@MainActor () -> Void)?

    func start(_ open: LiveQuery<Todo>) {
        subscription = open.subscribeOnMainActor { [weak self] event in
            self?.titles = event.snapshot.map(\.title)
            self?.updated?()
        }
    }

    func stop() { subscription?.cancel() }
}

@Suite struct MainActorTests {
    @MainActor @Test func aMainActorViewModelIsFedByALiveQuery() async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("main.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let model = TodoListModel()
        let (updates, continuation) = AsyncStream<[String]>.makeStream()
        model.updated = { [unowned model] in continuation.yield(model.titles) }
        model.start(try todos.order(by: Column("rank")).live())
        #expect(try await Wait.next(updates, "the initial titles") == [])
        try todos.insert(Todo.make(2, "Tea"))
        #expect(try await Wait.next(updates, "the titles after an insert") == ["Tea"])
        // Written from another thread: delivered on the main actor all the same.
        try await Wait.value("an insert from another thread") { try todos.insert(Todo.make(1, "Milk")) }
        #expect(try await Wait.next(updates, "the titles after an insert from another thread") == ["Milk", "Tea"])
        model.stop()
    }

    @MainActor @Test func aLiveListIsObservableAndGivesChangesets() async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("list.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        try todos.insert(Todo.make(1, "Milk"))
        let list = LiveList(try todos.order(by: Column("rank")).live())
        let (events, continuation) = AsyncStream<LiveQueryEvent<Todo>>.makeStream()
        list.onChange = { continuation.yield($0) }
        let first = try await Wait.next(events, "the initial event")
        #expect(first?.isInitial == true)
        #expect(list.items.map(\.title) == ["Milk"])
        #expect(list.version == (try store.currentVersion()))

        // SwiftUI's way of watching it: Observation tracking.
        let (observed, observedContinuation) = AsyncStream<Void>.makeStream()
        withObservationTracking { _ = list.items } onChange: { observedContinuation.yield() }
        try todos.insert(Todo.make(0, "Tea"))
        let second = try await Wait.next(events, "the insert's event")
        #expect(try await Wait.next(observed, "Observation's change of the items") != nil)
        #expect(second?.changeset.inserts == [0])
        #expect(list.items.map(\.title) == ["Tea", "Milk"])

        // Stopped: a later commit, which another list hears, leaves it as it was.
        list.stop()
        let other = LiveList(try todos.order(by: Column("rank")).live())
        let (otherEvents, otherContinuation) = AsyncStream<Void>.makeStream()
        other.onChange = { _ in otherContinuation.yield() }
        _ = try await Wait.next(otherEvents, "the other list's initial event")
        try todos.insert(Todo.make(5, "Jam"))
        _ = try await Wait.next(otherEvents, "the other list's event of the insert")
        #expect(other.items.map(\.title) == ["Tea", "Milk", "Jam"])
        #expect(list.items.map(\.title) == ["Tea", "Milk"])
    }

    @MainActor @Test func anErrorReachesTheMainActor() async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("error.sqlite"))
        try store.write { db in try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY)") }
        let live = store.liveQuery(sql: "SELECT id FROM t", identity: "id")
        let (errors, continuation) = AsyncStream<String>.makeStream()
        let subscription = live.subscribeOnMainActor(onError: { error in continuation.yield("\(error)") }) { _ in }
        try store.write { db in try db.execute("DROP TABLE t") }
        #expect(try await Wait.next(errors, "the error on the main actor")?.contains("no such table") == true)
        #expect(subscription.isFinished)
    }
}
