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
        // From SQLite's answers (see ``TableLayout``), the name matched as SQLite matches names.
        guard let layout = try TableLayout.read(db, table: table) else {
            if try db.fetchValue("SELECT count(*) FROM pragma_table_list(?) WHERE schema = 'main' AND type = 'view'", [table],
                                 as: Int.self) == 1 {
                throw StoreError(.history, "\(table) is a view: the change log holds the changes of the tables it reads, "
                                 + "and history rewinds tables: name the tables the view reads, with a query over them instead")
            }
            throw StoreError(.invalidQuery, "no table \(table) in the store")
        }
        switch layout.kind {
        case .virtual:
            throw StoreError(.history, "\(layout.name) is a virtual table: its module keeps its rows in shadow tables of its "
                             + "own, which history cannot rewind; only its current rows can be read")
        case .shadow:
            throw StoreError(.history, "\(layout.name) is a shadow table, written by the module of a virtual table: its "
                             + "changes are logged as that table's, and history cannot rewind them")
        case .table:
            break
        }
        self.table = layout.name
        quotedTable = SQLIdentifier.quoted(layout.name)
        guard let sql = try db.fetchValue("SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?", [layout.name],
                                          as: String.self), sql.hasPrefix("CREATE TABLE ") else {
            throw StoreError(.invalidQuery, "no table \(table) in the store")
        }
        self.sql = sql
        withoutRowid = layout.withoutRowid
        // A copy is written, and rows restored, through the columns that are not generated.
        columns = layout.writableColumns.map { layout.columns[$0].name }
        // The change capture's rule: the rowid keys a rowid table with no declared key, or whose
        // key is the rowid (SQLite's rule for an INTEGER PRIMARY KEY).
        keyColumns = layout.isKeyedByRowid ? nil : layout.primaryKey.map { layout.columns[$0].name }
        rowid = layout.rowidName
        separateRowid = layout.rowidAlias == nil ? rowid : nil
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
