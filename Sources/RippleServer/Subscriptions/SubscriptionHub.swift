#if Sync
import Crypto
import Foundation
import Ripple
import RippleDiff
import RippleSync

/// What a subscriber receives: first the result (or, for a resume, the change from the result
/// it had), then each replica version's change to it.
public struct SubscriptionEvent: Sendable {
    public enum Kind: Sendable {
        /// The whole result.
        case snapshot(WireSnapshot)
        /// The change from the rows last received.
        case changes(WireChangeset)
        /// The subscription ended (its table was dropped, its query no longer fits it): nothing
        /// more comes. `code`: what the client is told (`subscription_ended`, or
        /// `column_dropped` when a column it names was dropped).
        case ended(reason: String, code: SyncErrorCode = .subscriptionEnded)
        /// The replica could not run the query at all (a limit of SQLite's that the compiler's
        /// checks did not foresee): the subscription never had a result, and nothing comes.
        case refused(reason: String)
    }

    /// The replica version the result is at.
    public var version: Int64
    public var kind: Kind
    /// The event's JSON (the snapshot's or the changeset's object), encoded once for every
    /// subscriber sharing it; empty for a subscriber that takes the values alone (a part of a
    /// subscription with includes, whose tree encodes its own frames).
    package var json: [UInt8]

    public var isSnapshot: Bool {
        if case .snapshot = kind { return true }
        return false
    }
}

/// The server's subscriptions, evaluated by Ripple's live queries over the replica.
///
/// Subscriptions whose compiled SQL and bound values are equal — the same query under the same
/// rule — share one live query, and each change is converted to the wire and encoded once for
/// all of them. Users with different rules compile to different values, so they never share.
///
/// A change larger on the wire than the result it leads to is sent as that result instead.
public final class SubscriptionHub: Sendable {
    public let store: Store
    let rules: SyncRules
    /// What every resume basis starts with: the Postgres cluster and timeline the replica follows.
    let cluster: String

    /// Encoded changesets above this many bytes are compared with the result's encoding.
    static let snapshotComparisonThreshold = 4_096

    private struct Subscriber {
        var handler: @Sendable (SubscriptionEvent) -> Void
        /// For a resume that attached before the shared query had a result: the rows the client
        /// has, to be sent the change from them instead of a snapshot.
        var resumingFrom: [[WireValue]]?
        /// Whether it sends the events' JSON (a socket's subscription) or takes their values
        /// alone (a part of a tree): nothing is encoded for a live query none of whose
        /// subscribers sends it.
        var encodes = true
    }

    /// One live query and its subscribers.
    private final class Shared: @unchecked Sendable {   // every field is guarded by `lock`
        let lock = NSLock()
        let compiled: CompiledQuery
        let table: String
        let basis: String
        let shape: WireShape
        var subscribers: [Int: Subscriber] = [:]
        var rows: [[WireValue]] = []
        var version: Int64 = 0
        var hasResult = false
        /// The result's encoding at `version`, made when first asked for.
        var snapshotJSON: [UInt8]?
        var subscription: Subscription?
        /// How the live query ended (`ended` or `refused`), for subscribers that come later.
        var ended: SubscriptionEvent.Kind?

        init(compiled: CompiledQuery, basis: String, schema: SyncedTableSchema) {
            self.compiled = compiled
            self.table = schema.name
            self.basis = basis
            shape = WireShape(compiled, schema)
        }

        var snapshot: WireSnapshot {
            WireSnapshot(basis: basis, columns: shape.columns, types: shape.types, key: shape.key, rows: rows)
        }

        func encodedSnapshot() -> [UInt8] {
            if let snapshotJSON { return snapshotJSON }
            var out = JSONBytes(reservingCapacity: rows.count * 32 + 128)
            out.snapshot(snapshot)
            snapshotJSON = out.bytes
            return out.bytes
        }

        func identity(_ row: [WireValue]) -> [WireValue] { shape.key.map { row[$0] } }
    }

