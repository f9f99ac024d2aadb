import ArgumentParser
import Foundation
import RippleTesting

/// `ripple-bench observe-child` (hidden): one of workload O4's two processes, run by `observe`.
///
/// The writer's standard output is the observer's standard input, and the observer's standard
/// output the writer's standard input: two pipes carrying 8-byte messages (``ObservePipe``).
///
/// 1. The observer opens the file, subscribes to the window (the floor reads it once) and sends
///    ``ObservePipe/ready``.
/// 2. The writer opens the file and makes `writes` retitles of window rows, one at a time: write
///    `n` sets a title ending in `, write n`. After each commit it reads the clock (and, for the
///    floor, sends `n` to wake the observer), then waits for the observer's `n`.
/// 3. The observer reads the clock when it holds the window showing write `n` (Ripple: its
///    handler starts with the changeset; the floor: the window re-read), then sends `n` back.
/// 4. The writer sends ``ObservePipe/end``; each writes its ``ObserveChildReport`` to `--report`.
///
/// Both read `CLOCK_MONOTONIC` (``MonotonicClock``), which is one clock for the whole machine, so
/// the parent subtracts one process's instants from the other's.
struct ObserveChild: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "observe-child",
        abstract: "One process of workload O4: the writer or the observer.",
        shouldDisplay: false)

    enum Role: String, ExpressibleByArgument {
        case writer, observer
    }

    @Argument(help: "writer or observer.")
    var role: Role

    @Option(help: "c or ripple.")
    var impl: ObserveProcessImpl

    @Option(help: "The database file (seeded).")
    var path: String

    @Option(help: "Where to write the report (JSON).")
    var report: String

    @Option(help: "Writes in all, the warm-up included.")
    var writes: Int

    @Option(help: "The first writes, untimed: the observer counts events after them.")
    var warmUp: Int

    @Flag(inversion: .prefixedNo, help: "Run each write call under SCHED_FIFO (writer).")
    var realtimeWriter = true

    @Option(help: "Ripple's observer: time its notice path with a probe (passive or notices; see ObserveNoticeProbe).")
    var probe: ObserveNoticeProbe.Mode?

    /// How long either process waits for the other before giving up.
    static let timeout: TimeInterval = 60

    func run() throws {
        // A peer that died shows as an error from write(2), not as a signal.
        signal(SIGPIPE, SIG_IGN)
        let parentWatch = Self.exitWithParent()
        defer { parentWatch.cancel() }
        let input = ObservePipe(fd: STDIN_FILENO)
        let output = ObservePipe(fd: STDOUT_FILENO)
        let result: ObserveChildReport
        do {
            switch role {
            case .writer:
                result = try write(input: input, output: output)
            case .observer:
                switch impl {
                case .c: result = try ObserveFloor.observe(path: path, writes: writes, warmUp: warmUp, input: input, output: output)
                case .ripple:
                    result = try ObserveRipple.observe(path: path, writes: writes, warmUp: warmUp, probe: probe,
                                                       input: input, output: output)
                }
            }
        } catch {
            // For the parent's error line.
            try? Data("\(error)".utf8).write(to: Self.failureFile(ofReport: report))
            throw error
        }
        try JSONEncoder().encode(result).write(to: URL(fileURLWithPath: report))
    }

    /// Where a child that failed writes why, beside its report.
    static func failureFile(ofReport report: String) -> URL {
        URL(fileURLWithPath: report + ".failure")
    }

    /// The writer's side: waits for the observer, then makes every write, each waiting for its
    /// acknowledgement.
    private func write(input: ObservePipe, output: ObservePipe) throws -> ObserveChildReport {
        guard try input.receive(timeout: Self.timeout) == ObservePipe.ready else {
            throw ObserveFailure("writer: the observer did not get ready")
        }
        let writer: any ObserveChildWriter = switch impl {
        case .c: try ObserveFloor.Writer(path: path)
        case .ripple: try ObserveRipple.Writer(path: path)
        }
        defer { writer.close() }
        // The same writes as every O4 run: the same model, the same seed.
        var model = ObserveModel(rows: ObserveWorkload.o4.rows)
        var random = SeededGenerator(seed: Workloads.seed ^ 0x0B5E)
        let priority = ObserveWriterPriority(realtime: realtimeWriter)
        var report = ObserveChildReport(times: [], called: [], events: 0, scheduling: priority.description)
        for sequence in 1...writes {
            let record = model.nextWrite(.o4, index: sequence, using: &random).record
            let called = MonotonicClock.now()
            let committed = try priority.run {
                try writer.write(record)
                return MonotonicClock.now()
            }
            report.called.append(called)
            report.times.append(committed)
            if writer.wakesObserver { try output.send(Int64(sequence)) }
            let answer: Int64?
            do {
                answer = try input.receive(timeout: Self.timeout)
            } catch {
                throw ObserveFailure("writer: write \(sequence) not acknowledged (\(error))")
            }
            guard let acknowledged = answer else {
                throw ObserveFailure("writer: the observer ended before acknowledging write \(sequence)")
            }
            guard acknowledged == sequence else {
                throw ObserveFailure("writer: write \(sequence) acknowledged as \(acknowledged)")
            }
            model.apply(record)
        }
        try output.send(ObservePipe.end)
        return report
    }

    /// Ends this process, saying why on standard error: for a failure on a thread that cannot
    /// throw to ``run()`` (a handler). The parent sees the status and stops the other process.
    static func fail(_ message: String) -> Never {
        Report.note("observe-child: " + message)
        Self.exit(withError: ExitCode.failure)
    }

    /// Ends this process when its parent is gone (the parent's own timeouts cannot run then):
    /// checked every second.
    private static func exitWithParent() -> any DispatchSourceTimer {
        let parent = getppid()
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        timer.schedule(deadline: .now() + 1, repeating: 1, leeway: .milliseconds(500))
        timer.setEventHandler {
            if getppid() != parent {
                Report.note("observe-child: the parent process is gone, exiting")
                Self.exit(withError: ExitCode.failure)
            }
        }
        timer.resume()
        return timer
    }
}

