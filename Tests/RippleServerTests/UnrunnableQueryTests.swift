#if Sync
import Foundation
import Ripple
@testable import RippleServer
import RippleSync
import RippleTesting
import Testing

/// A query the replica cannot run — one the compiler's checks let through, that SQLite refuses
/// when it runs it — is refused (its subscriber told why, in SQLite's words), never reported as
/// a subscription that ended because its columns changed; a later subscriber of the same query
/// is refused too.
@Suite struct UnrunnableQueryTests {
    final class Events: @unchecked Sendable {   // every access holds `lock`
        private let lock = NSLock()
        private var kinds: [SubscriptionEvent.Kind] = []
        func append(_ event: SubscriptionEvent) { lock.withLock { kinds.append(event.kind) } }
        var all: [SubscriptionEvent.Kind] { lock.withLock { kinds } }
    }

    @Test func aQueryTheReplicaCannotRunIsRefusedSayingWhy() async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("replica.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
            try db.execute("INSERT INTO t VALUES (1, 'a')")
        }
        let hub = SubscriptionHub(store: store, rules: try SyncRules(json: Data(#"{"tables": {"t": {"read": true}}}"#.utf8)))
        let schema = SyncedTableSchema(name: "t", columns: [.init(name: "id", typeOID: PostgresTypes.OID.int8),
                                                            .init(name: "name", typeOID: PostgresTypes.OID.text)], key: [0])
        // SQLite matches GLOB patterns of at most 50,000 bytes: it fails when it runs this one.
        let compiled = CompiledQuery(sql: #"SELECT "id", "name" FROM "t" WHERE "name" GLOB ? ORDER BY "id" ASC"#,
                                     arguments: [.text(String(repeating: "*", count: 60_000))], identity: "id", columns: ["id", "name"])
        let (first, second) = (Events(), Events())
        let token = hub.subscribe(compiled, basis: "b", schema: schema) { first.append($0) }
        defer { token.cancel() }
        let again = hub.subscribe(compiled, basis: "b", schema: schema) { second.append($0) }
        defer { again.cancel() }
        // The first evaluation may run on another thread: wait for both answers.
        try await Wait.until("a first event for both subscribers") { !first.all.isEmpty && !second.all.isEmpty }
        for events in [first, second] {
            guard case .refused(let reason)? = events.all.first, events.all.count == 1 else {
                Issue.record("not refused: \(events.all)")
                continue
            }
            #expect(reason.contains("pattern too complex") && !reason.contains("columns changed") && !reason.contains("SELECT"), "\(reason)")
        }
    }
}
#endif
