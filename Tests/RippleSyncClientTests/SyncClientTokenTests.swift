#if Sync
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// The client renews its token in-band before it expires: the socket, and its subscriptions,
/// outlive the first token, with no reconnection.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync client tests skipped"), .timeLimit(.minutes(15)))
struct SyncClientTokenTests {
    @Test func theClientRenewsItsTokenBeforeItExpiresAndKeepsItsSocket() async throws {
        try await withThrowawayPostgres { postgres in
            try await TodosFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: TodosFixture.rules, directory: directory) { node in
                let store = try Store(path: directory.path("client.sqlite"))
                // Tokens that live 30 seconds: the node closes a socket whose token expired. The
                // client renews at three quarters of a token's life, so 7.5 s before its expiry:
                // room for a busy machine's late timer.
                let issued = Locked<[Date]>([])
                let client = SyncClient(url: node.url, store: store) {
                    let expires = Date().addingTimeInterval(30)
                    issued.withLock { $0.append(expires) }
                    return try node.token("alice", expires: expires)
                }
                let events = Locked<[SyncClientEvent]>([])
                let watcher = Task { for await event in client.events { events.withLock { $0.append(event) } } }
                do {
                    try await withStarted(client) {
                        try await client.subscribe("open", TodosFixture.aliceOpen)
                        try await Wait.until("the first result") { await client.rows(of: "open")?.isEmpty == false }
                        let firstExpiry = try #require(issued.withLock { $0.first })
                        try await Wait.until("the first token's expiry to pass", within: .seconds(60)) {
                            Date() > firstExpiry.addingTimeInterval(2)
                        }
                        try await postgres.psql("UPDATE todos SET title = 'after the first token' WHERE id = 2")
                        try await Wait.until("the change to reach the client") {
                            await client.rows(of: "open")?.contains { $0.contains(.text("after the first token")) } == true
                        }
                    }
                } catch {
                    watcher.cancel()
                    _ = await watcher.value
                    throw error
                }
                watcher.cancel()
                _ = await watcher.value
                let seen = events.withLock { $0 }
                #expect(issued.withLock { $0.count } >= 2, "renewed")
                #expect(seen.filter { if case .connected = $0 { true } else { false } }.count == 1, "one connection: \(seen)")
                #expect(!seen.contains { if case .serverError = $0 { true } else { false } }, "\(seen)")
            }
        }
    }
}
#endif
