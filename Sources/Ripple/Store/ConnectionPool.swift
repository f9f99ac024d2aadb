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

    private struct ReaderState {
        var idle: [Database] = []
        var opened = 0
    }

    init(writer: Database, readerLimit: Int, sharesWriter: Bool,
         openReader: @escaping @Sendable () throws -> Database) {
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

    private func checkOutReader() throws -> Database {
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
            if let reader { return reader }
            if mayOpen {
                do {
                    return try openReader()
                } catch {
                    readers.withLock { $0.opened -= 1 }
                    throw error
                }
            }
            readerAvailable.wait()
        }
    }

    private func checkIn(_ reader: Database) {
        readerAvailable.lock()
        readers.withLock { $0.idle.append(reader) }
        readerAvailable.signal()
        readerAvailable.unlock()
    }
}
