import Foundation

/// A persistent, SQLite-backed store: one writer connection (serialized) and a pool of readers
/// over one database file in WAL mode.
///
/// ```swift
/// let store = try Store(path: "/path/to/app.sqlite")
/// try store.write { db in try db.execute("INSERT INTO notes(body) VALUES (?)", ["Buy milk"]) }
/// let count = try store.read { db in try db.fetchValue("SELECT count(*) FROM notes", as: Int.self) }
/// ```
public final class Store: Sendable {
    /// How a store opens and uses its database.
    public struct Configuration: Sendable {
        /// The most reader connections open at once (readers beyond wait). Default 4.
        public var readerCount = 4
        /// How long a connection waits for a lock held by another connection or process before
        /// failing with `SQLITE_BUSY`, in seconds. Default 5.
        public var busyTimeout: TimeInterval = 5
        /// Opens the file read-only: every write fails with ``DatabaseError/ResultCode/readOnly``.
        public var readOnly = false
        /// Shows bind arguments in error descriptions (off by default: they may hold users' data).
        public var publicStatementArguments = false
        /// How long the change log keeps the changes of past versions. Default: the newest 10,000 versions.
        public var changeLogRetention: ChangeLogRetention = .versions(10_000)
        /// How many bytes of the database file each connection maps into memory (SQLite's
        /// `mmap_size`). Default 0: off.
        ///
        /// Mapping saves reads a copy of each page through a system call (a few percent on large
        /// scans). The risk is the process's life: when another program truncates the file while
        /// it is mapped, touching a page past the new end kills the process (`SIGBUS`) instead of
        /// returning an error. Turn it on only for a file no other program writes.
        public var memoryMapSize = 0
        /// How many prepared statements each connection keeps for reuse, by SQL text. Default 256.
        ///
        /// Running a statement first prepares it (SQLite parses and plans the text), which costs
        /// more than running a small one; each connection — the writer and every reader, so
        /// `readerCount + 1` of them — keeps the statements of the texts it ran most recently, and
        /// running one of those texts again skips the preparing. The store's own statements
        /// (collections, live queries, the change log) count too. Past this many distinct texts
        /// on a connection, the statement used least recently is let go of: SQLite finalizes it
        /// (a statement that a caller is still stepping is finalized only once that caller is
        /// done), and the text is prepared again if it runs again.
        ///
        /// The bound is on memory: a prepared statement takes from about 2 kB to tens of kB (a
        /// long query), so the default holds a few MB at most per connection, however many
        /// distinct texts an app runs (SQL built with its values spliced in is a new text per
        /// value: bind arguments instead). Each live query counts for a few texts (its query, and
        /// the reads of changed rows by their keys): raise the capacity when an app keeps more
        /// distinct texts than this in use over and over; 0 (or less) keeps none, and every call
        /// prepares its statement.
        public var statementCacheCapacity = 256
        /// While live queries are open, watch the database file (its `-wal` file) so that commits
        /// by other connections — another process, the `sqlite3` shell — are noticed as they
        /// happen. Default on. The watch exists only while live queries do. While the store
        /// holds its writer the watch does not hear writes to the `-wal` file (on Linux), so its
        /// own commits do not wake it; elsewhere they do, and are told apart without taking the
        /// writer (a read of the wal-index header). Another ``Store`` of this process on the
        /// same file is told directly after each commit, watched or not.
        public var watchesFile = true
        /// When the file is not watched (``watchesFile`` off, an in-memory store, or a file
        /// system where the watch cannot be set up), how often, while live queries are open, the
        /// store looks for commits made by other processes (see ``Store/noticeExternalWrites()``),
        /// in seconds; `nil` never looks. Default 0.25.
        public var externalWritePollInterval: TimeInterval? = 0.25
        /// Hears why a live query's stream ended when its subscriber gave no `onError` handler
        /// (the error and the query's description). A stream never ends silently: by default the
        /// reason is written to standard error. The error is also kept on ``Subscription/error``.
        public var unhandledLiveQueryError: @Sendable (_ error: any Error, _ query: String) -> Void = { error, query in
            let message = "Ripple: a live query ended with an error nobody handled (pass onError: to subscribe): "
                + "\(error)\n  query: \(query)\n"
            FileHandle.standardError.write(Data(message.utf8))
        }

        /// The default configuration.
        public init() {}
    }

