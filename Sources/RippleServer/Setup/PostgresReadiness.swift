#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple

/// One thing a database lacks for a node, in plain words: what, why it matters, and the SQL or
/// setting that fixes it (see ``PostgresReadiness``).
public struct PostgresFinding: Sendable, Hashable, CustomStringConvertible {
    /// How much it matters.
    public enum Severity: String, Sendable, Hashable {
        /// The node cannot run (or cannot follow a table) until it is fixed.
        case blocking
        /// The node runs, but something will go wrong (a full disk, rejected pushes).
        case warning
        /// Worth knowing; nothing to fix.
        case note
    }

    /// How much it matters.
    public var severity: Severity
    /// What is missing or wrong.
    public var what: String
    /// Why it matters.
    public var why: String
    /// The SQL or setting that fixes it.
    public var fix: String
    /// Whether ``PostgresSetup`` (`ripple-server setup`) fixes it.
    public var setupFixes: Bool

    /// A finding: `what`, `why` it matters, and the `fix`.
    public init(_ severity: Severity, _ what: String, why: String, fix: String, setupFixes: Bool = false) {
        (self.severity, self.what, self.why, self.fix, self.setupFixes) = (severity, what, why, fix, setupFixes)
    }

    /// The finding in three lines: what (with its severity), why, and the fix.
    public var description: String { "[\(severity.rawValue)] \(what)\n  why: \(why)\n  fix: \(fix)" }
}

