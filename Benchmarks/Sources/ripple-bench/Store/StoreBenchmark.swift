import ArgumentParser
import Foundation
import Ripple
import RippleTesting

/// `ripple-bench store`: the store's write and read throughput against the same loops on the C
/// API (the physical floor) and GRDB with `Codable` records (the peer), on one schema:
/// `todos(id TEXT PRIMARY KEY, title TEXT, rank INTEGER, done INTEGER)`, WAL, synchronous=NORMAL.
///
/// * I1: insert 100,000 records in one transaction (opening the file and creating the table included);
/// * R1: fetch all 100,000 ordered by `rank`, decoded into the struct;
/// * U1: 10,000 rows that each hold a 100 KB blob; update the title of each (by default: a
///   title that grows, one row per transaction; one of the same size, one row per transaction
///   and 100 rows per transaction): bytes written (WAL and database file) per update and rows
///   per second, beside the C floor (no log) — see ``UpdateWorkload``;
/// * K1: one write whose `String` id is 10 MB beside one whose ordinary value is 10 MB — see
///   ``BigKeyWorkload``.
///
/// The impls take turns, so that a slow spell of a noisy machine hits them all alike: each round
/// times one insert of every impl, then `--read-reps / --reps` fetches of every impl, each round
/// starting with the next impl. Ratios compare medians of the same run (`rows_per_s_ratio`) and
/// the fastest runs (`rows_per_s_ratio_min`).
struct StoreBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Inserts (I1) and ordered fetches (R1) of 100,000 records: ripple, c, grdb; small updates of rows with "
            + "large blobs (U1) and writes with a large key (K1): ripple, c.")

    /// The workloads, as given to `--workload`.
    enum Workload: String, CaseIterable, ExpressibleByArgument {
        case i1 = "I1", r1 = "R1", u1 = "U1", k1 = "K1"
    }

    @Option(help: "Run only these workloads (I1, R1, U1, K1; I1 and R1 run together).")
    var workload: [Workload] = []

    @Option(help: "U1: rows, each updated once.")
    var u1Rows = 10_000

    @Option(help: "U1: bytes of each row's blob.")
    var u1BlobBytes = 100_000

    @Option(help: "U1: runs as edit/rows-per-transaction, edit being resize (the record grows) or in-place (same size).")
    var u1Run: [String] = ["resize/1", "in-place/1", "in-place/100"]

    @Option(help: "K1: bytes of the large id or value.")
    var k1Bytes = 10_000_000

    @Option(help: "K1: timed writes of each kind.")
    var k1Reps = 3

    @Option(help: "Timed inserts (I1) of each impl.")
    var reps = 7

    @Option(help: "Timed fetches (R1) of each impl (default: 3 × --reps; fetches are cheap).")
    var readReps: Int?

    @Option(help: "Records per workload.")
    var count = 100_000

    @Option(help: "Run only these impls (c, grdb, ripple); ratios need ripple and the peer.")
    var impl: [String] = []

    func validate() throws {
        if reps < 1 { throw ValidationError("--reps must be at least 1") }
        if let readReps, readReps < 1 { throw ValidationError("--read-reps must be at least 1") }
        if count < 1 { throw ValidationError("--count must be at least 1") }
        if u1Rows < 1 || u1BlobBytes < 0 { throw ValidationError("--u1-rows must be positive, --u1-blob-bytes not negative") }
        if u1Runs == nil { throw ValidationError("--u1-run must be resize/N or in-place/N, N a positive number of rows") }
        if k1Bytes < 16 || k1Reps < 1 { throw ValidationError("--k1-bytes must be at least 16, --k1-reps at least 1") }
    }

    private func runs(_ workload: Workload) -> Bool { self.workload.isEmpty || self.workload.contains(workload) }

    private struct Impl {
        var name: String
        var insert: (String) throws -> Void
        var fetch: (String) throws -> [BenchTodo]
    }

    func run() throws {
        #if DEBUG
        Report.note("this is a debug build: time a release build (swift run -c release ...)")
        #endif
        if runs(.i1) || runs(.r1) { try runInsertsAndFetches() }
        if runs(.u1) { try runUpdates() }
        if runs(.k1) { try runBigKeys() }
    }

    private func runInsertsAndFetches() throws {
        let records = Self.records(count: count)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var run = 0
        func freshPath() -> String {
            run += 1
            return directory.appendingPathComponent("db-\(run).sqlite").path
        }
        func remove(_ path: String) {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }

        let impls = [
            Impl(name: "c", insert: { CFloor.insert(records, path: $0) }, fetch: { CFloor.fetchAll(path: $0) }),
            Impl(name: "grdb", insert: { try GRDBPeer.insert(records, path: $0) }, fetch: { try GRDBPeer.fetchAll(path: $0) }),
            Impl(name: "ripple", insert: { try RipplePeer.insert(records, path: $0) }, fetch: { try RipplePeer.fetchAll(path: $0) }),
        ].filter { impl.isEmpty || impl.contains($0.name) }
        let expectedOrder = records.sorted { ($0.rank, $0.id) < ($1.rank, $1.id) }.map(\.rank)

        // Untimed: every impl inserts once (warm-up), writes the file it reads in R1, and reads
        // it once (warm-up and check).
        var failures = 0
        var readPaths: [String] = []
        for impl in impls {
            let warmUp = freshPath()
            try impl.insert(warmUp)
            remove(warmUp)
            let path = freshPath()
            try impl.insert(path)
            readPaths.append(path)
            let fetched = try impl.fetch(path)
            if fetched.count != records.count || fetched.map(\.rank) != expectedOrder
                || Set(fetched.map(\.id)).count != records.count {
                Report.emit([("bench", "store"), ("workload", "R1"), ("impl", .string(impl.name)),
                             ("error", .string("fetched \(fetched.count) records, or not in rank order"))])
                failures += 1
            }
        }

        // Timed, in turns.
        let readReps = readReps ?? 3 * reps
        var inserts = [Timings](repeating: Timings(samples: []), count: impls.count)
        var fetches = inserts
        let clock = ContinuousClock()
        for round in 0..<reps {
            let order = impls.indices.map { (round + $0) % impls.count }
            for index in order {
                let path = freshPath()
                let start = clock.now
                try impls[index].insert(path)
                inserts[index].samples.append(start.duration(to: clock.now).milliseconds)
                remove(path)
            }
            let fetchesThisRound = readReps / reps + (round < readReps % reps ? 1 : 0)
            for _ in 0..<fetchesThisRound {
                for index in order {
                    let start = clock.now
                    let fetched = try impls[index].fetch(readPaths[index])
                    fetches[index].samples.append(start.duration(to: clock.now).milliseconds)
                    blackHole(fetched)
                }
            }
        }

        var results: [String: [String: Timings]] = ["I1": [:], "R1": [:]]
        for (index, impl) in impls.enumerated() {
            for (workload, timings) in [("I1", inserts[index]), ("R1", fetches[index])] {
                results[workload]![impl.name] = timings
                Report.emit([("bench", "store"), ("workload", .string(workload)), ("impl", .string(impl.name)),
                             ("reps", .int(timings.samples.count)), ("median_ms", .number(timings.median)),
                             ("min_ms", .number(timings.min)),
                             ("rows_per_s", .int(Int(Double(records.count) / (timings.median / 1000))))])
            }
        }
        emitRatios(results)
        if failures > 0 { throw ExitCode.failure }
    }

    /// The ratio lines (ripple's rows per second over each peer's) and the targets.
    private func emitRatios(_ results: [String: [String: Timings]]) {
        for workload in ["I1", "R1"] {
            guard let ripple = results[workload]!["ripple"] else { continue }
            var medianRatios: [String: Double] = [:]
            for peer in ["c", "grdb"] {
                guard let other = results[workload]![peer] else { continue }
                // Rows per second are inversely proportional to the time.
                medianRatios[peer] = other.median / ripple.median
                Report.emit([("bench", "store"), ("workload", .string(workload)), ("ratio", .string("ripple/\(peer)")),
                             ("rows_per_s_ratio", .number(other.median / ripple.median)),
                             ("rows_per_s_ratio_min", .number(other.min / ripple.min))])
            }
            func target(_ text: String, _ peer: String, atLeast limit: Double) {
                guard let value = medianRatios[peer] else { return }
                Report.emit([("bench", "store"), ("workload", .string(workload)), ("target", .string(text)),
                             ("value", .number(value)), ("met", .string(value >= limit ? "yes" : "no"))])
            }
            switch workload {
            case "I1":
                target("ripple/c rows_per_s_ratio >= 0.7", "c", atLeast: 0.7)
                target("ripple/grdb rows_per_s_ratio about 2 (>= 1.8)", "grdb", atLeast: 1.8)
            default:
                target("ripple/c rows_per_s_ratio >= 0.7", "c", atLeast: 0.7)
                target("ripple/grdb rows_per_s_ratio >= 1.5", "grdb", atLeast: 1.5)
            }
        }
    }

    private func withDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    /// The U1 runs asked for: (edit, rows per transaction).
    private var u1Runs: [(edit: UpdateWorkload.Edit, batch: Int)]? {
        var runs: [(UpdateWorkload.Edit, Int)] = []
        for text in u1Run {
            let parts = text.split(separator: "/")
            guard parts.count == 2, let edit = UpdateWorkload.Edit(rawValue: String(parts[0])), let batch = Int(parts[1]),
                  batch > 0 else { return nil }
            runs.append((edit, batch))
        }
        return runs
    }

    /// U1 for each run asked: c, then ripple, each on a file of its own (removed after).
    private func runUpdates() throws {
        for (edit, batch) in u1Runs ?? [] {
            var results: [String: UpdateWorkload.Result] = [:]
            for name in ["c", "ripple"] where impl.isEmpty || impl.contains(name) {
                let result = try withDirectory { directory in
                    let path = directory.appendingPathComponent("u1-\(name).sqlite").path
                    return name == "c"
                        ? UpdateWorkload.runC(path: path, rows: u1Rows, blobBytes: u1BlobBytes, edit: edit, batch: batch)
                        : try UpdateWorkload.runRipple(path: path, rows: u1Rows, blobBytes: u1BlobBytes, edit: edit, batch: batch)
                }
                results[name] = result
                var fields: [JSONField] = [("bench", "store"), ("workload", "U1"), ("edit", .string(edit.rawValue)),
                                           ("rows_per_transaction", .int(batch)), ("impl", .string(name)), ("rows", .int(u1Rows)),
                                           ("blob_bytes", .int(u1BlobBytes)),
                                           ("bytes_per_update", .number(Double(result.bytes) / Double(u1Rows))),
                                           ("rows_per_s", .int(Int(Double(u1Rows) / result.seconds)))]
                if let logBytes = result.logBytes {
                    fields.append(("log_bytes_per_update", .number(Double(logBytes) / Double(u1Rows))))
                }
                Report.emit(fields)
            }
            guard let ripple = results["ripple"], let c = results["c"] else { continue }
            let bytesRatio = Double(ripple.bytes) / Double(c.bytes)
            let run: [JSONField] = [("bench", "store"), ("workload", "U1"), ("edit", .string(edit.rawValue)),
                                    ("rows_per_transaction", .int(batch))]
            Report.emit(run + [("ratio", "ripple/c"), ("bytes_per_update_ratio", .number(bytesRatio)),
                               ("rows_per_s_ratio", .number(c.seconds / ripple.seconds))])
            Report.emit(run + [("target", "ripple/c bytes_per_update_ratio <= 2"), ("value", .number(bytesRatio)),
                         ("met", .string(bytesRatio <= 2 ? "yes" : "no"))])
        }
    }

    /// K1: a large id, then a large ordinary value, for c and ripple.
    private func runBigKeys() throws {
        for kind in BigKeyWorkload.Case.allCases {
            var medians: [String: (insert: Double, update: Double)] = [:]
            for name in ["c", "ripple"] where impl.isEmpty || impl.contains(name) {
                let (inserts, updates) = try withDirectory { directory in
                    let path = directory.appendingPathComponent("k1-\(name).sqlite").path
                    return name == "c"
                        ? BigKeyWorkload.runC(path: path, kind: kind, bytes: k1Bytes, reps: k1Reps)
                        : try BigKeyWorkload.runRipple(path: path, kind: kind, bytes: k1Bytes, reps: k1Reps)
                }
                medians[name] = (inserts.median, updates.median)
                for (write, timings) in [("insert", inserts), ("update", updates)] {
                    Report.emit([("bench", "store"), ("workload", "K1"), ("case", .string(kind.rawValue)), ("bytes", .int(k1Bytes)),
                                 ("write", .string(write)), ("impl", .string(name)), ("reps", .int(timings.samples.count)),
                                 ("median_ms", .number(timings.median)), ("min_ms", .number(timings.min))])
                }
            }
            guard let ripple = medians["ripple"], let c = medians["c"] else { continue }
            Report.emit([("bench", "store"), ("workload", "K1"), ("case", .string(kind.rawValue)), ("ratio", "ripple/c"),
                         ("insert_ms_ratio", .number(ripple.insert / c.insert)), ("update_ms_ratio", .number(ripple.update / c.update))])
        }
    }

    /// `count` records from the benchmarks' fixed seed.
    static func records(count: Int) -> [BenchTodo] {
        var random = SeededGenerator(seed: Workloads.seed)
        return (0..<count).map { index in
            BenchTodo(id: UUID(using: &random).uuidString, title: "Todo number \(index)",
                      rank: Int.random(in: 0..<1_000_000, using: &random), done: Bool.random(using: &random))
        }
    }
}

/// Ripple: a typed collection over the same table.
enum RipplePeer {
    static func insert(_ todos: [BenchTodo], path: String) throws {
        let store = try Store(path: path)
        try store.write { db in try db.execute(CFloor.createTable) }
        let collection = try store.collection("todos", of: BenchTodo.self)
        try collection.insert(contentsOf: todos)
    }

    static func fetchAll(path: String) throws -> [BenchTodo] {
        let store = try Store(path: path)
        return try store.collection("todos", of: BenchTodo.self).order(by: Column("rank")).fetchAll()
    }
}
