import Foundation

/// One committed version, as the change feed (``Store/commits(after:)``) delivers it.
public struct Commit: Hashable, Sendable {
    /// The version the commit took.
    public var version: Int64
    /// Where it came from; `nil` for a version committed before Ripple recorded origins.
    public var origin: CommitOrigin?
    /// The tag its caller gave it (see ``Store/write(tag:_:)``), if any.
    public var tag: String?
    /// When it committed, by the clock of the process that committed it (`nil` before Ripple
    /// recorded it).
    public var committedAt: Date?
    /// The rows it changed, one entry per table and operation (as ``Store/changes(after:upTo:)``
    /// gives them). An entry for the table `"*"` is a change of unknown extent: a schema change,
    /// or a write made without Ripple (origin ``CommitOrigin/foreign``), after which every table
    /// must be read again.
    public var changes: [ChangeLogEntry]
}

/// The store's committed versions, in order, from a given version on: every later version
/// exactly once, as it commits, whoever committed it (this store, another store or process on
/// the file, a write made without Ripple that the store adopted). See ``Store/commits(after:)``.
///
/// It never polls for the store's own commits (the commit pipeline wakes it) and hears other
/// connections' commits as live queries do (the file watch). Memory is bounded: versions are
/// read from the change log in batches of at most ``batchSize``.
public struct CommitFeed: AsyncSequence, Sendable {
    public typealias Element = Commit

    let store: Store
    let start: Int64
    /// The most versions read from the change log at once.
    public var batchSize = 256

    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, after: start, batchSize: Swift.max(1, batchSize))
    }

    /// Reads the feed. Its signal from the store lives as long as it does.
    public final class Iterator: AsyncIteratorProtocol {
        private let store: Store
        private let signal: CommitSignal
        private let batchSize: Int
        private var cursor: Int64
        private var buffer: [Commit] = []
        private var next = 0

        init(store: Store, after version: Int64, batchSize: Int) {
            self.store = store
            self.cursor = version
            self.batchSize = batchSize
            self.signal = CommitSignal()
            // Registered before the first read: a commit after that read is heard.
            store.observation.register(signal, store: store)
        }

        deinit { store.observation.unregister(signal) }

        /// The next committed version, waiting for it when the feed is caught up; `nil` once the
        /// task is cancelled.
        ///
        /// - Throws: ``StoreError`` of kind ``StoreError/Kind/history`` when the change log no
        ///   longer holds the next version (its retention dropped it: read the current state
        ///   afresh and follow from ``Store/currentVersion()``); the store's errors otherwise
        ///   (``StoreError/Kind/fileMoved``, …).
        public func next() async throws -> Commit? {
            while true {
                if next < buffer.count {
                    defer { next += 1 }
                    return buffer[next]
                }
                if Task.isCancelled { return nil }
                // Taken before reading: a commit after the read moves it, and the wait returns.
                let seen = signal.generation
                buffer = try store.read { db in try ChangeLog.commits(in: db, after: cursor, limit: batchSize) }
                next = 0
                if let last = buffer.last {
                    cursor = last.version
                    continue
                }
                await signal.wait(after: seen)
            }
        }
    }
}

extension Store {
    /// The change feed: the versions committed after `version`, in order, each once with its
    /// row changes, origin and tag, as they commit — a follower that misses nothing and never
    /// polls. Resumable: start again from the last version handled. Cancelling the task that
    /// iterates ends it.
    ///
    /// ```swift
    /// for try await commit in store.commits(after: lastHandled) {
    ///     for change in commit.changes { print(commit.version, commit.origin ?? "?", change.table, change.rowKeys) }
    ///     lastHandled = commit.version
    /// }
    /// ```
    ///
    /// Versions the change log no longer keeps (see ``Configuration/changeLogRetention``) end the
    /// feed with a ``StoreError`` of kind ``StoreError/Kind/history`` when it reaches them.
    public func commits(after version: Int64) -> CommitFeed {
        CommitFeed(store: self, start: version)
    }
}

/// What wakes a change feed waiting for the next commit: an observer told of every commit (so
/// that the store watches its file for other connections' commits while a feed waits).
final class CommitSignal: ObservationTarget, Sendable {
    let observerID = ObservationCenter.makeObserverID()

    private struct State {
        var generation: UInt64 = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    /// How many commits were told so far.
    var generation: UInt64 { state.withLock { $0.generation } }

    func storeDidCommit(_ summary: CommitSummary, batch: RefreshBatch) {
        state.withLock { state in
            state.generation += 1
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }?.resume()
    }

    func routed(_ version: Int64) {}

    func awaitDelivery(of version: Int64) {}

    /// Returns once a commit was told after `generation`, or the task is cancelled.
    func wait(after generation: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { state in
                let waiter = state.waiter
                state.waiter = nil
                return waiter
            }?.resume()
        }
    }
}
