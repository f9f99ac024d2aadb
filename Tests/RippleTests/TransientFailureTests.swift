import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Transient failures heal themselves (issue 38, item 6), each made to happen every time by a
/// fault hook or by where the test stands, not by chance.
@Suite struct TransientFailureTests {
    let directory: TemporaryDirectory
    let path: String

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("transient.sqlite")
    }

    /// A refresh fails for a moment after it read the version and took what the store told it
    /// of the commit (a reader's temporary file that cannot be opened with descriptors
    /// exhausted fails so, in the middle of the read): its retry still delivers the commit,
    /// with no later write to wake it. (It found the version already checked, and delivered
    /// nothing until the next write.)
    @Test(arguments: [false, true])
    func aRefreshFailingForAMomentMidReadDeliversOnItsRetry(filtered: Bool) throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let query = filtered ? items.filter(Column("id") < 100).order(by: Column("id")) : items.order(by: Column("id"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try query.live())
        defer { subscription.cancel() }
        #expect(subscriber.items == [Item(id: 1, title: "a")])

        let failures = Locked(2)
        store.observation.readFault.withLock { $0 = {
            try failures.withLock { remaining in
                guard remaining > 0 else { return }
                remaining -= 1
                throw DatabaseError(code: .cannotOpen, message: "unable to open a temporary file (injected)")
            }
        } }
        try items.insert(Item(id: 2, title: "b"))
        #expect(subscriber.waitFor(items: [Item(id: 1, title: "a"), Item(id: 2, title: "b")]),
                "the retried refresh delivers the insert")
        #expect(failures.withLock { $0 } == 0)
        #expect(subscriber.error == nil)
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        #expect(subscriber.events.last?.version == (try store.currentVersion()))
    }

    /// In a group, a member failing after another was read: the first member's snapshot is put
    /// back, so the changeset delivered on the retry is relative to what the subscriber holds.
    @Test func aGroupMemberFailingMidReadLeavesTheOthersAsDelivered() throws {
        let store = try Store(path: path, configuration: Store.Configuration.unwatched)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let group = try LiveQueryGroup([try items.order(by: Column("id")).live(), try items.filter(Column("id") > 1).live()])
        let received = Locked<[LiveQueryGroupEvent<Item>]>([])
        let subscription = group.subscribe { event in received.withLock { $0.append(event) } }
        defer { subscription.cancel() }
        let calls = Locked(0)
        store.observation.readFault.withLock { $0 = {
            // Fails on the second member of the first refresh after the insert.
            let call = calls.withLock { count in
                count += 1
                return count
            }
            if call == 2 { throw DatabaseError(code: .cannotOpen, message: "unable to open a temporary file (injected)") }
        } }
        try items.insert(Item(id: 2, title: "b"))
        // The retried refresh's event is delivered off this thread.
        try Wait.blockingUntil("the group's insert event after the failed read") { received.withLock({ $0.count }) >= 2 }
        let events = received.withLock { $0 }
        try #require(events.count == 2, "one insert event after the initial one")
        // Each member's changeset applies to what the subscriber holds.
        for member in 0..<2 {
            let old = events[0].members[member].snapshot, new = events[1].members[member].snapshot
            #expect(events[1].members[member].changeset.apply(to: old, using: new) == new, "member \(member)")
            #expect(events[1].members[member].changeset.inserts.count == 1, "member \(member)")
        }
    }

    /// Another store watches while this one runs statements outside a transaction: a read of the
    /// other store between two of them (here a subscription's first read) sees a state that no
    /// version names. It must not be labelled with the version before the statements (which
    /// names the state without them): it is read again once their version is taken.
    @Test func aStateBetweenTheStatementsOfAWriteWithoutTransactionIsNeverLabelledWithAnOlderVersion() throws {
        let writer = try Store(path: path, configuration: Store.Configuration.unwatched)
        let items = try writer.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        let watcher = try Store(path: path)
        let query = try watcher.collection("items", of: Item.self).order(by: Column("id"))
        let before = try writer.currentVersion()
        let subscriber = ListViewSubscriber<Item>()
        var subscription: Subscription?
        try writer.writeWithoutTransaction { db in
            try db.execute("INSERT INTO items(id, title) VALUES (2, 'b')")   // commits on its own
            subscription = subscriber.subscribe(to: try query.live())
            try db.execute("INSERT INTO items(id, title) VALUES (3, 'c')")
        }
        defer { subscription?.cancel() }
        let version = try writer.currentVersion()
        #expect(subscriber.waitFor(version: version), "the watcher's query reads the statements' version")
        // The version before the statements names the state without them; the last one, the state
        // with both. (Any version between is checked against the store's own history.)
        for event in subscriber.events {
            let expected = event.version <= before ? [Item(id: 1, title: "a")]
                : event.version >= version ? [Item(id: 1, title: "a"), Item(id: 2, title: "b"), Item(id: 3, title: "c")]
                : try watcher.snapshot(of: query, at: event.version)
            #expect(event.snapshot == expected, "the event of v\(event.version)")
        }
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }
}
