import Dispatch
import Foundation
import Ripple
import RippleDiff

/// A gate a slow subscriber's handler waits at, opened by the checker (never a timed sleep):
/// each ``releaseOne()`` lets one waiting handler through; ``releaseForever()`` opens it for good
/// (before the subscription is cancelled or the run settles).
final class StressSlowGate: @unchecked Sendable {   // `waiting` and `released` are guarded by `lock`
    private let lock = NSLock()
    private let semaphore = DispatchSemaphore(value: 0)
    private var waiting = false
    private var released = false

    /// Called by the handler: waits until the checker lets it through.
    func pass() {
        lock.lock()
        if released {
            lock.unlock()
            return
        }
        waiting = true
        lock.unlock()
        semaphore.wait()
    }

    /// Lets the waiting handler, if any, through.
    func releaseOne() {
        lock.lock()
        let wake = waiting
        waiting = false
        lock.unlock()
        if wake { semaphore.signal() }
    }

    /// Opens the gate for good.
    func releaseForever() {
        lock.lock()
        released = true
        let wake = waiting
        waiting = false
        lock.unlock()
        if wake { semaphore.signal() }
    }
}

/// One subscriber of the stress test: how it subscribed, and what it last received. It checks
/// each event on arrival against the previous one (versions, the changeset applied to the rows
/// it showed, batch-update rules) and hands the rows to the ledger, which compares them with the
/// model at the event's version.
final class StressSubscriber: @unchecked Sendable {   // the mutable state below is guarded by `lock`
    enum Kind: String, Sendable {
        case immediate = "handler, .immediate"
        case queue = "handler, .queue"
        case slowQueue = "slow handler, .queue"
        case asyncLoop = "events() loop"
    }

    let id: Int
    let kind: Kind
    /// Indices in the ledger's query pool, one per member (several: a ``LiveQueryGroup``).
    let queryIndices: [Int]
    let queries: [StressQuery]
    let slowGate: StressSlowGate?

    private let lock = NSLock()
    private var lastVersion: Int64?
    private var lastRows: [[StressRow]]
    private var cancelled = false
    private var subscription: Subscription?
    private var task: Task<Void, Never>?
    /// The version of the last event when a missed event was reported (reported once per event).
    private var staleReportedAt: Int64?

    init(id: Int, kind: Kind, queryIndices: [Int], queries: [StressQuery]) {
        self.id = id
        self.kind = kind
        self.queryIndices = queryIndices
        self.queries = queries
        self.slowGate = kind == .slowQueue ? StressSlowGate() : nil
        self.lastRows = Array(repeating: [], count: queries.count)
    }

    /// `#12 (handler, .queue; group of 3)`.
    var name: String { "#\(id) (\(kind.rawValue)\(queries.count > 1 ? "; LiveQueryGroup of \(queries.count)" : ""))" }

    var isImmediate: Bool { kind == .immediate }

    func attach(_ subscription: Subscription) { lock.withLock { self.subscription = subscription } }
    func attach(_ task: Task<Void, Never>) { lock.withLock { self.task = task } }

    /// The last event's version and rows (`nil` before the first event).
    var last: (version: Int64, rows: [[StressRow]])? {
        lock.withLock { lastVersion.map { ($0, lastRows) } }
    }

    /// Cancels the subscription (after opening a slow handler's gate, since `cancel()` waits for
    /// a running handler); from now on an event is a discrepancy. An `events()` loop's task is
    /// cancelled instead, which ends its loop.
    func cancel() {
        slowGate?.releaseForever()
        let (subscription, task) = lock.withLock { (self.subscription, self.task) }
        if let subscription {
            subscription.cancel()
            // Dropped: the subscription's observer holds the handler, which holds this subscriber.
            lock.withLock {
                cancelled = true
                self.subscription = nil
            }
        }
        task?.cancel()
        lock.withLock { self.task = nil }
    }

    /// Lets go of an ended subscription (its stream failed) without calling it cancelled.
    func detach() {
        lock.withLock {
            subscription = nil
            task = nil
        }
    }

    /// Whether a missed event at the subscriber's current last version should be reported now
    /// (once per last version).
    func shouldReportStale() -> Bool {
        lock.withLock {
            guard let lastVersion, staleReportedAt != lastVersion else { return false }
            staleReportedAt = lastVersion
            return true
        }
    }

