import ArgumentParser
import Foundation
import RippleDiff

/// `ripple-bench`: Ripple's benchmarks. Results are JSON lines on stdout; notes go to stderr.
@main
struct RippleBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ripple-bench",
        abstract: "Ripple's benchmarks: one JSON object per line on stdout, notes on stderr.",
        subcommands: [DiffBenchmark.self, DiffMemoryProbe.self, StoreBenchmark.self, ObserveBenchmark.self, ObserveChild.self,
                      HistoryBenchmark.self, HistoryMemoryProbe.self, SyncBenchmark.self, SyncScaleChild.self]
    )
}

/// `ripple-bench diff`: times Ripple's diff against the least work any hashing diff does
/// (`floor`) and against the standard library (`stdlib`), checks every Ripple result, and
/// measures W4's peak memory in child processes.
struct DiffBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Time Changeset(from:to:) on workloads W1–W4, with checks and W4's peak memory."
    )

    /// The limit on W4's peak memory above that of generating the workload.
    static let w4MemoryLimitMB = 150.0

    @Option(help: "Run only this workload: W1, W2, W3 or W4.")
    var workload: WorkloadName?

    @Option(help: "Timed repetitions of every impl (defaults: W1 50, W2 10, W3 10, W4 5; stdlib at most W1 5, W2 3).")
    var reps: Int?

    @Option(help: "Timed repetitions of the standard library's diff (defaults: W1 5, W2 3).")
    var stdlibReps: Int?

    func validate() throws {
        if let reps, reps < 1 { throw ValidationError("--reps must be at least 1") }
        if let stdlibReps, stdlibReps < 1 { throw ValidationError("--stdlib-reps must be at least 1") }
    }

    func run() throws {
        #if DEBUG
        Report.note("this is a debug build: time a release build (swift run -c release ...)")
        #endif
        emitMachine()
        let names = workload.map { [$0] } ?? WorkloadName.allCases
        var failures = 0
        for name in names {
            switch name {
            case .w1: failures += bench(Workloads.w1())
            case .w2: failures += bench(Workloads.w2())
            case .w3: failures += bench(Workloads.w3())
            case .w4: failures += bench(Workloads.w4())
            }
        }
        if names.contains(.w4) { failures += measureW4Memory() }
        if failures > 0 {
            Report.note("\(failures) check(s) failed: see the lines with \"error\"")
            throw ExitCode.failure
        }
    }

    /// Prints the machine and build the numbers come from.
    private func emitMachine() {
        let info = ProcessInfo.processInfo
        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif
        Report.emit([("bench", "diff"), ("info", "machine"),
                     ("os", .string(info.operatingSystemVersionString)),
                     ("cores", .int(info.activeProcessorCount)),
                     ("memory_mb", .int(Int(info.physicalMemory >> 20))),
                     ("build", .string(build))])
    }

    /// Times every impl on `workload` and prints their lines and ratios.
    /// Returns how many checks failed (each printed as a line with "error").
    private func bench<Element: BenchElement>(_ workload: Workload<Element>) -> Int {
        let name = workload.name
        let reps = self.reps ?? name.defaultReps
        let (source, target) = (workload.source, workload.target)
        Report.note("\(name.rawValue): \(source.count) → \(target.count) elements, \(reps) reps")
        var failures = 0
        func fail(_ impl: String, _ message: String) {
            Report.emit([("bench", "diff"), ("workload", .string(name.rawValue)),
                         ("impl", .string(impl)), ("error", .string(message))])
            failures += 1
        }
        func emitTimings(_ impl: String, _ timings: Timings, _ counts: [JSONField]) {
            Report.emit([("bench", "diff"), ("workload", .string(name.rawValue)),
                         ("impl", .string(impl)), ("reps", .int(timings.samples.count)),
                         ("min_ms", .number(timings.min)), ("median_ms", .number(timings.median))]
                        + counts)
        }
        func emitRatio(_ ratio: String, _ numerator: Timings, _ denominator: Timings) {
            Report.emit([("bench", "diff"), ("workload", .string(name.rawValue)),
                         ("ratio", .string(ratio)),
                         ("median_ratio", .number(numerator.median / denominator.median))])
        }

        // ripple: the engine, checked against the workload's expectation and by applying it.
        let ripple = measure(reps: reps) { Element.changeset(from: source, to: target) }
        let changeset = ripple.warmUp
        for problem in workload.expected.problems(with: changeset) { fail("ripple", problem) }
        if ripple.last != changeset {
            fail("ripple", "a timed run gave a different changeset than the warm-up run")
        }
        if changeset.apply(to: source, using: target) != target {
            fail("ripple", "apply(to: source, using: target) != target")
        }
        emitTimings("ripple", ripple.timings,
                    [("deletes", .int(changeset.deletes.count)), ("inserts", .int(changeset.inserts.count)),
                     ("updates", .int(changeset.updates.count)), ("moves", .int(changeset.moves.count))])

        // floor: one dictionary insert per old element, one lookup per new element.
        let floor = measure(reps: reps) { floorLookup(source, target) }
        let hits = floor.last.hits
        if floor.last != floor.warmUp || hits != source.count - workload.expected.deletes {
            fail("floor", "\(hits) identities found, expected \(source.count - workload.expected.deletes)")
        }
        emitTimings("floor", floor.timings,
                    [("deletes", .int(source.count - hits)), ("inserts", .int(target.count - hits))])

        // stdlib: Myers' diff with moves inferred, where it finishes in reasonable time.
        var stdlibTimings: Timings?
        if let stdlibReps = stdlibReps(for: name) {
            let stdlib = measure(reps: stdlibReps) { target.difference(from: source).inferringMoves() }
            let counts = StdlibCounts(stdlib.last)
            emitTimings("stdlib", stdlib.timings,
                        [("deletes", .int(counts.removals - counts.moves)),
                         ("inserts", .int(counts.insertions - counts.moves)),
                         ("moves", .int(counts.moves))])
            stdlibTimings = stdlib.timings
        }

        emitRatio("ripple/floor", ripple.timings, floor.timings)
        if let stdlibTimings { emitRatio("ripple/stdlib", ripple.timings, stdlibTimings) }
        return failures
    }

    /// Timed repetitions of `stdlib` on a workload, or `nil` where it is not run.
    private func stdlibReps(for name: WorkloadName) -> Int? {
        guard let standard = name.defaultStdlibReps else { return nil }
        return stdlibReps ?? reps.map { min($0, standard) } ?? standard
    }

    /// Runs `diff-memory` twice in child processes — generating W4 only, then also diffing it —
    /// and prints the peak memory of the diff. Returns how many checks failed.
    private func measureW4Memory() -> Int {
        let fields: [JSONField] = [("bench", "diff"), ("workload", "W4"), ("impl", "ripple")]
        do {
            let baseline = try PeakMemory.runChild(["diff-memory", "--workload", "W4", "--impl", "none"])
            let ripple = try PeakMemory.runChild(["diff-memory", "--workload", "W4", "--impl", "ripple"])
            let peak = Double(ripple.peakRSSKilobytes) / 1024
            let base = Double(baseline.peakRSSKilobytes) / 1024
            Report.emit(fields + [("metric", "peak_rss"), ("peak_rss_mb", .number(peak)),
                                  ("baseline_rss_mb", .number(base)), ("delta_mb", .number(peak - base))])
            if peak - base > Self.w4MemoryLimitMB {
                Report.emit(fields + [("error", .string("peak memory \(Int(peak - base)) MB above the "
                                                        + "baseline, limit \(Int(Self.w4MemoryLimitMB)) MB"))])
                return 1
            }
            return 0
        } catch {
            Report.emit(fields + [("metric", "peak_rss"), ("error", .string("\(error)"))])
            return 1
        }
    }
}

