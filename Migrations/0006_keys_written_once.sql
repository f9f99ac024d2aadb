-- Ripple's own schema, version 6: the change log writes each row's key once.
--
-- Never edit this file once released: add a new numbered file instead.

-- Keys are written exactly (exact_keys: a list of keys, each its values' types and bytes) and
-- their text is made when the log is read. row_keys (the keys as a JSON array of texts) stays
-- for the entries written before, and is NULL from now on; an entry with neither is a change of
-- unknown extent (a schema change, a write made without Ripple, a virtual table's rows).
-- SQLite cannot drop a NOT NULL constraint in place: the table is made again, with its rows.
CREATE TABLE ripple_changes_6 (
    version INTEGER NOT NULL,
    table_name TEXT NOT NULL,
    operation TEXT NOT NULL CHECK (operation IN ('insert', 'update', 'delete')),
    row_keys TEXT,
    old_rows TEXT,
    exact_keys BLOB,
    before_images BLOB,
    PRIMARY KEY (version, table_name, operation)
) WITHOUT ROWID;

INSERT INTO ripple_changes_6 (version, table_name, operation, row_keys, old_rows, exact_keys, before_images)
SELECT version, table_name, operation, row_keys, old_rows, exact_keys, before_images FROM ripple_changes;

DROP TABLE ripple_changes;
ALTER TABLE ripple_changes_6 RENAME TO ripple_changes;
CREATE INDEX ripple_changes_by_table ON ripple_changes (table_name, version);
