import Foundation

/// A queue between producers on any thread and one consumer task that waits for the next item
/// with a deadline: frames a socket received, instants a floor's loop saw a commit.
final class SyncMailbox<Element: Sendable>: @unchecked Sendable {   // every mutable field is guarded by `lock`
    private let lock = NSLock()
    private var items: [Element] = []
    private var head = 0
    private var finished = false
    private var waiter: CheckedContinuation<Void, Never>?

    /// Adds an item and wakes the consumer.
    func put(_ element: Element) {
        let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            items.append(element)
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume()
    }

    /// No more items come: the consumer gets what is left, then `nil`.
    func finish() {
        let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            finished = true
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume()
    }

    /// Every item waiting now.
    func drain() -> [Element] {
        lock.withLock {
            defer { (items, head) = ([], 0) }
            return Array(items[head...])
        }
    }

    /// The next item; `nil` once finished and empty.
    ///
    /// - Throws: ``SyncBenchError`` when nothing came within `seconds`.
    func take(within seconds: Double) async throws -> Element? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        let alarm = Task { [self] in
            try await Task.sleep(until: deadline, clock: .continuous)
            let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                defer { waiter = nil }
                return waiter
            }
            waiting?.resume()
        }
        defer { alarm.cancel() }
        while true {
            let (item, isFinished) = lock.withLock { () -> (Element?, Bool) in
                guard head < items.count else { return (nil, finished) }
                let item = items[head]
                head += 1
                if head == items.count || head > 4096 {
                    items.removeFirst(head)
                    head = 0
                }
                return (item, false)
            }
            if let item { return item }
            if isFinished { return nil }
            if ContinuousClock.now >= deadline { throw SyncBenchError("nothing came within \(seconds) s") }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = lock.withLock { () -> Bool in
                    // Past the deadline the alarm may have rung already: never wait after it.
                    if head < items.count || finished || ContinuousClock.now >= deadline { return true }
                    waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }
}
