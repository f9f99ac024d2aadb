#if Sync
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Ripple
import RippleSync

/// What a per-table resolver decides for an operation (see ``MutationResolver``).
public enum Resolution: Sendable {
    /// Apply this operation (the incoming one, or one the resolver made: a merge).
    case apply(MutationOp)
    /// Reject the whole mutation, with a reason the client receives.
    case reject(String)
}

/// Decides, on the server, what an incoming operation on one table does, given the row as it
/// stands in Postgres (read `FOR UPDATE` in the transaction that applies the mutation, so it
/// cannot change meanwhile; `nil`: no row with that key; values in their text form) and the
/// user. Without one, a `patch` writes its columns over the row's (per-column last writer wins,
/// by arrival at the server).
///
/// A row an earlier operation of the same mutation wrote is given as that operation left it,
/// with the values it carried. The operation returned must keep the table and the row's key
/// (else the mutation is rejected, `resolver`). A resolver runs before Postgres checks that the
/// mutation is the next one of its client: it may also run for a mutation pushed again, whose
/// stored result is then answered and whose operations are not applied, so it should decide
/// without side effects.
public typealias MutationResolver = @Sendable (_ op: MutationOp, _ current: [String: WireValue]?, _ user: String) throws -> Resolution

/// Applies clients' mutations to Postgres, each exactly once, as SYNC.md's "Writes" decides:
///
/// * Client ids are minted by the server per (user, device) and kept in `ripple_sync_clients`
///   with the last mutation applied; a mutation's first statement moves that counter from
///   `id - 1` to `id`, so the same mutation arriving twice (a retry, two sockets of one client on
///   two nodes) takes effect once: the second finds the counter moved and gets the first's result.
/// * Mutations run in transactions of up to ``batchSize`` with `synchronous_commit = on`, each
///   in a savepoint: a rejected one is undone alone. Postgres's function `ripple_sync_apply`
///   runs the statements the node built for them, and is the one place where counters move and
///   results are stored: a batch is one round trip, and a mutation on a table with a resolver
///   has the resolver run in the node first, in the same transaction (one more call of the
///   function, and a locked read per operation). Its result (applied, or rejected with a
///   reason) is a row of `ripple_sync_results` committed with it, and is answered with the WAL
///   position read after that commit (`lsn`): a client keeps the mutation until its
///   subscriptions stand there.
/// * Every operation reads its row `FOR UPDATE`; the table's write rule must hold for the row as
///   it was (unless new) and as it is after (unless deleted); a `patch` of a row that is gone is
///   rejected. A rejected mutation changes nothing but the counter and its result.
/// * Transient failures (serialization, deadlock, a connection or a server going away) are tried
///   again; permanent ones (a constraint, a permission, a value that does not fit) reject that
///   mutation only, with its SQLSTATE and constraint, never Postgres's `DETAIL` (which can show
///   other users' values).
public final class MutationWriter: Sendable {
    private let client: PostgresClient
    private let rules: SyncRules
    private let resolvers: [String: MutationResolver]
    private let logger: Logger
    /// The writable tables as Postgres described them, by name.
    private let described = Locked<[String: WritableTable]>([:])
    /// The columns of each table that this node saw dropped (see ``tableChanged(_:dropped:)``).
    private let droppedColumns = Locked<[String: Set<String>]>([:])

    /// How many times a mutation that fails for a transient reason is tried.
    static let attempts = 5

    public init(client: PostgresClient, rules: SyncRules, resolvers: [String: MutationResolver] = [:],
                logger: Logger = Logger(label: "ripple.sync.writes")) {
        (self.client, self.rules, self.resolvers, self.logger) = (client, rules, resolvers, logger)
    }

