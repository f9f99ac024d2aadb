#if Sync

/// A synced table's schema change, as the feed tells it before the replica commit that applies
/// it (see ``ReplicaFeed``).
public struct ReplicaSchemaChange: Sendable, Hashable {
    /// How the replica's table follows.
    public enum Kind: Sendable, Hashable {
        /// The table is gone from Postgres (dropped or renamed): every query over it ends.
        case gone
        /// The replica's table is made again (its key changed, or a column's type changed how
        /// the replica keeps it): every query over it ends, and history stops at the commit.
        case remade
        /// The replica's table follows in place, its history kept (see ``ReplicaFeed``):
        /// queries that name none of `droppedColumns` go on, and resume across the commit.
        case inPlace(addedColumns: [String], droppedColumns: [String])
    }

    /// The table.
    public var table: String
    public var kind: Kind
    /// The table's schema once the change is applied (`nil`: it is gone).
    public var schema: SyncedTableSchema?

    public init(table: String, kind: Kind, schema: SyncedTableSchema? = nil) {
        (self.table, self.kind, self.schema) = (table, kind, schema)
    }
}
#endif
