-- Ripple's own schema, version 1.
--
-- Applied by the store when it opens a database (domain "ripple" in ripple_migrations), in one
-- transaction. Never edit this file once released: add a new numbered file instead.

-- Key/value facts about the store. 'version' is the number of the last committed write.
CREATE TABLE ripple_meta (
    key TEXT PRIMARY KEY,
    value
) WITHOUT ROWID;

INSERT INTO ripple_meta (key, value) VALUES ('version', 0);
-- History is complete after this version: older changes were pruned by the retention policy.
INSERT INTO ripple_meta (key, value) VALUES ('oldest_version', 0);

-- The change log: for each committed write, one row per table and operation, holding the
-- primary keys of the rows it touched (a JSON array of texts, in the order they changed).
-- Written by the writer in the same transaction, right before it commits.
CREATE TABLE ripple_changes (
    version INTEGER NOT NULL,
    table_name TEXT NOT NULL,
    operation TEXT NOT NULL CHECK (operation IN ('insert', 'update', 'delete')),
    row_keys TEXT NOT NULL,
    PRIMARY KEY (version, table_name, operation)
) WITHOUT ROWID;

CREATE INDEX ripple_changes_by_table ON ripple_changes (table_name, version);

-- The registry of collections: name, the JSON path of their identity, and when they appeared.
CREATE TABLE ripple_collections (
    name TEXT PRIMARY KEY,
    primary_key TEXT NOT NULL,
    created_version INTEGER NOT NULL
) WITHOUT ROWID;