    /// A compiled query's result as the wire has it: the columns sent, their types, the key's
    /// positions, and how a replica row becomes a wire row.
    struct WireShape: Sendable {
        let columns: [String]
        let types: [String]
        let key: [Int]
        /// Which columns are `bool` (their 0 and 1 travel as `false` and `true`).
        let isBool: [Bool]

        init(_ compiled: CompiledQuery, _ schema: SyncedTableSchema) {
            columns = compiled.columns
            let typeOIDs = Dictionary(schema.columns.map { ($0.name, $0.typeOID) }, uniquingKeysWith: { first, _ in first })
            types = compiled.columns.map { PostgresTypes.wireName(of: typeOIDs[$0] ?? 0) }
            isBool = compiled.columns.map { typeOIDs[$0] == PostgresTypes.OID.bool }
            let keyNames = schema.key.map { schema.columns[$0].name }
            key = keyNames.compactMap { compiled.columns.firstIndex(of: $0) }
        }

        /// A replica row as the wire has it (the SQL's later columns stay on the server).
        func row(_ row: Row) -> [WireValue] {
            zip(row.values.prefix(columns.count), isBool).map { value, isBool in
                if isBool, case .integer(let integer) = value { return .bool(integer != 0) }
                return SubscriptionHub.wireValue(value)
            }
        }
    }

    /// A live query shared by subscriptions: the compiled query, and the wire types its
    /// subscribers were given (a subscription keeps the types it was given for its lifetime:
    /// after a widened type, new subscriptions share another live query).
    private struct SharedKey: Hashable {
        var compiled: CompiledQuery
        var types: [String]
    }

    private let shared = Locked<[SharedKey: Shared]>([:])
    /// The schema of each synced table whose schema changed while the hub ran, as the replica
    /// has it (or will, once the commit under way is done): a subscription compiled for an older
    /// one ends at once, as those over the table did (see ``staleEnding(of:schema:)``). Taken
    /// inside `shared`'s lock, so that a subscription is either followed or checked.
    private let changedSchemas = Locked<[String: ChangedSchema]>([:])

    /// A synced table's schema after its last change (`nil`: it is gone), and whether that
    /// change made its replica table again.
    private struct ChangedSchema {
        var schema: SyncedTableSchema?
        var remade: Bool
    }
    let nextID = Locked(0)
    /// The subscriptions with includes (see ``TreeShared``), those whose parts changed since the
    /// last finished version, and the last finished version.
    let trees = Locked<[CompiledTree: TreeShared]>([:])
    let changedTrees = Locked<[ObjectIdentifier: TreeShared]>([:])
    let completedVersion = Locked<Int64>(0)

    /// A hub over `store` (the replica) under `rules`; `cluster` names the Postgres cluster and
    /// timeline the replica follows (it begins every resume basis).
    public init(store: Store, rules: SyncRules, cluster: String = "") {
        self.store = store
        self.rules = rules
        self.cluster = cluster
    }

    /// How many live queries the hub runs (subscriptions sharing one count once).
    public var liveQueryCount: Int { shared.withLock { $0.count } }

    /// `query` restricted to `user`'s rules and compiled over `schema`, with the basis a resume
    /// of it must present. `tables`: the synced tables its sub-queries (and its read rules')
    /// may read (see ``tablesNeeded(by:)``).
    ///
    /// The client's query is checked first (its sub-queries nest at most
    /// ``QueryCompiler/maximumClientSubqueryLevels`` deep, over synced tables), then every
    /// table it reads gets its read rule (see `SyncRules.restrict(_:to:)`), then it compiles.
    ///
    /// - Throws: ``RulesError`` when the user may not read the table or a table a sub-query
    ///   reads, ``QueryError`` when the query does not fit the schemas.
    public func compile(_ query: QueryDescription, user: String, schema: SyncedTableSchema,
                        tables: [String: SyncedTableSchema] = [:]) throws -> (CompiledQuery, basis: String) {
        try compile(query, identity: SyncIdentity(user: user), schema: schema, tables: tables)
    }

