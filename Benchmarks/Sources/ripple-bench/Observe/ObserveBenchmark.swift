import ArgumentParser
import Foundation
import RippleTesting

/// `ripple-bench observe`: how long a live query's subscriber waits for a commit's changeset.
///
/// Latency is measured from the write's commit returning to the subscriber's handler starting
/// with its changeset (the diff included), on a real file: Ripple's live queries against GRDB's
/// `ValueObservation` (with a standard-library diff by identity in the observer) and against the
/// floor (commit through the C API, then re-query on a second connection, no diff).
///
/// Schema: `todo(id TEXT PRIMARY KEY, title TEXT, rank INTEGER, done INTEGER)` with an index on
/// `(done, rank)`, WAL, synchronous=NORMAL; `rank` is a permutation of `0..<rows`.
///
/// * O1: 10,000 rows, `done == false ORDER BY rank LIMIT 1000`, 1,000 single-row writes, each
///   waiting for its change: 9 in 10 retitle a row of the window, every 10th flips `done` of one
///   of the 2,000 lowest-rank rows (one whose flip changes the window);
/// * O2: O1 on 1,000,000 rows, 200 writes;
/// * O3: 10,000 rows, 100 live queries on disjoint 100-row `rank` ranges, 200 retitles back to
///   back, each waiting for the one subscriber whose range holds the row;
/// * O4: across processes: a writer process makes 300 retitles of rows of O1's window while an
///   observer process holds it, each write waiting for the observer's acknowledgement through a
///   pipe. Ripple's observer hears of commits through its watch on the file (polling off); the
///   floor's is woken through a pipe by the writer after each commit, and re-reads the window.
///   The clock is `CLOCK_MONOTONIC`, read by the writer when the commit returned and by the
///   observer when it held the window showing the write (see ``ObserveChild``). No GRDB: its
///   observations do not see other processes' commits. A commit the observer never hears of
///   ends the run after 60 s with an error. `--breakdown --workload O4` times the pieces of
///   Ripple's notice path (``ObserveProcesses/breakdown(writes:realtimeWriter:in:)``);
/// * O5: 10,000 live queries on one store, `owner == k ORDER BY id` for every owner of a
///   100,000-row table (10 rows each): the time to subscribe them all and the resident memory
///   each holds, then 500 writes that each move a row to another owner, waiting for both
///   concerned queries' events, beside the same writes with no live query, the same writes back
///   to back with the 10,000 queries, and writes between two owners with their two queries
///   alone and among all 10,000 (see ``ObserveSubscribers``). Ripple only: GRDB and the floor
///   have no index of their observers' filters. `--breakdown --workload O5` runs its writes with 2 to 10,000 subscribers, queued
///   or `.immediate`, waiting or not, and times the change-log read of a query that fell behind
///   (``ObserveSubscribers/breakdown()``).
///
/// The clock is read when the write call returns; on a busy machine the threads the commit wakes
/// could preempt the writer before it reads the clock, and so deliver "before" the commit
/// returned. Each write call therefore runs under `SCHED_FIFO` (where permitted; see
/// `--no-realtime-writer`), and `early` counts deliveries that still started first.
struct ObserveBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "observe",
        abstract: "Time commit-to-changeset latency of live queries (O1–O5): ripple, grdb, c.")

    @Option(help: "Run only this workload: O1, O2, O3, O4 or O5 (default: all).")
    var workload: ObserveWorkload?

    @Option(help: "Run only these impls (c, grdb, ripple); ratios need ripple and the peer.")
    var impl: [String] = []

    @Option(help: "Timed writes per workload (defaults: O1 1000, O2 200, O3 200, O4 300, O5 500).")
    var writes: Int?

    @Flag(inversion: .prefixedNo,
          help: "Run each write call under SCHED_FIFO, so that the threads it wakes cannot preempt it before it reads the clock.")
    var realtimeWriter = true

    @Flag(help: "Instead of the workloads, time the pieces of Ripple's path one by one (--writes: repetitions, default 200); with --workload O4, its cross-process notice path; with --workload O5, its writes with 2 to 10,000 subscribers.")
    var breakdown = false

    @Option(help: "With --breakdown --workload O5: run only these setups (by the name its lines print).")
    var setup: [String] = []

    /// Untimed writes before the timed ones (statement caches, first allocations).
    static let warmUpWrites = 10
    /// How long a write waits for its change before the run counts as failed.
    static let timeout: TimeInterval = 30

    func validate() throws {
        if let writes, writes < 1 { throw ValidationError("--writes must be at least 1") }
        let known = ObserveImpl.all.map(\.name)
        for name in impl where !known.contains(name) {
            throw ValidationError("unknown impl \(name): expected one of \(known.joined(separator: ", "))")
        }
    }

    func run() throws {
        #if DEBUG
        Report.note("this is a debug build: time a release build (swift run -c release ...)")
        #endif
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-bench-observe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        if breakdown {
            if workload == .o4 {
                try ObserveProcesses.breakdown(writes: writes ?? ObserveWorkload.o4.defaultWrites, realtimeWriter: realtimeWriter,
                                               in: directory)
            } else if workload == .o5 {
                try ObserveSubscribers(writes: writes ?? ObserveWorkload.o5.defaultWrites, realtimeWriter: realtimeWriter,
                                       directory: directory).breakdown(only: setup)
            } else {
                try ObserveBreakdown(reps: writes ?? 200).run(in: directory)
            }
            return
        }
        let impls = ObserveImpl.all.filter { impl.isEmpty || impl.contains($0.name) }
        var failures = 0
        for workload in self.workload.map({ [$0] }) ?? ObserveWorkload.allCases {
            if workload == .o5 {
                guard impls.contains(where: { $0.name == "ripple" }) else {
                    Report.note("O5: skipped: it runs ripple only")
                    continue
                }
                failures += try ObserveSubscribers(writes: writes ?? workload.defaultWrites, realtimeWriter: realtimeWriter,
                                                   directory: directory).run()
            } else {
                failures += try bench(workload, impls: impls, in: directory)
            }
        }
        if failures > 0 {
            Report.note("\(failures) check(s) failed: see the lines with \"error\"")
            throw ExitCode.failure
        }
    }

    /// Seeds `workload`'s file once, runs every impl on a copy, prints their lines, ratios and
    /// targets. Returns how many checks failed.
    private func bench(_ workload: ObserveWorkload, impls: [ObserveImpl], in directory: URL) throws -> Int {
        let writes = self.writes ?? workload.defaultWrites
        var impls = impls
        if workload == .o4, impls.contains(where: { $0.name == "grdb" }) {
            Report.note("O4: no grdb: GRDB's observations do not see commits of other processes")
            impls.removeAll { $0.name == "grdb" }
        }
        let seeded = directory.appendingPathComponent("\(workload.rawValue)-seed.sqlite").path
        Report.note("\(workload.rawValue): seeding \(workload.rows) rows")
        let model = ObserveModel(rows: workload.rows)
        ObserveFloor.seed(path: seeded, rows: workload.rows)
        var results: [String: ObserveResult] = [:]
        var failures = 0
        for impl in impls {
            let path = directory.appendingPathComponent("\(workload.rawValue)-\(impl.name).sqlite").path
            try FileManager.default.copyItem(atPath: seeded, toPath: path)
            Report.note("\(workload.rawValue): \(impl.name), \(writes) writes")
            let fields: [JSONField] = [("bench", "observe"), ("workload", .string(workload.rawValue)),
                                       ("impl", .string(impl.name))]
            do {
                let result = if workload == .o4 {
                    try ObserveProcesses(impl: ObserveProcessImpl(rawValue: impl.name)!, path: path, writes: writes,
                                         realtimeWriter: realtimeWriter, directory: directory).run()
                } else {
                    try run(workload, impl: impl, path: path, model: model, writes: writes)
                }
                for problem in result.problems { Report.emit(fields + [("error", .string(problem))]) }
                failures += result.problems.count
                Report.emit(fields + [
                    ("rows", .int(workload.rows)), ("queries", .int(workload.queries.count)),
                    ("writes", .int(result.latencies.count)),
                    ("p50_us", .number(result.percentile(0.5))), ("p99_us", .number(result.percentile(0.99))),
                    ("writes_per_s", .number(result.writesPerSecond)), ("values", .int(result.values)),
                    ("write_p50_us", .number(result.percentile(0.5, of: result.writeDurations))),
                ] + result.kindFields + [
                    ("early", .int(result.early)), ("writer", .string(result.writer)),
                ])
                results[impl.name] = result
            } catch {
                Report.emit(fields + [("error", .string("\(error)"))])
                failures += 1
            }
            for file in [path, path + "-wal", path + "-shm"] { try? FileManager.default.removeItem(atPath: file) }
        }
        try? FileManager.default.removeItem(atPath: seeded)
        emitRatios(workload, results)
        return failures
    }

    /// Runs `writes` timed writes of `workload` (after the warm-up) on the file at `path`.
    private func run(_ workload: ObserveWorkload, impl: ObserveImpl, path: String, model initial: ObserveModel,
                     writes: Int) throws -> ObserveResult {
        let queries = workload.queries
        let mailbox = ObserveMailbox<ObserveTodo>(queries: queries.count)
        let subject = try impl.open(path, queries, mailbox)
        defer { subject.close() }
        guard mailbox.waitForInitialEvents(timeout: Self.timeout) else {
            throw ObserveFailure("no initial event from every query within \(Int(Self.timeout)) s")
        }
        // The same writes for every impl: the same model, the same seed.
        var model = initial
        var random = SeededGenerator(seed: Workloads.seed ^ 0x0B5E)
        var result = ObserveResult()
        let writer = ObserveWriterPriority(realtime: realtimeWriter)
        let clock = ContinuousClock()
        var start = clock.now
        for index in -Self.warmUpWrites..<writes {
            if index == 0 {
                mailbox.resetValues()
                start = clock.now
            }
            let step = model.nextWrite(workload, index: index + Self.warmUpWrites, using: &random)
            mailbox.expect(query: step.query, step.check)
            let called = clock.now
            let committed = try writer.run { try subject.write(step.record, query: step.query) }
            guard let delivery = mailbox.waitForExpected(timeout: Self.timeout) else {
                result.problems.append("write \(index) (\(step.kind) \(step.record.id)): no matching event within \(Int(Self.timeout)) s")
                break
            }
            model.apply(step.record)
            if delivery.changes == 0 {
                result.problems.append("write \(index) (\(step.kind)): the matching event has an empty changeset")
            }
            guard index >= 0 else { continue }
            let latency = committed.duration(to: delivery.time)
            if latency < .zero { result.early += 1 }
            result.latencies.append(max(latency, .zero).microseconds)
            result.kinds.append(step.kind)
            result.writeDurations.append(called.duration(to: committed).microseconds)
        }
        let elapsed = start.duration(to: clock.now)
        result.writesPerSecond = Double(result.latencies.count) / (elapsed.milliseconds / 1000)
        result.values = mailbox.values
        result.problems += mailbox.errors
        result.writer = writer.description
        return result
    }

    /// The ratio lines (ripple against each peer) and the issue's targets.
    private func emitRatios(_ workload: ObserveWorkload, _ results: [String: ObserveResult]) {
        let name = workload.rawValue
        guard let ripple = results["ripple"] else { return }
        for peer in ["grdb", "c"] {
            guard let other = results[peer] else { continue }
            Report.emit([("bench", "observe"), ("workload", .string(name)), ("ratio", .string("ripple/\(peer)")),
                         ("p50_ratio", .number(ripple.percentile(0.5) / other.percentile(0.5))),
                         ("p99_ratio", .number(ripple.percentile(0.99) / other.percentile(0.99))),
                         ("writes_per_s_ratio", .number(ripple.writesPerSecond / other.writesPerSecond))])
        }
        func target(_ text: String, _ value: Double, _ met: Bool) {
            Report.emit([("bench", "observe"), ("workload", .string(name)), ("target", .string(text)),
                         ("value", .number(value)), ("met", .string(met ? "yes" : "no"))])
        }
        let p50 = ripple.percentile(0.5)
        let grdbP50 = results["grdb"]?.percentile(0.5)
        switch workload {
        case .o1:
            target("ripple p50_us <= 1000", p50, p50 <= 1000)
            if let grdbP50 { target("ripple/grdb p50_ratio <= 0.6", p50 / grdbP50, p50 / grdbP50 <= 0.6) }
        case .o2:
            if let grdbP50 { target("ripple/grdb p50_ratio <= 0.7", p50 / grdbP50, p50 / grdbP50 <= 0.7) }
        case .o3:
            target("ripple writes_per_s >= 1000", ripple.writesPerSecond, ripple.writesPerSecond >= 1000)
            target("ripple p50_us <= 2000", p50, p50 <= 2000)
            if let c = results["c"] {
                let ratio = ripple.writesPerSecond / c.writesPerSecond
                target("ripple/c writes_per_s_ratio >= 0.8", ratio, ratio >= 0.8)
            }
        case .o4:
            if let cP50 = results["c"]?.percentile(0.5) { target("ripple/c p50_ratio <= 2", p50 / cP50, p50 / cP50 <= 2) }
            target("ripple p50_us <= 5000", p50, p50 <= 5000)
        case .o5:
            break   // ObserveSubscribers prints its own
        }
    }
}

