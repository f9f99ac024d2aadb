-- Ripple's own schema, version 2: history (time travel).
--
-- Never edit this file once released: add a new numbered file instead.

-- Before-images: for an 'update' or 'delete' entry, a JSON array parallel to row_keys. Each
-- element is the row as it was before the transaction first touched that key — a JSON array
-- [rowid, column values in column order...] (rowid null for WITHOUT ROWID tables; reals always
-- written with a '.' or an exponent, or as {"$real":"inf"}; blobs as {"$blob":"hex"}) — or null
-- when the transaction had already touched the key earlier (an insert or an earlier change came
-- first, so the row's state before the transaction is known from that). 'insert' entries have
-- none: the key did not exist before its first touch. NULL for entries logged before this
-- migration: such versions cannot be undone.
ALTER TABLE ripple_changes ADD COLUMN old_rows TEXT;

-- When each version committed (unix time, seconds), for the time-window retention.
CREATE TABLE ripple_versions (
    version INTEGER PRIMARY KEY,
    committed_at REAL NOT NULL
);