/// `ripple-bench diff-memory` (hidden): generates a workload, diffs it once unless `--impl none`,
/// and prints this process's peak resident set size. Run by `diff` as a child process.
struct DiffMemoryProbe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff-memory",
        abstract: "Print the peak RSS of generating (and diffing) one workload.",
        shouldDisplay: false
    )

    /// What the probe runs after generating the workload.
    enum Impl: String, CaseIterable, ExpressibleByArgument {
        /// Nothing: the baseline.
        case none
        /// Ripple's diff, once.
        case ripple
    }

    @Option(help: "The workload: W1, W2, W3 or W4.")
    var workload: WorkloadName = .w4

    @Option(help: "none (generate only) or ripple (generate, then diff once).")
    var impl: Impl

    func run() throws {
        switch workload {
        case .w1: try probe(Workloads.w1())
        case .w2: try probe(Workloads.w2())
        case .w3: try probe(Workloads.w3())
        case .w4: try probe(Workloads.w4())
        }
    }

    private func probe<Element: BenchElement>(_ workload: Workload<Element>) throws {
        var fields: [JSONField] = [("bench", "diff-memory"), ("workload", .string(workload.name.rawValue)),
                                   ("impl", .string(impl.rawValue))]
        if impl == .ripple {
            let changeset = Element.changeset(from: workload.source, to: workload.target)
            fields.append(("deletes", .int(changeset.deletes.count)))
        }
        guard let peak = PeakMemory.ofThisProcess() else {
            throw PeakMemory.ChildError(description: "no VmHWM in /proc/self/status")
        }
        blackHole(workload)
        Report.emit(fields + [("peak_rss_kb", .int(peak))])
    }
}

/// What `floor` finds: how many new identities are old ones, and a checksum of their old indices.
struct FloorResult: Equatable {
    var hits = 0
    var checksum = 0
}

/// The least work any hashing diff does: a dictionary from every old identity to its index,
/// then one lookup per new identity.
func floorLookup<Element: BenchElement>(_ old: [Element], _ new: [Element]) -> FloorResult {
    var table: [Element.Identity: Int] = [:]
    table.reserveCapacity(old.count)
    for (index, element) in old.enumerated() { table[element.identity] = index }
    var result = FloorResult()
    for element in new {
        if let index = table[element.identity] {
            result.hits += 1
            result.checksum &+= index
        }
    }
    return result
}

/// The sizes of a standard-library difference whose moves were inferred.
struct StdlibCounts {
    var removals = 0
    var insertions = 0
    /// Removals associated with an insertion: moved elements.
    var moves = 0

    init<Element>(_ difference: CollectionDifference<Element>) {
        for change in difference {
            switch change {
            case .remove(_, _, let associatedWith):
                removals += 1
                if associatedWith != nil { moves += 1 }
            case .insert:
                insertions += 1
            }
        }
    }
}
