import Foundation

/// Workload O4 for one impl: runs its writer and its observer as child processes of this
/// executable (``ObserveChild``), the two wired to each other by their standard input and
/// output, and turns their reports into latencies.
///
/// Each child bounds its own waits for the other (``ObserveChild/timeout``) and exits when this
/// process is gone; when one fails, the other is killed at once, and whichever is still running
/// when this run ends (an error included) is killed too.
struct ObserveProcesses {
    var impl: ObserveProcessImpl
    /// The seeded file.
    var path: String
    /// Timed writes, after ``ObserveBenchmark/warmUpWrites`` untimed ones.
    var writes: Int
    var realtimeWriter: Bool
    /// Where the children write their reports.
    var directory: URL
    /// Ripple's observer: time its notice path (``ObserveNoticeProbe``).
    var probe: ObserveNoticeProbe.Mode?

    /// The untimed writes before the timed ones.
    private var warmUp: Int { ObserveBenchmark.warmUpWrites }

    func run() throws -> ObserveResult {
        let (writer, observer) = try runChildren()
        return latencies(writer: writer, observer: observer)
    }

    /// Runs the two processes; returns their reports.
    private func runChildren() throws -> (writer: ObserveChildReport, observer: ObserveChildReport) {
        let reports = (writer: directory.appendingPathComponent("O4-\(impl.rawValue)-writer.json"),
                       observer: directory.appendingPathComponent("O4-\(impl.rawValue)-observer.json"))
        let toObserver = Pipe()
        let toWriter = Pipe()
        let observer = child(.observer, report: reports.observer, input: toObserver, output: toWriter)
        let writer = child(.writer, report: reports.writer, input: toWriter, output: toObserver)
        let children = [(ObserveChild.Role.observer, observer), (.writer, writer)]
        // The roles in the order the processes ended.
        let endings = ObserveLocked<[ObserveChild.Role]>([])
        let ended = DispatchSemaphore(value: 0)
        for (role, process) in children {
            process.terminationHandler = { _ in
                endings.withLock { $0.append(role) }
                ended.signal()
            }
        }
        func killRunning() {
            for (_, process) in children where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        defer { killRunning() }
        try observer.run()
        try writer.run()
        // Only the children may hold the pipes: one's exit is then the other's end of file.
        for handle in [toObserver.fileHandleForReading, toObserver.fileHandleForWriting,
                       toWriter.fileHandleForReading, toWriter.fileHandleForWriting] {
            try? handle.close()
        }

        ended.wait()
        if children.contains(where: { !$0.1.isRunning && !Self.succeeded($0.1) }) { killRunning() }
        guard ended.wait(timeout: .now() + ObserveChild.timeout) == .success else {
            throw ObserveFailure("O4 \(impl.rawValue): a child process did not end within \(Int(ObserveChild.timeout)) s of the other")
        }
        // The first to fail is the cause (the other may have been killed for it).
        for role in endings.get() {
            let process = role == .writer ? writer : observer
            guard !Self.succeeded(process) else { continue }
            let report = role == .writer ? reports.writer : reports.observer
            let reason = (try? String(contentsOf: ObserveChild.failureFile(ofReport: report.path), encoding: .utf8))
                ?? (process.terminationReason == .exit ? "status \(process.terminationStatus)" : "signal \(process.terminationStatus)")
            throw ObserveFailure("O4 \(impl.rawValue): the \(role.rawValue) process failed: \(reason)")
        }
        let decoder = JSONDecoder()
        let reported = try (writer: decoder.decode(ObserveChildReport.self, from: Data(contentsOf: reports.writer)),
                            observer: decoder.decode(ObserveChildReport.self, from: Data(contentsOf: reports.observer)))
        let count = warmUp + writes
        guard reported.writer.times.count == count, reported.writer.called.count == count,
              reported.observer.times.count == count else {
            throw ObserveFailure("O4 \(impl.rawValue): the reports hold \(reported.writer.times.count) and "
                                 + "\(reported.observer.times.count) writes, expected \(count)")
        }
        return reported
    }

    /// A child process of this executable running `observe-child role`.
    private func child(_ role: ObserveChild.Role, report: URL, input: Pipe, output: Pipe) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
        process.arguments = ["observe-child", role.rawValue, "--impl", impl.rawValue, "--path", path,
                             "--report", report.path, "--writes", String(warmUp + writes), "--warm-up", String(warmUp)]
            + (realtimeWriter ? [] : ["--no-realtime-writer"])
            + (role == .observer ? probe.map { ["--probe", $0.rawValue] } ?? [] : [])
        process.standardInput = input
        process.standardOutput = output
        return process
    }

    private static func succeeded(_ process: Process) -> Bool {
        process.terminationReason == .exit && process.terminationStatus == 0
    }

    /// The timed writes' latencies: the observer's instant minus the writer's, write by write.
    private func latencies(writer: ObserveChildReport, observer: ObserveChildReport) -> ObserveResult {
        let count = warmUp + writes
        var result = ObserveResult()
        for index in warmUp..<count {
            let (committed, seen) = (writer.times[index], observer.times[index])
            guard seen > 0 else {
                result.problems.append("write \(index + 1): the observer never saw it")
                continue
            }
            let latency = Double(Int64(bitPattern: seen &- committed)) / 1_000
            if latency < 0 { result.early += 1 }
            result.latencies.append(max(latency, 0))
            result.kinds.append("title")
            result.writeDurations.append(Double(committed - writer.called[index]) / 1_000)
        }
        // From the first timed write call to the observer holding the last write.
        let elapsed = Double(Int64(bitPattern: observer.times[count - 1] &- writer.called[warmUp])) / 1e9
        result.writesPerSecond = Double(result.latencies.count) / elapsed
        result.values = observer.events
        result.writer = writer.scheduling ?? "normal"
        return result
    }
}