    /// `query` restricted to `identity`'s rules (its claims too) and compiled, as the form for
    /// a user id says.
    public func compile(_ query: QueryDescription, identity: SyncIdentity, schema: SyncedTableSchema,
                        tables: [String: SyncedTableSchema] = [:]) throws -> (CompiledQuery, basis: String) {
        try QueryCompiler.checkClientQuery(query, tables: tables)
        let compiled = try QueryCompiler.compile(try rules.restrict(query, to: identity), for: schema, tables: tables)
        return (compiled, basis(of: compiled))
    }

    /// The synced tables compiling `query` may need the schemas of: its own, those its
    /// sub-queries read, and those the read rules' sub-queries read.
    public func tablesNeeded(by query: QueryDescription) -> Set<String> {
        Set([query.table]).union(query.filter?.relatedTables ?? []).union(rules.tablesReadByReadRules)
    }

    /// The basis of a compiled query: the cluster, and a digest of its SQL and bound values (the
    /// user and the rule are among them: another user, or changed rules, give another basis).
    func basis(of compiled: CompiledQuery) -> String {
        var hash = SHA256()
        hash.update(data: Data(compiled.sql.utf8))
        for argument in compiled.arguments {
            hash.update(data: Data([0]))
            hash.update(data: Data(String(describing: argument).utf8))
        }
        let digest = hash.finalize().prefix(12).map { String(format: "%02x", $0) }.joined()
        return cluster.isEmpty ? digest : "\(cluster).\(digest)"
    }

    /// Subscribes `user` to `query` over `schema` (`tables`: as for
    /// ``compile(_:user:schema:tables:)``): `handler` receives the result now (a
    /// snapshot), then each change, in version order. It runs inside the replica's commit (or
    /// this call) and must return quickly: hand the event to the socket's queue, and subscribe
    /// or cancel elsewhere, never from inside it.
    ///
    /// `resumingFrom`: the rows the client holds for this query (in the query's order, as the
    /// wire has them); the first event is then the change from them to the current result.
    ///
    /// - Throws: ``RulesError`` when the user may not read the table, ``QueryError`` when the
    ///   query does not fit the schema.
    public func subscribe(_ query: QueryDescription, user: String, schema: SyncedTableSchema,
                          tables: [String: SyncedTableSchema] = [:], resumingFrom old: [[WireValue]]? = nil,
                          handler: @escaping @Sendable (SubscriptionEvent) -> Void) throws -> SubscriptionToken {
        let (compiled, basis) = try compile(query, user: user, schema: schema, tables: tables)
        return subscribe(compiled, basis: basis, schema: schema, resumingFrom: old, handler: handler)
    }

    /// ``subscribe(_:user:schema:tables:resumingFrom:handler:)`` for a query already compiled.
    public func subscribe(_ compiled: CompiledQuery, basis: String, schema: SyncedTableSchema,
                          resumingFrom old: [[WireValue]]? = nil,
                          handler: @escaping @Sendable (SubscriptionEvent) -> Void) -> SubscriptionToken {
        subscribe(compiled, basis: basis, schema: schema, resumingFrom: old, encoded: true, handler: handler)
    }