    /// Where the database lives: a file path, or `nil` for a private in-memory database.
    public let path: String?
    /// The configuration the store was opened with.
    public let configuration: Configuration
    let pool: ConnectionPool
    /// The live queries of this store, told of every commit.
    let observation: ObservationCenter
    /// For tests: runs when ``noticeExternalWrites()`` saw a foreign commit, before it locks.
    let noticeGate = Locked<(@Sendable () -> Void)?>(nil)
    /// The files the store opened at ``path`` (`nil` in memory), to tell when one is gone.
    let openedFiles: StoreFiles?
    /// The database file the store opened at ``path``.
    var openedFile: FileIdentity? { openedFiles?.database }
    /// What became of the commits of a `-wal` file lost under the store (see ``salvageLostLog()``).
    let logSalvage = Locked(LogSalvage.notTried)
    /// The file's key among this process's open stores (its path, resolved once).
    let registryKey: String?
    /// Whether the live queries were told that the file is gone.
    let fileLoss = Locked(false)
    /// Set when the file was found holding another history (see ``StoreError/Kind/fileReplaced``):
    /// every later call throws it.
    let fileReplacement = Locked<StoreError?>(nil)
    /// When (`DispatchTime` nanoseconds) a check last found the store's files in place; 0: never.
    let fileVerifiedAt = Locked<UInt64>(0)
    /// Run inside every commit before its version is recorded (see ``addCommitParticipant(_:)``).
    let commitParticipants = Locked<[Int: CommitParticipant]>([:])
    /// The thread on which async writes run (see ``asyncWrite(tag:_:)``).
    let writeLane = WorkLane(label: "ripple.store.writes", width: 1)
    /// The threads on which async reads run, as many as the readers (see ``asyncRead(_:)``).
    let readLane: WorkLane

    /// Opens (creating if needed) the database file at `path` and brings its schema up to date.
    ///
    /// Throws ``StoreError`` with kind ``StoreError/Kind/unusableFile`` when the file cannot be
    /// opened (the message says why: a missing directory, a directory at `path`, a permission),
    /// is not a database or is corrupt; with kind ``StoreError/Kind/fileMoved`` when another
    /// store of this process has open a file that was at `path` and was deleted or replaced
    /// (opening would start a different database beside it: release that store first), or
    /// whose `-wal` or `-shm` file was.
    public convenience init(path: String, configuration: Configuration = Configuration()) throws {
        try self.init(location: path, configuration: configuration)
    }

    /// Opens a private in-memory store (gone when the store is released).
    public static func inMemory(configuration: Configuration = Configuration()) throws -> Store {
        try Store(location: nil, configuration: configuration)
    }

