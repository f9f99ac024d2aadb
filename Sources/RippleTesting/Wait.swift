import Foundation
import Ripple

/// The tests' one way to wait: every wait has a deadline and names what it waits for, so that a
/// wait that never ends fails its own test, saying what never came, instead of holding up the
/// whole run.
///
/// The deadline is a safety net, not a measurement: a machine under load may take seconds for
/// what takes a millisecond when idle, so it is long (``limit``), and tests wait for events (a
/// condition, a signal, an outcome, a process's exit), never for time to pass.
///
/// ```swift
/// try await Wait.until("the second caller to wait") { gate.waiting == 1 }
/// let admitted = try await Wait.value("the cancelled caller's answer") { await second.value }
/// try Wait.for(entered, "the reader to enter its transaction")
/// let errors = try Wait.run(shell, "the sqlite3 shell") { read(pipe) }
/// ```
package enum Wait {
    /// The deadline of a wait that does not name its own: two minutes.
    package static let limit: Duration = .seconds(120)

    /// A wait whose deadline passed first.
    package struct TimedOut: Error, CustomStringConvertible {
        /// What the wait was for.
        package let what: String
        /// How long it waited.
        package let limit: Duration

        /// A wait for `what` that gave up after `limit` (for a test's own loop that bounds itself).
        package init(what: String, limit: Duration) {
            (self.what, self.limit) = (what, limit)
        }

        package var description: String { "gave up waiting for \(what) after \(limit)" }
    }

    // MARK: From a task

    /// Returns once `condition` holds, checking it at once and then at growing intervals (up to
    /// `pause`: a costly check, such as a query run by another process, takes a longer one);
    /// throws ``TimedOut`` when it still does not hold after `limit`, and `CancellationError`
    /// when the task is cancelled.
    package static func until(_ what: String, within limit: Duration = limit, pausingAtMost pause: Duration = .milliseconds(50),
                              _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        var next = Duration.milliseconds(1)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut(what: what, limit: limit) }
            try await Task.sleep(for: next)
            next = min(next * 2, pause)
        }
    }

    /// The result of `operation` (run in a task of its own), or ``TimedOut`` when it has not
    /// finished after `limit`. An operation that ignores cancellation (a continuation never
    /// resumed, a stream never finished) is left behind instead of waited for: the test goes on.
    package static func value<T: Sendable>(_ what: String, within limit: Duration = limit,
                                          _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let outcome = FirstOutcome<Result<T, any Error>>()
        let work = Task {
            do { outcome.finish(.success(try await operation())) } catch { outcome.finish(.failure(error)) }
        }
        let timer = Task {
            do { try await Task.sleep(for: limit) } catch { return }
            outcome.finish(.failure(TimedOut(what: what, limit: limit)))
            work.cancel()
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await outcome.value.get()
        } onCancel: {
            outcome.finish(.failure(CancellationError()))
            work.cancel()
        }
    }

    /// The next element of `stream` (`nil` once it finished), or ``TimedOut`` after `limit`
    /// (which ends the stream).
    package static func next<T: Sendable>(_ stream: AsyncStream<T>, _ what: String,
                                         within limit: Duration = limit) async throws -> T? {
        try await value(what, within: limit) { await stream.first { _ in true } }
    }

    // MARK: From a thread

    /// Returns once `semaphore` is signalled; throws ``TimedOut`` after `limit`.
    package static func `for`(_ semaphore: DispatchSemaphore, _ what: String, within limit: Duration = limit) throws {
        guard semaphore.wait(timeout: .now() + limit.timeInterval) == .success else {
            throw TimedOut(what: what, limit: limit)
        }
    }

    /// Returns once every task of `group` left it; throws ``TimedOut`` after `limit`.
    package static func `for`(_ group: DispatchGroup, _ what: String, within limit: Duration = limit) throws {
        guard group.wait(timeout: .now() + limit.timeInterval) == .success else {
            throw TimedOut(what: what, limit: limit)
        }
    }

    /// Returns once `condition` holds, blocking the thread between checks (at growing intervals,
    /// up to 50 ms); throws ``TimedOut`` when it still does not hold after `limit`.
    package static func blockingUntil(_ what: String, within limit: Duration = limit,
                                      _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + limit
        var pause = Duration.milliseconds(1)
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut(what: what, limit: limit) }
            Thread.sleep(forTimeInterval: pause.timeInterval)
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    // MARK: Child processes

    /// Starts `process` (configured, not yet running), runs `body` (which reads its output, say),
    /// and waits for it to exit. A process still running after `limit` is ended (SIGTERM, then
    /// SIGKILL 5 s later), so that its pipes close and `body` returns, and the wait throws
    /// ``TimedOut``.
    @discardableResult
    package static func run<T>(_ process: Process, _ what: String, within limit: Duration = limit,
                               reading body: () throws -> T) throws -> T {
        try ProcessLaunch.run(process)
        return try exit(of: process, what, within: limit, reading: body)
    }

    /// ``run(_:_:within:reading:)`` from a task: the wait holds a thread of its own instead of
    /// one of the cooperative threads (as many as cores) that every task of the process shares.
    /// A test that held them all for a child's whole run would stall every other test's tasks,
    /// and their deadlines would pass while they could not run.
    @discardableResult
    package static func run<T: Sendable>(_ process: Process, _ what: String, within limit: Duration = limit,
                                         reading body: @escaping @Sendable () throws -> T) async throws -> T {
        try await onOwnThread(what) { try run(process, what, within: limit, reading: body) }
    }

    /// Waits for `process` (already running) to exit, running `body` meanwhile; one still running
    /// after `limit` is ended as ``run(_:_:within:reading:)`` ends it, and the wait throws.
    @discardableResult
    package static func exit<T>(of process: Process, _ what: String, within limit: Duration = limit,
                                reading body: () throws -> T) throws -> T {
        let state = Locked((exited: false, overdue: false))
        let pid = process.processIdentifier
        // Signals the child unless it exited (and its id may be another's already).
        let send = { @Sendable (signal: Int32, overdue: Bool) in
            let running = state.withLock { state -> Bool in
                if overdue && !state.exited { state.overdue = true }
                return !state.exited
            }
            if running { kill(pid, signal) }
        }
        let end = DispatchWorkItem {
            send(SIGTERM, true)
            DispatchQueue.global().asyncAfter(deadline: .now() + 5) { send(SIGKILL, false) }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit.timeInterval, execute: end)
        defer { end.cancel() }
        let result: Result<T, any Error> = Result { try body() }
        if case .failure = result { send(SIGTERM, false) }
        process.waitUntilExit()
        let overdue = state.withLock { state -> Bool in
            state.exited = true
            return state.overdue
        }
        if overdue { throw TimedOut(what: "\(what) to exit", limit: limit) }
        return try result.get()
    }

    /// ``exit(of:_:within:reading:)`` from a task: the wait holds a thread of its own. A test that
    /// waited for a child on a cooperative thread (as many as cores: two here) starved every other
    /// task of the process while the child took its time — in-process nodes then could not stop,
    /// and unrelated tests' deadlines passed.
    @discardableResult
    package static func exit<T: Sendable>(of process: Process, _ what: String, within limit: Duration = limit,
                                          reading body: @escaping @Sendable () throws -> T) async throws -> T {
        try await onOwnThread(what) { try exit(of: process, what, within: limit, reading: body) }
    }

    /// ``exit(of:_:within:)`` from a task, on a thread of its own.
    package static func exit(of process: Process, _ what: String, within limit: Duration = limit) async throws {
        try await onOwnThread(what) { try exit(of: process, what, within: limit) }
    }

    /// Waits for `process` (already running) to exit; see ``exit(of:_:within:reading:)``.
    package static func exit(of process: Process, _ what: String, within limit: Duration = limit) throws {
        try exit(of: process, what, within: limit) { () }
    }
}

extension Duration {
    /// The duration in seconds, as Foundation and Dispatch take it.
    package var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