    /// ``subscribe(_:basis:schema:resumingFrom:handler:)``; `encoded` false: the events carry
    /// their values alone, no JSON (a tree's part: the tree encodes its own frames).
    func subscribe(_ compiled: CompiledQuery, basis: String, schema: SyncedTableSchema,
                   resumingFrom old: [[WireValue]]?, encoded: Bool,
                   handler: @escaping @Sendable (SubscriptionEvent) -> Void) -> SubscriptionToken {
        let id = nextID.withLock { value -> Int in
            value += 1
            return value
        }
        let key = SharedKey(compiled: compiled, types: WireShape(compiled, schema).types)
        var stale: SubscriptionEvent.Kind?
        let found = shared.withLock { entries -> (Shared, Bool)? in
            // Compiled for a schema from before a change the subscriptions were told of: it ends
            // as they did (its client subscribes again, for the schema the replica has).
            stale = staleEnding(of: compiled, schema: schema)
            if stale != nil { return nil }
            if let entry = entries[key] { return (entry, false) }
            let entry = Shared(compiled: compiled, basis: basis, schema: schema)
            entries[key] = entry
            return (entry, true)
        }
        guard case let (entry, isNew)? = found else {
            handler(SubscriptionEvent(version: completedVersion.withLock { $0 }, kind: stale ?? .ended(reason: "subscribe again"), json: []))
            return SubscriptionToken {}
        }
        entry.lock.withLock {
            if let ended = entry.ended {
                handler(SubscriptionEvent(version: entry.version, kind: ended, json: []))
            } else if entry.hasResult {
                handler(Self.firstEvent(of: entry, resumingFrom: old, encoded: encoded))
                entry.subscribers[id] = Subscriber(handler: handler, resumingFrom: nil, encodes: encoded)
            } else {
                entry.subscribers[id] = Subscriber(handler: handler, resumingFrom: old, encodes: encoded)
            }
        }
        if isNew {
            let table = schema.name
            // Routed: a commit concerns the query only when it changes a row of its result or
            // one its filter selects, and a few changed rows are read alone and put in place.
            let live = compiled.routing.map { routing in
                store.liveQuery(sql: compiled.sql, arguments: compiled.arguments, identity: compiled.identity, routing: routing)
            } ?? store.liveQuery(sql: compiled.sql, arguments: compiled.arguments, identity: compiled.identity)
            let subscription = live.subscribe(on: .immediate, onError: { [weak self, entry] error in
                // The replica's SQL stays on the server; SQLite's words for what failed do not
                // name it, nor any value.
                let why = Self.failure(error)
                if entry.lock.withLock({ entry.hasResult }) {
                    self?.end(entry, as: .ended(reason: "the subscription to \(table) ended: the replica could not run its query any "
                                                + "more (\(why)); subscribe again"))
                } else {
                    self?.end(entry, as: .refused(reason: "the replica cannot run this query on \(table): \(why)"))
                }
            }) { [entry] event in
                Self.receive(event, into: entry)
            }
            // (Ended meanwhile — a schema change followed, its query failed at once: nothing
            // cancels it later.)
            let ended = entry.lock.withLock { () -> Bool in
                entry.subscription = subscription
                return entry.ended != nil
            }
            if ended { subscription.cancel() }
        }
        return SubscriptionToken { [weak self] in self?.unsubscribe(id, from: key) }
    }

    /// The rows of `compiled` as they were at replica `version` (time travel through the
    /// replica's change log), as the wire has them. Every table the compiled SQL reads — its
    /// own, and those its sub-queries read (memberships) — is rewound to `version` together, as
    /// SQLite reports them while preparing it: a row a since-revoked membership gave is among
    /// them, so a resume's changeset deletes it. The replica's history is read on a thread of
    /// the store's own while the calling task suspends (see `Store.asyncRead(_:)`).
    ///
    /// - Throws: a `StoreError` of kind `history` when the change log no longer reaches
    ///   `version`, or a schema change of any of those tables lies between it and now;
    ///   `CancellationError` when the task was cancelled before the read began.
    public func asyncRows(of compiled: CompiledQuery, schema: SyncedTableSchema, at version: Int64) async throws -> [[WireValue]] {
        let steps = try await store.asyncHistory(rewindingTablesReadBy: compiled.sql, arguments: compiled.arguments,
                                                 identity: compiled.identity, from: version, to: version)
        let shape = WireShape(compiled, schema)
        return (steps.first?.snapshot ?? []).map(shape.row)
    }

    private static func firstEvent(of entry: Shared, resumingFrom old: [[WireValue]]?, encoded: Bool) -> SubscriptionEvent {
        guard let old else {
            return SubscriptionEvent(version: entry.version, kind: .snapshot(entry.snapshot), json: encoded ? entry.encodedSnapshot() : [])
        }
        let changeset = Changeset(from: old, to: entry.rows, identifiedBy: entry.identity, contentEqual: ==)
        let wire = WireChangeset(changeset, from: old, to: entry.rows)
        return encoded ? event(wire, of: entry) : SubscriptionEvent(version: entry.version, kind: .changes(wire), json: [])
    }

