/// What history needs to know of a table to copy it and find its rows: its columns, its key, and
/// the name SQL can use for its rowid when columns take some of the rowid's names.
struct TableShape {
    /// The table's name, and quoted.
    let table: String
    let quotedTable: String
    /// Its `CREATE TABLE` statement.
    let sql: String
    /// Its columns, in order.
    let columns: [String]
    let withoutRowid: Bool
    /// `nil`: the change log keys the table by its rowid (no declared key, or an INTEGER PRIMARY
    /// KEY); otherwise its declared primary-key columns, in key order.
    let keyColumns: [String]?
    /// How SQL reads and writes the rowid: the first of `rowid`, `oid`, `_rowid_` that no column
    /// takes, else the INTEGER PRIMARY KEY column (quoted); `nil` for a `WITHOUT ROWID` table, and
    /// for a table whose columns take all three names without an INTEGER PRIMARY KEY (SQLite then
    /// offers no way to name the rowid).
    let rowid: String?
    /// The rowid's name in a column list when it is not one of `columns` (no INTEGER PRIMARY KEY):
    /// a copy names it to keep the table's rowids. `nil` when copying the columns copies them,
    /// or when there are none to keep (or no name for them).
    let separateRowid: String?

    /// Whether a copy keeps the table's row order: its rowids (or, without rowid, its key).
    var keepsRowOrder: Bool { withoutRowid || rowid != nil }

    init(_ db: Database, table: String) throws {
        self.table = table
        quotedTable = SQLIdentifier.quoted(table)
        guard let sql = try db.fetchValue("SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?", [table],
                                          as: String.self), sql.hasPrefix("CREATE TABLE ") else {
            throw StoreError(.invalidQuery, "no table \(table) in the store")
        }
        self.sql = sql
        withoutRowid = sql.uppercased().contains("WITHOUT ROWID")
        var columns: [String] = []
        var key: [(position: Int, name: String, type: String)] = []
        for row in try db.fetchAll("SELECT name, type, pk FROM pragma_table_info(?, 'main') ORDER BY cid", [table]) {
            let name = try row.value("name", as: String.self)
            columns.append(name)
            let pk = try row.value("pk", as: Int.self)
            if pk > 0 { key.append((pk, name, (try? row.value("type", as: String.self)) ?? "")) }
        }
        key.sort { $0.position < $1.position }
        self.columns = columns
        // The change capture's rule: no declared key, or INTEGER PRIMARY KEY, is keyed by the rowid.
        let integerKey = !withoutRowid && key.count == 1 && key[0].type.uppercased() == "INTEGER" ? key[0].name : nil
        keyColumns = key.isEmpty || integerKey != nil ? nil : key.map(\.name)
        if withoutRowid {
            rowid = nil
            separateRowid = nil
        } else if let integerKey {
            rowid = RowidAlias.available(avoiding: columns) ?? SQLIdentifier.quoted(integerKey)
            separateRowid = nil
        } else {
            rowid = RowidAlias.available(avoiding: columns)
            separateRowid = rowid
        }
        if keyColumns == nil && rowid == nil {
            throw StoreError(.history, "the change log finds the rows of \(table) by their rowids, and its columns take every "
                             + "name of the rowid (rowid, oid, _rowid_): SQLite offers no way to read or find a row by its "
                             + "rowid, so its history cannot be rebuilt. Rename one of those columns, or declare a primary key")
        }
    }

    /// Throws ``StoreError/Kind/history`` unless a copy keeps the table's row order, which a
    /// result shows when its order is not total: `what` names such a query in the message.
    func requireRowOrder(for what: String) throws {
        guard !keepsRowOrder else { return }
        throw StoreError(.history, "\(what) may show the rows of \(table) in rowid order, and its columns take every name "
                         + "of the rowid (rowid, oid, _rowid_) without an INTEGER PRIMARY KEY: SQLite offers no way to read "
                         + "the rowids, so that order cannot be rebuilt for a past version. Order the query by columns "
                         + "ending with the key, or rename one of those columns")
    }
}
