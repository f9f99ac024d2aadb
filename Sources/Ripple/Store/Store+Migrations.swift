extension Store {
    /// Applies the pending migrations of `migrator` on the writer connection, each in its own
    /// transaction, after checking that none of its applied migrations changed.
    ///
    /// ```swift
    /// var migrator = Migrator(domain: "app")
    /// migrator.register(name: "0001_create_todos", sql: "CREATE TABLE todos(id TEXT PRIMARY KEY, title TEXT)")
    /// try store.migrate(migrator)
    /// ```
    ///
    /// Throws ``StoreError`` of kind ``StoreError/Kind/migration`` (see ``Migrator``). Do not call
    /// it from inside ``write(_:)``: the writer connection is in use there.
    public func migrate(_ migrator: Migrator) throws(StoreError) {
        try runOnWriter { db throws(StoreError) in try migrator.migrate(db) }
    }

    /// Runs `body` on the writer connection, keeping the type of its error.
    func runOnWriter(_ body: (Database) throws(StoreError) -> Void) throws(StoreError) {
        var failure: StoreError?
        pool.withWriter { db in
            do throws(StoreError) { try body(db) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}