    /// Checks `event` against the previous one; returns what is wrong with it and, for each
    /// member, the rows to compare with the model.
    func receive(_ event: StressObservedEvent) -> (problems: [StressDiscrepancy], rows: [[StressRow]]) {
        lock.lock()
        defer { lock.unlock() }
        var problems: [StressDiscrepancy] = []
        func problem(_ kind: StressDiscrepancy.Kind, _ summary: String, _ detail: String = "") {
            problems.append(StressDiscrepancy(kind: kind, summary: "subscriber \(name): \(summary)",
                                              detail: detail.isEmpty ? summary : detail))
        }
        if cancelled { problem(.eventAfterCancel, "event v\(event.version) delivered after cancel() returned") }
        guard event.members.count == queries.count else {
            problem(.invalidChangeset, "event with \(event.members.count) members for \(queries.count) queries")
            return (problems, [])
        }
        if event.members.contains(where: { $0.version != event.version || $0.previousVersion != event.previousVersion }) {
            problem(.versionOrder, "the members of a group event disagree on their versions")
        }
        for (index, member) in event.members.enumerated() where member.unreadable > 0 {
            problem(.unreadableRow, "\(member.unreadable) rows of query \(index) at v\(event.version) could not be read back")
        }
        if let lastVersion {
            if event.previousVersion != lastVersion || event.version <= lastVersion {
                problem(.versionOrder, "event v\(event.version) (previous v\(event.previousVersion.map(String.init) ?? "nil")) "
                        + "after the event at v\(lastVersion)")
            }
            if event.members.allSatisfy({ $0.changeset.isEmpty }) {
                problem(.eventWithoutChange, "event v\(event.version) changes nothing since v\(lastVersion)")
            }
        } else {
            if event.previousVersion != nil {
                problem(.notInitial, "the first event v\(event.version) names a previous version "
                        + "v\(event.previousVersion.map(String.init) ?? "")")
            }
        }
        for (index, member) in event.members.enumerated() {
            let old = lastVersion == nil ? [] : lastRows[index]
            if lastVersion == nil {
                let changeset = member.changeset
                if !(changeset.deletes.isEmpty && changeset.updates.isEmpty && changeset.moves.isEmpty
                     && changeset.inserts == Array(0..<member.rows.count)) {
                    problem(.notInitial, "the first event's changeset is not all inserts: \(changeset)")
                }
            }
            if let failure = Self.validate(member.changeset, from: old, to: member.rows) {
                problem(.invalidChangeset,
                        "v\(event.version) (after v\(lastVersion.map(String.init) ?? "none")), query \(index): \(failure)",
                        "subscriber \(name), query \(queries[index].description)\n  changeset: \(member.changeset)\n  \(failure)")
            }
        }
        lastVersion = event.version
        lastRows = event.members.map(\.rows)
        return (problems, lastRows)
    }

    /// Why `changeset` does not lead from `old` to `new` as a list view applies it, or `nil`:
    /// indices in range and used once, `apply(to:using:)` giving `new`, and every stage a batch
    /// a UIKit-style list accepts (``BatchUpdateListModel``).
    static func validate(_ changeset: Changeset, from old: [StressRow], to new: [StressRow]) -> String? {
        guard changeset.oldCount == old.count, changeset.newCount == new.count else {
            return "the changeset is \(changeset.oldCount)→\(changeset.newCount) rows, the snapshots \(old.count)→\(new.count)"
        }
        // Indices first: applying a changeset with indices out of range would trap.
        let olds = changeset.deletes + changeset.updates.map(\.old) + changeset.moves.map(\.old)
        let news = changeset.inserts + changeset.updates.map(\.new) + changeset.moves.map(\.new)
        guard olds.allSatisfy({ (0..<old.count).contains($0) }), news.allSatisfy({ (0..<new.count).contains($0) }) else {
            return "an index is out of range: \(changeset)"
        }
        let removedOrMoved = changeset.deletes + changeset.moves.map(\.old)
        let placed = changeset.inserts + changeset.moves.map(\.new)
        guard Set(removedOrMoved).count == removedOrMoved.count, Set(placed).count == placed.count,
              old.count - changeset.deletes.count + changeset.inserts.count == new.count else {
            return "indices repeat or counts do not add up: \(changeset)"
        }
        let applied = changeset.apply(to: old, using: new)
        if applied != new {
            let index = zip(applied, new).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(applied.count, new.count)
            return "apply(to: previous snapshot, using: snapshot) differs from the snapshot at row \(index)"
        }
        var list = BatchUpdateListModel(items: old)
        do {
            try list.apply(changeset, dataSource: new)
        } catch {
            return "not valid as batch updates: \(error)"
        }
        return nil
    }
}
