import Foundation
import Ripple
import RippleDiff
import RippleSync

/// What a subscriber receives: first the result, then each replica version's change to it.
public struct SubscriptionEvent: Sendable {
    public enum Kind: Sendable {
        /// The whole result, columns named.
        case snapshot(columns: [String], rows: [[WireValue]])
        /// The change from the rows last received.
        case changes(WireChangeset)
    }

    /// The replica version the result is at.
    public var version: Int64
    /// The Postgres commit LSN of that version (its commit's tag), when it came from one.
    public var lsn: String?
    public var kind: Kind
}

/// The server's subscriptions, evaluated by Ripple's live queries over the replica.
///
/// Subscriptions whose compiled SQL and bound values are equal — the same query under the same
/// rule — share one live query, and each change is converted to the wire once for all of them.
/// Users with different rules compile to different values, so they never share.
public final class SubscriptionHub: Sendable {
    public let store: Store
    let rules: SyncRules

    /// One live query and its subscribers.
    private final class Shared: @unchecked Sendable {   // every field is guarded by `lock`
        let lock = NSLock()
        var subscribers: [Int: @Sendable (SubscriptionEvent) -> Void] = [:]
        var columns: [String] = []
        var rows: [[WireValue]] = []
        var version: Int64 = 0
        var lsn: String?
        var hasResult = false
        var subscription: Subscription?
    }

    private let shared = Locked<[CompiledQuery: Shared]>([:])
    private let nextID = Locked(0)

    public init(store: Store, rules: SyncRules) {
        self.store = store
        self.rules = rules
    }

    /// How many live queries the hub runs (subscriptions sharing one count once).
    public var liveQueryCount: Int { shared.withLock { $0.count } }

    /// Subscribes `user` to `query` over `schema`: `handler` receives the result now (a
    /// snapshot), then each change, in version order. It runs inside the replica's commit (or
    /// this call) and must return quickly: hand the event to the socket's queue, and subscribe
    /// or cancel elsewhere, never from inside it.
    ///
    /// - Throws: ``RulesError`` when the user may not read the table, ``QueryError`` when the
    ///   query does not fit the schema.
    public func subscribe(_ query: QueryDescription, user: String, schema: SyncedTableSchema,
                          handler: @escaping @Sendable (SubscriptionEvent) -> Void) throws -> SubscriptionToken {
        let compiled = try QueryCompiler.compile(try rules.restrict(query, to: user), for: schema)
        let id = nextID.withLock { value -> Int in
            value += 1
            return value
        }
        let (entry, isNew) = shared.withLock { entries -> (Shared, Bool) in
            if let entry = entries[compiled] { return (entry, false) }
            let entry = Shared()
            entries[compiled] = entry
            return (entry, true)
        }
        entry.lock.withLock {
            entry.subscribers[id] = handler
            if entry.hasResult {
                handler(SubscriptionEvent(version: entry.version, lsn: entry.lsn, kind: .snapshot(columns: entry.columns, rows: entry.rows)))
            }
        }
        if isNew {
            let types = Dictionary(schema.columns.map { ($0.name, $0.typeOID) }, uniquingKeysWith: { first, _ in first })
            let live = store.liveQuery(sql: compiled.sql, arguments: compiled.arguments, identity: compiled.identity)
            let subscription = live.subscribe(on: .immediate) { [entry] event in
                Self.receive(event, into: entry, types: types)
            }
            entry.lock.withLock { entry.subscription = subscription }
        }
        return SubscriptionToken { [weak self] in self?.unsubscribe(id, from: compiled) }
    }

    private func unsubscribe(_ id: Int, from compiled: CompiledQuery) {
        let ended: Shared? = shared.withLock { entries in
            guard let entry = entries[compiled] else { return nil }
            let empty = entry.lock.withLock { () -> Bool in
                entry.subscribers[id] = nil
                return entry.subscribers.isEmpty
            }
            guard empty else { return nil }
            entries[compiled] = nil
            return entry
        }
        if let ended { ended.lock.withLock { ended.subscription }?.cancel() }
    }

    /// Converts the event's rows to the wire once, and hands the change to every subscriber.
    private static func receive(_ event: LiveQueryEvent<Row>, into entry: Shared, types: [String: UInt32]) {
        let columns = event.snapshot.first?.columnNames ?? []
        let rows = event.snapshot.map { row in
            zip(row.columnNames, row.values).map { name, value in wireValue(value, type: types[name]) }
        }
        entry.lock.withLock {
            let kind: SubscriptionEvent.Kind
            if entry.hasResult {
                kind = .changes(WireChangeset(event.changeset, from: entry.rows, to: rows))
            } else {
                kind = .snapshot(columns: columns, rows: rows)
            }
            (entry.columns, entry.rows, entry.version, entry.lsn, entry.hasResult) = (columns, rows, event.version, event.tag, true)
            let delivered = SubscriptionEvent(version: event.version, lsn: event.tag, kind: kind)
            for handler in entry.subscribers.values { handler(delivered) }
        }
    }

    /// A replica value on the wire, by its Postgres type: integers beyond ±2⁵³ and numerics as
    /// strings, booleans as booleans, ±Infinity and NaN as strings, bytea as `\x` hex text.
    static func wireValue(_ value: SQLValue, type: UInt32?) -> WireValue {
        switch value {
        case .null: return .null
        case .integer(let integer):
            if type == PostgresTypes.OID.bool { return .bool(integer != 0) }
            return integer.magnitude <= 1 << 53 ? .integer(integer) : .text(String(integer))
        case .real(let real):
            if real.isFinite { return .real(real) }
            return .text(real.isNaN ? "NaN" : real > 0 ? "Infinity" : "-Infinity")
        case .text(let text): return .text(text)
        case .blob(let bytes):
            let digits = Array("0123456789abcdef")
            return .text("\\x" + String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }))
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
