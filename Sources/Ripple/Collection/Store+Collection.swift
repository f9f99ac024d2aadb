extension Store {
    /// The collection of `Record` values stored in table `name`, creating the table if it does
    /// not exist.
    ///
    /// ```swift
    /// struct Todo: Codable, Sendable, Identifiable {
    ///     var id: UUID
    ///     var title: String
    ///     var rank: Int
    ///     var done: Bool
    ///     var tags: [String]   // nested values are stored as JSON text
    ///     var due: Date?
    /// }
    /// let todos = try store.collection("todos", of: Todo.self)
    /// try todos.insert(Todo(id: UUID(), title: "Buy milk", rank: 1, done: false, tags: ["home"], due: nil))
    /// ```
    ///
    /// Each top-level coding key is a column, in declaration order: integers and `Bool` →
    /// `INTEGER`; `Double`, `Float`, `Date` (seconds since 1970) → `REAL`; `String`, `UUID`,
    /// `URL`, and values that encode as one string (enums with `String` raw values) → `TEXT`;
    /// `Data` and `[UInt8]` → `BLOB`; arrays, structs and dictionaries → `TEXT` holding JSON.
    /// The columns are found by decoding a `Record` from placeholder values (see the error
    /// message if a property type refuses them). An existing table is adopted as it is: its
    /// columns must cover the record's keys.
    ///
    /// - Parameters:
    ///   - name: The table's name (quoted in SQL; must not be empty, hold control characters,
    ///     begin with `sqlite_` or `ripple_` in any case, or be `*`).
    ///   - primaryKey: The column holding `Record.id`; `"id"` unless the identity is computed
    ///     from another stored property (`var id: String { code }` with `primaryKey: "code"`).
    /// - Throws: ``StoreError`` with kind ``StoreError/Kind/invalidQuery`` for a bad name or a
    ///   missing primary-key column, ``StoreError/Kind/encoding`` when the record's columns
    ///   cannot be derived, ``DatabaseError`` when SQLite fails.
    public func collection<Record: Codable & Sendable & Identifiable>(
        _ name: String, of type: Record.Type = Record.self, primaryKey: String = "id"
    ) throws -> RecordCollection<Record> where Record.ID: Encodable {
        try SQLIdentifier.validate(name, as: "table", isTable: true)
        try SQLIdentifier.validate(primaryKey, as: "primary key column")
        let columns: [String]
        if let existing = try read({ db in try Self.existingColumns(of: name, in: db) }) {
            columns = existing
        } else {
            columns = try write { db in
                if let existing = try Self.existingColumns(of: name, in: db) { return existing }
                let probed = try SchemaProbe.columns(of: Record.self)
                for column in probed { try SQLIdentifier.validate(column.name, as: "column") }
                guard probed.contains(where: { $0.name == primaryKey }) else {
                    throw StoreError(.invalidQuery, "\(Record.self) has no property \"\(primaryKey)\" for the primary key "
                                     + "(properties: \(probed.map(\.name).joined(separator: ", ")))")
                }
                try db.execute(CollectionSchema.createTableSQL(table: name, columns: probed, primaryKey: primaryKey))
                return probed.map(\.name)
            }
        }
        guard columns.contains(primaryKey) else {
            throw StoreError(.invalidQuery, "table \"\(name)\" has no column \"\(primaryKey)\" for the primary key "
                             + "(columns: \(columns.joined(separator: ", ")))")
        }
        return RecordCollection(store: self, schema: CollectionSchema(table: name, columns: columns, primaryKey: primaryKey))
    }

    /// The columns of table `name` in order, or `nil` when there is no such table.
    private static func existingColumns(of table: String, in db: Database) throws -> [String]? {
        let rows = try db.fetchAll("SELECT name FROM pragma_table_info(?) ORDER BY cid", [table])
        let names = rows.compactMap { row -> String? in
            if case .text(let name) = row.values[0] { name } else { nil }
        }
        return names.isEmpty ? nil : names
    }
}

extension StoreError.Kind {
    /// The record to update or the row expected does not exist.
    public static let notFound = StoreError.Kind(name: "not found")
}
