import ArgumentParser
import Foundation
import RippleSyncTesting
import RippleTesting

/// `ripple-bench sync`: Ripple Sync against its floors, each measured in the same run on
/// throwaway PostgreSQL clusters with a node in this process and clients over real sockets.
///
/// * S1: the bytes of the `changes` frame the server sends for a psql UPDATE of one column of
///   one row in a 1,000-row ordered window, beside the same frame carrying the full row and the
///   whole window (the snapshot's JSON) — encodings the design does not use.
/// * S2: Postgres commit → client latency, p50/p99: from a writer sending an autocommit UPDATE
///   of a row in a subscribed 1,000-row window to the socket receiving its frame (`ripple`) and
///   to the Swift client having written it to its local store (`ripple-client`); beside the
///   floor of the design (`peek-floor`: the same UPDATE until a bare loop of
///   `pg_logical_slot_peek_binary_changes` on its own slot sees it) and a NOTIFY round trip
///   (`notify`: NOTIFY on one connection until LISTEN on another hears it); and, to say where
///   the time goes, the node's own way to the changes without applying them (`poll-peek`: its
///   poll of the flushed WAL position, every `pollInterval`, then the peek). Each commit waits for the previous
///   one's delivery, then 2–12 ms more (so that none shares a poll or a peek).
/// * S3: commits/s the node delivers with every commit (pgbench, 4 clients, 10,000 UPDATEs)
///   changing the one row of one of 100 subscriptions, then of 10,000: 100 sockets in both cases
///   (1, then 100 subscriptions each), each subscription a distinct query `id = k`; a case
///   waits at most 30 s for its frames (see ``SyncFanout``).
/// * S4: initial sync of 100,000 rows into a Swift client's store (`subscribe` until its rows are
///   in the local store), beside `COPY … TO STDOUT` of the same rows plus a bare SQLite insert.
/// * S5: a subscription resumed after 1,000 missed commits that touched 10 rows of its 1,000-row
///   window: the bytes and time of its first frame, beside a fresh snapshot of the window.
/// * W4: an app relaunched over its store holding 10,000 synced rows, 100 of which changed while
///   it was away: bytes and time to fresh rows, beside a fresh snapshot (``SyncRelaunch``).
/// * R1, R2: subscriptions under a membership rule — latency beside a single-table rule's, and
///   the node's CPU per membership grant with 100 and 10,000 subscribed users (``SyncRelational``).
/// * R3: a todo moved between two of 100 projects × 50 todos in a sectioned subscription — its
///   frame's bytes, and commit → socket latency beside a flat subscription's (``SyncSectioned``).
/// * R4: initial sync of a membership-ruled subscription with an include (10,000 todos and their
///   10,000 assignees) into a Swift client's store, beside COPY plus a bare SQLite insert (``SyncIncludedSync``).
///
/// Each group of workloads that shares a cluster (S1/S2/S5, S3, S4, W1–W3, W4, N1/N2, N3, R1/R2, R3,
/// R4) runs in a fresh process of its own — this executable again, with `--in-process` and that
/// group's workloads — so that no workload's figures depend on what ran before it in the same
/// process (N1's 15,000 sockets and N2's 10,000 clients leave threads, buffers and a grown heap
/// behind, which slowed R4 and S4 by a third). `--in-process` runs every chosen group here.
///
/// Lines: `bench` "sync", `workload`, `impl` and the figures; `ratio` lines; `target` lines
/// with `met` "yes" or "no". Notes (and what a missed target costs) go to stderr.
struct SyncBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Ripple Sync against its floors (S1–S5, W1–W4, N1–N3, R1–R4): bytes, latency, fan-out, initial sync, resume, writes, scale, relations.")

    @Option(help: "Run only this workload: S1…S5, W1…W4, N1…N3, R1…R4 (repeat it for several; default: all).")
    var workload: [SyncWorkload] = []

    @Option(help: "S2, R1: timed commits per impl.")
    var samples = 300

    @Option(help: "S3: commits per case.")
    var commits = 10_000

    @Option(help: "S4: rows synced.")
    var rows = 100_000

    @Option(help: "W3: mutations written offline.")
    var offline = 10_000

    @Option(help: "N1, N2: WebSockets held by the node (from three load processes).")
    var sockets = 15_000

    @Option(help: "N2: timed commits per query.")
    var rounds = 20

    @Option(help: "N3: commits per measurement.")
    var nodeCommits = 5_000

    @Option(help: "Seconds after which a run that has not finished stops its clusters and fails (each group's process has its own).")
    var watchdog: Double = 900

    @Flag(help: .hidden)
    var noMachineLine = false

    @Flag(help: "Run every chosen workload in this process (by default each group runs in a fresh process of its own).")
    var inProcess = false

    func validate() throws {
        if samples < 10 { throw ValidationError("--samples must be at least 10") }
        if commits < 100 { throw ValidationError("--commits must be at least 100") }
        if rows < 1 { throw ValidationError("--rows must be at least 1") }
        if offline < 1 { throw ValidationError("--offline must be at least 1") }
        if sockets < 15 || sockets > 18_000 { throw ValidationError("--sockets must be 15…18,000 (one process holds them all)") }
        if rounds < 1 { throw ValidationError("--rounds must be at least 1") }
        if nodeCommits < 100 { throw ValidationError("--node-commits must be at least 100") }
        if watchdog <= 0 { throw ValidationError("--watchdog must be positive") }
        if case .missing(let reason) = ThrowawayPostgres.availability { throw ValidationError(reason) }
    }

    func run() throws {
        #if DEBUG
        Report.note("this is a debug build: time a release build (swift run -c release ...)")
        #endif
        // Interrupted (Ctrl-C, a timeout's SIGTERM): the clusters are stopped before the end.
        let signals = [SIGINT, SIGTERM].map { (number: Int32) -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                Report.note("interrupted: stopping the clusters")
                SyncChildren.stopRunning()
                SyncCluster.stopAll()
                Foundation.exit(128 + number)
            }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        // The workloads are async (the node, the sockets); this command waits for them on its
        // own thread, outside the concurrency pool they run on, and no longer than the watchdog.
        let groups = SyncWorkload.groups(of: workload.isEmpty ? SyncWorkload.allCases : workload)
        if !inProcess && groups.count > 1 {
            let failures = try runGroupsInChildren(groups)
            if failures > 0 {
                Report.note("\(failures) group(s) failed: see the lines with \"error\"")
                throw ExitCode.failure
            }
            return
        }
        let outcome = SyncLocked<Result<Int, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let command = self
        Task.detached {
            let result: Result<Int, any Error>
            do { result = .success(try await command.runWorkloads()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + watchdog) == .success, let result = outcome.withLock({ $0 }) else {
            let phase = SyncProgress.abandon()
            Report.emit([("bench", "sync"), ("error", .string("the run did not finish within \(Int(watchdog)) s; it was at: \(phase)"))])
            SyncCluster.stopAll()
            throw ExitCode.failure
        }
        let failures = try result.get()
        if failures > 0 {
            Report.note("\(failures) check(s) failed: see the lines with \"error\"")
            throw ExitCode.failure
        }
    }

    /// Runs each group in a child process (this executable, `sync --in-process`, the group's
    /// workloads and this run's options), one after another, the child's lines going straight to
    /// ours; returns how many children failed. The children stop their own clusters; an
    /// interrupted parent stops the running child first (see ``run()``'s signal handler).
    private func runGroupsInChildren(_ groups: [[SyncWorkload]]) throws -> Int {
        let started = ContinuousClock.now
        emitMachine()
        var failures = 0
        for group in groups {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
            process.arguments = ["sync", "--in-process", "--no-machine-line"] + group.flatMap { ["--workload", $0.rawValue] } + optionArguments
            try process.run()
            SyncChildren.current.withLock { $0 = process }
            process.waitUntilExit()
            SyncChildren.current.withLock { $0 = nil }
            if process.terminationReason != .exit || process.terminationStatus != 0 {
                let names = group.map(\.rawValue).joined(separator: ",")
                Report.emit([("bench", "sync"), ("error", .string("the process for \(names) ended with status \(process.terminationStatus)"))])
                failures += 1
            }
        }
        Report.emit([("bench", "sync"), ("info", "run"), ("seconds", .number((ContinuousClock.now - started).seconds))])
        return failures
    }

    /// This run's options, as a child is given them.
    private var optionArguments: [String] {
        ["--samples", String(samples), "--commits", String(commits), "--rows", String(rows),
         "--offline", String(offline), "--sockets", String(sockets), "--rounds", String(rounds),
         "--node-commits", String(nodeCommits), "--watchdog", String(watchdog)]
    }

    /// Runs the chosen workloads; returns how many checks failed (each printed with "error").
    private func runWorkloads() async throws -> Int {
        let started = ContinuousClock.now
        if !noMachineLine { emitMachine() }
        var failures = 0
        for group in SyncWorkload.groups(of: workload.isEmpty ? SyncWorkload.allCases : workload) {
            failures += await run(group: group)
        }
        if !SyncProgress.isAbandoned && !noMachineLine {
            Report.emit([("bench", "sync"), ("info", "run"), ("seconds", .number((ContinuousClock.now - started).seconds))])
        }
        return failures
    }

    /// Runs one group of ``SyncWorkload/groups(of:)``; returns how many checks failed.
    private func run(group: [SyncWorkload]) async -> Int {
        switch group[0] {
        case .s1, .s2, .s5: await SyncWindowWorkloads(samples: samples).run(group)
        case .s3: await SyncFanout(commits: commits).run()
        case .s4: await SyncInitialSync(rows: rows).run()
        case .w1, .w2, .w3: await SyncWrites(samples: samples, offline: offline).run(group)
        case .w4: await SyncRelaunch().run()
        case .n1, .n2: await SyncScale(sockets: sockets, rounds: rounds).run(group)
        case .n3: await SyncNodesCost(commits: nodeCommits).run()
        case .r1, .r2: await SyncRelational(samples: samples).run(group)
        case .r3: await SyncSectioned(samples: samples).run()
        case .r4: await SyncIncludedSync().run()
        }
    }

    private func emitMachine() {
        let info = ProcessInfo.processInfo
        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif
        Report.emit([("bench", "sync"), ("info", "machine"),
                     ("os", .string(info.operatingSystemVersionString)),
                     ("cores", .int(info.activeProcessorCount)),
                     ("memory_mb", .int(Int(info.physicalMemory >> 20))),
                     ("build", .string(build))])
    }
}

/// Where the run stands, for the watchdog's line when it does not finish.
enum SyncProgress {
    private static let current = SyncLocked((phase: "starting", abandoned: false))

    static var phase: String {
        get { current.withLock { $0.phase } }
        set { current.withLock { $0.phase = newValue } }
    }

    /// Whether the watchdog gave up on the run: the workloads, still running, print nothing more.
    static var isAbandoned: Bool { current.withLock { $0.abandoned } }

    /// Gives up on the run; returns where it stood.
    static func abandon() -> String {
        current.withLock { state in
            state.abandoned = true
            return state.phase
        }
    }
}

/// The child process running a group of workloads now, for the signal handler.
enum SyncChildren {
    static let current = SyncLocked<Process?>(nil)

    /// Asks the running child to stop (it stops its clusters) and waits for it.
    static func stopRunning() {
        guard let process = current.withLock({ $0 }), process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

/// The names of the sync workloads, as given to `--workload`.
enum SyncWorkload: String, CaseIterable, ExpressibleByArgument, Sendable {
    case s1 = "S1", s2 = "S2", s3 = "S3", s4 = "S4", s5 = "S5", w1 = "W1", w2 = "W2", w3 = "W3", w4 = "W4", n1 = "N1", n2 = "N2", n3 = "N3"
    case r1 = "R1", r2 = "R2", r3 = "R3", r4 = "R4"

    /// The groups that share a cluster and a node, in the order a run takes them: S1/S2/S5,
    /// S3, S4, W1–W3, W4, N1/N2, N3, R1/R2, R3, R4 — each holding those of `chosen` it has.
    static func groups(of chosen: [SyncWorkload]) -> [[SyncWorkload]] {
        let groups: [[SyncWorkload]] = [[.s1, .s2, .s5], [.s3], [.s4], [.w1, .w2, .w3], [.w4], [.n1, .n2], [.n3], [.r1, .r2], [.r3], [.r4]]
        return groups.map { group in group.filter(chosen.contains) }.filter { !$0.isEmpty }
    }
}

/// How a sync workload prints its lines.
struct SyncLines {
    let workload: SyncWorkload
    /// Checks that failed so far.
    private(set) var failures = 0

    init(_ workload: SyncWorkload) { self.workload = workload }

    private var head: [JSONField] { [("bench", "sync"), ("workload", .string(workload.rawValue))] }

    func impl(_ name: String, _ fields: [JSONField]) {
        guard !SyncProgress.isAbandoned else { return }
        Report.emit(head + [("impl", .string(name))] + fields)
    }

    func ratio(_ name: String, _ fields: [JSONField]) {
        guard !SyncProgress.isAbandoned else { return }
        Report.emit(head + [("ratio", .string(name))] + fields)
    }

    /// A target of the issue, with its value and whether it is met.
    func target(_ text: String, _ value: Double, met: Bool) {
        guard !SyncProgress.isAbandoned else { return }
        Report.emit(head + [("target", .string(text)), ("value", .number(value)), ("met", .string(met ? "yes" : "no"))])
        if !met { Report.note("\(workload.rawValue): target not met: \(text) (value \(JSONValue.number(value).json))") }
    }

    /// A check that failed: a line with "error".
    mutating func error(_ impl: String, _ message: String) {
        failures += 1
        guard !SyncProgress.isAbandoned else { return }
        Report.emit(head + [("impl", .string(impl)), ("error", .string(message))])
    }
}

/// Latencies in microseconds, and their percentiles.
struct SyncLatencies {
    var samples: [Double] = []

    mutating func add(_ duration: Duration) { samples.append(duration.seconds * 1e6) }

    /// The nearest-rank percentile (`fraction` 0.5: the median).
    func percentile(_ fraction: Double) -> Double {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    var fields: [JSONField] {
        [("samples", .int(samples.count)), ("p50_us", .number(percentile(0.5))), ("p99_us", .number(percentile(0.99))),
         ("max_us", .number(samples.max() ?? .nan))]
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}
