import Foundation
import Ripple

/// A model-based differential check of live queries: seeded random writes from several threads
/// (and processes) through Ripple's public API, subscriptions opened and cancelled in every way
/// a user can, and every delivered event compared with an independent in-memory model.
///
/// ```swift
/// var configuration = StressConfiguration()
/// configuration.seed = 3
/// configuration.seconds = 2
/// let report = try await StressTest.run(configuration)
/// #expect(report.passed, "\(report.details)")
/// ```
///
/// From asynchronous code (a Swift Testing test, an `async` command) call the `async` form: the
/// run blocks the thread it runs on for its whole length while its `events()` subscribers are
/// tasks that need Swift's cooperative threads, of which there are as many as cores. The `async`
/// form runs on a thread of its own and leaves those threads free.
///
/// What is checked:
/// * every event's snapshot equals the model's result of its query at the event's version
///   (SQLite's comparison rules, keys compared as bytes, ties broken by the key);
/// * every changeset applied to the previous snapshot gives the snapshot, and is valid as
///   UIKit-style batch updates; the first event is the initial one; versions strictly increase;
///   no event comes after `cancel()` returns; no event changes nothing;
/// * every write changed the rows the model says, took the next version if it changed a row and
///   none otherwise; no version is taken by nobody; an event at a version no writer took is wrong;
/// * with one writer and no other process, every `.immediate` subscriber shows its query's new
///   result when the write returns;
/// * once the run settles, every open subscriber shows the final result, and fresh reads of
///   every query equal the model's.
public enum StressTest {
    /// Runs a stress test as `configuration` says and reports what it found.
    ///
    /// - Throws: when the run cannot be set up (the database cannot be created, a child cannot
    ///   be started); findings about the store are in the report, never thrown.
    public static func run(_ configuration: StressConfiguration) throws -> StressReport {
        let files = FileManager.default
        let ownsDirectory = configuration.directory == nil
        let directory = configuration.directory
            ?? files.temporaryDirectory.appendingPathComponent("ripple-stress-\(UUID().uuidString)").path
        try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let database = directory + "/stress.sqlite"
        for suffix in ["", "-wal", "-shm"] where files.fileExists(atPath: database + suffix) {
            try files.removeItem(atPath: database + suffix)
        }
        let report = try StressRun(configuration: configuration, directory: directory, database: database).run()
        if report.passed && ownsDirectory { try? files.removeItem(atPath: directory) }
        return report
    }

    /// Runs a stress test as `configuration` says, on a thread of its own, and reports what it
    /// found.
    ///
    /// The synchronous `run(_:)` holds its calling thread until the run ends; called from a task,
    /// that is one of Swift's cooperative threads, and when the others are busy too (a parallel
    /// test suite on a small machine) the run's own `events()` subscribers cannot run and are
    /// reported as having missed their events. This form waits without holding one.
    ///
    /// - Throws: what the synchronous `run(_:)` throws.
    public static func run(_ configuration: StressConfiguration) async throws -> StressReport {
        try await onOwnThread("ripple stress", stackSize: 8 << 20) { try run(configuration) }
    }
}

/// One stress run: set up, write and churn until the time is up, settle, check the end state.
private final class StressRun: Sendable {
    let configuration: StressConfiguration
    let directory: String
    let database: String
    let store: Store
    let access: StressStoreAccess
    let ledger: StressLedger
    let churn: StressChurn

    init(configuration: StressConfiguration, directory: String, database: String) throws {
        self.configuration = configuration
        self.directory = directory
        self.database = database
        var storeConfiguration = Store.Configuration()
        // A single-threaded replay polls for nothing; other processes' writes are noticed every 50 ms.
        storeConfiguration.externalWritePollInterval = configuration.singleThreaded ? nil
            : configuration.effectiveProcesses > 1 ? 0.05 : 0.25
        store = try Store(path: database, configuration: storeConfiguration)
        // Every table is made first (schema changes take versions too); the model starts from
        // the state after, read once.
        access = try StressStoreAccess(store: store, createTables: true)
        let initial = try access.readAll()
        var generator = StressGenerator(seed: configuration.seed, stream: 999)
        ledger = StressLedger(model: StressModel(version: initial.version, state: StressState(initial.tables)),
                              queries: generator.queryPool(perTable: 8), verbose: configuration.verbose, log: configuration.log)
        churn = StressChurn(access: access, ledger: ledger, maxSubscribers: configuration.maxSubscribers,
                            immediateOnly: configuration.singleThreaded)
    }

    func run() throws -> StressReport {
        let threads = configuration.effectiveThreads
        for thread in 0..<threads { ledger.register(source: "p/t\(thread)") }
        var children: [StressChildProcess] = []
        do {
            // Children stop (their stdin closes) however this ends.
            defer { for child in children { child.stopAndWait() } }
            children = try startChildren()
            let deadline = Date().addingTimeInterval(configuration.seconds)
            if configuration.singleThreaded {
                try write(thread: 0, until: deadline)
            } else {
                let group = DispatchGroup()
                let failure = StressFailureBox()
                for thread in 0..<threads {
                    group.enter()
                    Thread { [self] in
                        defer { group.leave() }
                        do { try write(thread: thread, until: deadline) } catch { failure.keep(error) }
                    }.start()
                }
                group.wait()
                try failure.rethrow()
            }
        }
        try settle()
        return ledger.report(seed: configuration.seed, database: database)
    }

