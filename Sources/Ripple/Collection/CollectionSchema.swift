/// The table behind a collection: its name, its columns in order, its primary key, and the SQL
/// of every collection statement, built once (identifiers quoted, values always `?` parameters).
///
/// Every statement names the table with its schema (`"main"."todos"`): a `TEMP` table, or a
/// table of an attached database, of the same name would otherwise take the collection's reads
/// and writes, which the change log (of `main` only) never sees.
///
/// Generated columns are read like the others and never written: the statements that write
/// leave them out (their parameters may then be missing; the encoder drops their values).
final class CollectionSchema: Sendable {
    /// What a collection's live queries can learn from the change log.
    enum Observation: Sendable, Equatable {
        /// The change log names the table's rows by the collection's key: a commit's changed rows
        /// are checked one by one (row-precise invalidation).
        case byKey
        /// The change log names the table's rows by something else (its rowid, when the key is a
        /// `UNIQUE` column of a rowid table): any change to the table runs the query again.
        case byTable
        /// The collection is a view: the query runs again after any change to a table it reads,
        /// found by SQLite while preparing it.
        case byTablesRead
    }

    let table: String
    /// The schema whose table this is: `main`, or `temp` for history's rewound copy.
    let database: String
    /// The table named with its schema, quoted.
    let quotedTable: String
    let observation: Observation
    let layout: ColumnLayout
    let primaryKey: String
    let primaryKeyIndex: Int
    /// Per column, whether it is generated; empty when none is.
    let generated: [Bool]
    /// Per column, what its affinity would convert of a record's values; empty when nothing.
    let conversions: [ColumnConversions]

    /// `"id", "title", …`
    let quotedColumnList: String
    let selectAllSQL: String
    let selectByIDSQL: String
    let insertSQL: String
    let upsertSQL: String
    let updateSQL: String
    let deleteSQL: String
    let countSQL: String

    /// `conversions`: by column name, what the column's affinity converts (see ``ColumnConversions``).
    init(table: String, columns: [String], primaryKey: String, observation: Observation = .byKey, database: String = "main",
         generated: Set<String> = [], conversions: [String: ColumnConversions] = [:]) {
        let generated = columns.contains(where: generated.contains) ? columns.map(generated.contains) : []
        self.generated = generated
        let converted = columns.map { conversions[$0] ?? [] }
        self.conversions = converted.allSatisfy(\.isEmpty) ? [] : converted
        self.table = table
        self.database = database
        self.quotedTable = SQLIdentifier.quoted(database) + "." + SQLIdentifier.quoted(table)
        self.observation = observation
        self.layout = ColumnLayout(columns)
        self.primaryKey = primaryKey
        let primaryKeyIndex = columns.firstIndex(of: primaryKey)!
        self.primaryKeyIndex = primaryKeyIndex
        let quoted = columns.map(SQLIdentifier.quoted)
        let quotedKey = quoted[primaryKeyIndex]
        // Parameter n is column n - 1 in every statement that binds a whole record (numbered
        // parameters), so one encoder binds records for inserts, upserts and updates alike.
        let written = columns.indices.filter { generated.isEmpty || !generated[$0] }
        let parameters = written.map { "?\($0 + 1)" }.joined(separator: ", ")
        let nonKey = written.filter { $0 != primaryKeyIndex }

        quotedColumnList = quoted.joined(separator: ", ")
        selectAllSQL = "SELECT \(quotedColumnList) FROM \(quotedTable)"
        selectByIDSQL = "\(selectAllSQL) WHERE \(quotedKey) = ?"
        insertSQL = "INSERT INTO \(quotedTable) (\(written.map { quoted[$0] }.joined(separator: ", "))) VALUES (\(parameters))"
        // A true update on conflict (not REPLACE, which deletes and re-inserts the row).
        upsertSQL = nonKey.isEmpty
            ? "\(insertSQL) ON CONFLICT (\(quotedKey)) DO NOTHING"
            : "\(insertSQL) ON CONFLICT (\(quotedKey)) DO UPDATE SET "
                + nonKey.map { "\(quoted[$0]) = excluded.\(quoted[$0])" }.joined(separator: ", ")
        updateSQL = nonKey.isEmpty
            ? "UPDATE \(quotedTable) SET \(quotedKey) = ?\(primaryKeyIndex + 1) WHERE \(quotedKey) = ?\(primaryKeyIndex + 1)"
            : "UPDATE \(quotedTable) SET " + nonKey.map { "\(quoted[$0]) = ?\($0 + 1)" }.joined(separator: ", ")
                + " WHERE \(quotedKey) = ?\(primaryKeyIndex + 1)"
        deleteSQL = "DELETE FROM \(quotedTable) WHERE \(quotedKey) = ?"
        countSQL = "SELECT count(*) FROM \(quotedTable)"
    }

    /// The same collection read from `database` instead (history reads a rewound copy in `temp`).
    func reading(from database: String) -> CollectionSchema {
        CollectionSchema(table: table, columns: layout.names, primaryKey: primaryKey, observation: observation, database: database,
                         generated: Set(layout.names.indices.filter { !generated.isEmpty && generated[$0] }.map { layout.names[$0] }),
                         conversions: conversions.isEmpty ? [:]
                             : Dictionary(uniqueKeysWithValues: zip(layout.names, conversions)))
    }

    /// `orderings`, then the primary key (ascending) unless they already hold it: the order is
    /// total, so which rows a window holds, and in what order, is a function of the data — not
    /// of the query plan, nor of which rows a live query placed in place.
    func totalOrder(_ orderings: [ColumnOrdering]) -> [ColumnOrdering] {
        guard !orderings.contains(where: { $0.column.name == primaryKey }) else { return orderings }
        return orderings + [ColumnOrdering(Column(primaryKey))]
    }

    /// `CREATE TABLE IF NOT EXISTS … STRICT` for probed columns: each column declares its type
    /// and, unless its property is optional, `NOT NULL`, so that SQLite refuses a value of
    /// another type or a NULL from any writer.
    static func createTableSQL(table: String, columns: [SchemaProbe.Column], primaryKey: String) -> String {
        let definitions = columns.map { column in
            "\(SQLIdentifier.quoted(column.name)) \(column.affinity.declaredType)"
                + (column.name == primaryKey ? " PRIMARY KEY NOT NULL" : column.isOptional ? "" : " NOT NULL")
        }
        return "CREATE TABLE IF NOT EXISTS main.\(SQLIdentifier.quoted(table)) (\(definitions.joined(separator: ", "))) STRICT"
    }
}