/// The impls O4 runs (GRDB has no cross-process observation).
enum ObserveProcessImpl: String, ExpressibleByArgument {
    case c, ripple
}

/// O4's writer side for one impl.
protocol ObserveChildWriter {
    /// Commits `record` (by id) in one transaction.
    func write(_ record: ObserveTodo) throws
    /// Whether the observer waits for the writer's message after each commit (the floor), or
    /// hears of the commit on its own (Ripple).
    var wakesObserver: Bool { get }
    func close()
}

/// What one O4 process reports to the parent. Instants are ``MonotonicClock`` nanoseconds;
/// `times[n - 1]` is for write `n`.
struct ObserveChildReport: Codable {
    /// Writer: when each commit returned. Observer: when it held the window showing each write.
    var times: [UInt64]
    /// Writer: when each write call began (empty for the observer).
    var called: [UInt64]
    /// Observer: the events (Ripple) or wake-ups (the floor) after the warm-up.
    var events: Int
    /// Writer: how the write calls were scheduled (`fifo` or `normal`).
    var scheduling: String?
    /// Ripple's observer with a probe: its wakes.
    var wakes: [ObserveNoticeProbe.Wake]?
}

/// `clock_gettime(CLOCK_MONOTONIC)`: on Linux one clock for every process of the machine.
enum MonotonicClock {
    /// Now, in nanoseconds.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

/// One end of a pipe between O4's processes, carrying 8-byte messages: a write's number, or
/// ``ready`` / ``end``.
struct ObservePipe {
    /// Observer to writer: subscribed, the writes may start.
    static let ready: Int64 = 0
    /// Writer to observer: no more writes.
    static let end: Int64 = 0

    let fd: Int32

    func send(_ message: Int64) throws {
        var message = message
        // Up to PIPE_BUF bytes go in one piece.
        guard write(fd, &message, 8) == 8 else {
            throw ObserveFailure("pipe: write failed (\(String(cString: strerror(errno))))")
        }
    }

    /// The next message, waiting at most `timeout` seconds (`nil`: as long as it takes);
    /// `nil` when the other end was closed.
    func receive(timeout: TimeInterval?) throws -> Int64? {
        var message: Int64 = 0
        var received = 0
        while received < 8 {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, timeout.map { Int32($0 * 1000) } ?? -1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else {
                throw ObserveFailure("pipe: nothing received within \(Int(timeout ?? 0)) s")
            }
            let count = withUnsafeMutableBytes(of: &message) { bytes in
                read(fd, bytes.baseAddress! + received, 8 - received)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                if count == 0 && received == 0 { return nil }
                throw ObserveFailure("pipe: read failed (\(count == 0 ? "end of file" : String(cString: strerror(errno))))")
            }
            received += count
        }
        return message
    }
}
