import Foundation

/// How a store notices other connections' commits while it has observers: a watch on the
/// database file (``FileWatch``, its wakes filtered by ``OwnCommitFilter``) or, when the file
/// cannot be watched (or is not a file), a timer every `pollInterval`. Either makes the store
/// look (``Store/noticeCommits(awaitingDeliveries:)``: `data_version`, then the change log), and
/// the store routes what it found to its observers. Another store of this process on the same
/// file tells it directly after each commit (on ``queue``).
///
/// ``ObservationCenter`` starts it when its first observer registers and stops it when its
/// last one leaves.
final class CommitDetector: Sendable {
    private struct State {
        var poller: (any DispatchSourceTimer)?
        var watch: FileWatch?
    }

    private let state = Locked(State())
    private let pollInterval: TimeInterval?
    /// The database file to watch (`nil` in memory).
    private let watchedFile: String?
    /// Where the watch's and other stores' calls to look for commits run, one at a time.
    let queue: DispatchQueue
    /// Tells the watch's wake-ups for the store's own commits from others' (`nil` unwatched).
    let ownCommits: OwnCommitFilter?
    /// Counts the watch's wakes.
    private let diagnostics: Locked<ObservationDiagnostics>

    init(pollInterval: TimeInterval?, watchedFile: String?, queue: DispatchQueue, diagnostics: Locked<ObservationDiagnostics>) {
        self.pollInterval = pollInterval
        self.watchedFile = watchedFile
        self.queue = queue
        self.diagnostics = diagnostics
        ownCommits = watchedFile == nil ? nil : OwnCommitFilter(queue: queue)
    }

    deinit {
        state.withLock {
            $0.poller?.cancel()
            $0.watch?.cancel()
        }
        // Never again read the writer's mapping of the wal-index (the connection is closing).
        ownCommits?.deactivate()
    }

    /// Whether the file is watched.
    var isWatching: Bool { state.withLock { $0.watch != nil } }

    /// Starts noticing `store`'s other connections' commits (nothing when it does already): the
    /// watch, or the timer when the file cannot be watched.
    func start(for store: Store) {
        state.withLock { state in
            guard state.watch == nil, state.poller == nil else { return }
            state.watch = watchedFile.flatMap { startWatch(of: $0, store: store) }
            if state.watch == nil, let pollInterval, pollInterval > 0 {
                // The fallback: the file cannot be watched, or the watch is off.
                let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
                timer.schedule(deadline: .now() + pollInterval, repeating: pollInterval, leeway: .milliseconds(10))
                timer.setEventHandler { [weak store] in
                    // A failure (the file busy, say) is retried at the next tick.
                    try? store?.noticeCommits()
                }
                timer.resume()
                state.poller = timer
            }
        }
    }

    /// Stops noticing (the last observer left).
    func stop() {
        state.withLock { state in
            state.poller?.cancel()
            state.poller = nil
            if state.watch != nil { ownCommits?.deactivate() }
            state.watch?.cancel()
            state.watch = nil
        }
    }

    /// Watches the database file for other connections' commits; `nil` when it cannot.
    private func startWatch(of path: String, store: Store) -> FileWatch? {
        guard let ownCommits else { return nil }
        // A failure to look (the file busy, say) is retried at the next change.
        let look: @Sendable () -> Void = { [weak store] in try? store?.noticeCommits() }
        ownCommits.activate(look: look)
        let watch = FileWatch(database: path, queue: queue) { [ownCommits, diagnostics] onlyWrites in
            diagnostics.withLock { $0.watchWakes += 1 }
            // The WAL is written by every commit, the store's own too, and the database file by
            // checkpoints: the filter tells others' commits apart. A file removed or replaced
            // is rare: look.
            if onlyWrites { ownCommits.wake() } else { look() }
        }
        if let watch { ownCommits.attach(watch) } else { ownCommits.deactivate() }
        return watch
    }
}