/// The observe benchmark's workloads.
enum ObserveWorkload: String, CaseIterable, ExpressibleByArgument {
    case o1 = "O1", o2 = "O2", o3 = "O3", o4 = "O4", o5 = "O5"

    init?(argument: String) {
        self.init(rawValue: argument.uppercased())
    }

    var rows: Int {
        switch self {
        case .o1, .o3, .o4: 10_000
        case .o2: 1_000_000
        case .o5: ObserveSubscribers.rows
        }
    }

    var defaultWrites: Int {
        switch self {
        case .o1: 1_000
        case .o2, .o3: 200
        case .o4: 300
        case .o5: 500
        }
    }

    var queries: [ObserveQuery] {
        switch self {
        case .o1, .o2, .o4: [.openWindow(limit: ObserveModel.window)]
        case .o3: (0..<100).map { .rankRange(low: $0 * ObserveModel.rangeWidth, count: ObserveModel.rangeWidth) }
        case .o5: []   // its own table and queries: see ObserveSubscribers
        }
    }
}

/// One live query of a workload.
enum ObserveQuery: Sendable {
    /// `done == false ORDER BY rank LIMIT limit`.
    case openWindow(limit: Int)
    /// `rank >= low AND rank < low + count ORDER BY rank`.
    case rankRange(low: Int, count: Int)
}

