#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple

/// What a ``ReplicaFeed`` follows: which tables of PostgreSQL's `public` schema, through which
/// publication and logical replication slot.
public struct FeedConfiguration: Sendable {
    /// The tables to keep in the replica (each needs a primary key).
    public var tables: [String]
    /// This node's slot: one per node, bound to its replica (see ``ReplicaFeed``).
    public var slot = "ripple_node"
    /// The publication of the synced tables (created when missing).
    public var publication = "ripple_sync"
    /// At most this many changes per peek (whole transactions: a peek may end past it).
    public var batchSize = 10_000
    /// How often, while following, the feed compares the synced tables' columns
    /// in Postgres's catalog with the replica's (``ReplicaFeed/checkCatalog()``): how soon a
    /// schema change with no later write is seen when there are no event triggers. `nil`: never.
    /// 5 s.
    public var catalogCheckInterval: Duration? = .seconds(5)

    public init(tables: [String]) { self.tables = tables }
}

/// A commit of the replica, as the feed tells it once done.
public struct ReplicaCommit: Sendable, Hashable {
    /// The replica's version.
    public var version: Int64
    /// The Postgres position it stands for: a transaction's commit LSN, or for a copy the WAL
    /// position after its snapshot (the replica is exact from there on).
    public var position: PGOutput.LSN
    /// Whether it is an initial copy (versions before it cannot be resumed from).
    public var isCopy: Bool
    /// The synced tables the commit made again (their key, or how the replica keeps a column,
    /// changed) or dropped: queries over them were compiled for columns that are no more. (A
    /// table that follows its schema change in place is not among them: see
    /// ``ReplicaSchemaChange``.)
    public var reshapedTables: [String]

    public init(version: Int64, position: PGOutput.LSN, isCopy: Bool, reshapedTables: [String] = []) {
        (self.version, self.position, self.isCopy, self.reshapedTables) = (version, position, isCopy, reshapedTables)
    }
}

