#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple

/// What an administrator sets up once so that a node can run as a role that is not a superuser
/// (`LOGIN REPLICATION`, and the grants its tables need): the publication of the synced tables,
/// the node's own tables (`ripple_sync_nodes`, `ripple_sync_clients`, `ripple_sync_results`), its
/// function `ripple_sync_apply`, the grants, and — when the one applying it is a superuser — the
/// event triggers that tell the node of schema changes at their commit.
///
/// ``statements`` is idempotent: running it again changes nothing, and running it again after
/// adding a table to ``tables`` adds that table to the publication and grants it. `ripple-server
/// setup` prints it, or applies it with `--apply`.
public struct PostgresSetup: Sendable {
    /// The role the node logs in as (made, `LOGIN`, when missing).
    public var role: String
    /// The synced tables of the `public` schema (the node reads them: `SELECT`).
    public var tables: [String]
    /// The synced tables clients write through the node (`INSERT`, `UPDATE`, `DELETE`).
    public var writes: [String]
    /// The publication's name (``SyncServerConfiguration/publication``).
    public var publication: String

    /// The setup for a node logging in as `role`, syncing `tables` (`writes` of them written by
    /// clients) through `publication`.
    public init(role: String, tables: [String], writes: [String] = [], publication: String = "ripple_sync") {
        (self.role, self.tables, self.writes, self.publication) = (role, tables, writes, publication)
    }

    /// The node's own tables, which it reads and writes.
    static let ownTables = ["ripple_sync_nodes", "ripple_sync_clients", "ripple_sync_results"]

    /// `ripple_sync_nodes`: which replica each slot feeds (see ``ReplicaFeed``).
    static let nodesTable = "CREATE TABLE IF NOT EXISTS ripple_sync_nodes (slot name PRIMARY KEY, replica uuid NOT NULL)"

    /// The names that are not usable: empty, or with characters the setup's SQL cannot carry.
    ///
    /// - Throws: ``SyncServerError`` naming the first such name.
    public func validate() throws {
        guard !tables.isEmpty else { throw SyncServerError("no tables to set up: name the synced tables (--tables a,b)") }
        for name in [role, publication] + tables + writes {
            if name.isEmpty || name.contains(where: { $0.isNewline || $0 == "\0" }) || name.contains("$") {
                throw SyncServerError("\(String(reflecting: name)) is not a name the setup can use (empty, a newline, or a $)")
            }
        }
        for name in writes where !tables.contains(name) {
            throw SyncServerError("\(name) is written (--writes) but not synced (--tables)")
        }
    }

    /// The SQL, one statement per element, each idempotent; run by a superuser (or a role that
    /// owns the tables and may create roles) in the node's database.
    public var statements: [String] {
        let role = SQLIdentifier.quoted(self.role)
        let roleName = Self.literal(self.role)
        let list = tables.map(SQLIdentifier.quoted).joined(separator: ", ")
        // The node's tables and function go where the node looks for them (its search path finds
        // them in `public`), whatever schema the one applying this would create in.
        var sql = ["SET search_path = public"]
        // The role: made when missing; REPLICATION given when the one applying may give it.
        sql.append("""
            -- The node's role: LOGIN REPLICATION (set its password with ALTER ROLE \(role) PASSWORD '…').
            DO $ripple$
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = \(roleName)) THEN
                    CREATE ROLE \(role) LOGIN;
                END IF;
                IF NOT (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = \(roleName)) THEN
                    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                        ALTER ROLE \(role) REPLICATION;
                    ELSE
                        RAISE WARNING 'role % lacks REPLICATION, which only a superuser gives: on Amazon RDS, GRANT rds_replication TO %; on Google Cloud SQL, ALTER ROLE % REPLICATION as cloudsqlsuperuser; on Azure, ALTER ROLE % REPLICATION as azure_pg_admin', \(roleName), \(roleName), \(roleName), \(roleName);
                    END IF;
                END IF;
            END $ripple$
            """)
        sql.append("GRANT USAGE ON SCHEMA public TO \(role)")
        // The publication lists exactly the synced tables.
        sql.append("""
            -- The publication of the synced tables (CREATE PUBLICATION … FOR TABLE needs their owner).
            DO $ripple$
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = \(Self.literal(publication))) THEN
                    CREATE PUBLICATION \(SQLIdentifier.quoted(publication)) FOR TABLE \(list);
                ELSE
                    ALTER PUBLICATION \(SQLIdentifier.quoted(publication)) SET TABLE \(list);
                END IF;
            END $ripple$
            """)
        sql.append("GRANT SELECT ON \(list) TO \(role)")
        if !writes.isEmpty {
            sql.append("GRANT INSERT, UPDATE, DELETE ON \(writes.map(SQLIdentifier.quoted).joined(separator: ", ")) TO \(role)")
        }
        // The node's own tables and function.
        sql.append(Self.nodesTable)
        sql += MutationWriter.tableStatements
        sql.append(MutationBatch.function)
        sql.append("GRANT SELECT, INSERT, UPDATE, DELETE ON \(Self.ownTables.joined(separator: ", ")) TO \(role)")
        sql.append("GRANT EXECUTE ON FUNCTION ripple_sync_apply(uuid, text, jsonb) TO \(role)")
        // The event triggers: only a superuser may make them; without them, schema changes are
        // seen from pgoutput's relation messages and the node's catalog check.
        sql.append("""
            -- Event triggers (superuser only): schema changes reach the node at their commit.
            DO $ripple$
            BEGIN
                IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                    \(DDLTriggers.function.replacingOccurrences(of: "$$", with: "$fn$"));
                    IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'ripple_sync_ddl_end') THEN
                        CREATE EVENT TRIGGER ripple_sync_ddl_end ON ddl_command_end EXECUTE FUNCTION ripple_sync_ddl();
                    END IF;
                    IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'ripple_sync_drop') THEN
                        CREATE EVENT TRIGGER ripple_sync_drop ON sql_drop EXECUTE FUNCTION ripple_sync_ddl();
                    END IF;
                    IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'ripple_sync_rewrite') THEN
                        CREATE EVENT TRIGGER ripple_sync_rewrite ON table_rewrite EXECUTE FUNCTION ripple_sync_ddl();
                    END IF;
                ELSE
                    RAISE NOTICE 'not a superuser: no event triggers (the node sees schema changes from relation messages and its catalog check)';
                END IF;
            END $ripple$
            """)
        return sql
    }

