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
    /// `INTEGER`; `Double`, `Float` → `REAL`; `Date` → `ANY` (its exact number of seconds since
    /// 1970: a real before 1970, decimal text from 1970 on); `String`, `UUID`, `URL`, `Decimal`,
    /// and values that encode as one string (enums with `String` raw values) → `TEXT`; `Data`
    /// and `[UInt8]` → `BLOB`; arrays, structs and dictionaries → `TEXT` holding JSON. What each
    /// stores, and what filters on it compare, is in <doc:StoredValues>.
    /// The columns are found by decoding a `Record` from placeholder values (see the error
    /// message if a property type refuses them).
    ///
    /// **The table says what the type says.** A new table is `STRICT`, each column declares its
    /// type, and every column of a non-optional property is `NOT NULL`: SQLite refuses a value of
    /// another type, or a NULL, from any writer (the `sqlite3` shell too). An existing table is
    /// compared with the type (see the rules of ``StoreError/Kind/schemaMismatch``): a new
    /// optional property (or one decoded with `decodeIfPresent`) is added as a column, a logged,
    /// versioned schema change; any other difference throws, naming the property, the column,
    /// what differs and the SQL migration that fixes it, and changes nothing. Tables created
    /// before Ripple declared `STRICT` and `NOT NULL` are used as they are (compared on types,
    /// columns and keys, not on nullability); a type that cannot be probed adopts an existing
    /// table without comparing.
    ///
    /// - Parameters:
    ///   - type: The record type (each top-level property a column).
    ///   - name: The table's name (quoted in SQL; must not be empty, hold control characters,
    ///     begin with `sqlite_` or `ripple_` in any case, or be `*`).
    ///   - primaryKey: The column holding `Record.id`; `"id"` unless the identity is computed
    ///     from another stored property (`var id: String { code }` with `primaryKey: "code"`).
    /// - Throws: ``StoreError`` with kind ``StoreError/Kind/invalidQuery`` for a bad name or a
    ///   missing primary-key column, ``StoreError/Kind/schemaMismatch`` when the type and an
    ///   existing table differ, ``StoreError/Kind/encoding`` when the record's columns cannot be
    ///   derived for a new table, ``DatabaseError`` when SQLite fails.
    public func collection<Record: Codable & Sendable & Identifiable>(
        _ name: String, of type: Record.Type = Record.self, primaryKey: String = "id"
    ) throws -> RecordCollection<Record> where Record.ID: Encodable {
        try SQLIdentifier.validate(name, as: "table", isTable: true)
        try SQLIdentifier.validate(primaryKey, as: "primary key column")
        let probe = Result { () throws(StoreError) in try SchemaProbe.columns(of: Record.self) }
        let columns: [String]
        var observation = CollectionSchema.Observation.byKey
        var generated: Set<String> = []
        var conversions: [String: ColumnConversions] = [:]
        if let shape = try read({ db in try DeclaredTable.read(name, in: db) }) {
            observation = shape.observation(keyedBy: primaryKey)
            generated = Set(shape.columns.filter(\.isGenerated).map(\.name))
            for column in shape.columns {
                conversions[column.name] = ColumnConversions(
                    affinity: DeclaredTable.affinity(of: column.declaredType, strict: shape.isStrict), strict: shape.isStrict)
            }
            if let probed = try? probe.get() {
                let additions = try TableCheck.compare(recordType: "\(Record.self)", probed: probed, table: name, shape: shape,
                                                       primaryKey: primaryKey)
                if !additions.isEmpty { try addColumns(additions, to: name) }
                columns = probed.map(\.name)
            } else {
                columns = shape.columns.map(\.name)   // not probed: adopted as it is
            }
        } else {
            (columns, generated, observation) = try write { db in
                // Made meanwhile by another connection: adopted as it is.
                if let existing = try DeclaredTable.read(name, in: db) {
                    return (existing.columns.map(\.name), Set(existing.columns.filter(\.isGenerated).map(\.name)),
                            existing.observation(keyedBy: primaryKey))
                }
                let probed = try probe.get()
                for column in probed { try SQLIdentifier.validate(column.name, as: "column") }
                guard probed.contains(where: { $0.name == primaryKey }) else {
                    throw StoreError(.invalidQuery, "\(Record.self) has no property \"\(primaryKey)\" for the primary key "
                                     + "(properties: \(probed.map(\.name).joined(separator: ", ")))")
                }
                try db.execute(CollectionSchema.createTableSQL(table: name, columns: probed, primaryKey: primaryKey))
                return (probed.map(\.name), [], .byKey)
            }
        }
        guard columns.contains(primaryKey) else {
            throw StoreError(.invalidQuery, "table \"\(name)\" has no column \"\(primaryKey)\" for the primary key "
                             + "(columns: \(columns.joined(separator: ", ")))")
        }
        return RecordCollection(store: self, schema: CollectionSchema(table: name, columns: columns, primaryKey: primaryKey,
                                                                      observation: observation,
                                                                      generated: generated, conversions: conversions))
    }

    /// Adds columns for new optional properties, in one write (a versioned schema change);
    /// columns another connection added meanwhile are skipped.
    private func addColumns(_ additions: [SchemaProbe.Column], to table: String) throws {
        try write { db in
            let shape = try DeclaredTable.read(table, in: db)
            let existing = Set(shape?.columns.map(\.name) ?? [])
            for column in additions where !existing.contains(column.name) {
                try SQLIdentifier.validate(column.name, as: "column")
                try db.execute("ALTER TABLE main.\(SQLIdentifier.quoted(table)) ADD COLUMN "
                               + "\(SQLIdentifier.quoted(column.name)) \(column.affinity.declaredType(strict: shape?.isStrict ?? true))")
            }
        }
    }
}

extension StoreError.Kind {
    /// The record to update or the row expected does not exist.
    public static let notFound = StoreError.Kind(name: "not found")
}
