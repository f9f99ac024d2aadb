import Foundation

/// The background refreshes one commit starts, read together: the live queries a commit concerns
/// read in one read transaction per batch, one after the other on one thread, instead of one
/// transaction and one thread hand-off each.
///
/// Why: a refresh is mostly fixed cost — waking a thread, beginning a read transaction (which
/// drops the connection's page cache when another connection committed), reading the same
/// interior pages again — and its own work, patching a few rows, is small. Refreshes run apart
/// also do not run side by side as often as one would think: a second thread often waits for
/// the first one's core. So a commit that concerns two live queries now costs one hand-off and
/// one transaction, and the second read finds the pages the first one loaded.
///
/// A batch holds at most ``chunkSize`` refreshes; a commit that concerns more starts several,
/// which run in parallel. Every refresh in a batch reads at the same version, as each would if it
/// ran alone right after the commit.
final class RefreshBatch: @unchecked Sendable {   // @unchecked: filled by one thread, then handed to the background queue and never touched again
    /// One live query's part: `read` runs inside the batch's read transaction, told the version
    /// it sees (read once for the batch), and hands its event on at once (reading again waits
    /// for the transaction's end, as anything started inside a store read does: see
    /// ``ConnectionPool/whenAccessEnds(_:)``). `fail` runs instead when the transaction cannot
    /// begin, or its version cannot be read.
    struct Refresh: Sendable {
        let store: Store
        let read: @Sendable (Database, ReadVersion) -> Void
        let fail: @Sendable (any Error) -> Void
    }

    /// Refreshes per batch at most.
    static var chunkSize: Int { 16 }

    private var refreshes: [Refresh] = []

    func add(_ refresh: Refresh) {
        refreshes.append(refresh)
    }

    /// Runs the refreshes added, in batches of at most ``chunkSize``, on `queue`.
    func start(on queue: DispatchQueue) {
        guard !refreshes.isEmpty else { return }
        for start in stride(from: 0, to: refreshes.count, by: Self.chunkSize) {
            let chunk = Array(refreshes[start..<min(start + Self.chunkSize, refreshes.count)])
            queue.async {
                ObservationThreads.background.inside { Self.run(chunk) }
            }
        }
        refreshes = []
    }

    /// Reads every refresh of `chunk` in one read transaction, each handing its event on as soon
    /// as it read it.
    private static func run(_ chunk: [Refresh]) {
        var began = false
        do {
            // The refreshes all belong to the store whose commit started them.
            let store = chunk[0].store
            // A reader that cannot open fails the refreshes at once: each retries later (see
            // ObserverState.backingOff) rather than holding this thread for the busy timeout.
            try store.read(waitingForReaders: false) { db in
                began = true
                store.observation.diagnostics.withLock { $0.batchReads += 1 }
                // The version every refresh sees, read once: failing, it fails them all, as it
                // would have failed each.
                let seen: ReadVersion
                do {
                    seen = try ReadVersion(db, recent: store.observation.recentOrigins)
                } catch {
                    for refresh in chunk { refresh.fail(error) }
                    return
                }
                for refresh in chunk { refresh.read(db, seen) }
            }
        } catch {
            // The transaction could not begin: no refresh read anything. (Ending a read
            // transaction loses nothing: what each refresh read was handed on.)
            if !began { for refresh in chunk { refresh.fail(error) } }
        }
    }
}
