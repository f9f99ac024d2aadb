#if Sync
/// The event triggers that tell a node's slot of schema changes at their commit (row decoding
/// alone does not: an added column's default changes every row without a row change). Each
/// emits a transactional logical message, prefix `ripple_ddl`, naming the table, which arrives
/// in the slot with the change's commit. Only a superuser may make event triggers: a node that
/// is one makes them itself; otherwise ``PostgresSetup`` does, when a superuser applies it.
enum DDLTriggers {
    /// The triggers' function.
    static let function = """
        CREATE OR REPLACE FUNCTION ripple_sync_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
        DECLARE
            changed record;
        BEGIN
            IF TG_EVENT = 'table_rewrite' THEN
                PERFORM pg_logical_emit_message(true, 'ripple_ddl', json_build_object('event', TG_EVENT,
                    'table', pg_event_trigger_table_rewrite_oid()::regclass::text)::text);
            ELSIF TG_EVENT = 'sql_drop' THEN
                FOR changed IN SELECT * FROM pg_event_trigger_dropped_objects() WHERE object_type IN ('table', 'table column') LOOP
                    PERFORM pg_logical_emit_message(true, 'ripple_ddl', json_build_object('event', TG_EVENT,
                        'table', changed.address_names[2], 'kind', changed.object_type)::text);
                END LOOP;
            ELSE
                FOR changed IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE object_type = 'table' LOOP
                    PERFORM pg_logical_emit_message(true, 'ripple_ddl', json_build_object('event', TG_EVENT,
                        'table', changed.objid::regclass::text, 'tag', changed.command_tag)::text);
                END LOOP;
            END IF;
        END $$
        """

    /// The triggers: name and event.
    static let triggers = [("ripple_sync_ddl_end", "ddl_command_end"), ("ripple_sync_drop", "sql_drop"),
                           ("ripple_sync_rewrite", "table_rewrite")]
}
#endif
