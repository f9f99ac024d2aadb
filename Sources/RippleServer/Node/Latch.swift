#if Sync
import Ripple

/// Closed until ``open()``, then open for good: those who ``wait()`` return once it opens.
final class Latch: Sendable {
    private let state = Locked<(open: Bool, waiters: [Int: CheckedContinuation<Void, any Error>], next: Int)>((false, [:], 0))

    init() {}

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.open = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    var isOpen: Bool { state.withLock { $0.open } }

    /// Returns once the latch is open.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    func wait() async throws {
        let id = state.withLock { state -> Int in
            defer { state.next += 1 }
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.open { return .success(()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }
}
#endif
