import Foundation

/// A store's registry of live observers: told of every commit (the store's own, and other
/// processes' when noticed), it tells the observers whose tables changed.
///
/// While observers are registered and the store is a file, a timer looks for other processes'
/// commits every `pollInterval` (see ``Store/noticeExternalWrites()``).
final class ObservationCenter: Sendable {
    private struct Entry {
        weak var target: (any ObservationTarget)?
    }

    private struct State {
        var targets: [ObjectIdentifier: Entry] = [:]
        var poller: (any DispatchSourceTimer)?
    }

    private let state = Locked(State())
    private let pollInterval: TimeInterval?
    /// How many times live queries of this store ran their SQL (for tests of invalidation).
    let fetchCount = Locked(0)

    init(pollInterval: TimeInterval?) {
        self.pollInterval = pollInterval
    }

    deinit {
        state.withLock { $0.poller?.cancel() }
    }

    /// The number of registered observers.
    var count: Int { state.withLock { $0.targets.count } }

    func register(_ target: any ObservationTarget, store: Store) {
        state.withLock { state in
            state.targets[ObjectIdentifier(target)] = Entry(target: target)
            if state.poller == nil, let pollInterval, pollInterval > 0 {
                let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
                timer.schedule(deadline: .now() + pollInterval, repeating: pollInterval, leeway: .milliseconds(10))
                timer.setEventHandler { [weak store] in
                    // A failure (the file busy, say) is retried at the next tick.
                    try? store?.noticeExternalWrites()
                }
                timer.resume()
                state.poller = timer
            }
        }
    }

    func unregister(_ target: any ObservationTarget) {
        state.withLock { state in
            state.targets[ObjectIdentifier(target)] = nil
            if state.targets.isEmpty {
                state.poller?.cancel()
                state.poller = nil
            }
        }
    }

    /// Tells the observers whose tables `summary` names (all, for ``ChangeLog/everyTable``).
    func didCommit(_ summary: CommitSummary) {
        let targets = state.withLock { state in state.targets.values.compactMap(\.target) }
        for target in targets {
            target.storeDidCommit(tables: summary.tables)
        }
    }
}
