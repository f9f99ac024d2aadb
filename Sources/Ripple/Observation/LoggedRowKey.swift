import RippleSQLite

/// How SQL names a table's rows as the change log names them (see ``ChangeCapture``): the rowid
/// for a table keyed by it, else the columns of its primary key. For the tables a routed query
/// reads only in a sub-query (``RowInterest/dependencies``), whose key no observer names.
struct LoggedRowKey: Sendable {
    /// The key's columns, quoted (the rowid's name for a table keyed by it).
    let columns: [String]

    /// `table`'s, or `nil` when SQL has no name for its rowid (its columns take all three names).
    init?(_ table: TableLayout) {
        if table.isKeyedByRowid {
            guard let rowid = table.rowidName else { return nil }
            columns = [rowid]
        } else {
            guard !table.primaryKey.isEmpty else { return nil }
            columns = table.primaryKey.map { SQLIdentifier.quoted(table.columns[$0].name) }
        }
    }

    /// The key as one SQL value: the column, or a row value of the columns (`(a, b)`).
    var sql: String { columns.count == 1 ? columns[0] : "(" + columns.joined(separator: ", ") + ")" }

    /// The key of the current row of `statement`, whose columns from `first` on are the key's
    /// (encoded as the change capture encodes them).
    func read(from statement: OpaquePointer, at first: Int32 = 0) -> RowKey {
        if columns.count == 1 { return RowKey(column: first, of: statement) }
        var bytes: [UInt8] = []
        for column in first..<first + Int32(columns.count) {
            RowKey.append(sqlite3_column_value(statement, column), textIsUTF8: false, to: &bytes)
        }
        return RowKey(encoded: bytes)
    }
}
