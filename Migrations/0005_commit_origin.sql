-- Ripple's own schema, version 5: where each commit came from.
--
-- Never edit this file once released: add a new numbered file instead.

-- The origin of each version's commit ('write', 'maintenance', 'migration', 'foreign' for a
-- write made without Ripple and adopted, 'replication', 'sync', or an origin of a later Ripple)
-- and the tag its caller gave it (an app's "import", a replica's PostgreSQL LSN), or NULL.
-- NULL origin: the version was committed before this migration.
ALTER TABLE ripple_versions ADD COLUMN origin TEXT;
ALTER TABLE ripple_versions ADD COLUMN tag TEXT;

-- A mark to count commits from: the wal-index's count of committed transactions (its header's
-- iChange) as a Ripple commit began, and the version and the count of commits without a version
-- right after it, written by that commit (which makes the count one more). Every Ripple commit
-- moves exactly one of the two counters, so commits since the mark beyond those were made
-- without Ripple, even between commits of several Ripple connections, which PRAGMA data_version
-- alone cannot tell apart. Written by a connection's first commit and when a commit takes in
-- others' commits made without Ripple. NULL: unknown (in memory).
INSERT INTO ripple_meta (key, value) VALUES ('wal_mark', NULL), ('wal_mark_version', NULL), ('wal_mark_commits', NULL);

-- While a Ripple connection runs statements outside a transaction (Store.writeWithoutTransaction,
-- migrations), its name ("process id:random"), set in a commit of its own before them and cleared
-- by the commit that records their version: their commits have no version until then, and the
-- other connections must not adopt them as writes made without Ripple. A name whose process is
-- gone (it crashed) is ignored. NULL: none.
INSERT INTO ripple_meta (key, value) VALUES ('maintenance', NULL);