    /// The statements as one script for `psql` (each ended with `;`).
    public var script: String {
        "-- Ripple Sync: what the node's role \(role) needs (idempotent; run again after adding a table).\n"
            + statements.map { $0 + ";\n" }.joined(separator: "\n")
    }

    /// Runs ``statements`` on `client`, in one transaction.
    ///
    /// - Returns: what the setup could not do as the role that applied it, in plain words (the
    ///   node's role lacks REPLICATION, which only a superuser gives; no event triggers without
    ///   a superuser) — Postgres's warnings, which a client does not show.
    /// - Throws: ``SyncServerError`` with Postgres's message and the step it refused (a role
    ///   that may not make the publication, say), and what that step needs; nothing is applied then.
    @discardableResult
    public func apply(on client: PostgresClient, logger: Logger) async throws -> [String] {
        try validate()
        let statements = statements
        let roleName = role
        return try await client.withConnection { connection in
            _ = try await connection.gatheredRows("BEGIN", logger: logger)
            var current = ""
            do {
                for statement in statements {
                    current = statement
                    _ = try await connection.gatheredRows(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                current = ""
                let caveats = try await Self.caveats(role: roleName, on: connection, logger: logger)
                _ = try await connection.gatheredRows("COMMIT", logger: logger)
                return caveats
            } catch {
                _ = try? await connection.gatheredRows("ROLLBACK", logger: logger)
                guard let refused = error as? PSQLError, let message = refused.serverInfo?[.message] else { throw error }
                // The step as its comment names it, or its first line.
                let lines = current.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                let step = lines.first { $0.hasPrefix("--") }.map { String($0.dropFirst(2)).trimmingCharacters(in: .whitespaces) }
                    ?? lines.first ?? current
                var needs = ""
                if message.hasPrefix("permission denied for database") {
                    needs = "; a publication needs CREATE on the database (GRANT CREATE ON DATABASE … TO the role applying this)"
                } else if message.hasPrefix("permission denied to create role") {
                    needs = "; making the node's role needs CREATEROLE (or make the role first)"
                } else if message.hasPrefix("must be owner of") {
                    needs = "; a publication is made by the tables' owner (or a superuser)"
                } else if message.hasPrefix("permission denied for schema") {
                    needs = "; the node's tables need CREATE on schema public"
                }
                throw SyncServerError("Postgres refused the setup, and nothing was applied: \(message) (in the step: \(step))\(needs)")
            }
        }
    }

    /// What the setup left undone for `role`, read back in its transaction.
    private static func caveats(role: String, on connection: PostgresConnection, logger: Logger) async throws -> [String] {
        var caveats: [String] = []
        let replication = try await connection.gatheredRows(
            "SELECT (rolreplication OR rolsuper)::text FROM pg_roles WHERE rolname = \(role)", logger: logger)
        if try replication.first?.first?.decode(String.self) != "true" {
            caveats.append("""
                role \(role) lacks REPLICATION, which only a superuser gives (on Amazon RDS: GRANT rds_replication TO \(role); \
                on Google Cloud SQL: ALTER ROLE \(role) REPLICATION as cloudsqlsuperuser; on Azure: as azure_pg_admin); \
                the node cannot run without it
                """)
        }
        let triggers = try await connection.gatheredRows(
            "SELECT count(*)::text FROM pg_event_trigger WHERE evtname LIKE 'ripple_sync_%'", logger: logger)
        if try triggers.first?.first?.decode(String.self) != "3" {
            caveats.append("""
                no event triggers (only a superuser makes them): the node sees schema changes from pgoutput's relation \
                messages and its catalog check every 5 s (see RunningWithoutSuperuser)
                """)
        }
        return caveats
    }

    /// `text` as an SQL string literal (quotes doubled), for the setup's `DO` blocks (which take
    /// no parameters).
    static func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
}
#endif