/// What a PostgreSQL database lacks for a node: its settings (`wal_level`, replication slots,
/// slot retention), the node's role (`REPLICATION`, grants), the synced tables (primary keys,
/// replica identity), the publication and the node's own tables and function. `ripple-server
/// check` prints the findings; a node whose role is not a superuser refuses to start while any
/// is blocking, saying what is missing and the command that sets it up.
public enum PostgresReadiness {
    /// What the node needs of `tables` on `client`'s database, for `role` (`nil`: the role
    /// connected), through `publication`; `writes` are the tables clients write through the node,
    /// `slot` the node's slot (it may exist already).
    public static func findings(on client: PostgresClient, tables: [String], writes: [String] = [], role: String? = nil,
                                publication: String = "ripple_sync", slot: String? = nil,
                                logger: Logger = Logger(label: "ripple.check")) async throws -> [PostgresFinding] {
        var found: [PostgresFinding] = []
        let settings = try await texts(client, """
            SELECT current_setting('wal_level'), current_setting('max_replication_slots'), current_setting('max_wal_senders'),
                   current_setting('max_slot_wal_keep_size'), (SELECT count(*) FROM pg_replication_slots)::text,
                   (SELECT count(*) FROM pg_replication_slots WHERE slot_name = \(slot ?? ""))::text,
                   current_user::text
            """, logger).first ?? []
        guard settings.count == 7 else { throw SyncServerError("Postgres did not give its settings") }
        let roleName = role ?? settings[6]
        if settings[0] != "logical" {
            found.append(.init(.blocking, "wal_level is \(settings[0]), not logical",
                               why: "the node reads Postgres's changes by logical decoding, which needs wal_level = logical",
                               fix: "ALTER SYSTEM SET wal_level = logical; then restart Postgres (managed services: a server "
                                   + "parameter, e.g. rds.logical_replication = 1 on Amazon RDS, cloudsql.logical_decoding = on on Cloud SQL)"))
        }
        let maxSlots = Int(settings[1]) ?? 0, usedSlots = Int(settings[4]) ?? 0, ownSlot = settings[5] != "0"
        if !ownSlot && usedSlots >= maxSlots {
            found.append(.init(.blocking, "max_replication_slots is \(maxSlots) and \(usedSlots) are in use",
                               why: "each node needs a logical replication slot of its own",
                               fix: "ALTER SYSTEM SET max_replication_slots = \(max(usedSlots + 4, 10)); then restart Postgres"))
        }
        if settings[2] == "0" {
            found.append(.init(.note, "max_wal_senders is 0",
                               why: "the node reads its slot with SQL functions and needs no WAL sender, but replicas and most tools do",
                               fix: "ALTER SYSTEM SET max_wal_senders = 10; then restart Postgres (only if something else needs it)"))
        }
        if settings[3] == "-1" {
            found.append(.init(.warning, "max_slot_wal_keep_size is unset (-1)",
                               why: "a slot keeps all WAL its node has not read: a node down for long can fill Postgres's disk",
                               fix: "ALTER SYSTEM SET max_slot_wal_keep_size = '10GB'; SELECT pg_reload_conf(); (a node whose slot "
                                   + "passes it starts again from a fresh copy)"))
        }

        // The role.
        let roleRow = try await texts(client, "SELECT rolsuper::text, rolreplication::text FROM pg_roles WHERE rolname = \(roleName)", logger).first
        guard let roleRow else {
            found.append(.init(.blocking, "role \(roleName) does not exist", why: "the node logs in as it",
                               fix: setupCommand(role: roleName, tables: tables), setupFixes: true))
            return found
        }
        let superuser = roleRow[0] == "true"
        let quotedRole = SQLIdentifier.quoted(roleName)
        if superuser {
            found.append(.init(.note, "role \(roleName) is a superuser",
                               why: "the node makes the publication, its own tables and the event triggers itself; a role that is "
                                   + "not a superuser is safer (see ripple-server setup)",
                               fix: setupCommand(role: "ripple_node", tables: tables)))
        } else if roleRow[1] != "true" {
            found.append(.init(.blocking, "role \(roleName) lacks REPLICATION",
                               why: "making and reading a logical replication slot needs it",
                               fix: "ALTER ROLE \(quotedRole) REPLICATION; (Amazon RDS/Aurora: GRANT rds_replication TO \(quotedRole);)",
                               setupFixes: true))
        }

        // The synced tables.
        for name in tables {
            let quoted = SQLIdentifier.quoted(name)
            let row = try await texts(client, """
                SELECT c.relreplident::text,
                       has_table_privilege(\(roleName)::name, c.oid, 'SELECT')::text, has_table_privilege(\(roleName)::name, c.oid, 'INSERT')::text,
                       has_table_privilege(\(roleName)::name, c.oid, 'UPDATE')::text, has_table_privilege(\(roleName)::name, c.oid, 'DELETE')::text,
                       EXISTS (SELECT 1 FROM pg_index WHERE indrelid = c.oid AND indisprimary)::text,
                       coalesce((SELECT indisprimary::text FROM pg_index WHERE indrelid = c.oid AND indisreplident), '')
                FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
                WHERE n.nspname = 'public' AND c.relname = \(name) AND c.relkind IN ('r', 'p')
                """, logger).first
            guard let row else {
                found.append(.init(.blocking, "table \(name) does not exist in the public schema",
                                   why: "the node syncs it (--tables)", fix: "create it, or leave it out of --tables"))
                continue
            }
            if row[5] != "true" {
                found.append(.init(.blocking, "table \(name) has no primary key",
                                   why: "the node keeps rows by their key, and updates and deletes name a row by it",
                                   fix: "ALTER TABLE \(quoted) ADD PRIMARY KEY (…);"))
            }
            switch row[0] {
            case "n":
                found.append(.init(.blocking, "table \(name) has REPLICA IDENTITY NOTHING",
                                   why: "Postgres refuses updates and deletes of a published table that carry no key",
                                   fix: "ALTER TABLE \(quoted) REPLICA IDENTITY DEFAULT; (its primary key)"))
            case "i" where row[6] != "true":
                found.append(.init(.warning, "table \(name)'s replica identity is an index other than its primary key",
                                   why: "a delete then carries that index's columns, not the key the node keeps rows by",
                                   fix: "ALTER TABLE \(quoted) REPLICA IDENTITY DEFAULT;"))
            case "d" where row[5] != "true":
                found.append(.init(.blocking, "table \(name) has no replica identity (REPLICA IDENTITY DEFAULT without a primary key)",
                                   why: "Postgres refuses updates and deletes of a published table that carry no key",
                                   fix: "ALTER TABLE \(quoted) ADD PRIMARY KEY (…);"))
            case "f":
                found.append(.init(.note, "table \(name) has REPLICA IDENTITY FULL",
                                   why: "not needed (the primary key is enough); every update and delete logs the whole old row",
                                   fix: "ALTER TABLE \(quoted) REPLICA IDENTITY DEFAULT; (optional)"))
            default:
                break
            }
            if !superuser && row[1] != "true" {
                found.append(.init(.blocking, "role \(roleName) may not read table \(name)",
                                   why: "the node copies the table (SELECT) when it starts afresh and after a schema change",
                                   fix: "GRANT SELECT ON \(quoted) TO \(quotedRole);", setupFixes: true))
            }
            if !superuser && writes.contains(name) && row[2...4].contains(where: { $0 != "true" }) {
                found.append(.init(.warning, "role \(roleName) may not insert, update and delete in table \(name)",
                                   why: "clients' pushed mutations on it would be rejected (a permission error)",
                                   fix: "GRANT INSERT, UPDATE, DELETE ON \(quoted) TO \(quotedRole);", setupFixes: true))
            }
        }

        // What a superuser's node makes itself.
        guard !superuser else { return found }
        let published = try await texts(client, """
            SELECT pubinsert::text, pubupdate::text, pubdelete::text, pubtruncate::text FROM pg_publication WHERE pubname = \(publication)
            """, logger).first
        if let published {
            let covered = Set(try await texts(client, """
                SELECT tablename::text FROM pg_publication_tables WHERE pubname = \(publication) AND schemaname = 'public'
                """, logger).map { $0[0] })
            let missing = tables.filter { !covered.contains($0) }
            if !missing.isEmpty {
                found.append(.init(.blocking, "publication \(publication) does not include \(missing.joined(separator: ", "))",
                                   why: "changes of a table reach the node only through the publication",
                                   fix: setupCommand(role: roleName, tables: tables), setupFixes: true))
            }
            if published.contains(where: { $0 != "true" }) {
                found.append(.init(.blocking, "publication \(publication) does not publish every insert, update, delete and truncate",
                                   why: "the node would miss those changes",
                                   fix: "ALTER PUBLICATION \(SQLIdentifier.quoted(publication)) SET (publish = 'insert, update, delete, truncate');"))
            }
        } else {
            found.append(.init(.blocking, "publication \(publication) does not exist",
                               why: "changes reach the node through it; making it needs the tables' owner",
                               fix: setupCommand(role: roleName, tables: tables), setupFixes: true))
        }
        for table in PostgresSetup.ownTables {
            let row = try await texts(client, """
                SELECT (to_regclass(\("public." + table)) IS NOT NULL)::text,
                       coalesce((has_table_privilege(\(roleName)::name, to_regclass(\("public." + table)), 'SELECT')
                           AND has_table_privilege(\(roleName)::name, to_regclass(\("public." + table)), 'INSERT')
                           AND has_table_privilege(\(roleName)::name, to_regclass(\("public." + table)), 'UPDATE')
                           AND has_table_privilege(\(roleName)::name, to_regclass(\("public." + table)), 'DELETE'))::text, 'false')
                """, logger).first ?? []
            if row.first != "true" {
                found.append(.init(.blocking, "the node's table \(table) does not exist",
                                   why: "the node keeps its slot's replica and its clients' mutations in its own tables",
                                   fix: setupCommand(role: roleName, tables: tables), setupFixes: true))
            } else if row.last != "true" {
                found.append(.init(.blocking, "role \(roleName) may not read and write the node's table \(table)",
                                   why: "the node keeps its slot's replica and its clients' mutations there",
                                   fix: "GRANT SELECT, INSERT, UPDATE, DELETE ON \(table) TO \(quotedRole);", setupFixes: true))
            }
        }
        let function = try await texts(client, """
            SELECT p.prosrc, has_function_privilege(\(roleName)::name, p.oid, 'EXECUTE')::text FROM pg_proc AS p
            WHERE p.proname = 'ripple_sync_apply' AND p.pronamespace = 'public'::regnamespace
            """, logger).first
        if let function {
            if function[0].trimmingCharacters(in: .whitespacesAndNewlines) != MutationBatch.body {
                found.append(.init(.blocking, "the node's function ripple_sync_apply is of another version of Ripple",
                                   why: "the node applies clients' mutations with it",
                                   fix: setupCommand(role: roleName, tables: tables), setupFixes: true))
            } else if function[1] != "true" {
                found.append(.init(.blocking, "role \(roleName) may not run the node's function ripple_sync_apply",
                                   why: "the node applies clients' mutations with it",
                                   fix: "GRANT EXECUTE ON FUNCTION ripple_sync_apply(uuid, text, jsonb) TO \(quotedRole);", setupFixes: true))
            }
        } else {
            found.append(.init(.blocking, "the node's function ripple_sync_apply does not exist",
                               why: "the node applies clients' mutations with it",
                               fix: setupCommand(role: roleName, tables: tables), setupFixes: true))
        }
        let triggers = try await texts(client, """
            SELECT count(*)::text FROM pg_event_trigger WHERE evtname IN ('ripple_sync_ddl_end', 'ripple_sync_drop', 'ripple_sync_rewrite')
                AND evtenabled <> 'D'
            """, logger).first?.first ?? "0"
        if triggers != "3" {
            found.append(.init(.note, "the event triggers are not installed (only a superuser may make them)",
                               why: "the node sees schema changes from pgoutput's relation messages and a catalog check every few "
                                   + "seconds instead of at their commit; a rewrite that keeps a table's columns and types "
                                   + "(ALTER COLUMN … TYPE … USING to the same type) is not seen until its rows are written again",
                               fix: "a superuser runs " + setupCommand(role: roleName, tables: tables)))
        }
        return found
    }

