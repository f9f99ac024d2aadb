import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Issue 14: commits by other connections reach live queries without polling — from the
/// `sqlite3` shell (another process, not Ripple) through a watch on the file, and from another
/// store of this process directly. Every store here has polling off and the file watch on.
@Suite struct CrossProcessObservationTests {
    let directory: TemporaryDirectory
    let path: String
    let store: Store

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    static var noPolling: Store.Configuration {
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = nil
        configuration.watchesFile = true
        return configuration
    }

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("shared.sqlite")
        store = try Store(path: path, configuration: Self.noPolling)
    }

    /// Runs `sql` in the sqlite3 shell, another process.
    func shell(_ sql: String) throws {
        #expect(try SQLiteShell.run(sql, on: path).status == 0)
    }

    @Test func aWriteByTheSqlite3ShellArrivesWithoutPolling() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        defer { subscription.cancel() }
        #expect(store.observation.isWatching)
        try shell("INSERT INTO items(id, title) VALUES (2, 'from the shell')")
        // A safety net only: the event comes when the file changes.
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a"), Item(id: 2, title: "from the shell")], timeout: 20))

        // After a checkpoint that resets the WAL, the watch still hears the next write.
        try store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        try shell("UPDATE items SET title = 'again' WHERE id = 1")
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "again"), Item(id: 2, title: "from the shell")], timeout: 20))
        #expect(subscriber.failures.isEmpty)
    }

    @Test func aWriteByAnotherStoreInThisProcessArrivesWithoutPolling() throws {
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.all.live())
        defer { subscription.cancel() }
        let other = try Store(path: path, configuration: Self.noPolling)
        try other.collection("items", of: Item.self).insert(Item(id: 7, title: "next door"))
        #expect(subscriber.waitFor(items: [Item(id: 7, title: "next door")], timeout: 20))
        #expect(subscriber.failures.isEmpty)
    }

    @Test func theWatchLivesOnlyWhileLiveQueriesDo() throws {
        let items = try store.collection("items", of: Item.self)
        #expect(!store.observation.isWatching)
        let subscription = try items.all.live().subscribe { _ in }
        #expect(store.observation.isWatching)
        subscription.cancel()
        #expect(!store.observation.isWatching)
        #expect(!(try Store.inMemory()).observation.isWatching)
        // Off unless asked for.
        let unwatched = try Store(path: directory.path("unwatched.sqlite"))
        let quiet = try unwatched.collection("items", of: Item.self).all.live().subscribe { _ in }
        #expect(!unwatched.observation.isWatching)
        quiet.cancel()
    }
}
