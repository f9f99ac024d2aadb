import ArgumentParser
import BenchSQLite
import Foundation
import Ripple
import RippleTesting

/// `ripple-bench history`: time travel over many versions, against the floor of knowing every
/// version in advance.
///
/// H1: a collection of 20,000 rows, then 1,000 single-row updates (each its own version; about
/// a third of them move a row to the front of the order, so the window changes often); the
/// history of `filter(group < 5).order(by: score).limit(100)` over those 1,000 versions.
///
/// * `ripple`: `store.history(of:from:to:_:)`, streaming, each step dropped once seen;
/// * `floor`: the C API on an in-memory copy of the table as of the first version, which
///   replays the same 1,000 updates and runs the same query (Ripple's own SQL) after each,
///   reading every column of every row — a re-query per version with nothing to rebuild.
///
/// Both are checked to give the same results. Peak memory is each impl's peak resident set size
/// (`VmHWM`) in a child process of its own, minus that of a child that does everything but the
/// impl's work (`baseline`: opens the store, generates the workload); `snapshot` is a child that
/// reads the table's 20,000 records once — one snapshot of the table, the yardstick of the
/// issue's target.
struct HistoryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Time and measure the history of a window over 1,000 versions (H1): ripple, floor."
    )

    @Option(help: "Timed runs of each impl.")
    var reps = 3

    @Option(help: "Rows in the collection.")
    var rows = HistoryWorkload.defaultRows

    @Option(help: "Single-row updates, one version each.")
    var versions = HistoryWorkload.defaultVersions

    func validate() throws {
        if reps < 1 { throw ValidationError("--reps must be at least 1") }
        if rows < 1 || versions < 1 { throw ValidationError("--rows and --versions must be at least 1") }
    }

    func run() throws {
        #if DEBUG
        Report.note("this is a debug build: time a release build (swift run -c release ...)")
        #endif
        let workload = HistoryWorkload(rows: rows, versions: versions)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("history.sqlite").path
        Report.note("H1: writing \(rows) rows and \(versions) updates")
        let range = try workload.write(to: path)
        let fields: [JSONField] = [("bench", "history"), ("workload", "H1"), ("rows", .int(rows)),
                                   ("versions", .int(versions)), ("window", .int(HistoryWorkload.window))]

        // Untimed: both impls once, and their steps compared.
        let store = try Store(path: path)
        let items = try store.collection("items", of: HistoryItem.self)
        let compiled = try HistoryWorkload.query(items).compiled()
        let createSQL = try HistoryWorkload.createSQL(store)
        let rippleSteps = try HistoryWorkload.rippleSteps(store, items, range)
        let floorSteps = workload.floor(createSQL: createSQL, query: compiled, from: range.from, check: true)
        var failures = 0
        if rippleSteps.map(\.version) != floorSteps.map(\.version) || rippleSteps.map(\.snapshot) != floorSteps.map(\.snapshot) {
            Report.emit(fields + [("error", .string("ripple's \(rippleSteps.count) steps differ from the floor's \(floorSteps.count)"))])
            failures += 1
        }
        Report.note("H1: \(rippleSteps.count) steps (the window changed at \(rippleSteps.count - 1) of \(versions) versions)")

        // Timed, in turns.
        var timings = [Timings(samples: []), Timings(samples: [])]
        let clock = ContinuousClock()
        for round in 0..<reps {
            for impl in round % 2 == 0 ? [0, 1] : [1, 0] {
                let start = clock.now
                if impl == 0 {
                    try store.history(of: HistoryWorkload.query(items), from: range.from, to: range.to) { blackHole($0) }
                } else {
                    blackHole(workload.floor(createSQL: createSQL, query: compiled, from: range.from, check: false))
                }
                timings[impl].samples.append(start.duration(to: clock.now).milliseconds)
            }
        }
        for (impl, timing, steps) in [("ripple", timings[0], rippleSteps.count), ("floor", timings[1], floorSteps.count)] {
            Report.emit(fields + [("impl", .string(impl)), ("reps", .int(timing.samples.count)),
                                  ("median_ms", .number(timing.median)), ("min_ms", .number(timing.min)),
                                  ("steps", .int(steps))])
        }
        let timeRatio = timings[0].median / timings[1].median
        Report.emit(fields + [("ratio", "ripple/floor"), ("median_ratio", .number(timeRatio)),
                              ("min_ratio", .number(timings[0].min / timings[1].min))])

        // Peak memory, each in a child process of its own.
        var peaks: [String: Double] = [:]
        for impl in HistoryMemoryProbe.Impl.allCases {
            let child = try PeakMemory.runChild(["history-memory", "--impl", impl.rawValue, "--path", path,
                                                 "--rows", String(rows), "--versions", String(versions)])
            peaks[impl.rawValue] = Double(child.peakRSSKilobytes) / 1024
        }
        let baseline = peaks["baseline"]!
        for impl in ["snapshot", "ripple", "floor"] {
            Report.emit(fields + [("impl", .string(impl)), ("metric", "peak_rss"), ("peak_rss_mb", .number(peaks[impl]!)),
                                  ("baseline_rss_mb", .number(baseline)), ("delta_mb", .number(peaks[impl]! - baseline))])
        }
        let snapshotDelta = peaks["snapshot"]! - baseline
        let rippleDelta = peaks["ripple"]! - baseline
        let memoryRatio = rippleDelta / snapshotDelta
        Report.emit(fields + [("ratio", "ripple/snapshot"), ("delta_ratio", .number(memoryRatio))])
        Report.emit(fields + [("ratio", "ripple/floor"), ("metric", "peak_rss"),
                              ("delta_ratio", .number(rippleDelta / (peaks["floor"]! - baseline)))])
        Report.emit(fields + [("target", "ripple/floor median_ratio <= 0.5"), ("value", .number(timeRatio)),
                              ("met", .string(timeRatio <= 0.5 ? "yes" : "no"))])
        Report.emit(fields + [("target", "ripple/snapshot delta_ratio <= 3"), ("value", .number(memoryRatio)),
                              ("met", .string(memoryRatio <= 3 ? "yes" : "no"))])
        if failures > 0 { throw ExitCode.failure }
    }
}

