import Foundation
import Ripple

/// Ripple's live queries on the observe benchmark's table, delivered asynchronously on a
/// private serial queue (as GRDB's async scheduling is).
final class ObserveRipple: ObserveSubject {
    private let store: Store
    private let todos: RecordCollection<ObserveTodo>
    private var subscriptions: [Subscription] = []

    init(path: String, queries: [ObserveQuery], mailbox: ObserveMailbox<ObserveTodo>) throws {
        store = try Store(path: path)
        // The table and its index exist already (seeded through the C API): the collection adopts them.
        todos = try store.collection("todo", of: ObserveTodo.self)
        let queue = DispatchQueue(label: "ripple-bench.observe.ripple")
        for (index, query) in queries.enumerated() {
            let request = switch query {
            case .openWindow(let limit):
                todos.filter(Column("done") == false).order(by: Column("rank")).limit(limit)
            case .rankRange(let low, let count):
                todos.filter(Column("rank") >= low && Column("rank") < low + count).order(by: Column("rank"))
            }
            let subscription = try request.live().subscribe(on: .queue(queue), onError: { error in
                mailbox.fail("ripple: query \(index) failed: \(error)")
            }) { event in
                mailbox.post(query: index, at: .now, event: event)
            }
            subscriptions.append(subscription)
        }
    }

    func write(_ record: ObserveTodo, query: Int) throws -> ContinuousClock.Instant {
        try todos.update(record)
        return .now
    }

    func close() {
        subscriptions.forEach { $0.cancel() }
        subscriptions = []
    }
}

extension ObserveMailbox {
    /// A Ripple handler received `event` for query `query` at `time` (read first thing in it).
    func post(query: Int, at time: ContinuousClock.Instant, event: LiveQueryEvent<Element>) {
        let changeset = event.changeset
        let changes = changeset.deletes.count + changeset.inserts.count + changeset.updates.count + changeset.moves.count
        post(query: query, at: time, snapshot: event.snapshot, changes: changes, initial: event.isInitial)
    }
}
