import Foundation

/// One writer connection, used by one caller at a time, and a pool of reader connections opened
/// on demand up to a limit (callers wait when all are busy).
///
/// In WAL mode readers never block the writer nor each other; each read transaction sees the
/// database as of its first read. An in-memory database has no separate readers: reads use the
/// writer connection (still one caller at a time).
final class ConnectionPool: Sendable {
    private let writer: Locked<Database>
    /// The thread inside `withWriter`, to catch a re-entrant call instead of deadlocking.
    private let writerThread = Locked<pthread_t?>(nil)
    private let readers: Locked<ReaderState>
    private let readerAvailable = NSCondition()
    private let openReader: @Sendable () throws -> Database
    private let readerLimit: Int
    private let sharesWriter: Bool
    /// How long a reader that fails to open is retried (the store's busy timeout).
    private let retryWindow: TimeInterval
    /// For tests: runs before each reader is opened, and may throw to simulate a failed open.
    let openFault = Locked<(@Sendable () throws -> Void)?>(nil)

    private struct ReaderState {
        var idle: [Database] = []
        var opened = 0
    }

    init(writer: Database, readerLimit: Int, sharesWriter: Bool, retryWindow: TimeInterval,
         openReader: @escaping @Sendable () throws -> Database) {
        self.retryWindow = retryWindow
        self.writer = Locked(writer)
        self.readers = Locked(ReaderState())
        self.readerLimit = max(1, readerLimit)
        self.sharesWriter = sharesWriter
        self.openReader = openReader
    }

    deinit {
        // Readers close first: the last connection to close folds the WAL back into the file,
        // and only the writer (not a read-only reader) can.
        readers.withLock { $0.idle.removeAll() }
    }

    /// Runs `body` with the writer connection, serialized with every other writer call.
    /// Traps when called again from inside `body` on the same thread (it would deadlock).
    func withWriter<T>(_ body: (Database) throws -> T) rethrows -> T {
        let thread = pthread_self()
        if writerThread.withLock({ $0.map { pthread_equal($0, thread) != 0 } ?? false }) {
            preconditionFailure("Ripple: Store.write was called inside a write on the same store; "
                                + "use the Database given to the outer closure (nested transactions are savepoints)")
        }
        return try writer.withLock { db in
            writerThread.withLock { $0 = thread }
            defer { writerThread.withLock { $0 = nil } }
            return try body(db)
        }
    }

    /// Runs `body` with a reader connection of its own for the duration of the call.
    func withReader<T>(_ body: (Database) throws -> T) throws -> T {
        if sharesWriter { return try withWriter(body) }
        let reader = try checkOutReader()
        defer { checkIn(reader) }
        return try body(reader)
    }

    /// An idle reader, or the right to open one (counted in `opened`), waiting while neither.
    private func reserveReader() -> Database? {
        readerAvailable.lock()
        defer { readerAvailable.unlock() }
        while true {
            let (reader, mayOpen) = readers.withLock { state -> (Database?, Bool) in
                if let reader = state.idle.popLast() { return (reader, false) }
                if state.opened < readerLimit {
                    state.opened += 1
                    return (nil, true)
                }
                return (nil, false)
            }
            if reader != nil || mayOpen { return reader }
            readerAvailable.wait()
        }
    }

    /// A reader: an idle one, or a new one. Opening can fail for a moment (the file briefly
    /// unreadable or locked, a descriptor limit reached): a failure that may pass is retried,
    /// backing off, for up to `retryWindow`; only a lasting one is thrown.
    private func checkOutReader() throws -> Database {
        let deadline = Date().addingTimeInterval(retryWindow)
        var pause: UInt32 = 1_000
        while true {
            if let reader = reserveReader() { return reader }
            do {
                try openFault.withLock { $0 }?()
                return try openReader()
            } catch {
                readerAvailable.lock()
                readers.withLock { $0.opened -= 1 }
                readerAvailable.signal()
                readerAvailable.unlock()
                guard Self.mayPass(error), Date() < deadline else { throw error }
                usleep(pause)
                pause = min(pause * 2, 50_000)
            }
        }
    }

    /// Whether a failure to open a reader may pass if tried again.
    private static func mayPass(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [.cannotOpen, .busy, .locked, .ioError].contains(error.code)
    }

    private func checkIn(_ reader: Database) {
        readerAvailable.lock()
        readers.withLock { $0.idle.append(reader) }
        readerAvailable.signal()
        readerAvailable.unlock()
    }
}
