#if Sync
import Logging
import Ripple

/// Watches a node's stop: once it begins, says so, and when the node's parts are still
/// running after the stop grace (and 5 s more for the cancelled parts to end), says which (an
/// error), every 10 s until they end — the line an operator needs when a node does not exit.
final class StopWatch: Sendable {
    private let parts: Locked<[String]>
    private let grace: Duration
    private let overtime: Duration
    private let every: Duration
    private let logger: Logger
    private let watching = Locked<(begun: Bool, ended: Bool, task: Task<Void, Never>?)>((false, false, nil))

    /// A watch of `parts` that speaks `overtime` after `grace`, then `every` while they run.
    init(parts: Locked<[String]>, grace: Duration, overtime: Duration = .seconds(5), every: Duration = .seconds(10), logger: Logger) {
        (self.parts, self.grace, self.overtime, self.every, self.logger) = (parts, grace, overtime, every, logger)
    }

    /// The stop began (a graceful shutdown, or the node's task cancelled); again does nothing.
    func begin() {
        let start = watching.withLock { state -> Bool in
            guard !state.begun, !state.ended else { return false }
            state.begun = true
            return true
        }
        guard start else { return }
        logger.info("stopping: telling the sockets to come back later, then stopping the node's parts")
        let (parts, grace, every, logger) = (parts, grace, every, logger)
        let task = Task {
            let began = ContinuousClock.now
            var wait = grace + overtime
            while (try? await Task.sleep(for: wait)) != nil {
                let names = parts.withLock { $0 }
                guard !names.isEmpty else { return }
                logger.error("""
                    stopping: still running \(began.duration(to: .now).formatted(.units(allowed: [.seconds], fractionalPart: .show(length: 1)))) \
                    after the stop began (the stop grace is \(grace)): \(names.joined(separator: ", "))
                    """)
                wait = every
            }
        }
        let late = watching.withLock { state -> Bool in
            state.task = task
            return state.ended
        }
        if late { task.cancel() }
    }

    /// Returns once the watch said its last (after ``end()``).
    func finished() async {
        await watching.withLock { $0.task }?.value
    }

    /// The node stopped: the watch ends.
    func end() {
        watching.withLock { state -> Task<Void, Never>? in
            state.ended = true
            return state.task
        }?.cancel()
    }
}
#endif
