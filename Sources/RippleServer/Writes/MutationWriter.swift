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
/// stands in Postgres (read `FOR UPDATE`, so it cannot change meanwhile; `nil`: no row with that
/// key; values in their text form) and the user. Without one, a `patch` writes its columns over
/// the row's (per-column last writer wins, by arrival at the server).
public typealias MutationResolver = @Sendable (_ op: MutationOp, _ current: [String: WireValue]?, _ user: String) throws -> Resolution

/// Applies clients' mutations to Postgres, each exactly once, as SYNC.md's "Writes" decides:
///
/// * Client ids are minted by the server per (user, device) and kept in `ripple_sync_clients`
///   with the last mutation applied; a mutation's first statement moves that counter from
///   `id - 1` to `id`, so the same mutation arriving twice (a retry, two sockets of one client on
///   two nodes) takes effect once: the second finds the counter moved and gets the first's result.
/// * Mutations run in transactions of up to ``batchSize`` with `synchronous_commit = on`, each
///   in a savepoint: a rejected one is undone alone. A batch is one round trip: Postgres's
///   function `ripple_sync_apply` runs the statements the node built for it;
///   a batch that writes a table with a resolver goes statement by statement, as the resolver
///   runs in the node. Its result (applied, or rejected with a
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

    /// How many times a mutation that fails for a transient reason is tried.
    static let attempts = 5

    public init(client: PostgresClient, rules: SyncRules, resolvers: [String: MutationResolver] = [:],
                logger: Logger = Logger(label: "ripple.sync.writes")) {
        (self.client, self.rules, self.resolvers, self.logger) = (client, rules, resolvers, logger)
    }

    /// Creates the server's own tables when missing.
    public func prepare() async throws {
        _ = try await client.gatheredRows("""
            CREATE TABLE IF NOT EXISTS ripple_sync_clients (
                client_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), user_id text NOT NULL,
                last_mutation_id int8 NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now())
            """, logger: logger)
        _ = try await client.gatheredRows("""
            CREATE TABLE IF NOT EXISTS ripple_sync_results (
                client_id uuid NOT NULL REFERENCES ripple_sync_clients ON DELETE CASCADE, mutation_id int8 NOT NULL,
                status text NOT NULL, code text, constraint_name text, message text,
                applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (client_id, mutation_id))
            """, logger: logger)
        _ = try await client.gatheredRows(PostgresQuery(unsafeSQL: MutationBatch.function), logger: logger)
    }

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
                        results.append(await reject(mutation, client: clientID, rejection))
                    }
                }
            }
            start += batch.count
        }
        return results
    }

    /// `batch` in one transaction, each mutation in a savepoint: applied, or rejected there and
    /// then (its operations undone, its counter and result stored). Fails with the last passing
    /// failure (a serialization failure, a deadlock, a lost connection) when one persisted through
    /// the attempts: nothing of the batch was committed.
    private func applyBatch(_ batch: [Mutation], client clientID: String, user: String) async -> Result<[MutationResult], Rejection> {
        var wait = Duration.milliseconds(20)
        var attempt = 1
        while true {
            do {
                return .success(try await client.withConnection(within: Self.batchLimit) { connection in
                    _ = try await connection.gatheredRows("BEGIN", logger: self.logger)
                    var results: [MutationResult] = []
                    do {
                        _ = try await connection.gatheredRows("SET LOCAL synchronous_commit = on", logger: self.logger)
                        if batch.contains(where: { $0.ops.contains { self.resolvers[$0.table] != nil } }) {
                            // A resolver runs in the node: statement by statement.
                            for mutation in batch {
                                results.append(try await self.applyInSavepoint(mutation, on: connection, client: clientID, user: user))
                            }
                        } else {
                            results = try await self.applyInPostgres(batch, on: connection, client: clientID, user: user)
                        }
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
                guard attempt < Self.attempts else { return .failure(rejection) }
                logger.info("a batch of client \(clientID): \(rejection.code), trying again")
                try? await Task.sleep(for: wait)
                wait *= 2
                attempt += 1
            }
        }
    }

    /// One mutation of a batch, in a savepoint. Throws only for a passing failure (the whole
    /// batch is tried again).
    private func applyInSavepoint(_ mutation: Mutation, on connection: PostgresConnection, client clientID: String,
                                  user: String) async throws -> MutationResult {
        _ = try await connection.gatheredRows("SAVEPOINT ripple_mutation", logger: logger)
        guard try await moveCounter(on: connection, client: clientID, user: user, to: mutation.id) else {
            _ = try await connection.gatheredRows("RELEASE SAVEPOINT ripple_mutation", logger: logger)
            return try await earlierResult(of: mutation, client: clientID, user: user, on: connection)
        }
        do {
            for op in mutation.ops { try await apply(op, on: connection, user: user) }
            let result = MutationResult(id: mutation.id, status: .applied)
            try await store(result, client: clientID, on: connection)
            _ = try await connection.gatheredRows("RELEASE SAVEPOINT ripple_mutation", logger: logger)
            return result
        } catch {
            let rejection = (error as? Rejection) ?? Rejection(error)
            if rejection.isTransient { throw error }
            // Its operations undone (and the counter with them), the counter moves again with
            // the rejection stored.
            _ = try await connection.gatheredRows("ROLLBACK TO SAVEPOINT ripple_mutation", logger: logger)
            guard try await moveCounter(on: connection, client: clientID, user: user, to: mutation.id) else {
                throw Rejection(code: "internal", message: "the client's counter moved under a held lock")
            }
            let result = MutationResult(id: mutation.id, status: .rejected, code: rejection.code, constraint: rejection.constraint,
                                        message: rejection.message)
            try await store(result, client: clientID, on: connection)
            _ = try await connection.gatheredRows("RELEASE SAVEPOINT ripple_mutation", logger: logger)
            return result
        }
    }

    /// Stores a mutation's result (in the transaction that moved its counter).
    private func store(_ result: MutationResult, client clientID: String, on connection: PostgresConnection) async throws {
        _ = try await connection.gatheredRows("""
            INSERT INTO ripple_sync_results (client_id, mutation_id, status, code, constraint_name, message)
            VALUES (\(clientID)::uuid, \(result.id), \(result.status.rawValue), \(result.code), \(result.constraint), \(result.message))
            """, logger: logger)
    }

    /// Moves the client's counter from `id - 1` to `id`; `false` when it was elsewhere.
    private func moveCounter(on connection: PostgresConnection, client clientID: String, user: String, to id: Int64) async throws -> Bool {
        var moved = false
        for _ in try await connection.gatheredRows("""
            UPDATE ripple_sync_clients SET last_mutation_id = \(id)
            WHERE client_id = \(clientID)::uuid AND user_id = \(user) AND last_mutation_id = \(id - 1) RETURNING 1
            """, logger: logger) { moved = true }
        return moved
    }

    /// The result of a mutation whose id the counter already passed (applied or rejected
    /// before: its stored result), or an out-of-order rejection (an id beyond the next one, or a
    /// client id not this user's), which is not stored.
    private func earlierResult(of mutation: Mutation, client clientID: String, user: String,
                               on connection: PostgresConnection? = nil) async throws -> MutationResult {
        let rows = try await texts(on: connection, """
            SELECT c.last_mutation_id::text, r.status, r.code, r.constraint_name, r.message
            FROM ripple_sync_clients AS c
            LEFT JOIN ripple_sync_results AS r ON r.client_id = c.client_id AND r.mutation_id = \(mutation.id)
            WHERE c.client_id = \(clientID)::uuid AND c.user_id = \(user)
            """)
        guard let row = rows.first, let last = Int64(row[0] ?? "") else {
            return MutationResult(id: mutation.id, status: .rejected, code: "out_of_order", message: "the client id is not this user's")
        }
        guard mutation.id <= last else {
            return MutationResult(id: mutation.id, status: .rejected, code: "out_of_order",
                                  message: "mutation \(mutation.id) came before mutation \(last + 1), which the server has not received")
        }
        let status = row[1].flatMap(MutationResult.Status.init(rawValue:)) ?? .applied
        return MutationResult(id: mutation.id, status: status, code: row[2], constraint: row[3], message: row[4])
    }

    /// Rejects `mutation`: its counter moves and its result is stored, nothing else changes
    /// (the transaction it failed in rolled back). Another socket that applied it meanwhile
    /// wins: its result is answered.
    private func reject(_ mutation: Mutation, client clientID: String, _ rejection: Rejection) async -> MutationResult {
        let result = MutationResult(id: mutation.id, status: .rejected, code: rejection.code, constraint: rejection.constraint,
                                    message: rejection.message)
        do {
            return try await client.withConnection(within: Self.batchLimit) { connection in
                _ = try await connection.gatheredRows("BEGIN", logger: self.logger)
                var answer = result
                do {
                    let user = try await self.user(of: clientID, on: connection)
                    if let user, try await self.moveCounter(on: connection, client: clientID, user: user, to: mutation.id) {
                        try await self.store(result, client: clientID, on: connection)
                        _ = try await connection.gatheredRows("COMMIT", logger: self.logger)
                    } else {
                        _ = try await connection.gatheredRows("ROLLBACK", logger: self.logger)
                        answer = try await self.earlierResult(of: mutation, client: clientID, user: user ?? "", on: connection)
                    }
                } catch {
                    _ = try? await connection.gatheredRows("ROLLBACK", logger: self.logger)
                    throw error
                }
                // Read after the rejection committed, or after the result stored by another
                // socket was read (so committed): past either's commit.
                if Self.isStored(answer) { answer.lsn = try await self.position(on: connection) }
                return answer
            }
        } catch {
            logger.warning("mutation \(mutation.id) of client \(clientID): its rejection could not be stored: \(String(reflecting: error))")
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

    private func user(of clientID: String, on connection: PostgresConnection) async throws -> String? {
        for user in try await connection.gatheredRows("SELECT user_id FROM ripple_sync_clients WHERE client_id = \(clientID)::uuid",
                                                          logger: logger).map({ try $0.decode(String.self) }) {
            return user
        }
        return nil
    }

    // MARK: Operations

    /// Applies one operation inside the mutation's transaction.
    private func apply(_ incoming: MutationOp, on connection: PostgresConnection, user: String) async throws {
        let table = try await writable(incoming.table, user: user)
        try validate(incoming, of: table)
        let rule = try rules.writeRule(of: table.name, for: user)
        // The row as it stands, locked, and whether the user may write it.
        let read = try Self.lockedRead(incoming, of: table, rule: rule, withValues: true)
        var current: [String: WireValue]?
        var allowed = true
        for row in try await connection.gatheredRows(read.query, logger: logger) {
            var values: [String: WireValue] = [:]
            var cells = row.makeIterator()
            allowed = (try cells.next()?.decode(Bool?.self)) == true
            for name in table.columns { values[name] = try cells.next()?.decode(String?.self).map(WireValue.text) ?? .null }
            current = values
        }
        if current != nil && !allowed {
            throw Rejection(code: "write_rule", message: "the rules do not let this user change that row of \(table.name)")
        }
        var op = incoming
        if let resolver = resolvers[table.name] {
            let decision: Resolution
            do {
                decision = try resolver(incoming, current, user)
            } catch {
                throw Rejection(code: "resolver", message: "the resolver of \(table.name) failed: \(error)")
            }
            switch decision {
            case .apply(let resolved):
                guard resolved.table == table.name else { throw Rejection(code: "resolver", message: "the resolver of \(table.name) wrote another table") }
                try validate(resolved, of: table)
                op = resolved
            case .reject(let reason):
                throw Rejection(code: "resolver", message: reason)
            }
        }
        if current == nil && op.kind == .patch {
            throw Rejection(code: "row_gone", message: "the row of \(table.name) this mutation changes no longer exists")
        }
        if current == nil && op.kind == .delete { return }
        guard let write = Self.write(op, of: table) else { return }
        _ = try await connection.gatheredRows(write.query, logger: logger)
        // The row as the operation left it must be one the user may write.
        guard let check = try Self.ruleAfter(op, of: table, rule: rule) else { return }
        for allowedAfter in try await connection.gatheredRows(check.query, logger: logger).map({ try $0.decode(Bool?.self) }) where allowedAfter != true {
            throw Rejection(code: "write_rule", message: "the rules do not let this user write that row of \(table.name)")
        }
    }

    // MARK: Statements of an operation

    /// `SELECT <the write rule, or TRUE> FROM table WHERE <key> FOR UPDATE` (`withValues`: and
    /// every column as text, for a resolver).
    private static func lockedRead(_ op: MutationOp, of table: WritableTable, rule: FilterDescription?, withValues: Bool,
                                   packed: Bool = false) throws -> PostgresStatement {
        var read = PostgresStatement(packed: packed)
        read.sql = "SELECT "
        if let rule { try read.append(rule, of: table) } else { read.sql += "TRUE" }
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
            let names = table.columns
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
    private static func ruleAfter(_ op: MutationOp, of table: WritableTable, rule: FilterDescription?,
                                  packed: Bool = false) throws -> PostgresStatement? {
        guard let rule, op.kind != .delete else { return nil }
        var check = PostgresStatement(packed: packed)
        check.sql = "SELECT "
        try check.append(rule, of: table)
        check.sql += " FROM \(table.quoted) WHERE "
        check.appendKey(of: table, op.values)
        return check
    }

    // MARK: A batch in one round trip

    /// `batch` applied by `ripple_sync_apply` in one statement (see ``MutationBatch``), inside
    /// the caller's transaction. A mutation the node refuses before Postgres sees it (a table
    /// the rules do not let the user write, an unknown column) still goes, as a rejection: its
    /// counter moves in order.
    private func applyInPostgres(_ batch: [Mutation], on connection: PostgresConnection, client clientID: String,
                                 user: String) async throws -> [MutationResult] {
        var planned: [MutationBatch.PlannedMutation] = []
        for mutation in batch {
            var entry = MutationBatch.PlannedMutation(id: mutation.id, ops: [], reject: nil)
            do {
                for op in mutation.ops { entry.ops.append(try await plan(op, user: user)) }
            } catch let error where !(error is PSQLError) {
                let rejection = (error as? Rejection) ?? Rejection(error)
                // Planning needs the table's description, which may need Postgres: a failure
                // that passes fails the batch (tried again, or answered unavailable), and is
                // never stored as the mutation's rejection. (The sync stress checker found a
                // node that had stored `unavailable` for a mutation planned while Postgres
                // restarted: the client sent it again forever.)
                if rejection.isTransient { throw error }
                entry = MutationBatch.PlannedMutation(id: mutation.id, ops: [],
                                                      reject: .init(code: rejection.code, message: rejection.message))
            }
            planned.append(entry)
        }
        let json = String(decoding: try JSONEncoder().encode(planned), as: UTF8.self)
        for answer in try await connection.gatheredRows("SELECT ripple_sync_apply(\(clientID)::uuid, \(user), \(json)::jsonb)::text",
                                                            logger: logger).map({ try $0.decode(String.self) }) {
            let results = try MutationBatch.results(from: answer)
            guard results.map(\.id) == batch.map(\.id) else { throw SyncServerError("ripple_sync_apply answered other mutations") }
            return results
        }
        throw SyncServerError("ripple_sync_apply answered nothing")
    }

    /// One operation's statements for ``MutationBatch``'s function.
    private func plan(_ op: MutationOp, user: String) async throws -> MutationBatch.PlannedOp {
        let table = try await writable(op.table, user: user)
        try validate(op, of: table)
        let rule = try rules.writeRule(of: table.name, for: user)
        let read = try Self.lockedRead(op, of: table, rule: rule, withValues: false, packed: true)
        let write = Self.write(op, of: table, packed: true)
        let check = write == nil ? nil : try Self.ruleAfter(op, of: table, rule: rule, packed: true)
        return MutationBatch.PlannedOp(kind: op.kind.rawValue, table: table.name, read: read.sql, readArgs: read.packed ?? [],
                                       write: write?.sql, writeArgs: write?.packed, check: check?.sql, checkArgs: check?.packed)
    }

    /// An operation's shape against its table: known columns, the whole key, every column for
    /// a `put`.
    private func validate(_ op: MutationOp, of table: WritableTable) throws {
        if let unknown = op.values.keys.first(where: { table.types[$0] == nil }) {
            throw Rejection(code: "bad_mutation", message: "table \(table.name) has no column \(unknown)")
        }
        if let missing = table.key.first(where: { op.values[$0] == nil || op.values[$0] == .null }) {
            throw Rejection(code: "bad_mutation", message: "the operation on \(table.name) has no value for its key column \(missing)")
        }
        if op.kind == .put, let missing = table.columns.first(where: { op.values[$0] == nil }) {
            throw Rejection(code: "bad_mutation", message: "a put on \(table.name) must give every column; \(missing) is missing")
        }
    }

    /// The table `name` as writes see it, when the rules let `user` write it.
    private func writable(_ name: String, user: String) async throws -> WritableTable {
        guard !name.lowercased().hasPrefix("ripple_"), rules.tables[name]?.write != nil else {
            throw Rejection(code: "write_rule", message: "the rules let no one write table \(name)")
        }
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
        isTransient = state == "40001" || state == "40P01" || state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53")
        let what = switch state {
        case "23505": "a row with the same unique values exists"
        case "23503": "a referenced row is missing, or the row is still referenced"
        case "23502": "a column that cannot be null was null"
        case "23514": "a check constraint refused the row"
        case "42501": "Postgres refused the permission"
        case _ where state.hasPrefix("22"): "a value does not fit its column"
        case _ where state.hasPrefix("23"): "a constraint refused the row"
        default: "Postgres refused the mutation"
        }
        message = constraint.map { "\(what) (constraint \($0))" } ?? what
    }
}
