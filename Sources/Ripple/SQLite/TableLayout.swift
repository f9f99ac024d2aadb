import RippleSQLite

/// What SQLite itself says of one table of the `main` schema — its kind, columns, key and rowid —
/// read from its answers (`pragma_table_list`, `pragma_table_xinfo`, `pragma_index_list`), never
/// from the text of its `CREATE` statement, and with names matched as SQLite matches them
/// (ASCII letters in either case).
///
/// The change capture, history and the collections all decide from it, so that they agree with
/// each other and with SQLite on every table SQLite accepts: a key declared in any of SQLite's
/// forms, `WITHOUT ROWID` however it is written, generated columns anywhere, virtual tables and
/// their shadow tables.
package struct TableLayout: Sendable {
    /// The kinds of table `pragma table_list` tells apart.
    package enum Kind: String, Sendable {
        /// An ordinary table, with or without rowid.
        case table
        /// A virtual table (FTS5, R*Tree, …): its rows are wherever its module keeps them.
        case virtual
        /// A table that a virtual table keeps its data in (`notes_content` of an FTS5 table `notes`).
        case shadow
    }

    /// One column, as `pragma table_xinfo` reports it.
    package struct Column: Sendable {
        package var name: String
        /// The declared type, as written (empty when none).
        package var declaredType: String
        /// A generated column's value is computed: rows are written without it.
        package var isGenerated: Bool
        /// A `VIRTUAL` generated column is not stored in the row's record at all.
        package var isStored: Bool
        /// A virtual table's hidden column (not part of `SELECT *`).
        package var isHidden: Bool
        /// The column's default, as the SQL expression SQLite keeps (`nil` when none).
        package var defaultExpression: String?
    }

    /// The table's name, spelt as in the schema.
    package let name: String
    package let kind: Kind
    /// Whether it is a `WITHOUT ROWID` table (`pragma table_list`'s `wr`).
    package let withoutRowid: Bool
    /// Every column, in table order (its position is the column's number in SQLite).
    package let columns: [Column]
    /// The declared primary key's columns (positions in ``columns``), in key order; empty when
    /// none is declared.
    package let primaryKey: [Int]
    /// The column that is another name for the rowid, by SQLite's rule: the only column of the
    /// primary key of a rowid table, when SQLite made no index for that key (an `INTEGER PRIMARY
    /// KEY`, but not `INTEGER PRIMARY KEY DESC`, nor `INT PRIMARY KEY`).
    package let rowidAlias: Int?

    /// Whether the table's rows are known by their rowid: a rowid table with no declared key, or
    /// whose key is the rowid.
    package var isKeyedByRowid: Bool { !withoutRowid && (primaryKey.isEmpty || rowidAlias != nil) }

    /// The columns a row is written with and restored through: all but the generated ones
    /// (positions in ``columns``). Before-images hold these columns, in this order.
    package var writableColumns: [Int] { columns.indices.filter { !columns[$0].isGenerated } }

    /// Where column `position` lies in the row's record: stored columns one after the other in
    /// table order, `VIRTUAL` generated columns nowhere (`nil`).
    package func storagePosition(of position: Int) -> Int? {
        guard columns[position].isStored else { return nil }
        return columns[..<position].reduce(0) { $0 + ($1.isStored ? 1 : 0) }
    }

    /// How SQL names the rowid: the first of `rowid`, `oid`, `_rowid_` that no column takes,
    /// else the column that is its alias (quoted); `nil` for a `WITHOUT ROWID` table, or when the
    /// columns take all three names and none is its alias (SQLite then offers no name for it).
    package var rowidName: String? {
        guard !withoutRowid else { return nil }
        if let free = RowidAlias.available(avoiding: columns.map(\.name)) { return free }
        return rowidAlias.map { SQLIdentifier.quoted(columns[$0].name) }
    }

    /// The layout of the table SQLite calls `name` in `main` (a table or a virtual table, found
    /// as SQLite finds names), or `nil` when there is none (no such table, or a view).
    package static func read(_ db: Database, table name: String) throws -> TableLayout? {
        try read(db, where: "t.name = ? COLLATE NOCASE", [name]).first
    }

    /// The layouts of every table of `main` except SQLite's own (`sqlite_…`) and the store's
    /// (`ripple_…`).
    package static func all(in db: Database) throws -> [TableLayout] {
        try read(db, where: "t.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND t.name NOT LIKE 'ripple\\_%' ESCAPE '\\'", [])
    }

    private static func read(_ db: Database, where condition: String, _ arguments: [any SQLValueConvertible]) throws
        -> [TableLayout] {
        // One statement for every table: its kind, and its columns in order.
        let rows = try db.fetchAll("""
            SELECT t.name, t.type, t.wr, c.name, c.type, c.pk, c.hidden, c.dflt_value,
                   EXISTS (SELECT 1 FROM pragma_index_list(t.name, 'main') WHERE origin = 'pk')
            FROM pragma_table_list AS t JOIN pragma_table_xinfo(t.name, 'main') AS c
            WHERE t.schema = 'main' AND t.type IN ('table', 'virtual', 'shadow') AND \(condition)
            ORDER BY t.name, c.cid
            """, arguments)
        var layouts: [TableLayout] = []
        var index = 0
        while index < rows.count {
            let name = rows[index].values[0].textValue ?? ""
            var columns: [Column] = []
            var key: [(order: Int64, position: Int)] = []
            let first = rows[index].values
            let kind = Kind(rawValue: first[1].textValue ?? "") ?? .table
            let withoutRowid = first[2] == .integer(1)
            let hasKeyIndex = first[8] == .integer(1)
            while index < rows.count, rows[index].values[0].textValue == name {
                let values = rows[index].values
                let hidden = values[6].integerValue ?? 0
                // 1: a virtual table's hidden column; 2: generated VIRTUAL; 3: generated STORED.
                columns.append(Column(name: values[3].textValue ?? "", declaredType: values[4].textValue ?? "",
                                      isGenerated: hidden == 2 || hidden == 3, isStored: hidden != 2,
                                      isHidden: hidden == 1, defaultExpression: values[7].textValue))
                if let order = values[5].integerValue, order > 0 { key.append((order, columns.count - 1)) }
                index += 1
            }
            let primaryKey = key.sorted { $0.order < $1.order }.map(\.position)
            let alias = kind == .table && !withoutRowid && primaryKey.count == 1 && !hasKeyIndex ? primaryKey[0] : nil
            layouts.append(TableLayout(name: name, kind: kind, withoutRowid: withoutRowid, columns: columns,
                                       primaryKey: primaryKey, rowidAlias: alias))
        }
        return layouts
    }

    /// The virtual table that shadow table `shadow` belongs to, among `virtualTables`: SQLite
    /// names a shadow table after its virtual table, an underscore and a suffix of the module's
    /// (`notes_content`), and the suffix has no underscore.
    static func owner(ofShadow shadow: String, among virtualTables: [String: String]) -> String? {
        guard let underscore = shadow.utf8.lastIndex(of: UInt8(ascii: "_")) else { return nil }
        let prefix = String(shadow[..<underscore])
        return virtualTables[SQLIdentifier.folded(prefix)]
    }
}

extension SQLValue {
    /// The text, when the value is text.
    var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    /// The integer, when the value is an integer.
    var integerValue: Int64? {
        if case .integer(let integer) = self { return integer }
        return nil
    }
}

extension SQLIdentifier {
    /// `name` as SQLite compares names: ASCII letters in lower case (SQLite folds no other
    /// letters). Names that fold alike are one table.
    static func folded(_ name: String) -> String {
        guard name.utf8.contains(where: { (0x41...0x5A).contains($0) }) else { return name }
        return String(decoding: name.utf8.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}
