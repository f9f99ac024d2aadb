#if Sync
import Ripple

/// A figure the node keeps itself (the count of open sockets, the frames sent), held under a
/// lock and handed to its swift-metrics object on every change: `record` gets the value before
/// and after, inside the lock, so a gauge set from two threads ends at the last value.
final class MetricCell<Value: Sendable>: Sendable {
    private let value: Locked<Value>
    private let record: @Sendable (_ old: Value, _ new: Value) -> Void

    init(_ value: Value, record: @escaping @Sendable (_ old: Value, _ new: Value) -> Void) {
        self.value = Locked(value)
        self.record = record
    }

    /// Changes the value (or reads it) and records the change.
    @discardableResult
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try value.withLock { value in
            let old = value
            defer { record(old, value) }
            return try body(&value)
        }
    }
}
#endif
