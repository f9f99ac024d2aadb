import Foundation
import GRDB

extension ObserveTodo: FetchableRecord, PersistableRecord {
    static var databaseTableName: String { "todo" }
}

/// GRDB's `ValueObservation` on a `DatabasePool`, delivered asynchronously on a private serial
/// queue, with `Codable` records; each observer diffs its new value from the previous one with
/// the standard library (by identity, moves inferred, then updates per id), so that both sides
/// deliver a changeset.
///
/// The observations track a constant region (`trackingConstantRegion`, GRDB's documented fast
/// path on a pool: the fetch runs on a reader, concurrently with the writer). With `tracking`,
/// GRDB re-fetches on the writer connection inside `write`, before it returns — slower writes, and
/// a fetch that a clock started when `write` returns would not see.
final class ObserveGRDB: ObserveSubject {
    private let pool: DatabasePool
    private var cancellables: [AnyDatabaseCancellable] = []

    init(path: String, queries: [ObserveQuery], mailbox: ObserveMailbox<ObserveTodo>) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        pool = try DatabasePool(path: path, configuration: configuration)
        let queue = DispatchQueue(label: "ripple-bench.observe.grdb")
        for (index, query) in queries.enumerated() {
            let request = switch query {
            case .openWindow(let limit):
                ObserveTodo.filter(Column("done") == false).order(Column("rank")).limit(limit)
            case .rankRange(let low, let count):
                ObserveTodo.filter(Column("rank") >= low && Column("rank") < low + count).order(Column("rank"))
            }
            let differ = ObserveStdlibDiffer()
            let observation = ValueObservation.trackingConstantRegion { db in try request.fetchAll(db) }
            let cancellable = observation.start(in: pool, scheduling: .async(onQueue: queue), onError: { error in
                mailbox.fail("grdb: query \(index) failed: \(error)")
            }, onChange: { todos in
                let (changes, initial) = differ.changes(to: todos)
                mailbox.post(query: index, at: .now, snapshot: todos, changes: changes, initial: initial)
            })
            cancellables.append(cancellable)
        }
    }

    func write(_ record: ObserveTodo, query: Int) throws -> ContinuousClock.Instant {
        try pool.write { db in try record.update(db) }
        return .now
    }

    func close() {
        cancellables.forEach { $0.cancel() }
        cancellables = []
    }
}

/// One GRDB observer's diff state: the previous value, diffed with `difference(from:)` on ids.
final class ObserveStdlibDiffer: @unchecked Sendable {
    // @unchecked: only used on the observation's serial delivery queue.
    private var previous: [ObserveTodo]?

    /// The number of changes from the previous value to `todos` (inserts, removals — a move
    /// counts as both — and updates), and whether this is the first value.
    func changes(to todos: [ObserveTodo]) -> (count: Int, initial: Bool) {
        defer { previous = todos }
        guard let previous else { return (todos.count, true) }
        let difference = todos.map(\.id).difference(from: previous.map(\.id)).inferringMoves()
        var oldByID: [String: ObserveTodo] = [:]
        oldByID.reserveCapacity(previous.count)
        for todo in previous { oldByID[todo.id] = todo }
        var updates = 0
        for todo in todos {
            if let old = oldByID[todo.id], old != todo { updates += 1 }
        }
        blackHole(difference)
        return (difference.count + updates, false)
    }
}
