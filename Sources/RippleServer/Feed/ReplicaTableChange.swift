#if Sync
import Ripple

/// How a replica table follows its Postgres table's new columns.
///
/// In place, keeping the table's history (see `Database.declareHistoryPreservingSchemaChange()`),
/// when every column it keeps is kept the same way (the same replica type, an order key or
/// not) and the key is the same:
///
/// * an added column is appended (`ADD COLUMN`, with its order key when its type has one);
/// * a dropped column is renamed to a tombstone, `ripple_dropped:<n>:<name>` (its order key
///   too), which no query names and later rows leave NULL: every other column stays at its
///   position, so history's before-images still fit, and a column added again under the same
///   name is a new column;
/// * a type widened within its replica type (`int4` to `int8`, `varchar(n)` to `varchar(m)` or
///   `text`, `numeric(p,s)` to a wider one) changes nothing in the replica.
///
/// Otherwise (the key changed; a column's replica type or order key changed, `int4` to `text`
/// say) the table is made again: its queries end, and history stops there.
struct ReplicaTableChange: Sendable {
    /// The table must be made again.
    var remakes = false
    /// The columns to append: name and replica type.
    var added: [(name: String, type: String)] = []
    /// The columns dropped in Postgres (their tombstones are made).
    var dropped: [String] = []
    /// The physical columns to rename to tombstones (dropped columns and their order keys).
    var tombstoned: [String] = []

    /// A replica table's physical columns, in order: name, declared type, position in the
    /// primary key (0: not in it).
    struct PhysicalColumn: Sendable {
        var name: String
        var type: String
        var keyPosition: Int
    }

    /// The prefix of a dropped column's tombstone.
    static let tombstonePrefix = "ripple_dropped:"

    /// The physical columns of replica table `name` (`PRAGMA table_info`).
    static func physicalColumns(of name: String, in db: Database) throws -> [PhysicalColumn] {
        try db.fetchAll("SELECT name, type, pk FROM pragma_table_info(?)", [name]).map { row in
            PhysicalColumn(name: try row.value("name", as: String.self), type: try row.value("type", as: String.self),
                           keyPosition: try row.value("pk", as: Int.self))
        }
    }

    /// How a replica table with `physical` columns follows Postgres columns `columns` (name,
    /// type OID) keyed by `key`.
    init(from physical: [PhysicalColumn], to columns: [(name: String, type: UInt32)], key: [String]) {
        guard !physical.isEmpty else {
            remakes = true
            return
        }
        let physicalKey = physical.filter { $0.keyPosition > 0 }.sorted { $0.keyPosition < $1.keyPosition }.map(\.name)
        guard physicalKey == key else {
            remakes = true
            return
        }
        let byName = Dictionary(physical.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let live = Set(columns.map(\.name))
        for column in columns {
            let replicaType = PostgresTypes.replicaType(of: column.type)
            let orderKey = OrderKeys.column(for: column.name)
            let ordered = OrderKeys.applies(to: column.type)
            if let existing = byName[column.name] {
                guard existing.type.uppercased() == replicaType, (byName[orderKey] != nil) == ordered else {
                    remakes = true
                    return
                }
            } else {
                added.append((column.name, replicaType))
                if ordered {
                    // An order key left by an earlier column of that name (an older table's)
                    // would be stale: made afresh.
                    if byName[orderKey] != nil { tombstoned.append(orderKey) }
                    added.append((orderKey, "BLOB"))
                }
            }
        }
        for column in physical where !column.name.hasPrefix(Self.tombstonePrefix) && !column.name.hasPrefix("ripple_order:")
            && !live.contains(column.name) {
            dropped.append(column.name)
            tombstoned.append(column.name)
            let orderKey = OrderKeys.column(for: column.name)
            if byName[orderKey] != nil, !tombstoned.contains(orderKey) { tombstoned.append(orderKey) }
        }
        tombstoneBase = physical.filter { $0.name.hasPrefix(Self.tombstonePrefix) }.count
    }

    /// How many tombstones the table has: the next one is numbered after them.
    private var tombstoneBase = 0

    /// The statements that make the replica's table `table` follow in place (none when it
    /// stays as it is, or is made again).
    func statements(for table: String) -> [String] {
        guard !remakes else { return [] }
        let quoted = SQLIdentifier.quoted(table)
        var statements: [String] = []
        for (offset, name) in tombstoned.enumerated() {
            let tombstone = "\(Self.tombstonePrefix)\(tombstoneBase + offset):\(name)"
            statements.append("ALTER TABLE \(quoted) RENAME COLUMN \(SQLIdentifier.quoted(name)) TO \(SQLIdentifier.quoted(tombstone))")
        }
        for (name, type) in added {
            statements.append("ALTER TABLE \(quoted) ADD COLUMN \(SQLIdentifier.quoted(name)) \(type)")
        }
        return statements
    }
}
#endif