/// The record every impl reads and writes (the `todo` table).
struct ObserveTodo: Codable, Sendable, Identifiable, Equatable {
    var id: String
    var title: String
    var rank: Int
    var done: Bool
}

/// An impl under test: opens the file, subscribes to the queries, and writes.
struct ObserveImpl: Sendable {
    var name: String
    /// Opens the store at a path and subscribes to every query, posting events to the mailbox.
    var open: @Sendable (String, [ObserveQuery], ObserveMailbox<ObserveTodo>) throws -> any ObserveSubject

    static let all: [ObserveImpl] = [
        ObserveImpl(name: "c") { try ObserveFloor(path: $0, queries: $1, mailbox: $2) },
        ObserveImpl(name: "grdb") { try ObserveGRDB(path: $0, queries: $1, mailbox: $2) },
        ObserveImpl(name: "ripple") { try ObserveRipple(path: $0, queries: $1, mailbox: $2) },
    ]
}

/// An open store with its subscriptions.
protocol ObserveSubject: AnyObject {
    /// Writes `record` (by id) in one transaction; returns the instant the commit returned.
    /// `query` is the one query that must see the change (the floor re-queries it).
    func write(_ record: ObserveTodo, query: Int) throws -> ContinuousClock.Instant
    /// Ends the subscriptions and closes the store.
    func close()
}

