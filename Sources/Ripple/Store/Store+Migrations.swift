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
    /// ``StoreError/Kind/nesting`` inside a ``write(tag:_:)`` or ``read(_:)`` (each migration commits
    /// on its own); of kind ``StoreError/Kind/fileMoved`` when the file was deleted or replaced.
    ///
    /// Applied migrations take a version together (origin ``CommitOrigin/migration``), so live
    /// queries re-read: those over a table whose schema changed run again, those over rows a
    /// migration changed read them again.
    public func migrate(_ migrator: Migrator) throws(StoreError) {
        if let access = pool.currentAccess {
            throw StoreError(.nesting, "migrate was called inside a \(access.isWrite ? "write" : "read"): each migration "
                             + "commits in a transaction of its own, so migrations cannot run inside one. Migrate outside")
        }
        try checkFile()
        do {
            try commit(.outsideTransaction, origin: .migration, tag: nil) { db in try migrator.migrate(db) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.migration, "migrated, but could not take a version for the change: \(error)",
                             underlying: error as? DatabaseError)
        }
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
