#if Sync
import Foundation
import Ripple
import RippleSync
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// Every store a client starts on numbers its local commits as mutations, one per commit — also
/// a store made after another was released, which the allocator may give the same address
/// (the client once remembered stores by `ObjectIdentifier`, and took such a store for one it had
/// seen: its commits were never sealed, and a benchmark's device found 0 mutations pending after
/// 10,000 offline writes).
@Suite struct SealingTests {
    @Test func everyStoreAClientStartsOnSealsItsCommits() async throws {
        let directory = try TemporaryDirectory()
        let port = try IncludedRowsTests.closedPort()
        for round in 0..<24 {
            let pending = try await Self.writeOffline(path: directory.path("device\(round).sqlite"), port: port)
            #expect(pending == 2, "round \(round): \(pending) mutations pending after two local commits")
            if pending != 2 { break }
        }
    }

    /// A store and a client of their own (both released on return): a snapshot makes `items` a
    /// synced table, then two local commits write it; how many mutations are pending.
    static func writeOffline(path: String, port: Int) async throws -> Int {
        let store = try Store(path: path)
        let client = SyncClient(url: "ws://127.0.0.1:\(port)/sync", store: store) { "a token" }
        await client.setBackoff(min: .seconds(60), max: .seconds(60))
        return try await withStarted(client) {
            try await client.subscribe("items", QueryDescription(table: "items", order: [OrderDescription(column: "id")]))
            let snapshot = WireSnapshot(basis: "b", columns: ["id", "n"], types: ["int8", "int8"], key: [0], rows: [[.integer(1), .integer(0)]])
            await client.receive(frame: String(decoding: ServerMessage.changes(lsn: "0/1", snapshots: ["items": snapshot], changesets: [:]).json,
                                               as: UTF8.self))
            _ = await client.rows(of: "items")
            for _ in 0..<2 { try await store.asyncWrite { db in try db.execute("UPDATE items SET n = n + 1 WHERE id = 1") } }
            return try await client.pendingMutations()
        }
    }
}
#endif