    private init(location: String?, configuration: Configuration) throws {
        self.path = location
        self.configuration = configuration
        let readOnly = configuration.readOnly
        let openPath = location.map { readOnly ? "file:\(Self.uriEscaped($0))?mode=ro" : $0 } ?? ":memory:"
        // The file's key among this process's stores: its path, resolved once (it touches the disk).
        let registryKey = location.map(OpenStoreFiles.key(of:))
        if let location, let registryKey, let lost = OpenStoreFiles.lostFile(at: location, key: registryKey) {
            throw StoreError(.fileMoved, lost.role == .database
                ? "another Store in this process has open the database file that was at \(location), which was deleted "
                    + "or replaced since: opening the path now would start a different database beside it. Release that store first"
                : "another Store in this process has open the database file at \(location), whose \(lost.path) was deleted "
                    + "or replaced since: a store opened now would share that store's handles on the file it lost. Release "
                    + "that store first")
        }
        let writer = try Self.open(openPath, file: location, readOnly: readOnly, configuration: configuration)
        let openedDatabase = location.flatMap { FileIdentity(path: $0) }
        self.registryKey = registryKey
        do {
            // The first statement reads the file header: a corrupt file or one that is not a
            // database fails here, before anything is written.
            _ = try writer.fetchValue("SELECT count(*) FROM sqlite_schema", as: Int.self)
            if location != nil && !readOnly {
                let mode = try Self.switchToWAL(writer, timeout: configuration.busyTimeout)
                if mode?.lowercased() != "wal" {
                    throw StoreError(.unusableFile, "cannot switch \(location!) to WAL mode (journal mode is \(mode ?? "unknown"))")
                }
            }
            try writer.executeScript("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; "
                                     + "PRAGMA mmap_size = \(max(0, configuration.memoryMapSize))")
            // The first read in WAL mode opens the `-wal` and `-shm` files, which the file check follows.
            if location != nil { _ = try writer.fetchValue("PRAGMA schema_version", as: Int.self) }
        } catch let error as DatabaseError where [.notADatabase, .corrupt].contains(error.code) {
            throw StoreError(.unusableFile, "\(location ?? ":memory:") is not a usable SQLite database", underlying: error)
        }
        self.openedFiles = location.flatMap { location in
            openedDatabase.map { StoreFiles(database: $0, path: location, sqlitePath: writer.filePath ?? location) }
        }
        self.readLane = WorkLane(label: "ripple.store.reads", width: location == nil ? 1 : configuration.readerCount)
        self.observation = ObservationCenter(pollInterval: location == nil ? nil : configuration.externalWritePollInterval,
                                             watchedFile: configuration.watchesFile ? location : nil)
        let sharesWriter = location == nil
        self.pool = ConnectionPool(writer: writer, readerLimit: configuration.readerCount, sharesWriter: sharesWriter,
                                   retryWindow: configuration.busyTimeout, writerUse: observation.ownCommits) {
            let reader = try Database(path: location.map { "file:\(Self.uriEscaped($0))?mode=ro" } ?? ":memory:",
                                      readOnly: true, configuration: configuration)
            try reader.executeScript("PRAGMA query_only = ON; PRAGMA mmap_size = \(max(0, configuration.memoryMapSize))")
            return reader
        }
        // The store's own schema (Migrations/*.sql); a read-only store only checks it is current.
        let schema = try Migrator.storeSchema()
        var schemaFailure: StoreError?
        do {
            try runOnWriter { db throws(StoreError) in
                try schema.migrate(db, checkOnly: readOnly)
                // Where the file stands among other connections' commits, from now: a foreign
                // commit made after a live query's first read is one to tell it of.
                do {
                    _ = try changeLog(of: db)
                } catch {
                    throw StoreError(.migration, "cannot read the store's version (ripple_meta)", underlying: error as? DatabaseError)
                }
            }
        } catch {
            schemaFailure = error
        }
        if let schemaFailure {
            // Pages past the header can be garbage too: found while reading the store's schema.
            if let underlying = schemaFailure.underlying, underlying.code == .notADatabase || underlying.code == .corrupt {
                throw StoreError(.unusableFile, "\(location ?? ":memory:") is not a usable SQLite database", underlying: underlying)
            }
            throw schemaFailure
        }
        if let registryKey, let openedFiles { OpenStoreFiles.register(self, key: registryKey, files: openedFiles) }
    }

    deinit {
        // A `-wal` or `-shm` file lost and not noticed (nothing called the store since): the
        // commits only the writer's handle on the log reaches are copied into the database file
        // before the connections close.
        if let path, let lost = openedFiles?.lost(at: path), lost != .database { salvageLostLogNow() }
        // Weak references to a store being released already read nil: its entry goes with the others'.
        if let registryKey, openedFiles != nil { OpenStoreFiles.forgetReleased(key: registryKey) }
    }

    /// Opens the writer; a file that cannot be opened gets an error saying why.
    private static func open(_ openPath: String, file: String?, readOnly: Bool,
                             configuration: Configuration) throws -> Database {
        do {
            return try Database(path: openPath, readOnly: readOnly, configuration: configuration)
        } catch {
            guard let file, error.code == .cannotOpen else { throw error }
            throw openFailure(path: file, readOnly: readOnly, error: error)
        }
    }

