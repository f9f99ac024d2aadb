#if Sync
import PostgresNIO
import Ripple

/// The questions the node asks Postgres's catalog about a table (by name, bound as a
/// parameter), one text each, for the feed and the writes alike.
enum PostgresCatalog {
    /// The table's columns in their order: name, type OID and type as `format_type` writes it
    /// (what `CAST(… AS type)` takes), each as text.
    static func columns(of table: String) -> PostgresQuery {
        """
        SELECT attname::text, atttypid::int8::text, format_type(atttypid, atttypmod) FROM pg_attribute
        WHERE attrelid = \(SQLIdentifier.quoted(table))::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum
        """
    }

    /// The names of the table's primary key columns, in key order (no row: no primary key).
    static func primaryKey(of table: String) -> PostgresQuery {
        """
        SELECT a.attname::text FROM pg_index AS i
        JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
        WHERE i.indrelid = \(SQLIdentifier.quoted(table))::regclass AND i.indisprimary
        ORDER BY array_position(i.indkey::int2[], a.attnum)
        """
    }
}
#endif
