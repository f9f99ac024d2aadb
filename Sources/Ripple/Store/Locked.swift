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
