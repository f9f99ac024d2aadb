import Foundation

/// A count kept per thread, in a POSIX thread-specific slot: what a thread is inside of (a
/// handler, Ripple's background work), asked on every event. `Thread.threadDictionary` did the
/// same through a bridged dictionary, at a microsecond a look.
final class ThreadCounter: Sendable {
    private let key: pthread_key_t

    init() {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed (\(status))")
        self.key = key
    }

    /// This thread's count (0 until it entered).
    var value: Int { Int(bitPattern: pthread_getspecific(key)) }

    /// Whether this thread is inside (see ``inside(_:)``).
    var isInside: Bool { value > 0 }

    /// Runs `body` with this thread's count one higher.
    func inside<T>(_ body: () throws -> T) rethrows -> T {
        let outer = value
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: outer + 1))
        defer { pthread_setspecific(key, UnsafeRawPointer(bitPattern: outer)) }
        return try body()
    }
}
