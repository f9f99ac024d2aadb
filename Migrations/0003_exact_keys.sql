-- Ripple's own schema, version 3: keys exactly as SQLite stores them.
--
-- Never edit this file once released: add a new numbered file instead.

-- The keys of an entry's rows exactly, in the order of row_keys: per key, its length (LEB128)
-- and its encoding — per key column a type byte (1 integer, 2 real, 3 text, 4 blob, 5 NULL),
-- then 8 bytes (integers, reals: little-endian bit pattern) or a LEB128 length and the bytes
-- (text as stored, blobs), or nothing (NULL). row_keys, text, cannot tell the blob x'61' from
-- the text '61', nor keep text that is not UTF-8; live queries compare these. NULL for entries
-- logged before this migration and for "*" entries (their readers re-read everything), and for
-- entries of more than 256 keys that row_keys tells exactly (rowids, or UTF-8 text keys).
ALTER TABLE ripple_changes ADD COLUMN exact_keys BLOB;

-- How many write transactions of Ripple's connections committed without taking a version (every
-- statement they ran failed or was rolled back to a savepoint, yet SQLite wrote pages). Another
-- connection sees such a commit in PRAGMA data_version: with this count it knows a Ripple store
-- made it, and does not mistake it for a write made without Ripple.
INSERT INTO ripple_meta (key, value) VALUES ('commits', 0);
