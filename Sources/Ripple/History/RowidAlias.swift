/// The names SQL gives a table's rowid — `rowid`, `oid` and `_rowid_` — each of which a column
/// may take for itself (then that name means the column). History's copy of a table and the
/// command-line tool's row identity use a name that no column takes.
package enum RowidAlias {
    /// Every name of the rowid, in the order they are tried.
    package static let names = ["rowid", "oid", "_rowid_"]

    /// The first name of the rowid that none of `columns` takes (SQLite compares names without
    /// regard to ASCII case), or `nil` when the table's columns take all three.
    package static func available(avoiding columns: some Sequence<String>) -> String? {
        let taken = Set(columns.map(SQLIdentifier.folded))
        return names.first { !taken.contains($0) }
    }
}
