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

    /// Reads the shape of `table`; throws `ValidationError` when `database` (the file, for the
    /// message) has no such table.
    init(table: String, in db: Database, database: String) throws {
        guard let sql = try db.fetchValue("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", [table],
                                          as: String.self) else {
            throw ValidationError("no table \(table) in \(database)")
        }
        let rows = try db.fetchAll("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", [table])
        self.table = table
        columns = try rows.map { try $0.value("name", as: String.self) }
        key = try rows.filter { try $0.value("pk", as: Int.self) > 0 }
            .sorted { try $0.value("pk", as: Int.self) < $1.value("pk", as: Int.self) }
            .map { (try $0.value("name", as: String.self), try $0.value("type", as: String.self)) }
        withoutRowid = sql.uppercased().contains("WITHOUT ROWID")
    }

    /// The name SQL gives the rowid here: the first of rowid, oid and _rowid_ that no column
    /// takes; `nil` without rowid, or when the columns take all three.
    var rowidName: String? { withoutRowid ? nil : RowidAlias.available(avoiding: columns) }

    /// An SQL expression whose value tells the table's rows apart, as `ripple history` follows
    /// them: the rowid, under a name no column takes (a column named rowid, oid or _rowid_ hides
    /// that name), or the INTEGER PRIMARY KEY; else the key's columns as a JSON array.
    func rowidOrKey() throws -> String {
        if let rowidName { return rowidName }
        if !withoutRowid, key.count == 1, key[0].type.uppercased() == "INTEGER" { return quotedIdentifier(key[0].name) }
        guard !key.isEmpty else {
            throw ValidationError("the rows of \(table) have no identity to follow: its columns take every name of "
                                  + "the rowid (rowid, oid, _rowid_) and it declares no primary key")
        }
        return "json_array(" + key.map { quotedIdentifier($0.name) }.joined(separator: ", ") + ")"
    }
}