    /// Runs `body` with a client of the database at `url` (`postgres://user[:password]@host[:port]/database`),
    /// for a command's few statements; the client stops when `body` ends.
    ///
    /// - Throws: ``PostgresEndpointError`` at once when Postgres refuses the URL's user or cannot
    ///   be reached (one connection is tried first: the pool would try again for a minute).
    public static func withClient<Result: Sendable>(url: String,
                                                    _ body: @Sendable (PostgresClient) async throws -> Result) async throws -> Result {
        var logger = Logger(label: "ripple.postgres")
        logger.logLevel = .critical
        let endpoint = try PostgresEndpoint(url: url)
        try await endpoint.probe(logger: logger)
        let client = PostgresClient(configuration: endpoint.clientConfiguration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// The tables of `publication` in the public schema (none when it does not exist).
    public static func publishedTables(on client: PostgresClient, publication: String,
                                       logger: Logger = Logger(label: "ripple.check")) async throws -> [String] {
        try await texts(client, """
            SELECT tablename::text FROM pg_publication_tables WHERE pubname = \(publication) AND schemaname = 'public' ORDER BY 1
            """, logger).map { $0[0] }
    }

    /// The command that sets up what `role` needs for `tables`.
    static func setupCommand(role: String, tables: [String]) -> String {
        "ripple-server setup --postgres URL --role \(role) --tables \(tables.joined(separator: ",")) --rules FILE --apply "
            + "(as a superuser or the tables' owner; without --apply it prints the SQL; --rules grants writes where the rules allow them)"
    }

    /// Whether the role connected is a superuser.
    static func isSuperuser(_ client: PostgresClient, logger: Logger) async throws -> Bool {
        try await texts(client, "SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user", logger).first?.first == "true"
    }

    /// For a node whose role is not a superuser: throws, in plain words, what blocks it and the
    /// command that sets it up.
    static func requireSetup(_ client: PostgresClient, tables: [String], publication: String, slot: String,
                             logger: Logger) async throws {
        let blocking = try await findings(on: client, tables: tables, publication: publication, slot: slot, logger: logger)
            .filter { $0.severity == .blocking }
        guard !blocking.isEmpty else { return }
        let role = try await texts(client, "SELECT current_user::text", logger).first?.first ?? "the node's role"
        var lines = ["Postgres is not ready for this node (its role \(role) is not a superuser, so the node makes nothing itself):"]
        let bySetup = blocking.filter(\.setupFixes)
        for finding in bySetup { lines.append("* \(finding.what)") }
        if !bySetup.isEmpty { lines.append("An administrator sets that up with: " + setupCommand(role: role, tables: tables)) }
        for finding in blocking where !finding.setupFixes { lines.append("* \(finding.what); fix: \(finding.fix)") }
        lines.append("ripple-server check --postgres URL --tables \(tables.joined(separator: ",")) says why each matters, and what else the database lacks.")
        throw FeedError(lines.joined(separator: "\n"))
    }

    /// The rows of `query`, each value as text (`""` for NULL).
    private static func texts(_ client: PostgresClient, _ query: PostgresQuery, _ logger: Logger) async throws -> [[String]] {
        try await client.gatheredRows(query, logger: logger).map { row in try row.map { try $0.decode(String?.self) ?? "" } }
    }
}
#endif