/// `ripple-bench history-memory` (hidden): does one impl's part of H1 on the store `history`
/// wrote, and prints this process's peak resident set size. Run by `history` as a child process.
struct HistoryMemoryProbe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history-memory",
        abstract: "Print the peak RSS of one impl of H1.",
        shouldDisplay: false
    )

    enum Impl: String, CaseIterable, ExpressibleByArgument {
        /// Open the store and generate the workload: what every other impl does first.
        case baseline
        /// Read the table's records once.
        case snapshot
        /// Ripple's streaming history.
        case ripple
        /// The C floor.
        case floor
    }

    @Option var impl: Impl
    @Option var path: String
    @Option var rows = HistoryWorkload.defaultRows
    @Option var versions = HistoryWorkload.defaultVersions

    func run() throws {
        let workload = HistoryWorkload(rows: rows, versions: versions)
        let store = try Store(path: path)
        let items = try store.collection("items", of: HistoryItem.self)
        let to = try store.currentVersion()
        let range = (from: to - Int64(versions), to: to)
        var fields: [JSONField] = [("bench", "history-memory"), ("impl", .string(impl.rawValue))]
        switch impl {
        case .baseline:
            blackHole(workload)
        case .snapshot:
            let all = try items.order(by: Column("id")).fetchAll()
            fields.append(("records", .int(all.count)))
            blackHole(all)
        case .ripple:
            var steps = 0
            try store.history(of: HistoryWorkload.query(items), from: range.from, to: range.to) { step in
                steps += 1
                blackHole(step)
            }
            fields.append(("steps", .int(steps)))
        case .floor:
            let steps = workload.floor(createSQL: try HistoryWorkload.createSQL(store), query: try HistoryWorkload.query(items).compiled(),
                                       from: range.from, check: false)
            fields.append(("steps", .int(steps.count)))
        }
        guard let peak = PeakMemory.ofThisProcess() else {
            throw PeakMemory.ChildError(description: "no VmHWM in /proc/self/status")
        }
        blackHole(workload)
        Report.emit(fields + [("peak_rss_kb", .int(peak))])
    }
}

/// H1's record.
struct HistoryItem: Codable, Sendable, Identifiable, Equatable {
    var id: Int
    var group: Int
    var score: Double
    var title: String
    var note: String
}

/// H1's data, generated from the benchmarks' seed: the rows, and the updates that follow.
struct HistoryWorkload {
    static let defaultRows = 20_000
    static let defaultVersions = 1_000
    /// The window's size.
    static let window = 100

    let rows: [HistoryItem]
    /// Each update: a whole record (same id, new group or score).
    let updates: [HistoryItem]

    init(rows count: Int, versions: Int) {
        var random = SeededGenerator(seed: Workloads.seed ^ 0x4849)
        let letters = Array("abcdefghijklmnopqrstuvwxyz ")
        var rows = (0..<count).map { id in
            HistoryItem(id: id, group: Int.random(in: 0..<10, using: &random), score: Double.random(in: 0..<1, using: &random),
                        title: "Item number \(id)",
                        note: String((0..<40).map { _ in letters.randomElement(using: &random)! }))
        }
        self.rows = rows
        updates = (0..<versions).map { _ in
            var row = rows[Int.random(in: 0..<count, using: &random)]
            // A third go to the front of the order, where the window is.
            row.score = Double.random(in: 0..<(Int.random(in: 0..<3, using: &random) == 0 ? 0.015 : 1), using: &random)
            if Int.random(in: 0..<10, using: &random) == 0 { row.group = Int.random(in: 0..<10, using: &random) }
            rows[row.id] = row
            return row
        }
    }

    /// The query whose history is read.
    static func query(_ items: RecordCollection<HistoryItem>) -> RecordQuery<HistoryItem> {
        items.filter(Column("group") < 5).order(by: Column("score")).limit(window)
    }