    /// Hands `changeset` (at the entry's version) to every subscriber: encoded once for those
    /// that send it, as values to the others.
    private static func deliver(_ changeset: WireChangeset, of entry: Shared) {
        var encoded: SubscriptionEvent?
        for subscriber in entry.subscribers.values {
            if subscriber.encodes {
                let delivered = encoded ?? event(changeset, of: entry)
                encoded = delivered
                subscriber.handler(delivered)
            } else {
                subscriber.handler(SubscriptionEvent(version: entry.version, kind: .changes(changeset), json: []))
            }
        }
    }

    /// A change as sent: the changeset, or the result when that encodes shorter.
    private static func event(_ changeset: WireChangeset, of entry: Shared) -> SubscriptionEvent {
        var out = JSONBytes()
        out.changeset(changeset)
        if out.bytes.count > snapshotComparisonThreshold {
            let snapshot = entry.encodedSnapshot()
            if snapshot.count < out.bytes.count {
                return SubscriptionEvent(version: entry.version, kind: .snapshot(entry.snapshot), json: snapshot)
            }
        }
        return SubscriptionEvent(version: entry.version, kind: .changes(changeset), json: out.bytes)
    }

    private func unsubscribe(_ id: Int, from key: SharedKey) {
        let ended: Shared? = shared.withLock { entries in
            guard let entry = entries[key] else { return nil }
            let empty = entry.lock.withLock { () -> Bool in
                entry.subscribers[id] = nil
                return entry.subscribers.isEmpty
            }
            guard empty else { return nil }
            entries[key] = nil
            return entry
        }
        if let ended { ended.lock.withLock { ended.subscription }?.cancel() }
    }

    /// Ends the subscriptions that read `table` (its columns changed, or it was dropped) — over
    /// it, or through a sub-query — saying `reason`; later subscriptions are compiled afresh.
    public func endSubscriptions(on table: String, reason: String) {
        let ending = shared.withLock { entries in
            entries.values.filter { $0.table == table || $0.compiled.dependencies.contains { $0.table == table } }
        }
        for entry in ending {
            end(entry, as: .ended(reason: reason))
            entry.lock.withLock { entry.subscription }?.cancel()
        }
    }

    /// Follows `change` of a synced table, before the replica commit that applies it: a change
    /// its replica table follows in place as ``followSchemaChange(of:added:dropped:)`` says; the
    /// subscriptions over a table made again or gone end after that commit
    /// (``endSubscriptions(on:reason:)``). From now on, a subscription compiled for the table's
    /// schema from before the change (read before the change was found) ends as soon as it
    /// subscribes, as those over the table did; one compiled for the new schema goes on.
    public func followSchemaChange(_ change: ReplicaSchemaChange) {
        var added: [String] = []
        var dropped: [String] = []
        if case .inPlace(let addedColumns, let droppedColumns) = change.kind { (added, dropped) = (addedColumns, droppedColumns) }
        let remade = if case .inPlace = change.kind { false } else { true }
        follow(change.table, added: added, dropped: dropped, recording: ChangedSchema(schema: change.schema, remade: remade))
    }

    /// Follows a schema change of `table` that its replica table follows in place (columns
    /// `added` and `dropped`; a widened type changes neither), before the replica commit that
    /// applies it:
    ///
    /// * a subscription that names a dropped column — selects, compares or orders by it, in the
    ///   query or a sub-query — ends with `column_dropped`, naming the column and the table;
    /// * one with no column list over `table` (every column) ends with `subscription_ended`
    ///   when a column was added or dropped: subscribing again gives the new columns;
    /// * every other one goes on, through the commit and on resume (its compiled query, hence
    ///   its basis, is unchanged), with the wire types it was given.
    public func followSchemaChange(of table: String, added: [String], dropped: [String]) {
        follow(table, added: added, dropped: dropped, recording: nil)
    }

    /// Ends the subscriptions a change of `table` (columns `added` and `dropped`) ends, and
    /// records the table's schema after it (`recording`) for the subscriptions compiled before.
    private func follow(_ table: String, added: [String], dropped: [String], recording: ChangedSchema?) {
        let ending = shared.withLock { entries -> [(Shared, SubscriptionEvent.Kind)] in
            if let recording { changedSchemas.withLock { $0[table] = recording } }
            guard !added.isEmpty || !dropped.isEmpty else { return [] }
            return entries.values.compactMap { entry in
                Self.ending(of: entry.compiled, over: entry.table, byChangeOf: table, dropped: dropped).map { (entry, $0) }
            }
        }
        for (entry, ending) in ending {
            end(entry, as: ending)
            entry.lock.withLock { entry.subscription }?.cancel()
        }
    }

