import Foundation

/// One writer connection, used by one caller at a time, and a pool of reader connections opened
/// on demand up to a limit (callers wait when all are busy).
///
/// In WAL mode readers never block the writer nor each other; each read transaction sees the
/// database as of its first read. An in-memory database has no separate readers: reads use the
/// writer connection (still one caller at a time).
///
/// The pool remembers which connection each thread holds (its ``Access``), so that a store call
/// made inside another never waits for a second connection while holding the first: the store
/// runs it on the held connection, or refuses it. No thread ever holds two connections of one
/// pool, so no two threads can wait on each other.
final class ConnectionPool: Sendable {
    /// What a thread inside a store call holds.
    enum Access {
        /// The writer, in a write transaction.
        case writing(Database)
        /// The writer, in a read nested in a write (it sees the write's changes, cannot write).
        case readingInWrite(Database)
        /// A reader (or, for an in-memory store, the writer) in a read transaction.
        case reading(Database)
        /// A read whose connection shows more than the store's committed state (history's
        /// rewound copy of a table), calling the caller's code back: store calls made there are
        /// refused with `reason`, never run on that connection.
        case callingBack(Database, reason: String)

        /// Whether the thread is inside a write (reading in it or not).
        var isWrite: Bool {
            switch self {
            case .reading, .callingBack: false
            case .writing, .readingInWrite: true
            }
        }

        var database: Database {
            switch self {
            case .writing(let db), .readingInWrite(let db), .reading(let db), .callingBack(let db, _): db
            }
        }
    }

    /// A thread's access, and what waits for it to end.
    private struct Lease {
        var access: Access
        var whenDone: [() -> Void] = []
    }

    private let writer: Locked<Database>
    /// The access of each thread inside a store call, by thread. A thread's entry is only added
    /// and removed by that thread, so it cannot be stale while that thread asks.
    private let leases = Locked<[pthread_t: Lease]>([:])
    private let readers: Locked<ReaderState>
    private let readerAvailable = NSCondition()
    private let openReader: @Sendable () throws -> Database
    private let readerLimit: Int
    private let sharesWriter: Bool
    /// How long a reader that fails to open is retried (the store's busy timeout).
    private let retryWindow: TimeInterval
    /// Told when the writer is taken and released (how a file watch tells the store's own
    /// commits from others').
    private let writerUse: OwnCommitFilter?
    /// For tests: runs before each reader is opened, and may throw to simulate a failed open.
    let openFault = Locked<(@Sendable () throws -> Void)?>(nil)

    private struct ReaderState {
        var idle: [Database] = []
        var opened = 0
    }

    init(writer: Database, readerLimit: Int, sharesWriter: Bool, retryWindow: TimeInterval,
         writerUse: OwnCommitFilter? = nil, openReader: @escaping @Sendable () throws -> Database) {
        self.retryWindow = retryWindow
        self.writerUse = writerUse
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

    // MARK: Access

    /// What the calling thread holds, when it is inside a store call on this pool.
    var currentAccess: Access? {
        let thread = pthread_self()
        return leases.withLock { $0[thread]?.access }
    }

    /// Runs `body` with the calling thread's access changed to `access` (a read nested in a write).
    func withAccess<T>(_ access: Access, _ body: () throws -> T) rethrows -> T {
        let thread = pthread_self()
        let previous = leases.withLock { leases in
            defer { leases[thread]?.access = access }
            return leases[thread]?.access
        }
        defer { leases.withLock { $0[thread]?.access = previous ?? access } }
        return try body()
    }

    /// Runs `action` on this thread once its current store call ends (after its connection is
    /// released), and returns `true`; returns `false`, doing nothing, outside a store call.
    func whenAccessEnds(_ action: @escaping () -> Void) -> Bool {
        let thread = pthread_self()
        return leases.withLock { leases in
            guard leases[thread] != nil else { return false }
            leases[thread]!.whenDone.append(action)
            return true
        }
    }

    /// Records `access` for the calling thread while `body` runs; hands back what waited for it
    /// in `whenDone`, for the caller to run once the connection is released.
    private func lease<T>(_ access: Access, whenDone: inout [() -> Void], _ body: () throws -> T) rethrows -> T {
        let thread = pthread_self()
        leases.withLock { $0[thread] = Lease(access: access) }
        defer { whenDone = leases.withLock { $0.removeValue(forKey: thread)?.whenDone ?? [] } }
        return try body()
    }

    // MARK: Connections

    /// Runs `body` with the writer connection, serialized with every other writer call.
    ///
    /// Throws ``StoreError/Kind/nesting`` when the calling thread is already inside a store
    /// call on this pool (it would wait for itself): the store runs nested calls on the
    /// connection the thread holds.
    func withWriter<T>(_ body: (Database) throws -> T) throws -> T {
        if let access = currentAccess { throw Self.nestingError(access) }
        var whenDone: [() -> Void] = []
        defer { for action in whenDone { action() } }
        return try writer.withLock { db in
            writerUse?.writerWillStart()
            defer { writerUse?.writerWillRelease(db) }
            return try lease(.writing(db), whenDone: &whenDone) { try body(db) }
        }
    }

    /// Runs `body` with a reader connection of its own for the duration of the call (see
    /// ``withWriter(_:)`` for nested calls).
    func withReader<T>(retryingOpen: Bool = true, _ body: (Database) throws -> T) throws -> T {
        if let access = currentAccess { throw Self.nestingError(access) }
        var whenDone: [() -> Void] = []
        defer { for action in whenDone { action() } }
        if sharesWriter {
            return try writer.withLock { db in try lease(.reading(db), whenDone: &whenDone) { try body(db) } }
        }
        let reader = try checkOutReader(retrying: retryingOpen)
        defer { checkIn(reader) }   // before what waited for this read runs (it may read)
        return try lease(.reading(reader), whenDone: &whenDone) { try body(reader) }
    }

    /// The error for a connection asked for by a thread that already holds `access`.
    static func nestingError(_ access: Access) -> StoreError {
        switch access {
        case .writing, .readingInWrite:
            StoreError(.nesting, "this thread is inside a write on this store, which holds the writer connection")
        case .reading:
            StoreError(.nesting, "this thread is inside a read on this store, which holds a reader connection")
        case .callingBack(_, let reason):
            StoreError(.nesting, reason)
        }
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
    /// backing off, for up to `retryWindow` (`retrying`; else not at all); only a lasting one is
    /// thrown.
    private func checkOutReader(retrying: Bool) throws -> Database {
        let deadline = Date().addingTimeInterval(retrying ? retryWindow : 0)
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

    /// Whether a failure to open or read with a reader may pass if tried again (descriptors
    /// exhausted, the file busy or locked beyond the timeout, an I/O error, memory, a read
    /// between the statements of a write outside a transaction and their version): a live
    /// query's refresh is retried then, not ended. A moved file, a query that does not fit the
    /// schema or invalid SQL do not pass.
    static func mayPass(_ error: any Error) -> Bool {
        if error is BetweenVersions { return true }
        guard let error = error as? DatabaseError else { return false }
        return [.cannotOpen, .busy, .locked, .ioError, .noMemory].contains(error.code)
    }

    private func checkIn(_ reader: Database) {
        readerAvailable.lock()
        readers.withLock { $0.idle.append(reader) }
        readerAvailable.signal()
        readerAvailable.unlock()
    }
}

/// A live query's read saw a state no version names yet (see ``ReadVersion/isBetweenVersions``):
/// it is read again once the version is taken.
struct BetweenVersions: Error {}