// MARK: - Breakdown

extension ObserveProcesses {
    /// `observe --breakdown --workload O4`: where Ripple's cross-process latency goes. Runs O4's
    /// Ripple processes with each ``ObserveNoticeProbe`` mode and prints, per piece, the p50 and
    /// p99 over the timed writes, in microseconds from the start of the write call:
    ///
    /// * `commit_returned`: the write call returned (the benchmark's latencies start here);
    /// * `first_wake`: a thread waiting on inotify woke (the first WAL write of the commit);
    /// * `handler`: the handler started with the changeset;
    /// * passive (the store's own watch): `wake_to_handler`, from the probe's first wake;
    /// * notices (the probe tells the store): `first_visible_wake`, the first wake with the
    ///   commit visible; `notice_call`, the `noticeExternalWrites()` call that found it (when it
    ///   was visible before the call began and did not become visible during it: certainly that
    ///   call); `notice_to_handler`, from its return to the handler (the refresh and two queue
    ///   hops); `empty_notice_call`, the calls that had nothing to find (no commit became
    ///   visible since the previous call, nor during this one).
    ///
    /// And per mode, the wakes per write; in notices mode, how many writes' first wake came
    /// before the commit was visible, and how many commits became visible during a call (left
    /// out of `notice_call` and `notice_to_handler`).
    static func breakdown(writes: Int, realtimeWriter: Bool, in directory: URL) throws {
        let seeded = directory.appendingPathComponent("O4-breakdown-seed.sqlite").path
        ObserveFloor.seed(path: seeded, rows: ObserveWorkload.o4.rows)
        for mode in [ObserveNoticeProbe.Mode.passive, .notices] {
            let path = directory.appendingPathComponent("O4-breakdown-\(mode.rawValue).sqlite").path
            try FileManager.default.copyItem(atPath: seeded, toPath: path)
            Report.note("O4 breakdown: ripple, probe \(mode.rawValue), \(writes) writes")
            let run = ObserveProcesses(impl: .ripple, path: path, writes: writes, realtimeWriter: realtimeWriter,
                                       directory: directory, probe: mode)
            let (writer, observer) = try run.runChildren()
            run.emitBreakdown(mode, writer: writer, observer: observer)
            for file in [path, path + "-wal", path + "-shm"] { try? FileManager.default.removeItem(atPath: file) }
        }
    }

    private func emitBreakdown(_ mode: ObserveNoticeProbe.Mode, writer: ObserveChildReport, observer: ObserveChildReport) {
        let wakes = observer.wakes ?? []
        var pieces: [(name: String, samples: [Double])] = [
            ("commit_returned", []), ("first_wake", []), ("handler", []),
        ] + (mode == .passive ? [("wake_to_handler", [])]
             : [("first_visible_wake", []), ("notice_call", []), ("notice_to_handler", []), ("empty_notice_call", [])])
        func add(_ name: String, _ from: UInt64, _ to: UInt64) {
            pieces[pieces.firstIndex { $0.name == name }!].samples.append(Double(Int64(bitPattern: to &- from)) / 1_000)
        }
        var wakeCount = 0
        var earlyFirstWakes = 0
        var visibleDuringCall = 0
        var next = wakes.startIndex
        // The probe connection's data version after the previous call.
        var known = wakes.first?.versionBefore
        for index in 0..<(warmUp + writes) {
            // The wakes of a write: from its call to the next write's (acknowledged after this one's handler).
            let start = writer.called[index]
            let end = index + 1 < writer.called.count ? writer.called[index + 1] : UInt64.max
            while next < wakes.endIndex && wakes[next].woke < start { next += 1 }
            var own: [ObserveNoticeProbe.Wake] = []
            while next < wakes.endIndex && wakes[next].woke < end {
                own.append(wakes[next])
                next += 1
            }
            guard index >= warmUp else { continue }
            let handler = observer.times[index]
            add("commit_returned", start, writer.times[index])
            add("handler", start, handler)
            wakeCount += own.count
            guard let first = own.first else { continue }
            add("first_wake", start, first.woke)
            switch mode {
            case .passive:
                add("wake_to_handler", first.woke, handler)
            case .notices:
                if first.versionBefore == known { earlyFirstWakes += 1 }
                var visible = false
                for wake in own {
                    guard let before = wake.versionBefore, let after = wake.versionAfter, let returned = wake.returned else { continue }
                    defer { known = after }
                    if before != after {
                        if !visible { visibleDuringCall += 1 }
                        visible = true
                    } else if before == known {
                        add("empty_notice_call", wake.woke, returned)
                    } else if !visible {
                        visible = true
                        add("first_visible_wake", start, wake.woke)
                        add("notice_call", wake.woke, returned)
                        add("notice_to_handler", returned, handler)
                    }
                }
            }
        }
        let fields: [JSONField] = [("bench", "observe"), ("workload", "O4"), ("impl", "ripple"), ("probe", .string(mode.rawValue))]
        for (name, samples) in pieces {
            var result = ObserveResult()
            result.latencies = samples
            Report.emit(fields + [("breakdown", .string(name)), ("samples", .int(samples.count)),
                                  ("p50_us", .number(result.percentile(0.5))), ("p99_us", .number(result.percentile(0.99)))])
        }
        Report.emit(fields + [("wakes_per_write", .number(Double(wakeCount) / Double(writes)))]
                    + (mode == .notices ? [("first_wake_before_commit_visible", .int(earlyFirstWakes)),
                                           ("visible_during_call", .int(visibleDuringCall))] : [])
                    + [("writes", .int(writes)), ("writer", .string(writer.scheduling ?? "normal"))])
    }
}