    /// How a subscription (`compiled`, over table `root`) ends when the columns of `table`
    /// changed in place, `dropped` among them (see ``followSchemaChange(of:added:dropped:)``);
    /// `nil`: it goes on.
    private static func ending(of compiled: CompiledQuery, over root: String, byChangeOf table: String,
                               dropped: [String]) -> SubscriptionEvent.Kind? {
        let reads = root == table || compiled.dependencies.contains { $0.table == table }
        guard reads else { return nil }
        let named = namedColumn(of: compiled, over: root, among: dropped, table: table)
        if let column = named, !compiled.selectsEveryColumn {
            return .ended(reason: "column \(column) of \(table) was dropped: the subscription names it (subscribe "
                          + "again without it)", code: .columnDropped)
        }
        if compiled.selectsEveryColumn && root == table {
            return .ended(reason: "the columns of \(table) changed: subscribe again for its new columns")
        }
        if named != nil {
            // Every column of another table, whose sub-query names the dropped column.
            return .ended(reason: "a column of \(table) the subscription's filter names was dropped: subscribe again")
        }
        return nil
    }

    /// How a subscription compiled for `schema` (its table's) ends at once because a change of
    /// a table it reads was followed after that schema was read: as the subscriptions over the
    /// table did then (the table made again or gone: as they do after the commit). `nil`: it
    /// fits the replica's table — now, or once the commit under way is done (a subscription
    /// compiled for the old columns of a table changed in place, naming none it lost, goes on
    /// through that commit as the others did).
    private func staleEnding(of compiled: CompiledQuery, schema: SyncedTableSchema) -> SubscriptionEvent.Kind? {
        let changed = changedSchemas.withLock { $0 }
        guard !changed.isEmpty else { return nil }
        let reshaped = { (table: String) in SubscriptionEvent.Kind.ended(reason: "the columns of \(table) changed, or it was dropped: subscribe again") }
        for dependency in compiled.dependencies where changed[dependency.table].map({ $0.schema == nil }) == true {
            return reshaped(dependency.table)
        }
        guard let recorded = changed[schema.name], recorded.schema != schema else { return nil }
        guard let now = recorded.schema, !recorded.remade else { return reshaped(schema.name) }
        let names = schema.columns.map(\.name)
        let newNames = now.columns.map(\.name)
        guard names != newNames else { return nil }   // a widened type: it goes on
        let dropped = names.filter { !newNames.contains($0) }
        return Self.ending(of: compiled, over: schema.name, byChangeOf: schema.name, dropped: dropped)
    }

    /// The first of `dropped` (columns of `table`) that `compiled` (over table `root`) names:
    /// among its columns, or anywhere in its SQL (a filter's, an order's, a sub-query's; a
    /// column of another table under the same name counts too: the subscription ends rather
    /// than risk running over a column that is gone).
    private static func namedColumn(of compiled: CompiledQuery, over root: String, among dropped: [String], table: String) -> String? {
        dropped.first { column in
            (root == table && compiled.columns.contains(column))
                || compiled.sql.contains(SQLIdentifier.quoted(column))
                || compiled.sql.contains(SQLIdentifier.quoted(OrderKeys.column(for: column)))
        }
    }