    /// Creates the server's own tables and function when missing, when the node's role is a
    /// superuser; a role that is not finds them made by an administrator (``PostgresSetup``:
    /// the feed's ``ReplicaFeed/prepare()`` says what is missing).
    public func prepare() async throws {
        guard try await PostgresReadiness.isSuperuser(client, logger: logger) else { return }
        for statement in Self.tableStatements {
            _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
        _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: MutationBatch.function), logger: logger)
    }

    /// The server's own tables: each client id with its last mutation, and each mutation's result.
    static let tableStatements = [
        """
        CREATE TABLE IF NOT EXISTS ripple_sync_clients (
            client_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), user_id text NOT NULL,
            last_mutation_id int8 NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now())
        """,
        """
        CREATE TABLE IF NOT EXISTS ripple_sync_results (
            client_id uuid NOT NULL REFERENCES ripple_sync_clients ON DELETE CASCADE, mutation_id int8 NOT NULL,
            status text NOT NULL, code text, constraint_name text, message text,
            applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (client_id, mutation_id))
        """,
    ]

    /// The client id for `user` on a device that claims `claimed` (the id the server gave it
    /// before), and the last mutation applied under it. An id the server does not know, or one
    /// of another user, gets a new id (so does a device restored from a backup once it notices:
    /// see the protocol page).
    public func client(claimed: String?, user: String) async throws -> (id: String, lastMutation: Int64) {
        if let claimed, UUID(uuidString: claimed) != nil {
            let rows = try await texts("""
                SELECT client_id::text, last_mutation_id::text FROM ripple_sync_clients
                WHERE client_id = \(claimed)::uuid AND user_id = \(user)
                """)
            if let row = rows.first, let last = Int64(row[1] ?? "") { return (row[0] ?? claimed, last) }
        }
        let rows = try await texts("INSERT INTO ripple_sync_clients (user_id) VALUES (\(user)) RETURNING client_id::text")
        guard let id = rows.first?[0] else { throw SyncServerError("Postgres minted no client id") }
        return (id, 0)
    }

    /// Whether a result was stored with its mutation (applied, or rejected for good): only those
    /// carry a position. An `out_of_order` answer is not stored — not the mutation's fate — and
    /// must carry none, or a client would take it for final and drop the mutation.
    static func isStored(_ result: MutationResult) -> Bool {
        result.status == .applied || !["out_of_order", "unavailable"].contains(result.code ?? "")
    }

    /// How long one attempt at a batch may take, waiting for a connection included, before it
    /// is given up (and tried again, or answered `unavailable`): 60 s.
    static let batchLimit: Duration = .seconds(60)

    /// Mutations applied in one Postgres transaction at most (each in a savepoint of its own,
    /// with its own result): one commit, and one wait for the disk, per batch.
    public static let batchSize = 100

    /// Applies `mutations` of `clientID` (belonging to `user`) in order; returns each one's result.
    public func apply(_ mutations: [Mutation], client clientID: String, user: String) async -> [MutationResult] {
        var results: [MutationResult] = []
        var start = 0
        while start < mutations.count {
            // A node stopping takes no more of the push: the client sends the rest again.
            guard !Task.isCancelled else { return results }
            let batch = Array(mutations[start..<min(start + Self.batchSize, mutations.count)])
            if case .success(let applied) = await applyBatch(batch, client: clientID, user: user) {
                results += applied
            } else {
                // The batch kept failing: one mutation at a time, each tried again and, failing
                // still for a reason of its own, rejected alone. A failure that passes (Postgres
                // restarting, a lock that keeps deadlocking, the node stopping) rejects nothing:
                // that mutation is answered `unavailable` (not stored) and the push ends there,
                // so the client sends it, and those after it, again.
                for mutation in batch {
                    switch await applyBatch([mutation], client: clientID, user: user) {
                    case .success(let applied):
                        results += applied
                    case .failure(let rejection) where rejection.isTransient || Task.isCancelled:
                        results.append(MutationResult(id: mutation.id, status: .rejected, code: "unavailable",
                                                      message: "Postgres could not take it for now (\(rejection.code)); send it again"))
                        return results
                    case .failure(let rejection):
                        results.append(await reject(mutation, client: clientID, user: user, rejection))
                    }
                }
            }
            start += batch.count
        }
        return results
    }

    /// `batch` in one transaction, each mutation in a savepoint: applied, or rejected there and
    /// then (its operations undone, its counter and result stored); with `rejection`, each
    /// mutation is rejected with it (its counter moved and the rejection stored, nothing else).
    /// Fails with the last passing failure (a serialization failure, a deadlock, a lost
    /// connection) when one persisted through the attempts: nothing of the batch was committed.
    private func applyBatch(_ batch: [Mutation], client clientID: String, user: String,
                            rejecting rejection: Rejection? = nil) async -> Result<[MutationResult], Rejection> {
        var wait = Duration.milliseconds(20)
        var attempt = 1
        while true {
            do {
                return .success(try await client.withConnection(within: Self.batchLimit) { connection in
                    _ = try await connection.gatheredRows("BEGIN", logger: self.logger)
                    var results: [MutationResult] = []
                    do {
                        _ = try await connection.gatheredRows("SET LOCAL synchronous_commit = on", logger: self.logger)
                        results = try await self.applyInPostgres(batch, on: connection, client: clientID, user: user, rejecting: rejection)
                        _ = try await connection.gatheredRows("COMMIT", logger: self.logger)
                    } catch {
                        _ = try? await connection.gatheredRows("ROLLBACK", logger: self.logger)
                        throw error
                    }
                    // Read after the commit: past it, and past the commits of the results read
                    // from storage (a mutation applied before), which were visible to the batch.
                    // Failing here tries the batch again, which then answers the stored results.
                    let lsn = try await self.position(on: connection)
                    for index in results.indices where Self.isStored(results[index]) { results[index].lsn = lsn }
                    return results
                })
            } catch {
                let rejection = (error as? Rejection) ?? Rejection(error)
                // A node stopping tries nothing again: the batch was not committed, and the
                // client sends it again to this node or another.
                guard attempt < Self.attempts, !Task.isCancelled else { return .failure(rejection) }
                logger.info("a batch of client \(clientID): \(rejection.code), trying again")
                try? await Task.sleep(for: wait)
                wait *= 2
                attempt += 1
            }
        }
    }

    /// Rejects `mutation`: its counter moves and its result is stored, nothing else changes
    /// (the transaction it failed in rolled back). Another socket that applied it meanwhile
    /// wins: its result is answered.
    private func reject(_ mutation: Mutation, client clientID: String, user: String, _ rejection: Rejection) async -> MutationResult {
        switch await applyBatch([mutation], client: clientID, user: user, rejecting: rejection) {
        case .success(let results) where results.count == 1:
            return results[0]
        case .success, .failure:
            logger.warning("mutation \(mutation.id) of client \(clientID): its rejection (\(rejection.code)) could not be stored")
            return MutationResult(id: mutation.id, status: .rejected, code: "internal",
                                  message: "the server could not store the mutation's result; send it again")
        }
    }

    /// Where Postgres has flushed its WAL to now. Read once a result is known to be committed
    /// (with `synchronous_commit = on`, its commit record is flushed), it is a position at or
    /// past that commit (the result's `lsn`) that the feed, which reads flushed WAL, reaches.
    private func position(on connection: PostgresConnection) async throws -> String {
        for lsn in try await connection.gatheredRows("SELECT pg_current_wal_flush_lsn()::text", logger: logger).map({ try $0.decode(String.self) }) {
            return lsn
        }
        throw SyncServerError("Postgres gave no WAL position")
    }

    // MARK: Exactly once: the batch function

    /// `batch` applied inside the caller's transaction by `ripple_sync_apply` (see
    /// ``MutationBatch``): the one place where a client's counter moves and a mutation's result
    /// is stored, whether or not a table has a resolver.
    ///
    /// The node plans each mutation's statements. A mutation it refuses before Postgres sees it
    /// (a table the rules do not let the user write, an unknown column, or `rejection`) still
    /// goes, as a rejection: its counter moves in order. A mutation that writes a table with a
    /// resolver is planned once the mutations before it are applied — the batch goes to the
    /// function in runs that end before each such mutation — so its resolvers read the rows as
    /// those mutations left them. Without resolvers the batch is one run: one round trip.
    private func applyInPostgres(_ batch: [Mutation], on connection: PostgresConnection, client clientID: String,
                                 user: String, rejecting rejection: Rejection?) async throws -> [MutationResult] {
        var results: [MutationResult] = []
        var run: [MutationBatch.PlannedMutation] = []
        for mutation in batch {
            if let rejection {
                run.append(MutationBatch.PlannedMutation(id: mutation.id, ops: [], reject: MutationBatch.Refusal(rejection)))
                continue
            }
            let resolves = mutation.ops.contains { resolvers[$0.table] != nil }
            if resolves && !run.isEmpty {
                results += try await applyInPostgres(run, on: connection, client: clientID, user: user)
                run = []
            }
            run.append(try await plan(mutation, user: user, resolvingOn: resolves ? connection : nil))
        }
        if !run.isEmpty { results += try await applyInPostgres(run, on: connection, client: clientID, user: user) }
        guard results.map(\.id) == batch.map(\.id) else { throw SyncServerError("ripple_sync_apply answered other mutations") }
        return results
    }

    /// One call of `ripple_sync_apply` with `planned`: their results, in order.
    private func applyInPostgres(_ planned: [MutationBatch.PlannedMutation], on connection: PostgresConnection,
                                 client clientID: String, user: String) async throws -> [MutationResult] {
        let json = String(decoding: try JSONEncoder().encode(planned), as: UTF8.self)
        for answer in try await connection.gatheredRows("SELECT ripple_sync_apply(\(clientID)::uuid, \(user), \(json)::jsonb)::text",
                                                            logger: logger).map({ try $0.decode(String.self) }) {
            let results = try MutationBatch.results(from: answer)
            guard results.map(\.id) == planned.map(\.id) else { throw SyncServerError("ripple_sync_apply answered other mutations") }
            // A column Postgres does not have: the tables changed since they were described.
            if results.contains(where: { $0.code == "42703" }) { forgetTables() }
            return results
        }
        throw SyncServerError("ripple_sync_apply answered nothing")
    }

    /// `mutation`'s statements for the function, or the rejection the node decides before
    /// Postgres sees it. With `connection` (the batch's, inside its transaction), an operation
    /// on a table with a resolver is first resolved (see ``resolve(_:of:rule:with:user:rows:on:)``);
    /// the resolvers' reads run in a savepoint, so a read Postgres refuses (a key that does not
    /// fit its column) rejects the mutation at that operation, and leaves the transaction usable.
    private func plan(_ mutation: Mutation, user: String, resolvingOn connection: PostgresConnection?) async throws -> MutationBatch.PlannedMutation {
        var entry = MutationBatch.PlannedMutation(id: mutation.id, ops: [], reject: nil)
        if let connection { _ = try await connection.gatheredRows("SAVEPOINT ripple_resolve", logger: logger) }
        // The rows this mutation's operations on tables with a resolver wrote, as they left them.
        var rows: [RowKey: [String: WireValue]?] = [:]
        do {
            for op in mutation.ops {
                var table = try await writable(op.table, user: user)
                if op.values.keys.contains(where: { table.types[$0] == nil }) {
                    // A column this node has not seen yet (added since it described the table):
                    // described again before it is refused.
                    described.withLock { $0[table.name] = nil }
                    table = try await writable(op.table, user: user)
                }
                try validate(op, of: table)
                let rule = try await writeRule(of: table, for: user)
                var decided = op
                if let connection, let resolver = resolvers[table.name] {
                    let step: Step
                    do {
                        step = try await resolve(op, of: table, rule: rule, with: resolver, user: user, rows: &rows, on: connection)
                    } catch let error as PSQLError {
                        let rejection = Rejection(error)
                        if rejection.isTransient { throw error }
                        _ = try await connection.gatheredRows("ROLLBACK TO SAVEPOINT ripple_resolve", logger: logger)
                        step = .reject(rejection)
                    }
                    guard case .apply(let resolved) = step else {
                        // Postgres applies the operations before it, then rejects the mutation here.
                        if case .reject(let rejection) = step { entry.ops.append(MutationBatch.PlannedOp(refusal: rejection)) }
                        break
                    }
                    decided = resolved
                }
                entry.ops.append(try Self.plan(decided, of: table, rule: rule))
            }
        } catch let error where !(error is PSQLError) {
            let rejection = (error as? Rejection) ?? Rejection(error)
            // Planning needs the table's description, which may need Postgres: a failure
            // that passes fails the batch (tried again, or answered unavailable), and is
            // never stored as the mutation's rejection. (The sync stress checker found a
            // node that had stored `unavailable` for a mutation planned while Postgres
            // restarted: the client sent it again forever.)
            if rejection.isTransient { throw error }
            entry = MutationBatch.PlannedMutation(id: mutation.id, ops: [], reject: MutationBatch.Refusal(rejection))
        }
        if let connection { _ = try await connection.gatheredRows("RELEASE SAVEPOINT ripple_resolve", logger: logger) }
        return entry
    }

    /// What the node decides for an operation on a table with a resolver.
    private enum Step {
        /// Apply this operation (the resolver's).
        case apply(MutationOp)
        /// Reject the mutation at this operation.
        case reject(Rejection)
    }

    /// A row of a table, by its key's values in their text form.
    private struct RowKey: Hashable {
        var table: String
        var key: [String?]

        init(_ op: MutationOp, of table: WritableTable) {
            (self.table, key) = (table.name, table.key.map { PostgresStatement.text(of: op.values[$0] ?? .null) })
        }
    }

    /// Runs `resolver` for `op`, given the row as it stands — read `FOR UPDATE` in the batch's
    /// transaction, so it cannot change before the function writes it; or, when an earlier
    /// operation of the same mutation wrote it, as that operation left it (in `rows`, which
    /// gets this operation's effect) — and the user. A row the write rule does not let the user
    /// change is not shown to the resolver: the operation goes as it is, and the function
    /// rejects it (`write_rule`).
    private func resolve(_ op: MutationOp, of table: WritableTable, rule: WriteRule?, with resolver: MutationResolver,
                         user: String, rows: inout [RowKey: [String: WireValue]?], on connection: PostgresConnection) async throws -> Step {
        let key = RowKey(op, of: table)
        let current: [String: WireValue]?
        if let written = rows[key] {
            current = written
        } else {
            var found: [String: WireValue]?
            var allowed = true
            let read = try Self.lockedRead(op, of: table, rule: rule, withValues: true)
            for row in try await connection.gatheredRows(read.query, logger: logger) {
                var values: [String: WireValue] = [:]
                var cells = row.makeIterator()
                allowed = (try cells.next()?.decode(Bool?.self)) == true
                for name in table.columns { values[name] = try cells.next()?.decode(String?.self).map(WireValue.text) ?? .null }
                found = values
            }
            if found != nil && !allowed { return .apply(op) }
            current = found
        }
        let decision: Resolution
        do {
            decision = try resolver(op, current, user)
        } catch {
            return .reject(Rejection(code: "resolver", message: "the resolver of \(table.name) failed: \(error)"))
        }
        switch decision {
        case .apply(let resolved):
            guard resolved.table == table.name else {
                return .reject(Rejection(code: "resolver", message: "the resolver of \(table.name) wrote another table"))
            }
            try validate(resolved, of: table)
            guard RowKey(resolved, of: table) == key else {
                return .reject(Rejection(code: "resolver", message: "the resolver of \(table.name) changed the row's key"))
            }
            rows.updateValue(Self.row(current, after: resolved, of: table), forKey: key)   // nil: the row is gone
            return .apply(resolved)
        case .reject(let reason):
            return .reject(Rejection(code: "resolver", message: reason))
        }
    }

    /// The row `current` as `op` leaves it, each value in its text form (`nil`: no row).
    static func row(_ current: [String: WireValue]?, after op: MutationOp, of table: WritableTable) -> [String: WireValue]? {
        func text(_ value: WireValue) -> WireValue { PostgresStatement.text(of: value).map(WireValue.text) ?? .null }
        switch op.kind {
        case .put:
            return Dictionary(uniqueKeysWithValues: table.columns.map { ($0, text(op.values[$0] ?? .null)) })
        case .patch:
            return current.map { row in row.merging(op.values.mapValues(text)) { _, new in new } }
        case .delete:
            return nil
        }
    }

    // MARK: Statements of an operation

    /// `SELECT <the write rule, or TRUE> FROM table WHERE <key> FOR UPDATE` (`withValues`: and
    /// every column as text, for a resolver).
    private static func lockedRead(_ op: MutationOp, of table: WritableTable, rule: WriteRule?, withValues: Bool,
                                   packed: Bool = false) throws -> PostgresStatement {
        var read = PostgresStatement(packed: packed)
        read.sql = "SELECT "
        if let rule { try read.append(rule.filter, of: table, tables: rule.tables) } else { read.sql += "TRUE" }
        if withValues { for name in table.columns { read.sql += ", \(SQLIdentifier.quoted(name))::text" } }
        read.sql += " FROM \(table.quoted) WHERE "
        read.appendKey(of: table, op.values)
        read.sql += " FOR UPDATE"
        return read
    }

    /// The statement that writes `op` (`nil`: a patch that changes no column).
    private static func write(_ op: MutationOp, of table: WritableTable, packed: Bool = false) -> PostgresStatement? {
        var write = PostgresStatement(packed: packed)
        switch op.kind {
        case .put:
            // The columns the operation gives: one added since the client was built takes its
            // default in a new row, and keeps its value in an existing one.
            let names = table.columns.filter { op.values[$0] != nil }
            write.sql = "INSERT INTO \(table.quoted) (\(names.map(SQLIdentifier.quoted).joined(separator: ", "))) VALUES ("
            for (offset, name) in names.enumerated() {
                if offset > 0 { write.sql += ", " }
                write.bind(op.values[name] ?? .null, as: table.types[name])
            }
            write.sql += ") ON CONFLICT (\(table.key.map(SQLIdentifier.quoted).joined(separator: ", "))) DO "
            let others = names.filter { !table.key.contains($0) }
            write.sql += others.isEmpty ? "NOTHING"
                : "UPDATE SET " + others.map { "\(SQLIdentifier.quoted($0)) = EXCLUDED.\(SQLIdentifier.quoted($0))" }.joined(separator: ", ")
        case .patch:
            let changed = op.values.keys.filter { !table.key.contains($0) }.sorted()
            guard !changed.isEmpty else { return nil }
            write.sql = "UPDATE \(table.quoted) SET "
            for (offset, name) in changed.enumerated() {
                if offset > 0 { write.sql += ", " }
                write.sql += "\(SQLIdentifier.quoted(name)) = "
                write.bind(op.values[name] ?? .null, as: table.types[name])
            }
            write.sql += " WHERE "
            write.appendKey(of: table, op.values)
        case .delete:
            write.sql = "DELETE FROM \(table.quoted) WHERE "
            write.appendKey(of: table, op.values)
        }
        return write
    }

    /// `SELECT <the write rule> FROM table WHERE <key>`, for the row as `op` left it (`nil`: no
    /// rule, or a delete).
    private static func ruleAfter(_ op: MutationOp, of table: WritableTable, rule: WriteRule?,
                                  packed: Bool = false) throws -> PostgresStatement? {
        guard let rule, op.kind != .delete else { return nil }
        var check = PostgresStatement(packed: packed)
        check.sql = "SELECT "
        try check.append(rule.filter, of: table, tables: rule.tables)
        check.sql += " FROM \(table.quoted) WHERE "
        check.appendKey(of: table, op.values)
        return check
    }

    /// One operation's statements for ``MutationBatch``'s function.
    private static func plan(_ op: MutationOp, of table: WritableTable, rule: WriteRule?) throws -> MutationBatch.PlannedOp {
        let read = try lockedRead(op, of: table, rule: rule, withValues: false, packed: true)
        let write = write(op, of: table, packed: true)
        let check = write == nil ? nil : try ruleAfter(op, of: table, rule: rule, packed: true)
        return MutationBatch.PlannedOp(kind: op.kind.rawValue, table: table.name, read: read.sql, readArgs: read.packed ?? [],
                                       write: write?.sql, writeArgs: write?.packed, check: check?.sql, checkArgs: check?.packed)
    }

    /// An operation's shape against its table: known columns (a column dropped since the client
    /// was built is `column_dropped`), the whole key. A `put` need not give every column: an
    /// app built before a column was added does not know it (see ``write(_:of:packed:)``).
    private func validate(_ op: MutationOp, of table: WritableTable) throws {
        if let unknown = op.values.keys.sorted().first(where: { table.types[$0] == nil }) {
            if droppedColumns.withLock({ $0[table.name]?.contains(unknown) == true }) {
                throw Rejection(code: "column_dropped", message: "column \(unknown) of \(table.name) was dropped: the mutation names it")
            }
            throw Rejection(code: "bad_mutation", message: "table \(table.name) has no column \(unknown)")
        }
        if let missing = table.key.first(where: { op.values[$0] == nil || op.values[$0] == .null }) {
            throw Rejection(code: "bad_mutation", message: "the operation on \(table.name) has no value for its key column \(missing)")
        }
    }

    /// The table `name` as writes see it, when the rules let `user` write it.
    private func writable(_ name: String, user: String) async throws -> WritableTable {
        guard !name.lowercased().hasPrefix("ripple_"), rules.tables[name]?.write != nil else {
            throw Rejection(code: "write_rule", message: "the rules let no one write table \(name)")
        }
        return try await describe(name)
    }

    /// A table's write rule for `user`, with the tables its sub-queries read described (`nil`:
    /// any row).
    private func writeRule(of table: WritableTable, for user: String) async throws -> WriteRule? {
        guard let filter = try rules.writeRule(of: table.name, for: user) else { return nil }
        var tables: [String: WritableTable] = [:]
        for name in filter.relatedTables {
            guard !name.lowercased().hasPrefix("ripple_") else {
                throw Rejection(code: "write_rule", message: "the write rule of \(table.name) reads \(name), which is not a synced table")
            }
            tables[name] = try await describe(name)
        }
        return WriteRule(filter: filter, tables: tables)
    }

    /// A write rule as statements check it: its filter, and the tables its sub-queries read.
    private struct WriteRule {
        var filter: FilterDescription
        var tables: [String: WritableTable]
    }

    /// The table `name` as Postgres describes it (kept until ``forgetTables()``).
    private func describe(_ name: String) async throws -> WritableTable {
        if let table = described.withLock({ $0[name] }) { return table }
        let columns = try await texts(PostgresCatalog.columns(of: name))
        let key = try await texts(PostgresCatalog.primaryKey(of: name)).compactMap { $0[0] }
        guard !key.isEmpty else { throw Rejection(code: "bad_mutation", message: "table \(name) has no primary key") }
        let table = WritableTable(name: name, columns: columns.compactMap { $0[0] },
                                  types: Dictionary(columns.compactMap { row in row[0].map { ($0, row[2] ?? "text") } }, uniquingKeysWith: { a, _ in a }),
                                  key: key)
        described.withLock { $0[name] = table }
        return table
    }

    /// Forgets the tables' descriptions (after a schema change).
    public func forgetTables() { described.withLock { $0 = [:] } }

    /// Forgets table `table`'s description after a schema change that dropped `dropped`: a
    /// mutation naming one of them is rejected with `column_dropped` (while this node runs;
    /// after a restart, with `bad_mutation`, as any unknown column).
    public func tableChanged(_ table: String, dropped: [String]) {
        described.withLock { $0[table] = nil }
        droppedColumns.withLock { $0[table, default: []].formUnion(dropped) }
    }

    /// The rows of `query`, each column as text: on `connection`, or on one from the pool.
    private func texts(on connection: PostgresConnection? = nil, _ query: PostgresQuery) async throws -> [[String?]] {
        let rows = if let connection {
            try await connection.gatheredRows(query, logger: logger)
        } else {
            try await client.gatheredRows(query, logger: logger)
        }
        return try rows.map { row in try row.map { try $0.decode(String?.self) } }
    }
}

