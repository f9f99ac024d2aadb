import Foundation

/// A value guarded by a lock: the one place the store (and the sync server) share mutable state
/// across threads.
package final class Locked<Value>: @unchecked Sendable {   // @unchecked: every access to `value` holds `lock`
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// The first of several outcomes: any number of callers, from anywhere, may ``finish(_:)`` it;
/// the first one decides and later ones are ignored. One task awaits ``value``, before or after
/// the outcome came. (Unlike a task group, nothing waits for the outcomes that lost, such as a
/// write or a connection that never ends.)
package final class FirstOutcome<T: Sendable>: Sendable {
    private let state = Locked<(waiting: CheckedContinuation<T, Never>?, outcome: T?)>((nil, nil))

    package init() {}

    /// Decides the outcome, unless it is decided already.
    package func finish(_ value: T) {
        let waiting = state.withLock { state -> CheckedContinuation<T, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = value
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume(returning: value)
    }

    /// Whether the outcome is decided.
    package var isDecided: Bool { state.withLock { $0.outcome != nil } }

    /// The outcome, once decided.
    package var value: T {
        get async {
            await withCheckedContinuation { continuation in
                let known = state.withLock { state -> T? in
                    if state.outcome == nil { state.waiting = continuation }
                    return state.outcome
                }
                if let known { continuation.resume(returning: known) }
            }
        }
    }
}
