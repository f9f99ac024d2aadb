import RippleSQLite

/// One async store call (``Store/asyncWrite(tag:_:)``, ``Store/asyncRead(_:)``) from its
/// submission to its end, and how its task's cancellation reaches its work:
///
/// * cancelled before its work starts, the work does not run `body` at all;
/// * cancelled while `body` runs, the SQLite statement running on its connection is interrupted
///   (`sqlite3_interrupt`: it fails with ``DatabaseError/ResultCode/interrupt``), and once `body`
///   returns or throws the transaction is rolled back;
/// * cancelled after `body` returned, the call ends as if not cancelled (a commit under way
///   completes).
///
/// In the first two cases the call throws `CancellationError`.
final class AsyncStoreCall: Sendable {
    /// A connection's handle, to interrupt it from the cancelling thread.
    private struct Interruptible: @unchecked Sendable {   // @unchecked: sqlite3_interrupt may be called from any thread; used only under `state`'s lock while the call holds the connection
        let handle: OpaquePointer
    }

    private struct State {
        var cancelled = false
        /// The connection while `body` runs on it.
        var running: Interruptible?
    }

    private let state = Locked(State())

    /// Whether the task was cancelled.
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// The task was cancelled: interrupts `body` when it runs (under the lock, so the call cannot
    /// hand its connection on meanwhile).
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            if let running = state.running { sqlite3_interrupt(running.handle) }
        }
    }

    /// Runs `body` on `db` (inside the store call that holds it), unless the task was cancelled
    /// before or while it ran: then throws `CancellationError`, and the store call rolls back.
    func run<T>(_ body: (Database) throws -> T, on db: Database) throws -> T {
        try state.withLock { state in
            if state.cancelled { throw CancellationError() }
            state.running = Interruptible(handle: db.handle)
        }
        let result = Result { try body(db) }
        try state.withLock { state in
            state.running = nil
            if state.cancelled { throw CancellationError() }
        }
        return try result.get()
    }
}