struct ObserveFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// What one impl did on one workload.
struct ObserveResult {
    /// Commit-to-handler latency of every timed write, in microseconds.
    var latencies: [Double] = []
    /// The kind of each timed write (``ObserveModel/Write/kind``).
    var kinds: [String] = []
    /// How long each timed write call took (the transaction, and whatever the impl does
    /// before returning), in microseconds.
    var writeDurations: [Double] = []
    var writesPerSecond = 0.0
    /// Events the subscribers received during the timed writes (initial events excluded).
    var values = 0
    /// Matching events whose handler started before the write call returned (counted as 0 µs).
    var early = 0
    /// How the write calls were scheduled: `fifo` or `normal`.
    var writer = "normal"
    var problems: [String] = []

    /// `title_p50_us`, `flip_p50_us`… when the writes are of more than one kind.
    var kindFields: [JSONField] {
        var names: [String] = []
        for kind in kinds where !names.contains(kind) { names.append(kind) }
        guard names.count > 1 else { return [] }
        return names.map { kind in
            let samples = zip(kinds, latencies).filter { $0.0 == kind }.map(\.1)
            return ("\(kind)_p50_us", .number(percentile(0.5, of: samples)))
        }
    }

    /// The nearest-rank percentile `fraction` of the latencies (or of `samples`).
    func percentile(_ fraction: Double, of samples: [Double]? = nil) -> Double {
        let sorted = (samples ?? latencies).sorted()
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}

/// Runs the write calls under `SCHED_FIFO` (priority 1), back to the normal policy after each.
struct ObserveWriterPriority: CustomStringConvertible {
    private(set) var realtime: Bool

