-- Ripple's own schema, version 5: where each commit came from.
--
-- Never edit this file once released: add a new numbered file instead.

-- The origin of each version's commit ('write', 'maintenance', 'migration', 'foreign' for a
-- write made without Ripple and adopted, 'replication', 'sync', or an origin of a later Ripple)
-- and the tag its caller gave it (an app's "import", a replica's PostgreSQL LSN), or NULL.
-- NULL origin: the version was committed before this migration.
ALTER TABLE ripple_versions ADD COLUMN origin TEXT;
ALTER TABLE ripple_versions ADD COLUMN tag TEXT;
