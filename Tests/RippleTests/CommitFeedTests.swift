import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Issue 24: the change feed (`store.commits(after:)`) and the origin and tag of each commit.
@Suite struct CommitFeedTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("feed.sqlite")
    }

    func makeStore(retention: ChangeLogRetention = .unlimited, watchesFile: Bool = true) throws -> Store {
        var configuration = Store.Configuration()
        configuration.changeLogRetention = retention
        configuration.externalWritePollInterval = nil
        configuration.watchesFile = watchesFile
        let store = try Store(path: path, configuration: configuration)
        try store.write { db in try db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, title TEXT NOT NULL)") }
        return store
    }

    /// Three threads commit 10,002 versions; a consumer started at the version before follows
    /// them, stops in the middle (its iterator dropped) and resumes from the last one it handled.
    /// It receives every version once, in order, each with the row its commit inserted.
    @Test func aConsumerReceivesEveryLaterVersionOnceInOrderAcrossACancelAndResume() async throws {
        let store = try makeStore()
        let start = try store.currentVersion()
        let perThread = 3_334
        let writers = Task.detached {
            DispatchQueue.concurrentPerform(iterations: 3) { thread in
                for step in 0..<perThread {
                    try? store.write(tag: "t\(thread)") { db in
                        try db.execute("INSERT INTO items(id, title) VALUES (?, 'x')", [thread * 10_000 + step])
                    }
                }
            }
        }
        let final = start + Int64(3 * perThread)
        let (versions, keys, tags) = try await Wait.value("the feed to reach version \(final)") {
            var versions: [Int64] = []
            var keys: Set<String> = []
            var tags: Set<String> = []
            // First part: until half the versions arrived, then the iterator is dropped.
            for try await commit in store.commits(after: start) {
                versions.append(commit.version)
                keys.formUnion(commit.changes.flatMap(\.rowKeys))
                if let tag = commit.tag { tags.insert(tag) }
                #expect(commit.origin == .write)
                if versions.count == 5_000 { break }
            }
            // Resumed from the last version handled.
            for try await commit in store.commits(after: versions.last!) {
                versions.append(commit.version)
                keys.formUnion(commit.changes.flatMap(\.rowKeys))
                if let tag = commit.tag { tags.insert(tag) }
                if commit.version == final { break }
            }
            return (versions, keys, tags)
        }
        try await Wait.value("the writers") { await writers.value }
        #expect(versions == Array((start + 1)...final))
        #expect(keys.count == 3 * perThread)
        #expect(tags == ["t0", "t1", "t2"])
    }

    @Test func aFeedWaitingForCommitsEndsWhenItsTaskIsCancelled() async throws {
        let store = try makeStore()
        let start = try store.currentVersion()
        let consumer = Task {
            var count = 0
            for try await _ in store.commits(after: start) { count += 1 }
            return count
        }
        // The consumer waits (or has not started): either way it ends with nothing read.
        consumer.cancel()
        #expect(try await Wait.value("the cancelled consumer to end") { try await consumer.value } == 0)
        #expect(store.observation.count == 0)
    }

    @Test func aFeedThatNeedsVersionsRetentionDroppedEndsWithAHistoryError() async throws {
        let store = try makeStore(retention: .versions(10))
        for id in 0..<200 {
            try store.write { db in try db.execute("INSERT INTO items(id, title) VALUES (?, 'x')", [id]) }
        }
        await #expect(throws: StoreError.self) {
            _ = try await Wait.value("the feed's answer from version 0") {
                let iterator = store.commits(after: 0).makeAsyncIterator()
                return try await iterator.next()?.version
            }
        }
        // From a version it keeps, it follows.
        let current = try store.currentVersion()
        #expect(try await Wait.value("the feed's first commit after \(current - 5)") {
            let iterator = store.commits(after: current - 5).makeAsyncIterator()
            return try await iterator.next()?.version
        } == current - 4)
    }

    /// Each path that commits records its origin; the tag given by the caller travels with it,
    /// to live-query events, the change log and the feed.
    @Test func everyCommitCarriesItsOriginAndTag() async throws {
        let store = try makeStore(watchesFile: false)   // the shell's write is noticed below, when asked
        let start = try store.currentVersion()
        let events = Locked<[(CommitOrigin?, String?)]>([])
        let subscription = store.liveQuery(sql: "SELECT id, title FROM items", identity: "id").subscribe { event in
            events.withLock { $0.append((event.origin, event.tag)) }
        }
        defer { subscription.cancel() }
        try store.write(tag: "import") { db in try db.execute("INSERT INTO items(id, title) VALUES (1, 'a')") }
        try store.writeWithoutTransaction(tag: "cleanup") { db in try db.execute("DELETE FROM items WHERE id = 1") }
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_seed", sql: "INSERT INTO items(id, title) VALUES (2, 'seeded')")
        try store.migrate(migrator)
        try SQLiteShell.run("INSERT INTO items(id, title) VALUES (3, 'shell')", on: path)
        try store.noticeExternalWrites()

        let expected: [(CommitOrigin, String?)] = [(.write, "import"), (.maintenance, "cleanup"), (.migration, nil), (.foreign, nil)]
        let delivered = events.withLock { $0 }.dropFirst()   // the first event is the initial snapshot
        #expect(delivered.map(\.0) == expected.map(\.0))
        #expect(delivered.map(\.1) == expected.map(\.1))
        let entries = try store.changes(after: start)
        #expect(entries.map(\.origin) == expected.map(\.0))
        #expect(entries.map(\.tag) == expected.map(\.1))
        let feed = try await Wait.value("the feed's \(expected.count) commits") {
            var feed: [Commit] = []
            for try await commit in store.commits(after: start) {
                feed.append(commit)
                if feed.count == 4 { break }
            }
            return feed
        }
        #expect(feed.count == expected.count)
        #expect(feed.map(\.origin) == expected.map(\.0))
        #expect(feed.map(\.tag) == expected.map(\.1))
        #expect(feed.allSatisfy { $0.committedAt != nil })
        // The write made without Ripple: a change of unknown extent.
        #expect(feed.last?.changes.map(\.table) == ["*"])
    }
}
