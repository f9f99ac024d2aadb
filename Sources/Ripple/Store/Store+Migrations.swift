extension Store {
    /// Applies the pending migrations of `migrator` on the writer connection, each in its own
    /// transaction, after checking that none of its applied migrations changed.
    ///
    /// ```swift
    /// var migrator = try Migrator(domain: "app")
    /// try migrator.register(name: "0001_create_todos", sql: "CREATE TABLE todos(id TEXT PRIMARY KEY, title TEXT)")
    /// try store.migrate(migrator)
    /// ```
    ///
    /// Throws ``StoreError`` of kind ``StoreError/Kind/migration`` (see ``Migrator``); of kind
    /// ``StoreError/Kind/nesting`` inside a ``write(_:)`` or ``read(_:)`` (each migration commits
    /// on its own); of kind ``StoreError/Kind/fileMoved`` when the file was deleted or replaced.
    ///
    /// Applied migrations take a version together, so live queries re-read.
    public func migrate(_ migrator: Migrator) throws(StoreError) {
        if let access = pool.currentAccess {
            throw StoreError(.nesting, "migrate was called inside a \(access.isWrite ? "write" : "read"): each migration "
                             + "commits in a transaction of its own, so migrations cannot run inside one. Migrate outside")
        }
        try checkFile()
        var routing: ObservationCenter.Routing?
        var failure: StoreError?
        try runOnWriter { db throws(StoreError) in
            let countSQL = "SELECT count(*) FROM ripple_migrations"
            let log: ChangeLog?
            let appliedBefore: Int?
            do {
                log = try changeLog(of: db)
                appliedBefore = try db.fetchValue(countSQL, as: Int.self)
            } catch {
                throw StoreError(.migration, "cannot read the applied migrations: \(error)", underlying: error as? DatabaseError)
            }
            // Migrations committed before one that fails still take a version: each commits on its own.
            do throws(StoreError) { try migrator.migrate(db) } catch { failure = error }
            do {
                if let log, try db.fetchValue(countSQL, as: Int.self) != appliedBefore {
                    routing = observation.route(try log.recordSchemaChange(db))
                }
            } catch {
                if failure == nil {
                    failure = StoreError(.migration, "migrated, but could not take a version for the change: \(error)",
                                         underlying: error as? DatabaseError)
                }
            }
        }
        if let routing { observation.deliver(routing) }
        if let failure { throw failure }
    }

    /// Runs `body` on the writer connection, keeping the type of its error.
    func runOnWriter(_ body: (Database) throws(StoreError) -> Void) throws(StoreError) {
        var failure: StoreError?
        do {
            try pool.withWriter { db in
                do throws(StoreError) { try body(db) } catch { failure = error }
            }
        } catch {
            throw error as? StoreError ?? StoreError(.migration, "\(error)")
        }
        if let failure { throw failure }
    }
}
