import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// A subscriber as a list view is one: it holds the list it last showed, applies each delivered
/// changeset to it through the batch-update model (which enforces UIKit's rules), and checks the
/// result equals the delivered snapshot. It also checks the version chain.
final class ListViewSubscriber<Element: Equatable & Sendable>: @unchecked Sendable {   // every field is guarded by `condition`
    private let condition = NSCondition()
    private var model = BatchUpdateListModel<Element>(items: [])
    private var _events: [LiveQueryEvent<Element>] = []
    private var _failures: [String] = []
    private var _error: (any Error)?
    private var lastVersion: Int64?
    private var cancelled = false

    /// Called for every event (as the handler).
    func receive(_ event: LiveQueryEvent<Element>) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        if cancelled { _failures.append("v\(event.version) delivered after cancel() returned") }
        if let lastVersion {
            if event.version <= lastVersion { _failures.append("version \(event.version) after \(lastVersion)") }
            if event.previousVersion != lastVersion {
                _failures.append("previousVersion \(String(describing: event.previousVersion)), last received \(lastVersion)")
            }
        } else if !event.isInitial || event.changeset.inserts.count != event.snapshot.count || !event.changeset.deletes.isEmpty {
            _failures.append("the first event is not the initial snapshot: \(event.changeset)")
        }
        if event.updatedColumns.count != event.changeset.updates.count {
            _failures.append("\(event.updatedColumns.count) column sets for \(event.changeset.updates.count) updates")
        }
        do {
            try model.apply(event.changeset, dataSource: event.snapshot)
            try model.expect(event.snapshot)
        } catch {
            _failures.append("v\(event.version): \(error)")
            model = BatchUpdateListModel(items: event.snapshot)
        }
        lastVersion = event.version
        _events.append(event)
    }

    /// Called when the stream ends with an error.
    func fail(_ error: any Error) {
        condition.lock()
        _error = error
        condition.broadcast()
        condition.unlock()
    }

    var events: [LiveQueryEvent<Element>] { condition.withLock { _events } }
    var failures: [String] { condition.withLock { _failures } }
    var error: (any Error)? { condition.withLock { _error } }
    var items: [Element] { condition.withLock { model.items } }
    var version: Int64? { condition.withLock { lastVersion } }

    /// Waits (up to `timeout` seconds, a safety net) until an event of `version` or later arrived.
    @discardableResult
    func waitFor(version: Int64, timeout: TimeInterval = Wait.limit.timeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while (lastVersion ?? -1) < version && _error == nil {
            if !condition.wait(until: deadline) { return false }
        }
        return (lastVersion ?? -1) >= version
    }

    /// Waits (up to `timeout` seconds) until the stream ended with an error.
    @discardableResult
    func waitForError(timeout: TimeInterval = Wait.limit.timeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while _error == nil {
            if !condition.wait(until: deadline) { return false }
        }
        return true
    }

    /// Notes that `cancel()` returned: any later event is a failure.
    func markCancelled() {
        condition.withLock { cancelled = true }
    }

    /// Waits (up to `timeout` seconds) until the list shows `expected`.
    @discardableResult
    func waitFor(items expected: [Element], timeout: TimeInterval = Wait.limit.timeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while model.items != expected && _error == nil {
            if !condition.wait(until: deadline) { return false }
        }
        return model.items == expected
    }

    /// Subscribes to `query`, delivering to this subscriber.
    func subscribe(to query: LiveQuery<Element>, on delivery: Delivery = .immediate) -> Subscription {
        query.subscribe(on: delivery, onError: { [self] in fail($0) }) { [self] in receive($0) }
    }
}

extension NSCondition {
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

extension Todo {
    static func make(_ rank: Int, _ title: String? = nil, done: Bool = false) -> Todo {
        Todo(id: UUID(), title: title ?? "todo \(rank)", rank: rank, done: done, tags: [], due: nil)
    }
}

/// Runs `body` while another thread holds one of `store`'s connections in an open read (a read
/// cannot write, and a subscription made inside a read starts when it ends: holding a reader on
/// another thread is how a test keeps one busy).
func whileAnotherThreadReads<T>(_ store: Store, _ body: () throws -> T) throws -> T {
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        _ = try? store.read { _ in
            entered.signal()
            _ = try? Wait.for(release, "the test to end the other thread's read")
        }
        finished.signal()
    }
    try Wait.for(entered, "another thread to open a read")
    defer {
        release.signal()
        do { try Wait.for(finished, "the other thread's read to end") } catch { Issue.record(error) }
    }
    return try body()
}

extension Store.Configuration {
    /// Neither a file watch nor polling: a store so configured hears of other connections'
    /// commits only when told (`noticeExternalWrites()`, a direct word from another store), so
    /// when it looks is the test's choice.
    static var unwatched: Store.Configuration {
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = nil
        configuration.watchesFile = false
        return configuration
    }
}
