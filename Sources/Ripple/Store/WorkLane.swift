import Dispatch

/// Threads of the store's own that run its blocking work for async callers, at most `width`
/// pieces at once, in the order they came: the caller suspends while its work waits here or
/// runs, so no thread of Swift's cooperative pool ever waits for a connection or a lock.
///
/// The store has two: one of width 1 for writes (one writer connection: a second thread would
/// only wait for the first) and one as wide as its readers. Work beyond the width waits in the
/// lane's list, holding no thread.
final class WorkLane: Sendable {
    typealias Work = @Sendable () -> Void

    private struct State {
        /// How many threads run work now (at most `width`).
        var running = 0
        /// Work not started yet, oldest first from `head`.
        var waiting: [Work] = []
        var head = 0

        /// The oldest waiting work, if any.
        mutating func next() -> Work? {
            guard head < waiting.count else {
                waiting.removeAll(keepingCapacity: true)
                head = 0
                return nil
            }
            defer {
                head += 1
                if head > 64 && head * 2 > waiting.count {
                    waiting.removeFirst(head)
                    head = 0
                }
            }
            return waiting[head]
        }
    }

    private let queue: DispatchQueue
    private let width: Int
    private let state = Locked(State())

    init(label: String, width: Int) {
        self.queue = DispatchQueue(label: label, attributes: .concurrent)
        self.width = max(1, width)
    }

    /// Runs `work` on one of the lane's threads, now if one is free, else after the work before it.
    func submit(_ work: @escaping Work) {
        let starts = state.withLock { state in
            guard state.running < width else {
                state.waiting.append(work)
                return false
            }
            state.running += 1
            return true
        }
        guard starts else { return }
        queue.async {
            var work = work
            while true {
                work()
                // The thread goes on with the oldest waiting work, or leaves the lane.
                guard let next = self.state.withLock({ state -> Work? in
                    if let next = state.next() { return next }
                    state.running -= 1
                    return nil
                }) else { return }
                work = next
            }
        }
    }
}
