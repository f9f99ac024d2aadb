extension Database {
    /// The rows of a raw SQL query decoded as `type`, matching result columns to coding keys by
    /// name (arguments are bound, never spliced):
    ///
    /// ```swift
    /// let milk = try store.read { db in
    ///     try db.fetchAll(Todo.self, "SELECT * FROM todos WHERE title LIKE ?", ["%milk%"])
    /// }
    /// let titles = try store.read { db in try db.fetchAll(String.self, "SELECT title FROM todos") }
    /// ```
    ///
    /// Values are read as collections store them (see ``Store/collection(_:of:primaryKey:)``);
    /// a missing column decodes as `nil` for an optional property. A single-value type (`String`,
    /// `Int`…) reads the first column.
    ///
    /// - Throws: ``StoreError`` with kind ``StoreError/Kind/decoding`` naming the column and the
    ///   expected type when a value does not decode; ``DatabaseError`` when SQLite fails.
    public func fetchAll<Record: Decodable>(_ type: Record.Type, _ sql: String,
                                            _ arguments: [any SQLValueConvertible] = []) throws -> [Record] {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        return try RowDecoder(statement: statement, recordType: Record.self).decodeAll(Record.self, from: statement)
    }

    /// The first row of a raw SQL query decoded as `type`, or `nil` when there is none.
    public func fetchOne<Record: Decodable>(_ type: Record.Type, _ sql: String,
                                            _ arguments: [any SQLValueConvertible] = []) throws -> Record? {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        return try RowDecoder(statement: statement, recordType: Record.self).decodeNext(Record.self, from: statement)
    }
}
