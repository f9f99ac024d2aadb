import ArgumentParser
import Foundation
import Ripple
import RippleDiff
import RippleTesting

/// `ripple crashtest-child --db PATH --seed S` (hidden): the process `ripple crashtest` kills.
///
/// Opens the store, subscribes two live queries (one delivered immediately, one on a queue, both
/// checked event by event), then writes the crash test's transactions one after another — the
/// first after the one the database ends with — until it is killed. Right after each commit
/// returns it writes one line to stdout, unbuffered:
///
///     commit <transaction> <version> <digest> <rows>
///
/// A failed check ends the process with status 3 (a message on stderr).
struct CrashTestChildCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crashtest-child",
        abstract: "The writing process of `ripple crashtest` (not for direct use).",
        shouldDisplay: false
    )

    @Option(help: "The database file.")
    var db: String

    @Option(help: "The seed the transactions are generated from.")
    var seed: UInt64

    @Option(help: "Stop after this many transactions (a safety net: the parent kills the child long before).")
    var maxTransactions = 1_000_000

    func run() throws {
        let store = try Store(path: db, configuration: CrashWorkload.configuration)
        let items = try store.collection(CrashWorkload.itemsTable, of: CrashItem.self)
        try store.write { db in try db.executeScript(CrashWorkload.progressSchema) }
        let start = try CrashWorkload.committedTransaction(in: store)
        var model = CrashModel.replayed(seed: seed, through: start)

        // Two live queries: a collection query delivered inside each write, and a raw SQL query
        // delivered on a queue. Both check every changeset against the list they showed before.
        let cheap = items.filter(Column("value") < 100).order(by: Column("value"), Column("id"))
        let immediate = CrashTestListChecker<CrashItem>(name: "immediate (value < 100)")
        let first = try cheap.live().subscribe(on: .immediate, onError: { immediate.fail("ended: \($0)") }) {
            immediate.receive($0)
        }
        let queued = CrashTestListChecker<Row>(name: "queue (id % 5 = 0)")
        let second = store.liveQuery(sql: "SELECT id, value, txn FROM items WHERE id % 5 = 0 ORDER BY id", identity: "id")
            .subscribe(on: .queue(DispatchQueue(label: "ripple.crashtest.subscriber")), onError: { queued.fail("ended: \($0)") }) {
                queued.receive($0)
            }
        defer {
            first.cancel()
            second.cancel()
        }

        for _ in 0..<maxTransactions {
            let transaction = model.next()
            try store.write { db in try CrashWorkload.write(transaction, items: items, in: db) }
            model.apply(transaction)
            let version = try store.currentVersion()
            let line = "commit \(transaction.number) \(version) \(transaction.digest) \(transaction.rowCount)\n"
            FileHandle.standardOutput.write(Data(line.utf8))   // unbuffered: reported once written

            // The immediate subscriber has already seen this commit: its list is the query's result.
            let expected = model.sortedItems.filter { $0.value < 100 }.sorted { ($0.value, $0.id) < ($1.value, $1.id) }
            if immediate.items != expected {
                immediate.fail("after transaction \(transaction.number) (v\(version)) the list shows "
                               + "\(immediate.items.count) items, the model \(expected.count)")
            }
        }
    }
}

/// A live query's subscriber in the crash test's child: applies every changeset to the list it
/// showed through the batch-update model, and checks versions; any failure ends the process.
final class CrashTestListChecker<Element: Equatable & Sendable>: @unchecked Sendable {   // every field is guarded by `lock`
    private let lock = NSLock()
    private var model = BatchUpdateListModel<Element>(items: [])
    private var lastVersion: Int64?
    let name: String

    init(name: String) {
        self.name = name
    }

    /// What the list shows now.
    var items: [Element] { lock.withLock { model.items } }

    func receive(_ event: LiveQueryEvent<Element>) {
        lock.lock()
        defer { lock.unlock() }
        if let lastVersion {
            if event.version <= lastVersion || event.previousVersion != lastVersion {
                fail("event v\(event.version) (after v\(event.previousVersion.map(String.init) ?? "nil")) "
                     + "follows v\(lastVersion)")
            }
        } else if !event.isInitial {
            fail("the first event v\(event.version) is not the initial snapshot")
        }
        do {
            try model.apply(event.changeset, dataSource: event.snapshot)
        } catch {
            fail("v\(event.version): \(error)")
        }
        lastVersion = event.version
    }

    func fail(_ message: String) -> Never {
        Console.error("crashtest-child: live query \(name): \(message)")
        exit(3)
    }
}