    init(realtime: Bool) {
        self.realtime = realtime
        guard realtime else { return }
        // Try once: without the privilege, run every write normally.
        var parameters = sched_param(sched_priority: 1)
        if pthread_setschedparam(pthread_self(), SCHED_FIFO, &parameters) == 0 {
            Self.restore()
        } else {
            Report.note("cannot run writes under SCHED_FIFO (no privilege?): running them normally")
            self.realtime = false
        }
    }

    var description: String { realtime ? "fifo" : "normal" }

    /// Runs `body` under `SCHED_FIFO` when realtime; returns its result.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        guard realtime else { return try body() }
        var parameters = sched_param(sched_priority: 1)
        pthread_setschedparam(pthread_self(), SCHED_FIFO, &parameters)
        defer { Self.restore() }
        return try body()
    }

    private static func restore() {
        var parameters = sched_param(sched_priority: 0)
        pthread_setschedparam(pthread_self(), SCHED_OTHER, &parameters)
    }
}

extension Duration {
    /// The duration in microseconds.
    var microseconds: Double { milliseconds * 1000 }
}

// MARK: - Mailbox

/// Where subscribers' handlers report, and where the writer waits for the events that show its
/// write (one, or one per query a write concerns, as in O5). The writer states what each event
/// must hold before writing; the handler that delivers it records the instant it started.
final class ObserveMailbox<Element: Sendable>: @unchecked Sendable {
    // @unchecked: every property is guarded by `condition`.
    typealias Check = @Sendable ([Element]) -> Bool
    /// When a matching event's handler started, and the size of its changeset.
    typealias Match = (time: ContinuousClock.Instant, changes: Int)

    private let condition = NSCondition()
    private var initialEvents: [Int]
    /// Queries whose initial event has not come yet.
    private var missingInitialEvents: Int
    private var pending: [(query: Int, check: Check)] = []
    private var matched: [Match] = []
    private var valueCount = 0
    private var problems: [String] = []
    /// The last snapshot each query delivered.
    private var latest: [[Element]?]

