import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Another program restores an older copy of the file over a live store (issue 38, item 5): the
/// store never lets a version go back nor name two states. Its live queries end with
/// ``StoreError/Kind/fileReplaced``, and every later call throws it.
@Suite struct FileReplacementTests {
    let directory: TemporaryDirectory
    let path: String

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("restored.sqlite")
    }

    /// Runs `sql` (or a dot-command) in the sqlite3 shell, another process.
    func shell(_ sql: String) throws {
        let outcome = try SQLiteShell.run(sql, on: path)
        #expect(outcome.status == 0, "\(outcome.errors)")
    }

    static func isFileReplaced(_ error: (any Error)?) -> Bool {
        (error as? StoreError)?.kind == .fileReplaced
    }

    /// The copy restored is older: the file's version goes back. The file watch tells the store;
    /// its live query ends with the typed error (having delivered no state of the copy), and its
    /// writes, reads and versions throw it instead of naming the copy's states with versions it
    /// already gave out.
    @Test func anOlderCopyRestoredOverTheFileEndsLiveQueriesAndStopsTheStore() throws {
        let store = try Store(path: path)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let backup = directory.path("backup.sqlite")
        try store.writeWithoutTransaction { db in try db.execute("VACUUM INTO ?", [backup]) }
        let backedUp = try store.currentVersion()
        try items.insert(Item(id: 2, title: "b"))
        try items.insert(Item(id: 3, title: "c"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        defer { subscription.cancel() }
        #expect(subscriber.waitFor(version: try store.currentVersion(), ))
        let delivered = subscriber.events.count

        try shell(".restore '\(backup)'")
        #expect(subscriber.waitForError(), "the live query ends once the file watch saw the restore")
        #expect(Self.isFileReplaced(subscriber.error), "\(String(describing: subscriber.error))")
        #expect(subscriber.events.count == delivered, "no state of the restored copy was delivered")
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        #expect { try items.insert(Item(id: 4, title: "d")) } throws: { Self.isFileReplaced($0) }
        #expect { try store.currentVersion() } throws: { Self.isFileReplaced($0) }
        #expect { try items.fetchAll() } throws: { Self.isFileReplaced($0) }
        // A store opened now continues the file's history as it is.
        let reopened = try Store(path: path)
        #expect(try reopened.currentVersion() == backedUp)
        #expect(try reopened.collection("items", of: Item.self).fetchAll() == [Item(id: 1, title: "a")])
    }

    /// The restored copy was written to since, up to the version the store last saw, before the
    /// store looked: the version did not go back, but names another commit. The store still
    /// finds out (by when that version committed) and stops, at its next look or write.
    @Test func aRestoredCopyWrittenUpToTheSameVersionIsStillFound() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let backup = directory.path("backup.sqlite")
        try store.writeWithoutTransaction { db in try db.execute("VACUUM INTO ?", [backup]) }
        try items.insert(Item(id: 2, title: "b"))
        let seen = try store.currentVersion()

        try shell(".restore '\(backup)'")
        // Another program brings the copy to the version the store saw again, with another state.
        do {
            let other = try Store(path: path, configuration: Store.Configuration.unwatched)
            let others = try other.collection("items", of: Item.self)
            var id = 100
            while try other.currentVersion() < seen {
                try others.insert(Item(id: id, title: "not b"))
                id += 1
            }
            #expect(try other.currentVersion() == seen)
        }
        #expect { try store.noticeExternalWrites() } throws: { Self.isFileReplaced($0) }
        #expect { try items.insert(Item(id: 3, title: "c")) } throws: { Self.isFileReplaced($0) }
    }

    /// The store writes before it looked: the write is refused (nothing committed), never given a
    /// version the store already gave another state.
    @Test func aWriteAfterTheRestoreIsRefusedAndCommitsNothing() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let backup = directory.path("backup.sqlite")
        try store.writeWithoutTransaction { db in try db.execute("VACUUM INTO ?", [backup]) }
        let backedUp = try store.currentVersion()
        try items.insert(Item(id: 2, title: "b"))
        try items.insert(Item(id: 3, title: "c"))

        try shell(".restore '\(backup)'")
        #expect { try items.insert(Item(id: 4, title: "d")) } throws: { Self.isFileReplaced($0) }
        let reopened = try Store(path: path)
        #expect(try reopened.currentVersion() == backedUp)
        #expect(try reopened.collection("items", of: Item.self).fetchAll() == [Item(id: 1, title: "a")])
    }
}
