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
    ///
    /// Applied migrations take a version together, so live queries re-read.
    public func migrate(_ migrator: Migrator) throws(StoreError) {
        var summary: CommitSummary?
        try runOnWriter { db throws(StoreError) in
            let log: ChangeLog?
            let before = db.totalChangedRowCount
            let schemaBefore: Int64?
            do {
                log = try changeLog(of: db)
                schemaBefore = try db.fetchValue("PRAGMA schema_version", as: Int64.self)
            } catch {
                throw StoreError(.migration, "cannot read the schema before migrating: \(error)", underlying: error as? DatabaseError)
            }
            try migrator.migrate(db)
            do {
                let schemaAfter = try db.fetchValue("PRAGMA schema_version", as: Int64.self)
                if let log, db.totalChangedRowCount != before || schemaAfter != schemaBefore {
                    summary = try log.recordSchemaChange(db)
                }
            } catch {
                throw StoreError(.migration, "migrated, but could not take a version for the change: \(error)",
                                 underlying: error as? DatabaseError)
            }
        }
        if let summary { observation.didCommit(summary) }
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