    init(queries: Int) {
        initialEvents = Array(repeating: 0, count: queries)
        missingInitialEvents = queries
        latest = Array(repeating: nil, count: queries)
    }

    /// A handler received `snapshot` for query `query` at `time`; `changes` is the size of its
    /// changeset (-1 for the floor, which does not diff).
    func post(query: Int, at time: ContinuousClock.Instant, snapshot: [Element], changes: Int, initial: Bool) {
        condition.lock()
        if initial {
            if initialEvents[query] == 0 { missingInitialEvents -= 1 }
            initialEvents[query] += 1
        } else {
            valueCount += 1
        }
        latest[query] = snapshot
        if let index = pending.firstIndex(where: { $0.query == query && $0.check(snapshot) }) {
            pending.remove(at: index)
            matched.append((time, changes))
        }
        // The waiter is woken only once what it waits for is complete, and after the lock is
        // released: woken at each event, or into a held lock, it would take a core from the
        // handlers still to run.
        let complete = pending.isEmpty || (initial && missingInitialEvents == 0)
        condition.unlock()
        if complete { condition.broadcast() }
    }

    /// A subscription failed.
    func fail(_ message: String) {
        condition.lock()
        problems.append(message)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every query delivered its initial event.
    func waitForInitialEvents(timeout: TimeInterval) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while missingInitialEvents > 0 && problems.isEmpty {
            if !condition.wait(until: deadline) { return false }
        }
        return problems.isEmpty
    }

    /// The next write must show in an event of `query` whose snapshot passes `check`.
    func expect(query: Int, _ check: @escaping Check) {
        expect([(query, check)])
    }

    /// The next write must show in an event of each of these queries whose snapshot passes its check.
    func expect(_ events: [(query: Int, check: Check)]) {
        condition.lock()
        pending = events
        matched = []
        condition.unlock()
    }

    /// Waits for the event announced by ``expect(query:_:)``: when its handler started, and the
    /// size of its changeset.
    func waitForExpected(timeout: TimeInterval) -> Match? {
        waitForAllExpected(timeout: timeout)?.first
    }

    /// Waits for every event announced by ``expect(_:)``; returns them in the order they came.
    func waitForAllExpected(timeout: TimeInterval) -> [Match]? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !pending.isEmpty {
            if !problems.isEmpty || !condition.wait(until: deadline) { return nil }
        }
        return matched
    }

    /// Waits until the last snapshot query `query` delivered passes `check` (woken by each
    /// event's end of writes: call it once the writes are done).
    func waitForLatest(query: Int, timeout: TimeInterval, _ check: ([Element]) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !(latest[query].map(check) ?? false) {
            if !problems.isEmpty || !condition.wait(until: deadline) { return false }
        }
        return true
    }

    func resetValues() {
        condition.lock()
        valueCount = 0
        condition.unlock()
    }

    /// Events received since ``resetValues()`` (initial events excluded).
    var values: Int {
        condition.lock()
        defer { condition.unlock() }
        return valueCount
    }

    var errors: [String] {
        condition.lock()
        defer { condition.unlock() }
        return problems
    }
}

/// A value shared between threads under a lock.
final class ObserveLocked<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func get() -> Value { lock.withLock { value } }

    /// Runs `body` on the value under the lock.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }
}

// MARK: - Data and writes

/// The seeded rows and the writes made on them: the benchmark's own view of the table, so that
/// every write is chosen to change exactly what it must, and its event can be recognized.
struct ObserveModel {
    /// The open window's size (O1, O2).
    static let window = 1_000
    /// Each O3 query's range of ranks.
    static let rangeWidth = 100
    /// Flips pick among this many lowest ranks.
    static let flipRanks = 2_000
    /// Rows the model keeps (the lowest ranks): enough for the window to drift.
    static let kept = 10_000

