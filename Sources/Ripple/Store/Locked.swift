import Foundation

/// A value guarded by a lock: the one place the store shares mutable state across threads.
final class Locked<Value>: @unchecked Sendable {   // @unchecked: every access to `value` holds `lock`
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
