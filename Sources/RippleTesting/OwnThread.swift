import Foundation

/// Runs `work` on a new thread named `name` and waits for it without holding the caller's
/// thread. From a task, a blocking wait (a child process, a long synchronous run) would hold one
/// of Swift's cooperative threads, of which there are as many as cores: a parallel test suite
/// that holds them all starves every task of the process.
package func onOwnThread<T: Sendable>(_ name: String, stackSize: Int? = nil,
                              _ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.name = name
        if let stackSize { thread.stackSize = stackSize }
        thread.start()
    }
}