    /// The rows of the lowest ranks, indexed by rank.
    private(set) var byRank: [ObserveTodo]

    /// The model of `rows` seeded rows (see ``rows(count:_:)``).
    init(rows: Int) {
        var byRank = [ObserveTodo?](repeating: nil, count: min(rows, Self.kept))
        Self.rows(count: rows) { todo in
            if todo.rank < byRank.count { byRank[todo.rank] = todo }
        }
        self.byRank = byRank.map { $0! }
    }

    /// The seeded rows in insertion order: ranks are a permutation of `0..<count` (scattered
    /// across insertion order), ids random UUIDs, `done` random — the same on every run.
    static func rows(count: Int, _ body: (ObserveTodo) -> Void) {
        var random = SeededGenerator(seed: Workloads.seed)
        for index in 0..<count {
            let rank = index &* 7_919 % count   // 7,919 is prime, coprime with 10^4 and 10^6
            body(ObserveTodo(id: UUID(using: &random).uuidString, title: "Todo number \(rank)",
                             rank: rank, done: Bool.random(using: &random)))
        }
    }

    /// One write: the record to store, the query that must see it, and how to recognize its event.
    struct Write {
        var record: ObserveTodo
        var query: Int
        var check: ObserveMailbox<ObserveTodo>.Check
        /// `title` (a retitle) or `flip` (`done` toggled).
        var kind: String
    }

    /// The write number `index` of `workload`.
    func nextWrite(_ workload: ObserveWorkload, index: Int, using random: inout SeededGenerator) -> Write {
        switch workload {
        case .o1, .o2, .o4:
            let window = openWindow()
            let last = window.last!
            if workload != .o4 && index % 10 == 9 {
                // Flip `done` of a low-rank row whose flip changes the window: one in it, or a
                // done row ranked before its end.
                while true {
                    var record = byRank[Int.random(in: 0..<Self.flipRanks, using: &random)]
                    guard !record.done ? record.rank <= last : record.rank < last else { continue }
                    record.done.toggle()
                    let (id, done) = (record.id, record.done)
                    return Write(record: record, query: 0, check: { snapshot in
                        snapshot.count == Self.window && snapshot.contains { $0.id == id } == !done
                    }, kind: "flip")
                }
            }
            var record = byRank[window[Int.random(in: 0..<window.count, using: &random)]]
            record.title = "Todo number \(record.rank), write \(index)"
            let (id, title) = (record.id, record.title)
            return Write(record: record, query: 0, check: { snapshot in
                snapshot.count == Self.window && snapshot.contains { $0.id == id && $0.title == title }
            }, kind: "title")
        case .o3:
            var record = byRank[Int.random(in: 0..<byRank.count, using: &random)]
            record.title = "Todo number \(record.rank), write \(index)"
            let (id, title) = (record.id, record.title)
            return Write(record: record, query: record.rank / Self.rangeWidth, check: { snapshot in
                snapshot.count == Self.rangeWidth && snapshot.contains { $0.id == id && $0.title == title }
            }, kind: "title")
        case .o5:
            preconditionFailure("observe: O5 makes its own writes (ObserveSubscribers)")
        }
    }

    /// The number of the write that set `title` (`…, write 12` → 12), `nil` for a seeded title.
    static func writeNumber(in title: String) -> Int? {
        guard let marker = title.range(of: ", write ", options: .backwards) else { return nil }
        return Int(title[marker.upperBound...])
    }

    mutating func apply(_ record: ObserveTodo) {
        byRank[record.rank] = record
    }

    /// The ranks of the open window: the first `window` rows not done, in rank order.
    private func openWindow() -> [Int] {
        var ranks: [Int] = []
        ranks.reserveCapacity(Self.window)
        for todo in byRank where !todo.done {
            ranks.append(todo.rank)
            if ranks.count == Self.window { return ranks }
        }
        fatalError("observe: fewer than \(Self.window) open rows among the \(byRank.count) lowest ranks")
    }
}