/// Why a mutation is rejected: a Postgres SQLSTATE (with the constraint it named) or one of
/// Ripple's codes, and a message without other rows' values.
struct Rejection: Error {
    let code: String
    var constraint: String? = nil
    let message: String
    var isTransient = false
    /// Whether `code` is a Postgres SQLSTATE (and `message` Ripple's own text for it).
    var isPostgres = false

    init(code: String, constraint: String? = nil, message: String) {
        (self.code, self.constraint, self.message) = (code, constraint, message)
    }

    /// The rejection an error of Postgres (or of the connection) stands for.
    init(_ error: any Error) {
        if error is CancellationError || error is PostgresAnswerTimeout || error is ChannelError || error is IOError {
            // The node is stopping, or its connection to Postgres failed: not the mutation's fault.
            self.init(code: "unavailable", message: "the node is stopping, or lost Postgres for a moment")
            isTransient = true
            return
        }
        guard let error = error as? PSQLError else {
            // Not Postgres's (a bug, or a rule that names no column): trying again would not help.
            self.init(code: "internal", message: "the server failed: \(type(of: error))")
            return
        }
        guard let state = error.serverInfo?[.sqlState] else {
            // No answer from Postgres: the connection failed or closed.
            self.init(code: "08000", message: "the connection to Postgres failed")
            isTransient = true
            return
        }
        self.init(state: state, constraint: error.serverInfo?[.constraintName])
    }

    /// The rejection for Postgres's SQLSTATE `state` (and the constraint it named): a message of
    /// Ripple's own, never Postgres's text or DETAIL.
    init(state: String, constraint: String?) {
        code = state
        self.constraint = constraint
        isPostgres = true
        isTransient = state == "40001" || state == "40P01" || state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53")
        let what = switch state {
        case "23505": "a row with the same unique values exists"
        case "23503": "a referenced row is missing, or the row is still referenced"
        case "23502": "a column that cannot be null was null"
        case "23514": "a check constraint refused the row"
        case "42501": "Postgres refused the permission"
        // The table changed after the node last described it (a column dropped since).
        case "42703": "a column the mutation names is not in the table (dropped since the app was built?)"
        case _ where state.hasPrefix("22"): "a value does not fit its column"
        case _ where state.hasPrefix("23"): "a constraint refused the row"
        default: "Postgres refused the mutation"
        }
        message = constraint.map { "\(what) (constraint \($0))" } ?? what
    }
}
#endif