    /// What a live query's failure was, in SQLite's words (never the SQL nor its values).
    private static func failure(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message }
        if let error = error as? StoreError { return error.underlying?.message ?? "a \(error.kind) error" }
        return "\(type(of: error))"
    }

    /// Ends every subscriber of `entry` with `ending` (`ended`: its live query ended, its table
    /// was dropped…; `refused`: it could not run at all); later subscribers of the same query
    /// get a new live query.
    private func end(_ entry: Shared, as ending: SubscriptionEvent.Kind) {
        shared.withLock { entries in
            let key = SharedKey(compiled: entry.compiled, types: entry.shape.types)
            if entries[key] === entry { entries[key] = nil }
        }
        entry.lock.withLock {
            entry.ended = ending
            for subscriber in entry.subscribers.values {
                subscriber.handler(SubscriptionEvent(version: entry.version, kind: ending, json: []))
            }
            entry.subscribers = [:]
        }
    }

    /// Converts the event's rows to the wire once, encodes the change once, and hands it to
    /// every subscriber.
    private static func receive(_ event: LiveQueryEvent<Row>, into entry: Shared) {
        let changeset = event.changeset
        let onlyUpdates = changeset.deletes.isEmpty && changeset.inserts.isEmpty && changeset.moves.isEmpty
        // A commit that only updated rows (the common case): those rows alone are converted and
        // put in place, in the entry's rows (no copy of the result per commit).
        let updatedInPlace = entry.lock.withLock { () -> Bool in
            guard entry.hasResult, onlyUpdates, changeset.oldCount == entry.rows.count,
                  changeset.newCount == event.snapshot.count else { return false }
            var updates: [WireChangeset.Update] = []
            for pair in changeset.updates {
                let after = entry.shape.row(event.snapshot[pair.new])
                updates.append(.init(old: pair.old, new: pair.new, columns: WireChangeset.changedColumns(from: entry.rows[pair.old], to: after)))
                entry.rows[pair.new] = after
            }
            (entry.version, entry.snapshotJSON) = (event.version, nil)
            deliver(WireChangeset(updates: updates), of: entry)
            return true
        }
        if updatedInPlace { return }
        // Otherwise the new rows, converted outside the lock: a row the commit neither inserted
        // nor updated is the entry's wire row already (events of one live query come one at a
        // time, and only they change the entry's rows).
        let previous = entry.lock.withLock { entry.hasResult ? entry.rows : nil }
        let rows: [[WireValue]]
        if let previous, changeset.oldCount == previous.count, changeset.newCount == event.snapshot.count {
            let updated = Set(changeset.updates.map(\.new))
            rows = event.snapshot.indices.map { index in
                if !updated.contains(index), let old = changeset.oldIndex(forNew: index) { return previous[old] }
                return entry.shape.row(event.snapshot[index])
            }
        } else {
            rows = event.snapshot.map(entry.shape.row)
        }
        entry.lock.withLock {
            let old = entry.rows
            let hadResult = entry.hasResult
            (entry.rows, entry.version, entry.hasResult, entry.snapshotJSON) = (rows, event.version, true, nil)
            guard hadResult else {
                for (id, subscriber) in entry.subscribers {
                    subscriber.handler(firstEvent(of: entry, resumingFrom: subscriber.resumingFrom, encoded: subscriber.encodes))
                    entry.subscribers[id]?.resumingFrom = nil
                }
                return
            }
            deliver(WireChangeset(changeset, from: old, to: rows), of: entry)
        }
    }

    /// A replica value on the wire: integers beyond ±2⁵³ as strings (numerics are text
    /// already), ±Infinity and NaN as strings, bytea as `\x` hex text (booleans, which need
    /// their column's type, are made by the row's conversion).
    static func wireValue(_ value: SQLValue) -> WireValue {
        switch value {
        case .null: return .null
        case .integer(let integer):
            return integer.magnitude <= 1 << 53 ? .integer(integer) : .text(String(integer))
        case .real(let real):
            if real.isFinite { return .real(real) }
            return .text(real.isNaN ? "NaN" : real > 0 ? "Infinity" : "-Infinity")
        case .text(let text): return .text(text)
        case .blob(let bytes): return .text(Hex.text(of: bytes))
        }
    }
}

/// Ends a subscription when cancelled or released.
public final class SubscriptionToken: Sendable {
    private let end: Locked<(@Sendable () -> Void)?>

    init(_ end: @escaping @Sendable () -> Void) { self.end = Locked(end) }

    public func cancel() {
        let action = end.withLock { value -> (@Sendable () -> Void)? in
            defer { value = nil }
            return value
        }
        action?()
    }

    deinit { cancel() }
}
#endif
