extension RecordCollection {
    // MARK: One record

    /// Inserts `record`. Fails with a ``DatabaseError`` whose code is
    /// ``DatabaseError/ResultCode/constraint`` when a record with the same id exists (which is
    /// left unchanged).
    public func insert(_ record: Record) throws {
        try store.write { db in try insert(record, in: db) }
    }

    /// Inserts `record` in `db`'s transaction.
    public func insert(_ record: Record, in db: Database) throws {
        try run(schema.insertSQL, for: CollectionOfOne(record), inserting: true, in: db)
    }

    /// Inserts `record`, or replaces every column of the record with the same id (an SQL
    /// update, not a delete and insert).
    public func upsert(_ record: Record) throws {
        try store.write { db in try upsert(record, in: db) }
    }

    /// Inserts or replaces `record` in `db`'s transaction.
    public func upsert(_ record: Record, in db: Database) throws {
        try run(schema.upsertSQL, for: CollectionOfOne(record), inserting: true, in: db)
    }

    /// Replaces the stored record with the same id as `record`. Throws ``StoreError`` with kind
    /// ``StoreError/Kind/notFound`` when there is none.
    public func update(_ record: Record) throws {
        try store.write { db in try update(record, in: db) }
    }

    /// Replaces the stored record with the same id as `record`, in `db`'s transaction.
    public func update(_ record: Record, in db: Database) throws {
        try run(schema.updateSQL, for: CollectionOfOne(record), requiringChanges: true, in: db)
    }

    /// Deletes the record with `id`; returns whether there was one.
    @discardableResult
    public func delete(id: Record.ID) throws -> Bool {
        try store.write { db in try delete(id: id, in: db) }
    }

    /// Deletes the record with `id` in `db`'s transaction; returns whether there was one.
    @discardableResult
    public func delete(id: Record.ID, in db: Database) throws -> Bool {
        try delete(ids: CollectionOfOne(id), in: db) == 1
    }

    // MARK: Batches, each in one transaction

    /// Inserts `records` in one transaction: all of them, or none when one fails (a duplicate
    /// id, a value that does not encode).
    ///
    /// - Complexity: O(n); one prepared statement, each record bound without intermediate
    ///   dictionaries.
    public func insert(contentsOf records: some Sequence<Record>) throws {
        try store.write { db in try insert(contentsOf: records, in: db) }
    }

    /// Inserts `records` in `db`'s transaction, all or none (a savepoint inside the transaction).
    public func insert(contentsOf records: some Sequence<Record>, in db: Database) throws {
        try db.transaction { try run(schema.insertSQL, for: records, inserting: true, in: db) }
    }

    /// Inserts or replaces `records` in one transaction, all or none.
    public func upsert(contentsOf records: some Sequence<Record>) throws {
        try store.write { db in try upsert(contentsOf: records, in: db) }
    }

    /// Inserts or replaces `records` in `db`'s transaction, all or none.
    public func upsert(contentsOf records: some Sequence<Record>, in db: Database) throws {
        try db.transaction { try run(schema.upsertSQL, for: records, inserting: true, in: db) }
    }

    /// Replaces stored records in one transaction, all or none: throws ``StoreError`` with kind
    /// ``StoreError/Kind/notFound`` (and changes nothing) when one of them is not stored.
    public func update(contentsOf records: some Sequence<Record>) throws {
        try store.write { db in try update(contentsOf: records, in: db) }
    }

    /// Replaces stored records in `db`'s transaction, all or none.
    public func update(contentsOf records: some Sequence<Record>, in db: Database) throws {
        try db.transaction { try run(schema.updateSQL, for: records, requiringChanges: true, in: db) }
    }

    /// Deletes the records with `ids` in one transaction; returns how many there were.
    @discardableResult
    public func delete(ids: some Sequence<Record.ID>) throws -> Int {
        try store.write { db in try delete(ids: ids, in: db) }
    }

    /// Deletes the records with `ids` in `db`'s transaction; returns how many there were.
    @discardableResult
    public func delete(ids: some Sequence<Record.ID>, in db: Database) throws -> Int {
        try db.transaction {
            let statement = try db.cachedStatement(schema.deleteSQL)
            defer { statement.reset() }
            var deleted = 0
            for id in ids {
                try statement.bind(try keyValue(id), at: 1)
                _ = try statement.step()
                deleted += db.changedRowCount
                statement.reset()
            }
            return deleted
        }
    }

    /// Deletes every record; returns how many there were.
    @discardableResult
    public func deleteAll() throws -> Int {
        try store.write { db in try deleteAll(in: db) }
    }

    /// Deletes every record in `db`'s transaction; returns how many there were.
    @discardableResult
    public func deleteAll(in db: Database) throws -> Int {
        try db.execute("DELETE FROM \(schema.quotedTable)")
        return db.changedRowCount
    }

    // MARK: Internals

    /// Runs `sql` (whose parameter n is column n - 1) once per record. When `inserting`, the
    /// statement inserts the record's row (an insert or an upsert): the change capture is told
    /// each row's key as it is bound.
    private func run(_ sql: String, for records: some Sequence<Record>, inserting: Bool = false,
                     requiringChanges: Bool = false, in db: Database) throws {
        let statement = try db.cachedStatement(sql)
        defer { statement.reset() }
        let encoder = RowEncoder(statement: statement, layout: schema.layout, table: schema.table, recordType: Record.self,
                                 generated: schema.generated, conversions: schema.conversions)
        defer { encoder.finish() }
        if inserting, let capture = db.changeCapture {
            capture.expectInserts(into: schema.table)
            encoder.announceKeys(to: capture, parameter: Int32(schema.primaryKeyIndex + 1))
        }
        defer { if inserting { db.changeCapture?.stopExpectingInserts() } }
        func write(_ record: Record) throws {
            try encoder.bind(record)
            try encoder.run()
            if requiringChanges && db.changedRowCount == 0 {
                var message = "no \(Record.self) with this id in \"\(schema.table)\" to update"
                if store.configuration.publicStatementArguments { message += " (id: \(record.id))" }
                throw StoreError(.notFound, message)
            }
        }
        // The records of an array are read in place: this code is not specialized for the
        // sequence's type, and its iterator would cost a call through a witness per record.
        let wroteInPlace = try records.withContiguousStorageIfAvailable { buffer -> Bool in
            for index in buffer.indices { try write(buffer[index]) }
            return true
        }
        if wroteInPlace == nil {
            for record in records { try write(record) }
        }
    }
}
