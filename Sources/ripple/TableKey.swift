import ArgumentParser
import Ripple

/// A table's columns and declared primary key, read from its schema: what the subcommands that
/// follow a table's rows from one result to the next (`ripple history`, `ripple watch`) need to
/// tell them apart.
struct TableKey {
    /// The table's name.
    let table: String
    /// Its column names, in order.
    let columns: [String]
    /// Its declared primary-key columns, in key order, each with its declared type; empty when it
    /// declares none.
    let key: [(name: String, type: String)]
    /// Whether it is a `WITHOUT ROWID` table.
    let withoutRowid: Bool
    /// The column that is another name for the rowid (an INTEGER PRIMARY KEY, by SQLite's rule).
    let rowidAlias: String?

    /// Reads the shape of `table` from SQLite's answers (see `TableLayout`); throws
    /// `ValidationError` when `database` (the file, for the message) has no such table.
    init(table: String, in db: Database, database: String) throws {
        guard let layout = try TableLayout.read(db, table: table), layout.kind != .shadow else {
            throw ValidationError("no table \(table) in \(database)")
        }
        self.table = layout.name
        columns = layout.columns.map(\.name)
        key = layout.primaryKey.map { (layout.columns[$0].name, layout.columns[$0].declaredType) }
        withoutRowid = layout.withoutRowid
        rowidAlias = layout.rowidAlias.map { layout.columns[$0].name }
    }

    /// The name SQL gives the rowid here: the first of rowid, oid and _rowid_ that no column
    /// takes; `nil` without rowid, or when the columns take all three.
    var rowidName: String? { withoutRowid ? nil : RowidAlias.available(avoiding: columns) }

    /// An SQL expression whose value tells the table's rows apart, as `ripple history` follows
    /// them: the rowid, under a name no column takes (a column named rowid, oid or _rowid_ hides
    /// that name), or the INTEGER PRIMARY KEY; else the key's columns as a JSON array.
    func rowidOrKey() throws -> String {
        if let rowidName { return rowidName }
        if let rowidAlias { return quotedIdentifier(rowidAlias) }
        guard !key.isEmpty else {
            throw ValidationError("the rows of \(table) have no identity to follow: its columns take every name of "
                                  + "the rowid (rowid, oid, _rowid_) and it declares no primary key")
        }
        return "json_array(" + key.map { quotedIdentifier($0.name) }.joined(separator: ", ") + ")"
    }
}