    /// Starts the child writer processes; on failure, stops those already started.
    private func startChildren() throws -> [StressChildProcess] {
        let count = configuration.effectiveProcesses - 1
        guard count > 0 else { return [] }
        guard let executable = configuration.childExecutable else {
            throw StressError("--processes \(configuration.processes) needs the `ripple` executable to start child writers")
        }
        var children: [StressChildProcess] = []
        do {
            for index in 1...count {
                let child = StressChildProcess(executable: executable, database: database, seed: configuration.seed,
                                               outsideWrites: configuration.outsideWrites, index: index,
                                               threads: configuration.effectiveThreads)
                for source in child.sources { ledger.register(source: source) }
                try child.start(ledger: ledger)
                children.append(child)
            }
        } catch {
            for child in children { child.stopAndWait() }
            throw error
        }
        return children
    }

    /// One writer thread: writes until `deadline` (or the operation budget), and now and then
    /// subscribes, cancels or lets a slow subscriber go.
    private func write(thread: Int, until deadline: Date) throws {
        let source = "p/t\(thread)"
        defer { ledger.finish(source: source) }
        var generator = StressGenerator(seed: configuration.seed, stream: UInt64(thread))
        generator.outsideShare = configuration.outsideWrites
        let writer = try StressWriter(access: access, source: source, gateDirectory: directory, generator: generator)
        var random = StressGenerator(seed: configuration.seed, stream: UInt64(500 + thread))
        let soleWriter = configuration.effectiveThreads == 1 && configuration.effectiveProcesses == 1
        let progressEvery = 5.0
        var nextProgress = Date().addingTimeInterval(progressEvery)
        if thread == 0 {
            for _ in 0..<min(8, configuration.maxSubscribers) { churn.subscribe(using: &random) }
        }
        while Date() < deadline {
            if let budget = configuration.maxOperations, ledger.operationCount >= budget { break }
            ledger.submit(writer.writeNext())
            if soleWriter { ledger.checkImmediateSubscribersAreCurrent() }
            if random.chance(0.3) { churn.step(using: &random) }
            if configuration.effectiveProcesses > 1 && random.chance(0.05) { try? store.noticeExternalWrites() }
            if thread == 0, let log = configuration.log, Date() >= nextProgress {
                nextProgress = Date().addingTimeInterval(progressEvery)
                log("stress: progress \(ledger.progress)")
            }
        }
        ledger.count(busyRetried: writer.busyRetried)
    }

    /// After the last write: notices every process's commits, lets every queued delivery happen,
    /// and checks the end state.
    private func settle() throws {
        churn.releaseSlowSubscribers()
        try store.noticeExternalWrites()
        ledger.settle(finalVersion: try store.currentVersion())
        ledger.reportRoutingInvariants(store.routingInvariantViolations)

        // Every open subscriber must come to show the final result (its last event arrived).
        // `.immediate` ones already do (a single-threaded run has no other kind); queued
        // deliveries and `events()` loops are waited for while events keep arriving.
        churn.drainQueues()
        let quiet: TimeInterval = configuration.singleThreaded ? 0 : configuration.settleQuietPeriod
        for subscriber in ledger.awaitFinalSnapshots(quietPeriod: quiet, limit: Date().addingTimeInterval(max(quiet, 30))) {
            ledger.reportMissedFinalEvent(subscriber)
        }
        // A fresh read of every query must give the model's result.
        for index in ledger.queries.indices {
            do {
                ledger.reportFreshRead(index, rows: try access.fetch(ledger.queries[index]))
            } catch {
                ledger.reportFreshReadFailure(index, error)
            }
        }

        // Cancelled subscribers hear of nothing more: one more write, noticed and drained.
        let open = ledger.openSubscribers
        for subscriber in open {
            subscriber.cancel()
            if subscriber.kind != .asyncLoop { ledger.unregister(subscriber) }
        }
        ledger.register(source: "p/final")
        let writer = try StressWriter(access: access, source: "p/final", gateDirectory: directory,
                                      generator: StressGenerator(seed: configuration.seed, stream: 777))
        ledger.submit(writer.perform(.write(StressTable.allCases.map { table in
            var random = StressGenerator(seed: configuration.seed, stream: 778 + UInt64(table.rawValue))
            return .operation(.upsert(table, random.row(of: table)), .rawSQL)
        }, rollBack: false)))
        ledger.finish(source: "p/final")
        try store.noticeExternalWrites()
        ledger.settle(finalVersion: try store.currentVersion())
        churn.drainQueues()
        // The events() loops end once their cancelled iterators return nil.
        _ = ledger.awaitOpenSubscribers(until: Date().addingTimeInterval(30))
        ledger.reportUnknownVersions()
    }
}

/// Keeps the first error a writer thread threw.
private final class StressFailureBox: @unchecked Sendable {   // `error` is guarded by `lock`
    private let lock = NSLock()
    private var error: (any Error)?
    func keep(_ error: any Error) { lock.withLock { if self.error == nil { self.error = error } } }
    func rethrow() throws { if let error = lock.withLock({ error }) { throw error } }
}
