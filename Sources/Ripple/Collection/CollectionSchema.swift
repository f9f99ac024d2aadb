/// The table behind a collection: its name, its columns in order, its primary key, and the SQL
/// of every collection statement, built once (identifiers quoted, values always `?` parameters).
///
/// Generated columns are read like the others and never written: the statements that write
/// leave them out (their parameters may then be missing; the encoder drops their values).
final class CollectionSchema: Sendable {
    let table: String
    let quotedTable: String
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
    init(table: String, columns: [String], primaryKey: String, generated: Set<String> = [],
         conversions: [String: ColumnConversions] = [:]) {
        let generated = columns.contains(where: generated.contains) ? columns.map(generated.contains) : []
        self.generated = generated
        let converted = columns.map { conversions[$0] ?? [] }
        self.conversions = converted.allSatisfy(\.isEmpty) ? [] : converted
        self.table = table
        self.quotedTable = SQLIdentifier.quoted(table)
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
        return "CREATE TABLE IF NOT EXISTS \(SQLIdentifier.quoted(table)) (\(definitions.joined(separator: ", "))) STRICT"
    }
}