    /// Switches the file to WAL mode. The switch needs a moment of exclusive access and does not
    /// wait on the busy handler, so when another connection (or process) opens the same new file
    /// at the same time it is retried until the busy timeout.
    private static func switchToWAL(_ db: Database, timeout: TimeInterval) throws -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        var pause: UInt32 = 1_000
        while true {
            let outcome = Result { () throws(DatabaseError) -> String? in
                try db.fetchValue("PRAGMA journal_mode = WAL", as: String.self)
            }
            switch outcome {
            case .success(let mode):
                return mode
            case .failure(let error) where (error.code == .busy || error.code == .locked) && Date() < deadline:
                usleep(pause)
                pause = min(pause * 2, 50_000)
            case .failure(let error):
                throw error
            }
        }
    }

    private static func uriEscaped(_ path: String) -> String {
        path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
            .replacingOccurrences(of: "#", with: "%23")
    }

    /// Runs `body` in a write transaction on the writer connection (one writer at a time):
    /// committed when `body` returns, rolled back entirely when it throws.
    ///
    /// A transaction that changes rows gets the next version number, and the rows it changed are
    /// logged in the same transaction (see ``changes(after:upTo:)``), with the version's origin
    /// (``CommitOrigin/write``) and `tag` (an app's "import" or "user edit", say), which
    /// live-query events and the change feed show. Live queries with ``Delivery/immediate``
    /// delivery have their events delivered before `write` returns, whichever thread delivers
    /// them (unless `write` is called inside a handler).
    ///
    /// All or nothing, whatever happens inside `body`: when SQLite rolls the transaction back by
    /// itself (a conflict clause such as `OR ROLLBACK`, a trigger's `RAISE(ROLLBACK, …)`) and
    /// `body` catches that error and goes on, its later statements are refused (none commits on
    /// its own), and `write` throws a ``DatabaseError`` with code ``DatabaseError/ResultCode/abort``.
    ///
    /// **Store calls inside a write join it.** A `write` (or a collection's write) called by the
    /// same thread inside `body` runs in a savepoint of this transaction: undone alone when it
    /// throws, committed with the rest. A `read` (or a collection's read, ``currentVersion()``)
    /// sees this transaction's uncommitted changes. A live query subscribed inside `body` reads
    /// its first result once the write ends. Calls that commit on their own (``migrate(_:)``,
    /// ``writeWithoutTransaction(tag:_:)``) and history throw ``StoreError/Kind/nesting``.
    ///
    /// Ripple runs the transaction: SQL that would end or nest it (`BEGIN`, `COMMIT`, `ROLLBACK`,
    /// `SAVEPOINT`, `RELEASE`, `ATTACH`, `DETACH`) is refused before it runs with a
    /// ``DatabaseError`` whose code is ``DatabaseError/ResultCode/authorization``. Nest with
    /// ``Database/transaction(_:_:)`` or ``Database/savepoint(_:)``.
    ///
    /// - Throws: what `body` throws (nothing is committed); ``StoreError/Kind/nesting`` when
    ///   called inside a ``read(_:)``; ``StoreError/Kind/fileMoved`` when the database file, or
    ///   its `-wal` or `-shm` file, was deleted or replaced (nothing is committed; what becomes of
    ///   earlier commits is told there).
    public func write<T>(tag: String? = nil, _ body: (Database) throws -> T) throws -> T {
        try write(origin: .write, tag: tag, body)
    }

    /// ``write(tag:_:)`` under another ``CommitOrigin`` (a replica applying a server's changes, a
    /// sync client's rebase).
    package func write<T>(origin: CommitOrigin, tag: String?, _ body: (Database) throws -> T) throws -> T {
        switch pool.currentAccess {
        case .writing(let db)?:
            return try db.savepoint { try body(db) }
        case .reading?, .readingInWrite?:
            throw StoreError(.nesting, "store.write was called inside a read: a read sees one committed state and "
                             + "cannot change it. Do the reading and the writing in one store.write (its reads see its writes)")
        case .callingBack(_, let reason)?:
            throw StoreError(.nesting, reason)
        case nil:
            break
        }
        return try commit(.transaction, origin: origin, tag: tag, body)
    }

    /// ``write(origin:tag:_:)`` that also returns the version the transaction took (`nil` when it
    /// changed no row), for a writer that must name its commits (a replica telling its
    /// subscribers which version a Postgres transaction became). When it returns, immediate live
    /// queries have had their events of that version, as after any write.
    package func writeTakingVersion<T>(origin: CommitOrigin, tag: String?,
                                       _ body: (Database) throws -> T) throws -> (result: T, version: Int64?) {
        guard pool.currentAccess == nil else {
            throw StoreError(.nesting, "a write that names its version cannot run inside another store call")
        }
        return try commitTakingVersion(.transaction, origin: origin, tag: tag, body)
    }

    /// Looks for commits made to the database file by other connections — another process, or
    /// another ``Store`` on the same file — and lets live queries re-read what they changed.
    ///
    /// Live queries call this on their own when the file watch sees the file change (or every
    /// ``Configuration/externalWritePollInterval`` when it is not watched); call it directly
    /// when you know another process wrote (or in tests, to be deterministic).
    /// A foreign commit made without Ripple (so without a version) is given the next version;
    /// a read-only store only notices foreign commits that took a version.
    ///
    /// When it returns, live queries with ``Delivery/immediate`` delivery have had the events of
    /// every commit noticed so far, whichever thread noticed it (the file watch may have been
    /// first): a test can check them at once.
    ///
    /// Inside a write it does nothing (no other connection can commit while the write holds the
    /// write lock, and the write notices earlier commits itself); inside a read it throws
    /// ``StoreError/Kind/nesting``. Throws ``StoreError/Kind/fileMoved`` (and ends every live
    /// query with it) when the database file, or its `-wal` or `-shm` file, was deleted or replaced.
    public func noticeExternalWrites() throws {
        switch pool.currentAccess {
        case .writing?, .readingInWrite?: return
        case .reading?: throw StoreError(.nesting, "noticeExternalWrites() was called inside a read: call it outside")
        case .callingBack(_, let reason)?: throw StoreError(.nesting, reason)
        case nil: break
        }
        try noticeCommits(awaitingDeliveries: true)
    }

    /// The writer's change log, installed once the store's schema exists.
    func changeLog(of db: Database) throws -> ChangeLog? {
        if let log = db.changeLog { return log }
        guard try ChangeLog.isInstalled(in: db) else {
            return nil
        }
        let log = try ChangeLog(installingOn: db, retention: configuration.changeLogRetention)
        log.onReplaced = { [weak self] error in self?.fileWasReplaced(error) }
        db.changeLog = log
        return log
    }

    /// Runs `body` in a read transaction on a reader connection: every read inside sees the same
    /// committed state, whatever the writer commits meanwhile.
    ///
    /// A `read` called by the same thread inside a read runs in it (same connection, same
    /// state); inside a ``write(tag:_:)`` it runs in the write and sees its uncommitted changes.
    /// Either way `body` cannot write: a write inside a read throws ``StoreError/Kind/nesting``.
    /// Inside the handler of a streamed history (``history(of:from:to:_:)``), whose read shows
    /// a rewound copy of a table, every store call throws ``StoreError/Kind/nesting``.
    ///
    /// - Throws: what `body` throws; ``StoreError/Kind/fileMoved`` when the database file was
    ///   deleted or replaced, or its `-wal` or `-shm` file was and the store noticed (a read
    ///   looks at the database file only: the next commit, or look for other writers, checks the
    ///   others).
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try read(waitingForReaders: true, body)
    }

    /// ``read(_:)``; without `waitingForReaders`, a reader that cannot be opened fails at once
    /// instead of being retried for the busy timeout (a live query retries its refresh later,
    /// off the thread that committed).
    func read<T>(waitingForReaders: Bool, _ body: (Database) throws -> T) throws -> T {
        switch pool.currentAccess {
        case .reading(let db)?, .readingInWrite(let db)?:
            return try body(db)
        case .writing(let db)?:
            return try pool.withAccess(.readingInWrite(db)) { try db.readingOnly { try body(db) } }
        case .callingBack(_, let reason)?:
            throw StoreError(.nesting, reason)
        case nil:
            try checkFileBeforeRead()
            return try pool.withReader(retryingOpen: waitingForReaders) { db in
                try db.transaction(.deferred) { try body(db) }
            }
        }
    }

    /// Runs `body` on the writer connection outside any transaction (for statements that cannot
    /// run in one, such as `VACUUM` or some pragmas).
    ///
    /// Rows changed by its statements are versioned and logged together, in a transaction of
    /// their own right after `body` returns (or throws), so live queries hear of them; the
    /// version's origin is ``CommitOrigin/maintenance``, with `tag`.
    ///
    /// It is the one place where `VACUUM`, `ATTACH`, `DETACH` and transactions of your own
    /// (`BEGIN` … `COMMIT`) may run. A transaction still open when `body` returns is rolled back,
    /// and the call throws.
    ///
    /// - Throws: what `body` throws; ``StoreError/Kind/nesting`` inside a write or a read (it
    ///   cannot run outside their transaction); ``StoreError/Kind/fileMoved`` when the database
    ///   file, or its `-wal` or `-shm` file, was deleted or replaced.
    public func writeWithoutTransaction<T>(tag: String? = nil, _ body: (Database) throws -> T) throws -> T {
        if let access = pool.currentAccess {
            throw StoreError(.nesting, "writeWithoutTransaction was called inside a "
                             + (access.isWrite ? "write" : "read") + ": it runs outside any transaction, so it cannot run inside one")
        }
        try checkFile()
        return try commit(.outsideTransaction, origin: .maintenance, tag: tag) { db in
            try db.allowingMaintenance { try body(db) }
        }
    }
}