/// Keeps a Ripple store — the replica — equal to tables of a PostgreSQL database, through
/// logical decoding (`pgoutput`, read with `pg_logical_slot_peek_binary_changes`).
///
/// * Each Postgres transaction becomes one commit of the replica (origin
///   `CommitOrigin.replication`, tagged with the transaction's commit LSN), written together
///   with the position it reached; only then is the slot advanced past it. A feed stopped
///   anywhere — after a peek, after an apply, before the slot moved — replays rather than
///   skips: what the replica's stored position covers is not applied again.
/// * The slot and the replica belong together: Postgres keeps, in `ripple_sync_nodes`, which
///   replica a slot feeds. A new replica, a replica the slot does not belong to, or a slot gone
///   or `lost` gets a fresh slot and a fresh copy — never a resumed position with rows missing.
/// * The initial copy reads every table in one `REPEATABLE READ` snapshot and the WAL position
///   after it; the slot (made before) replays onto the copy as upserts and deletes-if-present,
///   so the replica is exact from that position on (``consistentFrom``).
///
/// * A schema change of a synced table (told by the node's event triggers, or by pgoutput
///   describing the table with other columns) is applied in the commit of its transaction: the
///   table is described again and read afresh from a snapshot, and only the rows whose values
///   differ are written. Added columns, dropped columns and types widened within how the
///   replica keeps them are followed in place, the table's history kept (a dropped column
///   becomes a tombstone no query names; see `ReplicaTableChange`), so that live queries over
///   the columns that stay go on and resume across it; any other change makes the table again.
///   ``ReplicaSchemaChange`` tells which, before the commit.
///
/// Values are kept as ``PostgresTypes`` says.
public actor ReplicaFeed {
    public let store: Store
    let client: PostgresClient
    public let configuration: FeedConfiguration
    private let logger = Logger(label: "ripple.feed", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A replica table: its Postgres columns (name and type OID) in order, and its key's positions.
    struct Table {
        let name: String
        let columns: [(name: String, type: UInt32)]
        let key: [Int]
        /// The columns with order keys (see ``OrderKeys``), by position.
        let ordered: [Int]
        /// Inserts a row (its columns, then the order keys of ``ordered``), or updates the
        /// row with its key in place (its live queries see an update, and can read that row
        /// alone), not deleted and inserted again.
        let upsertSQL: String
        /// Deletes the row with a key.
        let deleteSQL: String
        /// `WHERE` of the row with a key, for an update of some columns.
        let keyCondition: String

        init(name: String, columns: [(name: String, type: UInt32)], key: [Int]) {
            self.name = name
            self.columns = columns
            self.key = key
            ordered = columns.indices.filter { OrderKeys.applies(to: columns[$0].type) }
            let names = columns.map { SQLIdentifier.quoted($0.name) } + ordered.map { SQLIdentifier.quoted(OrderKeys.column(for: columns[$0].name)) }
            let keyNames = key.map { SQLIdentifier.quoted(columns[$0].name) }
            let others = names.filter { !keyNames.contains($0) }
            let conflict = others.isEmpty ? "DO NOTHING" : "DO UPDATE SET " + others.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
            let marks = Array(repeating: "?", count: names.count).joined(separator: ", ")
            upsertSQL = "INSERT INTO \(SQLIdentifier.quoted(name)) (\(names.joined(separator: ", "))) VALUES (\(marks)) "
                + "ON CONFLICT (\(keyNames.joined(separator: ", "))) \(conflict)"
            keyCondition = keyNames.map { "\($0) = ?" }.joined(separator: " AND ")
            deleteSQL = "DELETE FROM \(SQLIdentifier.quoted(name)) WHERE \(keyCondition)"
        }
    }

    /// The synced tables, by name.
    private var tables: [String: Table] = [:]
    /// The synced tables whose schema change is being applied: from the transaction that
    /// changed them being found, to its replica commit told (see ``schema(of:)``).
    private var changing: Set<String> = []
    /// Who waits in ``schema(of:)`` for a change of ``changing`` to be applied.
    private var changeWaiters: [CheckedContinuation<Void, Never>] = []
    /// The client's connections whose session has the text forms (``textForms``) set.
    private let textFormsSet = Locked<Set<PostgresConnection.ID>>([])
    /// The relations pgoutput described, by OID.
    private var relations: [UInt32: PGOutput.Relation] = [:]
    /// The synced tables' OIDs when last described (a table dropped and made again has another).
    private var oids: [String: UInt32] = [:]
    /// The end LSN of the last transaction the replica holds.
    public private(set) var appliedLSN = PGOutput.LSN(0)
    /// The position from which the replica is exact (the initial copy's).
    public private(set) var consistentFrom = PGOutput.LSN(0)

    /// Told of each replica commit once it is done: its live queries with immediate delivery
    /// have had their events of it (see ``ReplicaCommit``).
    private let onCommit: (@Sendable (ReplicaCommit) -> Void)?

    /// Told of each synced table whose schema changed, before the replica commit that follows
    /// it: the live queries that cannot go on are ended first (see ``ReplicaSchemaChange``).
    private let onSchemaChange: (@Sendable (ReplicaSchemaChange) -> Void)?

    /// A feed of `store` from `client`'s database; `onCommit` hears each replica commit once its
    /// immediate live queries have their events (the sync server completes its frames there);
    /// `onSchemaChange`, each synced table's schema change before the commit that applies it.
    public init(store: Store, client: PostgresClient, configuration: FeedConfiguration,
                onCommit: (@Sendable (ReplicaCommit) -> Void)? = nil,
                onSchemaChange: (@Sendable (ReplicaSchemaChange) -> Void)? = nil) {
        self.store = store
        self.client = client
        self.configuration = configuration
        self.onSchemaChange = onSchemaChange
        self.onCommit = onCommit
    }

    /// Tells ``onSchemaChange`` of each table of `recopy`.
    private func tellSchemaChanges(_ recopy: Recopy) {
        guard let onSchemaChange else { return }
        for name in recopy.gone { onSchemaChange(ReplicaSchemaChange(table: name, kind: .gone)) }
        for (table, change, _) in recopy.kept {
            let added = change.added.map(\.name).filter { !$0.hasPrefix("ripple_order:") }
            let kind: ReplicaSchemaChange.Kind = change.remakes ? .remade : .inPlace(addedColumns: added, droppedColumns: change.dropped)
            onSchemaChange(ReplicaSchemaChange(table: table.name, kind: kind, schema: describedSchema(of: table.name)))
        }
    }

    /// The schema of synced table `name` as the replica holds it (after ``prepare()``), for
    /// compiling queries over it (``QueryCompiler``).
    ///
    /// While a schema change of the table is being applied — described anew, its replica
    /// commit not yet done and told to the feed's `onCommit` — it waits for that: a query
    /// compiled for columns the replica's table does not have yet would fail there, and one
    /// compiled for the old columns would miss the end that the subscriptions over them got (a
    /// client told `subscription_ended` subscribes again at once).
    public func schema(of name: String) async -> SyncedTableSchema? {
        while changing.contains(name) {
            await withCheckedContinuation { changeWaiters.append($0) }
        }
        return describedSchema(of: name)
    }

    /// Table `name` as the feed describes it now (during a schema change, the new description).
    private func describedSchema(of name: String) -> SyncedTableSchema? {
        tables[name].map { table in
            SyncedTableSchema(name: table.name, columns: table.columns.map { .init(name: $0.name, typeOID: $0.type) }, key: table.key)
        }
    }

    // MARK: Preparing

    /// Makes sure the publication, the slot and the replica's tables exist and belong together;
    /// copies the tables afresh when the replica cannot resume from the slot.
    public func prepare() async throws {
        try await store.asyncWrite(origin: .replication, tag: nil) { db in
            try db.execute("CREATE TABLE IF NOT EXISTS ripple_replica(key TEXT PRIMARY KEY, value) WITHOUT ROWID")
            try db.execute("INSERT OR IGNORE INTO ripple_replica VALUES ('replica', ?)", [UUID().uuidString.lowercased()])
        }
        let (replica, stored, from, synced) = try await store.asyncRead { db in
            (try db.fetchValue("SELECT value FROM ripple_replica WHERE key = 'replica'", as: String.self) ?? "",
             try db.fetchValue("SELECT value FROM ripple_replica WHERE key = 'lsn'", as: String.self).flatMap(PGOutput.LSN.init),
             try db.fetchValue("SELECT value FROM ripple_replica WHERE key = 'consistent_from'", as: String.self)
                .flatMap(PGOutput.LSN.init),
             try db.fetchValue("SELECT value FROM ripple_replica WHERE key = 'tables'", as: String.self))
        }
        if try await PostgresReadiness.isSuperuser(client, logger: logger) {
            for name in configuration.tables { tables[name] = try await describe(name) }
            try await makeWhatIsMissing()
        } else {
            // A role that is not a superuser makes nothing: an administrator did
            // (``PostgresSetup``); what is missing is said in plain words, with the command.
            try await PostgresReadiness.requireSetup(client, tables: configuration.tables, publication: configuration.publication,
                                                     slot: configuration.slot, logger: logger)
            for name in configuration.tables { tables[name] = try await describe(name) }
        }
        let slot = try await rows("""
            SELECT coalesce(s.wal_status, ''), coalesce(n.replica::text, '') FROM pg_replication_slots AS s
            LEFT JOIN ripple_sync_nodes AS n ON n.slot = s.slot_name WHERE s.slot_name = \(configuration.slot)
            """)
        // Resumable: the slot is this replica's and whole, and the replica holds the tables the
        // configuration names (another set needs a copy).
        let resumes = (slot.first.map { $0[0] != "lost" && $0[1] == replica } ?? false) && synced == Self.tableList(configuration.tables)
        if resumes, let stored, let from {
            (appliedLSN, consistentFrom) = (stored, from)
            // The tables as the replica holds them, not as Postgres has them now: a schema
            // change made while the node was away is found where the slot replays it (or by the
            // catalog check), and followed, instead of the replica taking rows of columns it
            // does not have. (A replica that recorded no description keeps Postgres's.)
            let recorded = try await store.asyncRead { db in
                try db.fetchAll("SELECT value FROM ripple_replica WHERE key LIKE 'table:%'").compactMap { row -> String? in
                    if case .text(let text)? = row.values.first { return text }
                    return nil
                }
            }
            for json in recorded {
                guard let (table, oid) = Self.decodeDescription(json), self.tables[table.name] != nil else { continue }
                (self.tables[table.name], oids[table.name]) = (table, oid)
            }
            try await ensureReplicaTables()
            return
        }
        // A fresh slot, bound to this replica, then a copy from a snapshot taken after it.
        if !slot.isEmpty {
            _ = try await client.gatheredRows("SELECT pg_drop_replication_slot(\(configuration.slot)::name)", logger: logger)
        }
        // Where the slot starts: every transaction after it is replayed onto the copy, those
        // below the copy's position too (commit visibility is not LSN order: a transaction
        // below it may be missing from the snapshot).
        let created = try await rows("SELECT lsn::text FROM pg_create_logical_replication_slot(\(configuration.slot)::name, 'pgoutput')")
        guard let start = created.first.flatMap({ PGOutput.LSN($0[0]) }) else { throw FeedError("the slot was made without a position") }
        _ = try await client.gatheredRows("""
            INSERT INTO ripple_sync_nodes VALUES (\(configuration.slot)::name, \(replica)::uuid)
            ON CONFLICT (slot) DO UPDATE SET replica = excluded.replica
            """, logger: logger)
        try await copy(replayingFrom: start)
    }

    /// What a superuser's node makes itself when missing: `ripple_sync_nodes`, the event
    /// triggers, and the publication, which lists exactly the synced tables (made, or set again
    /// when the configuration changed).
    private func makeWhatIsMissing() async throws {
        _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: PostgresSetup.nodesTable), logger: logger)
        try await installDDLTriggers()
        let list = configuration.tables.map(SQLIdentifier.quoted).joined(separator: ", ")
        let publication = SQLIdentifier.quoted(configuration.publication)
        if try await rows("SELECT 1 FROM pg_publication WHERE pubname = \(configuration.publication)").isEmpty {
            _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: "CREATE PUBLICATION \(publication) FOR TABLE \(list)"), logger: logger)
        } else {
            let published = try await rows("""
                SELECT tablename::text FROM pg_publication_tables WHERE pubname = \(configuration.publication) AND schemaname = 'public'
                """).map { $0[0] }
            if Set(published) != Set(configuration.tables) {
                _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: "ALTER PUBLICATION \(publication) SET TABLE \(list)"), logger: logger)
            }
        }
    }

    /// Installs the event triggers that tell the slot of schema changes (see ``DDLTriggers``):
    /// a superuser's node does it itself.
    private func installDDLTriggers() async throws {
        _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: DDLTriggers.function), logger: logger)
        for (name, event) in DDLTriggers.triggers {
            if try await rows("SELECT 1 FROM pg_event_trigger WHERE evtname = \(name)").isEmpty {
                _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: "CREATE EVENT TRIGGER \(name) ON \(event) EXECUTE FUNCTION ripple_sync_ddl()"),
                                       logger: logger)
            }
        }
    }

    /// The columns and key of Postgres table `name` (its OID recorded in ``oids``).
    private func describe(_ name: String) async throws -> Table {
        let columns = try await rows(PostgresCatalog.columns(of: name))
        let key = try await rows(PostgresCatalog.primaryKey(of: name)).map { $0[0] }
        let described = columns.map { (name: $0[0], type: UInt32($0[1]) ?? 0) }
        oids[name] = try await rows("SELECT \(SQLIdentifier.quoted(name))::regclass::oid::int8::text").first.flatMap { UInt32($0[0]) }
        guard !key.isEmpty else { throw FeedError("table \(name) has no primary key: a synced table needs one") }
        return Table(name: name, columns: described, key: key.compactMap { column in described.firstIndex { $0.name == column } })
    }

    /// Creates the replica's tables that do not exist yet.
    private func ensureReplicaTables() async throws {
        let tables = tables.values.sorted(by: { $0.name < $1.name })
        try await store.asyncWrite(origin: .replication, tag: nil) { db in
            for table in tables {
                try db.execute(Self.createSQL(table, ifNotExists: true))
            }
        }
    }

    /// The replica table's `CREATE TABLE`.
    private static func createSQL(_ table: Table, ifNotExists: Bool = false) -> String {
        let columns = table.columns.map { SQLIdentifier.quoted($0.name) + " " + PostgresTypes.replicaType(of: $0.type) }
            + table.columns.filter { OrderKeys.applies(to: $0.type) }.map { SQLIdentifier.quoted(OrderKeys.column(for: $0.name)) + " BLOB" }
        let key = table.key.map { SQLIdentifier.quoted(table.columns[$0].name) }.joined(separator: ", ")
        return "CREATE TABLE \(ifNotExists ? "IF NOT EXISTS " : "")\(SQLIdentifier.quoted(table.name)) (\(columns.joined(separator: ", ")), "
            + "PRIMARY KEY (\(key)))"
    }

    /// Copies every table from one snapshot into the replica, in one commit; the replica is
    /// exact from the WAL position after the snapshot on (``consistentFrom``), and the slot's
    /// transactions from `start` on are applied onto the copy.
    private func copy(replayingFrom start: PGOutput.LSN) async throws {
        try await ensureReplicaTables()
        let names = configuration.tables
        let (described, describedOIDs) = (tables, oids)
        let (copied, position) = try await snapshot(of: names)
        guard let lsn = PGOutput.LSN(position) else { throw FeedError("Postgres gave no WAL position (\(position))") }
        let (_, version) = try await store.asyncWriteTakingVersion(origin: .replication, tag: "copy \(lsn)") { db in
            for name in names {
                let table = described[name]!
                // A replica table of other columns (the table changed while the node was away):
                // made again (a copy starts history afresh anyway).
                let physical = try ReplicaTableChange.physicalColumns(of: name, in: db)
                let change = ReplicaTableChange(from: physical, to: table.columns.map { ($0.name, $0.type) },
                                                key: table.key.map { table.columns[$0].name })
                if change.remakes || !change.statements(for: name).isEmpty {
                    try db.execute("DROP TABLE IF EXISTS \(SQLIdentifier.quoted(name))")
                    try db.execute(Self.createSQL(table))
                }
                try db.execute("DELETE FROM \(SQLIdentifier.quoted(name))")
                for row in copied[name] ?? [] { try Self.upsert(table, row.map { $0.map(PGOutput.Value.text) ?? .null }, in: db) }
                try Self.recordDescription(of: table, oid: describedOIDs[name], in: db)
            }
            try db.execute("INSERT OR REPLACE INTO ripple_replica VALUES ('lsn', ?), ('consistent_from', ?), ('tables', ?)",
                           [start.description, lsn.description, Self.tableList(names)])
        }
        (appliedLSN, consistentFrom) = (start, lsn)
        if let version { onCommit?(ReplicaCommit(version: version, position: lsn, isCopy: true)) }
    }

    /// `table` (and its OID) as the replica records it, under `ripple_replica`'s key
    /// `table:<name>`, in the commit that makes the replica's table so.
    private static func recordDescription(of table: Table, oid: UInt32?, in db: Database) throws {
        let object: [String: Any] = ["name": table.name, "oid": Int(oid ?? 0), "key": table.key,
                                     "columns": table.columns.map { [$0.name, Int($0.type)] as [Any] }]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        try db.execute("INSERT OR REPLACE INTO ripple_replica VALUES (?, ?)", ["table:" + table.name, json])
    }

    /// A table description recorded by ``recordDescription(of:oid:in:)``.
    private static func decodeDescription(_ json: String) -> (Table, UInt32)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
              let name = object["name"] as? String, let oid = object["oid"] as? Int, let key = object["key"] as? [Int],
              let columns = object["columns"] as? [[Any]] else { return nil }
        var described: [(name: String, type: UInt32)] = []
        for column in columns {
            guard column.count == 2, let name = column[0] as? String, let type = column[1] as? Int else { return nil }
            described.append((name, UInt32(type)))
        }
        guard !key.isEmpty, key.allSatisfy(described.indices.contains) else { return nil }
        return (Table(name: name, columns: described, key: key), UInt32(oid))
    }

    /// The synced tables as the replica records them (sorted, one per line).
    private static func tableList(_ names: [String]) -> String { names.sorted().joined(separator: "\n") }

    /// The rows of `names` (each value in its output form) from one `REPEATABLE READ` snapshot,
    /// and the WAL position after it.
    private func snapshot(of names: [String]) async throws -> (rows: [String: [[String?]]], position: String) {
        let described = tables
        let logger = logger
        return try await client.withConnection { connection in
            _ = try await connection.gatheredRows(Self.textForms, logger: logger)
            _ = try await connection.gatheredRows("BEGIN ISOLATION LEVEL REPEATABLE READ", logger: logger)
            do {
                var copied: [String: [[String?]]] = [:]
                for name in names {
                    let table = described[name]!
                    // Each value in its type's output form, as pgoutput sends it (`concat` calls the
                    // output function; a cast to text may not: `true::text` is `true`, not `t`).
                    let list = table.columns.map { column in
                        let name = SQLIdentifier.quoted(column.name)
                        return "CASE WHEN \(name) IS NULL THEN NULL ELSE concat(\(name)) END"
                    }.joined(separator: ", ")
                    copied[name] = try await connection.gatheredRows(
                        PostgresQuery(unsafeSQL: "SELECT \(list) FROM \(SQLIdentifier.quoted(name))"), logger: logger, within: .hours(24)
                    ).map { row in try row.map { try $0.decode(String?.self) } }
                }
                var position = ""
                for row in try await connection.gatheredRows("SELECT pg_current_wal_insert_lsn()::text", logger: logger) {
                    position = try row.decode(String.self)
                }
                _ = try await connection.gatheredRows("COMMIT", logger: logger)
                return (copied, position)
            } catch {
                _ = try? await connection.gatheredRows("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    // MARK: Following

    /// Peeks, applies and confirms until the slot has nothing more; returns the number of
    /// Postgres transactions applied. `confirm: false` leaves the slot where it was (a feed
    /// stopped between applying and confirming, for tests).
    ///
    /// One call at a time (``run(pollInterval:)`` makes them so): the actor is re-entered at
    /// each await, and two overlapping calls would read the slot twice.
    ///
    /// `progress` runs after each peek answered and each Postgres transaction applied (a long
    /// catch-up is alive).
    @discardableResult
    public func catchUp(confirm: Bool = true, progress: @Sendable () -> Void = {}) async throws -> Int {
        var applied = 0
        while true {
            let batch = try await peek()
            progress()
            guard !batch.isEmpty else { return applied }
            var last: PGOutput.LSN?
            var transaction: [PGOutput.Message] = []
            for message in batch {
                switch message {
                case .begin:
                    transaction = [message]
                case .commit(let commit):
                    transaction.append(message)
                    if commit.endLSN > appliedLSN {
                        // A schema change: its tables are described and copied again from a
                        // snapshot after it (later transactions replay onto the copy), in the
                        // same replica commit as the transaction's other changes.
                        let changed = Self.changedTables(in: transaction, relations: relations, tables: tables, oids: oids)
                        if changed.isEmpty {
                            try await apply(transaction, commit: commit, recopy: nil)
                        } else {
                            // Compiling over these tables waits until the replica has their new
                            // schema and its commit was told (see ``schema(of:)``).
                            changing.formUnion(changed)
                            let described = (tables, oids)
                            do {
                                let recopy = try await recopy(changed)
                                tellSchemaChanges(recopy)
                                try await apply(transaction, commit: commit, recopy: recopy)
                                appliedSchemaChange(of: changed)
                            } catch {
                                // Nothing of it reached the replica: its tables are described as
                                // the replica has them, so that the feed, started again, finds the
                                // change again (and compiling meanwhile fits the replica).
                                (tables, oids) = described
                                appliedSchemaChange(of: changed)
                                throw error
                            }
                        }
                        applied += 1
                        progress()
                    }
                    last = commit.endLSN
                    transaction = []
                case .relation(let relation):
                    relations[relation.oid] = relation
                    transaction.append(message)
                default:
                    transaction.append(message)
                }
            }
            guard confirm, let last else { return applied }
            _ = try await client.gatheredRows("SELECT pg_replication_slot_advance(\(configuration.slot)::name, \(last.description)::pg_lsn)",
                                   logger: logger)
            // Fewer changes than asked for: the slot had no more (a peek to learn it costs as
            // much as one that finds some).
            if batch.count < configuration.batchSize { return applied }
        }
    }

    /// Follows Postgres until the task is cancelled: prepares, then ``follow(pollInterval:activePollInterval:read:progress:)``.
    ///
    /// - Throws: what ``prepare()`` or ``catchUp(confirm:progress:)`` throws (Postgres gone, a value that
    ///   does not fit its type); `CancellationError` when cancelled.
    public func run(pollInterval: Duration = .milliseconds(5)) async throws {
        try await prepare()
        try await follow(pollInterval: pollInterval)
    }

    /// Catches up, then watches the flushed end of the WAL (`pg_current_wal_flush_lsn()`, a
    /// cheap read: decoding sees only flushed WAL) every `pollInterval` — every
    /// `activePollInterval`, when given, for ``activeWindow`` after it last moved — and catches
    /// up whenever it moved, until the task is cancelled. `read` hears each position the replica has read
    /// through (after a catch-up, and at each look that found nothing new); `progress`, each look
    /// answered and each transaction applied. Every ``FeedConfiguration/catalogCheckInterval``
    /// it also checks the catalog (``checkCatalog()``).
    ///
    /// - Throws: what ``catchUp(confirm:progress:)`` throws; `CancellationError` when cancelled.
    public func follow(pollInterval: Duration = .milliseconds(5), activePollInterval: Duration? = nil,
                       read: @Sendable (PGOutput.LSN) -> Void = { _ in }, progress: @Sendable () -> Void = {}) async throws {
        var seen = PGOutput.LSN(0)
        var movedAt = ContinuousClock.now - Self.activeWindow
        var checkedAt = ContinuousClock.now
        while true {
            try Task.checkCancellation()
            // (Busy or not: a table changed with no write since is told by the catalog alone,
            // however busy the other tables are.)
            if let interval = configuration.catalogCheckInterval, ContinuousClock.now - checkedAt >= interval {
                try await checkCatalog()
                checkedAt = .now
            }
            let flushed = try await flushedPosition()
            progress()
            if flushed != seen {
                try await catchUp(progress: progress)
                seen = flushed
                movedAt = .now
                read(flushed)
            } else {
                read(flushed)
                let active = activePollInterval.map { ContinuousClock.now - movedAt < Self.activeWindow ? $0 : pollInterval }
                try await Task.sleep(for: active ?? pollInterval)
            }
        }
    }

    /// Compares the synced tables' columns and types in Postgres's catalog (`pg_attribute`), and
    /// their OIDs, with the replica's; each table that differs — a column added, dropped or
    /// retyped with no row written since, a table dropped or made again — is told to the slot in a
    /// `ripple_ddl` message (`"event": "catalog_check"`, with what the catalog says), which the
    /// feed handles at its position like an event trigger's: the table is described and copied
    /// again. A node that knows the table as the message says already (its relation messages
    /// told it, or another node's check came first) does nothing more. Returns the tables told.
    ///
    /// Without event triggers (a role that is not a superuser), this and pgoutput's relation
    /// messages are how schema changes are seen; ``follow(pollInterval:activePollInterval:read:progress:)``
    /// runs it every ``FeedConfiguration/catalogCheckInterval``.
    @discardableResult
    public func checkCatalog() async throws -> [String] {
        let names = configuration.tables.filter { tables[$0] != nil }
        guard !names.isEmpty else { return [] }
        // Each table's OID, columns and their types, in the form of ``signature(of:tables:oids:)``.
        let found = try await rows("""
            SELECT c.relname::text, c.oid::int8::text || '|' || coalesce((
                SELECT string_agg(a.attname || ':' || a.atttypid::int8::text, ',' ORDER BY a.attnum) FROM pg_attribute AS a
                WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '')
            FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname::text = ANY(\(names))
            """)
        let catalog = Dictionary(found.map { ($0[0], $0[1]) }, uniquingKeysWith: { first, _ in first })
        var told: [String] = []
        for name in names {
            let signature = catalog[name] ?? ""
            guard signature != Self.signature(of: name, tables: tables, oids: oids) else { continue }
            let content = try JSONSerialization.data(withJSONObject: ["event": "catalog_check", "table": name, "signature": signature],
                                                     options: [.sortedKeys])
            _ = try await client.gatheredRows("""
                SELECT pg_logical_emit_message(true, 'ripple_ddl', \(String(decoding: content, as: UTF8.self)))::text
                """, logger: logger)
            told.append(name)
        }
        return told
    }

    /// Synced table `name`'s OID, columns and their types as the feed knows them (`""`: gone).
    private static func signature(of name: String, tables: [String: Table], oids: [String: UInt32]) -> String {
        guard let table = tables[name] else { return "" }
        return "\(oids[name] ?? 0)|" + table.columns.map { "\($0.name):\($0.type)" }.joined(separator: ",")
    }

    /// How long after the WAL last moved ``follow(pollInterval:activePollInterval:read:progress:)`` looks
    /// every `activePollInterval`: 100 ms.
    public static let activeWindow: Duration = .milliseconds(100)

    /// The end of the WAL Postgres has flushed (what decoding can see so far).
    public func flushedPosition() async throws -> PGOutput.LSN {
        let text = try await rows("SELECT pg_current_wal_flush_lsn()::text").first?.first ?? ""
        guard let position = PGOutput.LSN(text) else { throw FeedError("Postgres gave no WAL position (\(text))") }
        return position
    }

    /// Postgres's `max_slot_wal_keep_size`: how much WAL a slot may hold back (`-1`: without
    /// limit, so that a node down for long can fill Postgres's disk).
    public func slotRetentionLimit() async throws -> String {
        try await rows("SELECT current_setting('max_slot_wal_keep_size')").first?.first ?? ""
    }

    /// Which Postgres history the replica follows: the cluster's system identifier and its
    /// current timeline, `7350160375306405406-1`. A restored backup or a promoted standby
    /// names another, so positions from one are never taken for positions of the other.
    public func clusterIdentity() async throws -> String {
        let row = try await rows("""
            SELECT (SELECT system_identifier::text FROM pg_control_system()),
                   (SELECT timeline_id::text FROM pg_control_checkpoint())
            """).first ?? []
        guard row.count == 2 else { throw FeedError("Postgres did not say which cluster it is") }
        return "\(row[0])-\(row[1])"
    }

    /// The next batch of whole transactions from the slot (the slot does not move).
    public func peek() async throws -> [PGOutput.Message] {
        let (slot, size, publication, logger) = (configuration.slot, configuration.batchSize, configuration.publication, logger)
        return try await client.withConnection { [textFormsSet] connection in
            // Values are written in the session's text forms: the same ones as the copy's, set
            // once per connection (they are session settings; a round trip fewer per peek).
            if textFormsSet.withLock({ !$0.contains(connection.id) }) {
                _ = try await connection.gatheredRows(Self.textForms, logger: logger)
                textFormsSet.withLock { _ = $0.insert(connection.id) }
            }
            let rows = try await connection.gatheredRows("""
                SELECT data FROM pg_logical_slot_peek_binary_changes(\(slot)::name, NULL, \(size)::int,
                    'proto_version', '1', 'publication_names', \(publication), 'messages', 'true')
                """, logger: logger)
            return try rows.map { row in try PGOutput.Message(Array(try row.decode(ByteBuffer.self).readableBytesView)) }
        }
    }

    /// The settings that fix values' text forms (see ``PostgresTypes``): times in UTC and ISO,
    /// bytea in hex, floats in their shortest exact form.
    static let textForms: PostgresQuery = """
        SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO, MDY', false),
               set_config('bytea_output', 'hex', false), set_config('extra_float_digits', '1', false)
        """

    /// Applies one Postgres transaction in one commit of the replica, with its position; the
    /// tables of `recopy` are replaced by their fresh copies instead of taking its row changes.
    private func apply(_ transaction: [PGOutput.Message], commit: PGOutput.Commit, recopy: Recopy?) async throws {
        var unchanged = tables
        for name in (recopy?.gone ?? []) + (recopy?.kept.map(\.table.name) ?? []) { unchanged[name] = nil }
        let (described, relations, describedOIDs) = (unchanged, relations, oids)
        let (_, version) = try await store.asyncWriteTakingVersion(origin: .replication, tag: commit.commitLSN.description) { db in
            if let recopy {
                for name in recopy.gone {
                    try db.execute("DROP TABLE IF EXISTS \(SQLIdentifier.quoted(name))")
                    try db.execute("DELETE FROM ripple_replica WHERE key = ?", ["table:" + name])
                }
                for (table, _, _) in recopy.kept { try Self.recordDescription(of: table, oid: describedOIDs[table.name], in: db) }
                // Tables that follow in place first, declared (history crosses them): nothing
                // else of the transaction may change the schema before the declaration.
                let inPlace = recopy.kept.filter { !$0.change.remakes }
                for (table, change, _) in inPlace {
                    for statement in change.statements(for: table.name) { try db.execute(statement) }
                }
                if recopy.gone.isEmpty, inPlace.count == recopy.kept.count,
                   inPlace.contains(where: { !$0.change.statements(for: $0.table.name).isEmpty }) {
                    try db.declareHistoryPreservingSchemaChange()
                }
                for (table, change, rows) in recopy.kept {
                    if change.remakes {
                        try db.execute("DROP TABLE IF EXISTS \(SQLIdentifier.quoted(table.name))")
                        try db.execute(Self.createSQL(table))
                        for row in rows { try Self.upsert(table, row.map { $0.map(PGOutput.Value.text) ?? .null }, in: db) }
                    } else {
                        try Self.replaceRows(of: table, with: rows, in: db)
                    }
                }
            }
            for message in transaction {
                switch message {
                case .insert(let insert):
                    guard let table = Self.table(of: insert.relation, relations, described) else { continue }
                    try Self.upsert(table, insert.new, in: db)
                case .update(let update):
                    guard let table = Self.table(of: update.relation, relations, described) else { continue }
                    if let old = update.old { try Self.delete(table, old, in: db) }
                    try Self.update(table, update.new, in: db)
                case .delete(let delete):
                    guard let table = Self.table(of: delete.relation, relations, described) else { continue }
                    try Self.delete(table, delete.old, in: db)
                case .truncate(let truncate):
                    for relation in truncate.relations {
                        guard let table = Self.table(of: relation, relations, described) else { continue }
                        try db.execute("DELETE FROM \(SQLIdentifier.quoted(table.name))")
                    }
                default:
                    continue
                }
            }
            try db.execute("INSERT OR REPLACE INTO ripple_replica VALUES ('lsn', ?)", [commit.endLSN.description])
        }
        appliedLSN = commit.endLSN
        let reshaped = (recopy?.gone ?? []) + (recopy?.kept.filter(\.change.remakes).map(\.table.name) ?? [])
        if let version { onCommit?(ReplicaCommit(version: version, position: commit.commitLSN, isCopy: false, reshapedTables: reshaped)) }
    }

    /// The synced tables whose schema a transaction changed: named by a `ripple_ddl` message (an
    /// event trigger's; a catalog check's, unless the feed knows the table as it says already),
    /// or described by pgoutput with other columns than the replica's.
    private static func changedTables(in transaction: [PGOutput.Message], relations: [UInt32: PGOutput.Relation],
                                      tables: [String: Table], oids: [String: UInt32]) -> Set<String> {
        var changed: Set<String> = []
        for message in transaction {
            switch message {
            case .message(let message) where message.prefix == "ripple_ddl":
                guard let object = try? JSONSerialization.jsonObject(with: Data(message.content)) as? [String: Any],
                      let name = object["table"] as? String else { continue }
                if object["event"] as? String == "catalog_check" {
                    // What the catalog said when checked: the feed may know it already.
                    if let said = object["signature"] as? String, said != signature(of: name, tables: tables, oids: oids) {
                        changed.insert(name)
                    }
                    continue
                }
                // `public.items`, `items` or a quoted name, as regclass prints it.
                let bare = name.hasPrefix("public.") ? String(name.dropFirst("public.".count)) : name
                let unquoted = bare.hasPrefix("\"") && bare.hasSuffix("\"") && bare.count >= 2
                    ? String(bare.dropFirst().dropLast()).replacingOccurrences(of: "\"\"", with: "\"") : bare
                if tables[unquoted] != nil { changed.insert(unquoted) }
            case .relation(let relation) where relation.namespace == "public":
                guard let table = tables[relation.name] else { continue }
                let described = relation.columns.map { ($0.name, $0.typeOID) }
                if !described.elementsEqual(table.columns, by: { $0.0 == $1.name && $0.1 == $1.type }) { changed.insert(relation.name) }
            default:
                continue
            }
        }
        return changed
    }

    /// The schema change of `names` is applied (or the feed failed applying it): compiling over
    /// them goes on.
    private func appliedSchemaChange(of names: Set<String>) {
        changing.subtract(names)
        let waiters = changeWaiters
        changeWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// Tables described and read afresh after a schema change (see ``recopy(_:)``).
    struct Recopy {
        /// The tables gone from Postgres (dropped or renamed).
        var gone: [String]
        /// The tables read again, with how the replica's table follows, and the rows of one
        /// snapshot.
        var kept: [(table: Table, change: ReplicaTableChange, rows: [[String?]])]
    }

    /// Describes `names` again and reads them afresh from one snapshot; how each replica table
    /// follows its new columns is a ``ReplicaTableChange``. A table that is gone is dropped (so
    /// the live queries over it end with an error naming it).
    private func recopy(_ names: Set<String>) async throws -> Recopy {
        var recopy = Recopy(gone: [], kept: [])
        for name in names.sorted() {
            if try await rows("SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tablename = \(name)").isEmpty {
                recopy.gone.append(name)
                tables[name] = nil
            } else {
                tables[name] = try await describe(name)
            }
        }
        let kept = names.sorted().filter { tables[$0] != nil }
        let copied = try await snapshot(of: kept)
        for name in kept {
            let table = tables[name]!
            let physical = try await store.asyncRead { db in try ReplicaTableChange.physicalColumns(of: name, in: db) }
            let change = ReplicaTableChange(from: physical, to: table.columns.map { ($0.name, $0.type) },
                                            key: table.key.map { table.columns[$0].name })
            recopy.kept.append((table, change, copied.rows[name] ?? []))
        }
        return recopy
    }

    /// Puts the copied rows of `table` in the replica: writes only the rows that differ from the
    /// replica's (a row whose values are all the same is left alone, so that its live queries
    /// see no update), and deletes the rows the copy no longer has.
    private static func replaceRows(of table: Table, with copied: [[String?]], in db: Database) throws {
        let names = table.columns.map { SQLIdentifier.quoted($0.name) }.joined(separator: ", ")
        var current: [[SQLValue]: [SQLValue]] = [:]
        for row in try db.fetchAll("SELECT \(names) FROM \(SQLIdentifier.quoted(table.name))") {
            let values = Array(row.values.prefix(table.columns.count))
            current[table.key.map { values[$0] }] = values
        }
        for row in copied {
            let values = row.map { $0.map(PGOutput.Value.text) ?? .null }
            guard values.count == table.columns.count else {
                throw FeedError("a row of \(table.name) has \(values.count) values for \(table.columns.count) columns")
            }
            let replica = try zip(values, table.columns).map { try sqlValue($0, of: $1.type) }
            let key = table.key.map { replica[$0] }
            let before = current.removeValue(forKey: key)
            if before != replica { try upsert(table, values, in: db) }
        }
        for key in current.keys {
            let arguments = key.map { $0 as any SQLValueConvertible }
            try db.execute(table.deleteSQL, arguments)
        }
    }

    /// The synced table a relation OID names, checked against the columns pgoutput describes.
    private static func table(of oid: UInt32, _ relations: [UInt32: PGOutput.Relation], _ tables: [String: Table]) -> Table? {
        guard let relation = relations[oid], relation.namespace == "public", let table = tables[relation.name],
              relation.columns.elementsEqual(table.columns, by: { $0.name == $1.name && $0.typeOID == $1.type }) else {
            return nil   // not synced, or described otherwise: the transaction re-copies it (see changedTables)
        }
        return table
    }

    /// Inserts the row, or updates the row with its key in place (a replay onto the copy).
    private static func upsert(_ table: Table, _ values: [PGOutput.Value], in db: Database) throws {
        guard values.count == table.columns.count else {
            throw FeedError("a row of \(table.name) has \(values.count) values for \(table.columns.count) columns")
        }
        let statement = try db.cachedStatement(table.upsertSQL)
        defer { statement.reset() }
        for (position, column) in table.columns.enumerated() {
            try statement.bind(try sqlValue(values[position], of: column.type), at: Int32(position + 1))
        }
        for (offset, position) in table.ordered.enumerated() {
            try statement.bind(try orderKey(values[position], of: table.columns[position].type),
                               at: Int32(table.columns.count + offset + 1))
        }
        while try statement.step() {}
    }

    /// The order key of a value (see ``OrderKeys``).
    private static func orderKey(_ value: PGOutput.Value, of type: UInt32) throws -> SQLValue {
        switch value {
        case .null: return .null
        case .text(let text): return .blob(try OrderKeys.key(text, of: type))
        case .binary, .unchanged: throw FeedError("a value came in a form the feed does not ask for")
        }
    }

    /// Updates the row with the new row's key: every column sent (an unchanged TOASTed value
    /// keeps the replica's); a row the replica does not have is inserted when whole.
    private static func update(_ table: Table, _ values: [PGOutput.Value], in db: Database) throws {
        if !values.contains(.unchanged) { return try upsert(table, values, in: db) }
        var assignments: [String] = []
        var arguments: [any SQLValueConvertible] = []
        for (index, column) in table.columns.enumerated() where values[index] != .unchanged {
            assignments.append("\(SQLIdentifier.quoted(column.name)) = ?")
            arguments.append(try sqlValue(values[index], of: column.type))
            if OrderKeys.applies(to: column.type) {
                assignments.append("\(SQLIdentifier.quoted(OrderKeys.column(for: column.name))) = ?")
                arguments.append(try orderKey(values[index], of: column.type))
            }
        }
        for position in table.key { arguments.append(try sqlValue(values[position], of: table.columns[position].type)) }
        try db.execute("UPDATE \(SQLIdentifier.quoted(table.name)) SET \(assignments.joined(separator: ", ")) WHERE \(table.keyCondition)", arguments)
    }

    /// Deletes the row of the key in `values` (the key's columns; the others are ignored).
    private static func delete(_ table: Table, _ values: [PGOutput.Value], in db: Database) throws {
        let arguments = try table.key.map { try sqlValue(values[$0], of: table.columns[$0].type) as any SQLValueConvertible }
        try db.execute(table.deleteSQL, arguments)
    }

    private static func sqlValue(_ value: PGOutput.Value, of type: UInt32) throws -> SQLValue {
        switch value {
        case .null: return .null
        case .text(let text): return try PostgresTypes.replicaValue(text, of: type)
        case .binary, .unchanged: throw FeedError("a value came in a form the feed does not ask for")
        }
    }

    // MARK: Helpers

    /// The rows of a query, each column as text.
    private func rows(_ query: PostgresQuery) async throws -> [[String]] {
        try await client.gatheredRows(query, logger: logger).map { row in try row.map { try $0.decode(String?.self) ?? "" } }
    }

}

/// The feed could not go on, and why.
public struct FeedError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