    /// Writes the rows (one version), then each update (one version each); returns the versions
    /// before and after the updates.
    func write(to path: String) throws -> (from: Int64, to: Int64) {
        let store = try Store(path: path)
        let items = try store.collection("items", of: HistoryItem.self)
        try items.insert(contentsOf: rows)
        let from = try store.currentVersion()
        for update in updates { try items.update(update) }
        return (from, try store.currentVersion())
    }

    /// Ripple's steps, collected.
    static func rippleSteps(_ store: Store, _ items: RecordCollection<HistoryItem>,
                            _ range: (from: Int64, to: Int64)) throws -> [(version: Int64, snapshot: [HistoryItem])] {
        var steps: [(version: Int64, snapshot: [HistoryItem])] = []
        try store.history(of: query(items), from: range.from, to: range.to) { steps.append(($0.version, $0.snapshot)) }
        return steps
    }

    /// The statement that created the collection's table in the store.
    static func createSQL(_ store: Store) throws -> String {
        try store.read { db in
            try db.fetchValue("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'items'", as: String.self) ?? ""
        }
    }

    /// The floor: an in-memory copy of the table (made with the store's own `CREATE TABLE`) as of
    /// version `from`, each update replayed, the query run after each. The copy is made in the
    /// timed part, as Ripple makes its own. With `check`, returns the steps (each version whose
    /// result changed, as history gives them); without, one checksum per version and no records.
    func floor(createSQL: String, query compiled: CompiledQuery, from: Int64,
               check: Bool) -> [(version: Int64, snapshot: [HistoryItem])] {
        var db: OpaquePointer?
        precondition(sqlite3_open(":memory:", &db) == SQLITE_OK)
        defer { sqlite3_close(db) }
        CFloor.exec(db!, createSQL)
        var insert: OpaquePointer?
        sqlite3_prepare_v2(db, "INSERT INTO items VALUES (?, ?, ?, ?, ?)", -1, &insert, nil)
        CFloor.exec(db!, "BEGIN")
        for row in rows {
            Self.bind(row, to: insert)
            precondition(sqlite3_step(insert) == SQLITE_DONE)
            sqlite3_reset(insert)
        }
        CFloor.exec(db!, "COMMIT")
        sqlite3_finalize(insert)
        var update: OpaquePointer?
        sqlite3_prepare_v2(db, "UPDATE items SET \"group\" = ?2, score = ?3, title = ?4, note = ?5 WHERE id = ?1", -1, &update, nil)
        defer { sqlite3_finalize(update) }
        var select: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, compiled.sql, -1, &select, nil) == SQLITE_OK, "the floor cannot prepare the query")
        defer { sqlite3_finalize(select) }
        for (index, argument) in compiled.arguments.enumerated() {
            switch argument {
            case .integer(let value): sqlite3_bind_int64(select, Int32(index + 1), value)
            case .real(let value): sqlite3_bind_double(select, Int32(index + 1), value)
            default: preconditionFailure("H1's query binds numbers only")
            }
        }
        var steps: [(version: Int64, snapshot: [HistoryItem])] = []
        func query(_ version: Int64) {
            var result: [HistoryItem] = []
            var checksum = 0
            while sqlite3_step(select) == SQLITE_ROW {
                let id = sqlite3_column_int64(select, 0), group = sqlite3_column_int64(select, 1)
                let score = sqlite3_column_double(select, 2)
                let title = sqlite3_column_text(select, 3), titleBytes = sqlite3_column_bytes(select, 3)
                let note = sqlite3_column_text(select, 4), noteBytes = sqlite3_column_bytes(select, 4)
                if check {
                    func text(_ pointer: UnsafePointer<UInt8>?, _ count: Int32) -> String {
                        String(decoding: UnsafeBufferPointer(start: pointer, count: Int(count)), as: UTF8.self)
                    }
                    result.append(HistoryItem(id: Int(id), group: Int(group), score: score, title: text(title, titleBytes),
                                              note: text(note, noteBytes)))
                } else {
                    checksum &+= Int(id) &+ Int(group) &+ Int(score.bitPattern & 0xFF) &+ Int(titleBytes) &+ Int(noteBytes)
                        &+ Int(title?.pointee ?? 0) &+ Int(note?.pointee ?? 0)
                }
            }
            sqlite3_reset(select)
            if !check {
                steps.append((Int64(checksum), []))
            } else if steps.last?.snapshot != result {
                steps.append((version, result))
            }
        }
        query(from)
        for (index, row) in updates.enumerated() {
            Self.bind(row, to: update)
            precondition(sqlite3_step(update) == SQLITE_DONE)
            sqlite3_reset(update)
            query(from + Int64(index + 1))
        }
        return steps
    }

    private static func bind(_ row: HistoryItem, to statement: OpaquePointer?) {
        sqlite3_bind_int64(statement, 1, Int64(row.id))
        sqlite3_bind_int64(statement, 2, Int64(row.group))
        sqlite3_bind_double(statement, 3, row.score)
        _ = row.title.withCString { sqlite3_bind_text(statement, 4, $0, -1, CFloor.transient) }
        _ = row.note.withCString { sqlite3_bind_text(statement, 5, $0, -1, CFloor.transient) }
    }
}
