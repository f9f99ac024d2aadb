/// Reads and writes for async code: the same calls as ``Store/write(tag:_:)`` and
/// ``Store/read(_:)``, run on threads of the store's own while the calling task suspends.
extension Store {
    /// Runs `body` in a write transaction, as ``write(tag:_:)`` does, without blocking the
    /// calling task's thread: the transaction runs on a thread of the store's own and the task
    /// suspends until it ends.
    ///
    /// Call it from async code (an actor, a server's handler, a `Task`) instead of
    /// ``write(tag:_:)``, which holds its thread while it waits for the writer connection and
    /// while the transaction runs: a few such waits can take every thread of Swift's cooperative
    /// pool (as many as the machine has cores) and stall every task of the process.
    ///
    /// ```swift
    /// let id = try await store.asyncWrite(tag: "import") { db in
    ///     try db.execute("INSERT INTO notes(body) VALUES (?)", ["Buy milk"])
    ///     return db.lastInsertedRowID
    /// }
    /// ```
    ///
    /// Everything else is ``write(tag:_:)``'s: one writer at a time (async and blocking writes
    /// wait for each other in one order), the same version, change log, commit participants and
    /// errors, and live queries with ``Delivery/immediate`` delivery have had their events when
    /// it returns. Async writes wait for the writer in the order they were called, holding no
    /// thread while they wait.
    ///
    /// **Cancellation.** When the calling task is cancelled before the transaction begins,
    /// `body` does not run; while `body` runs, the SQLite statement it is running is interrupted
    /// (it throws ``DatabaseError`` with code ``DatabaseError/ResultCode/interrupt``) and the
    /// transaction is rolled back once `body` ends, even if `body` caught that error. Either way
    /// nothing is committed and the call throws `CancellationError`. Once `body` has returned,
    /// the commit completes and its result is returned.
    ///
    /// It is named apart from ``write(tag:_:)`` so that blocking calls in async code keep
    /// their meaning (in an async context, Swift picks an async overload of the same name).
    ///
    /// - Throws: what ``write(tag:_:)`` throws, or `CancellationError`.
    public func asyncWrite<T: Sendable>(tag: String? = nil, _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await asyncWrite(origin: .write, tag: tag, body)
    }

    /// ``asyncWrite(tag:_:)`` under another ``CommitOrigin`` (see ``write(origin:tag:_:)``).
    package func asyncWrite<T: Sendable>(origin: CommitOrigin, tag: String?,
                                         _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runSuspending(on: writeLane) { call in
            try self.write(origin: origin, tag: tag) { db in try call.run(body, on: db) }
        }
    }

    /// ``writeTakingVersion(origin:tag:_:)`` for async code (see ``asyncWrite(tag:_:)``).
    package func asyncWriteTakingVersion<T: Sendable>(origin: CommitOrigin, tag: String?,
                                                      _ body: @escaping @Sendable (Database) throws -> T) async throws
        -> (result: T, version: Int64?) {
        try await runSuspending(on: writeLane) { call in
            let (result, version) = try self.writeTakingVersion(origin: origin, tag: tag) { db in try call.run(body, on: db) }
            return (result, version)
        }
    }

    /// Runs `body` in a read transaction, as ``read(_:)`` does, without blocking the calling
    /// task's thread: the read runs on a thread of the store's own (as many at once as the store
    /// has readers, ``Configuration/readerCount``) and the task suspends until it ends.
    ///
    /// ```swift
    /// let count = try await store.asyncRead { db in
    ///     try db.fetchValue("SELECT count(*) FROM notes", as: Int.self) ?? 0
    /// }
    /// ```
    ///
    /// It sees one committed state, as ``read(_:)`` does. Cancelled before it begins, `body`
    /// does not run; while it runs, its SQLite statement is interrupted; either way the call
    /// throws `CancellationError` (see ``asyncWrite(tag:_:)``).
    ///
    /// - Throws: what ``read(_:)`` throws, or `CancellationError`.
    public func asyncRead<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runSuspending(on: readLane) { call in
            try self.read { db in try call.run(body, on: db) }
        }
    }

    /// ``currentVersion()`` for async code: read on a reader thread of the store's own while the
    /// task suspends (see ``asyncRead(_:)``).
    package func asyncCurrentVersion() async throws -> Int64 {
        try await asyncRead { db in try ChangeLog.version(db) }
    }

    /// ``taggedVersions(after:)`` for async code: read on a reader thread of the store's own
    /// while the task suspends (see ``asyncRead(_:)``).
    package func asyncTaggedVersions(after version: Int64) async throws -> [(version: Int64, tag: String)] {
        try await asyncRead { db in try ChangeLog.taggedVersions(in: db, after: version) }
    }

    /// ``history(table:sql:arguments:identity:from:to:)`` for async code: the history is read
    /// on a reader thread of the store's own while the task suspends. Cancelled before it
    /// begins, it does not run and throws `CancellationError`; once begun, it runs to its end.
    package func asyncHistory(table: String, sql: String, arguments: [SQLValue], identity: String,
                              from: Int64, to: Int64) async throws -> [HistoryStep<Row>] {
        try await asyncHistory(tables: [table], sql: sql, arguments: arguments, identity: identity, from: from, to: to)
    }

    /// ``history(tables:sql:arguments:identity:from:to:)`` for async code: every table named is
    /// rewound, all together. Read as ``asyncHistory(table:sql:arguments:identity:from:to:)`` is.
    package func asyncHistory(tables: [String], sql: String, arguments: [SQLValue], identity: String,
                              from: Int64, to: Int64) async throws -> [HistoryStep<Row>] {
        try await runSuspending(on: readLane) { call in
            if call.isCancelled { throw CancellationError() }
            return try self.history(tables: tables, sql: sql, arguments: arguments, identity: identity, from: from, to: to)
        }
    }

    /// The history of a raw SQL query with every table it reads rewound, all together (the
    /// tables SQLite reports while preparing `sql`, learned in the history's own read
    /// transaction), for async code: read as ``asyncHistory(table:sql:arguments:identity:from:to:)``
    /// is. A sync node resumes a subscription with it, whatever tables its query's sub-queries read.
    package func asyncHistory(rewindingTablesReadBy sql: String, arguments: [SQLValue], identity: String,
                              from: Int64, to: Int64) async throws -> [HistoryStep<Row>] {
        try await runSuspending(on: readLane) { call in
            if call.isCancelled { throw CancellationError() }
            var steps: [HistoryStep<Row>] = []
            try self.history(rewindingTablesReadBy: sql, arguments: arguments, identity: identity, from: from, to: to) {
                steps.append($0)
            }
            return steps
        }
    }

    /// Runs `work` on `lane` and suspends until it ends; the task's cancellation reaches the
    /// work through its ``AsyncStoreCall``.
    private func runSuspending<T: Sendable>(on lane: WorkLane,
                                            _ work: @escaping @Sendable (AsyncStoreCall) throws -> T) async throws -> T {
        let call = AsyncStoreCall()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                lane.submit {
                    do {
                        continuation.resume(returning: try work(call))
                    } catch {
                        continuation.resume(throwing: call.isCancelled ? CancellationError() : error)
                    }
                }
            }
        } onCancel: {
            call.cancel()
        }
    }
}
