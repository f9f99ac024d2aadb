import ArgumentParser
import Foundation
import Ripple
import RippleTesting

/// `ripple-bench store`: the store's write and read throughput against the same loops on the C
/// API (the physical floor) and GRDB with `Codable` records (the peer), on one schema:
/// `todos(id TEXT PRIMARY KEY, title TEXT, rank INTEGER, done INTEGER)`, WAL, synchronous=NORMAL.
///
/// * I1: insert 100,000 records in one transaction (opening the file and creating the table included);
/// * R1: fetch all 100,000 ordered by `rank`, decoded into the struct.
struct StoreBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Time inserts (I1) and ordered fetches (R1) of 100,000 records: ripple, c, grdb.")

    @Option(help: "Timed repetitions of each impl.")
    var reps = 5

    @Option(help: "Records per workload.")
    var count = 100_000

    @Option(help: "Run only these impls (c, grdb, ripple); ratios need ripple and the peer.")
    var impl: [String] = []

    func run() throws {
        let records = Self.records(count: count)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var run = 0
        func freshPath() -> String {
            run += 1
            return directory.appendingPathComponent("db-\(run).sqlite").path
        }

        typealias Impl = (name: String, insert: (String) throws -> Void, fetch: (String) throws -> [BenchTodo])
        let impls: [Impl] = [
            ("c", { CFloor.insert(records, path: $0) }, { CFloor.fetchAll(path: $0) }),
            ("grdb", { try GRDBPeer.insert(records, path: $0) }, { try GRDBPeer.fetchAll(path: $0) }),
            ("ripple", { try RipplePeer.insert(records, path: $0) }, { try RipplePeer.fetchAll(path: $0) }),
        ]
        let selected = impls.filter { impl.isEmpty || impl.contains($0.name) }
        let expectedOrder = records.sorted { ($0.rank, $0.id) < ($1.rank, $1.id) }.map(\.rank)
        var failures = 0
        var medians: [String: [String: Double]] = ["I1": [:], "R1": [:]]
        for impl in selected {
            // I1: every repetition writes a new file.
            let insert = try measureThrowing(reps: reps) { try impl.insert(freshPath()) }
            // R1: read the file the impl itself wrote.
            let path = freshPath()
            try impl.insert(path)
            let fetch = try measureThrowing(reps: reps) { try impl.fetch(path) }
            if fetch.last.count != records.count || fetch.last.map(\.rank) != expectedOrder
                || Set(fetch.last.map(\.id)).count != records.count {
                Report.emit([("bench", "store"), ("workload", "R1"), ("impl", .string(impl.name)),
                             ("error", .string("fetched \(fetch.last.count) records, or not in rank order"))])
                failures += 1
            }
            for (workload, timings) in [("I1", insert.timings), ("R1", fetch.timings)] {
                let rowsPerSecond = Double(records.count) / (timings.median / 1000)
                medians[workload]![impl.name] = rowsPerSecond
                Report.emit([("bench", "store"), ("workload", .string(workload)), ("impl", .string(impl.name)),
                             ("reps", .int(reps)), ("median_ms", .number(timings.median)), ("min_ms", .number(timings.min)),
                             ("rows_per_s", .int(Int(rowsPerSecond)))])
            }
        }
        for workload in ["I1", "R1"] {
            guard let ripple = medians[workload]!["ripple"] else { continue }
            for peer in ["c", "grdb"] where medians[workload]![peer] != nil {
                Report.emit([("bench", "store"), ("workload", .string(workload)), ("ratio", .string("ripple/\(peer)")),
                             ("rows_per_s_ratio", .number(ripple / medians[workload]![peer]!))])
            }
        }
        if failures > 0 { throw ExitCode.failure }
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

/// Runs `body` once untimed, then `reps` times timed (see ``measure(reps:_:)``), rethrowing errors.
func measureThrowing<Result>(reps: Int, _ body: () throws -> Result) throws -> Measurement<Result> {
    var failure: Error?
    let measurement = measure(reps: reps) { () -> Result? in
        do { return try body() } catch { failure = error; return nil }
    }
    if let failure { throw failure }
    return Measurement(warmUp: measurement.warmUp!, last: measurement.last!, timings: measurement.timings)
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
