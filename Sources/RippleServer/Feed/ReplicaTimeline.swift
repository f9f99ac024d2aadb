#if Sync
import Ripple

/// Which replica version stands for which Postgres position, for resuming clients by position,
/// and the newest version whose frames are complete.
///
/// Positions come from the feed: a transaction's commit LSN, or a copy's snapshot position
/// (see ``ReplicaCommit``). After a copy at X, the slot replays transactions below X onto it;
/// their versions count as X (the replica equals Postgres at X once all of them are applied),
/// so positions never go backwards here and versions from before the copy are never resumed
/// from.
final class ReplicaTimeline: Sendable {
    struct State {
        /// Versions since the newest copy, ascending, with their positions (never decreasing).
        var versions: [Int64] = []
        var positions: [UInt64] = []
        /// The newest copy's position: resumes from before it get a snapshot.
        var resumableFrom: UInt64 = 0
        /// The newest version the feed finished (its subscribers' frames are complete).
        var completedVersion: Int64 = 0
        var completedPosition = PGOutput.LSN(0)
    }

    private let state = Locked(State())
    /// At most this many versions are remembered (the change log keeps no more for time travel).
    let capacity: Int

    init(capacity: Int) { self.capacity = max(capacity, 16) }

    /// Reads the positions of the replica's retained versions from its change log (their tags).
    func load(from store: Store) async throws {
        let tagged = try await store.asyncTaggedVersions(after: 0)
        for (version, tag) in tagged {
            if tag.hasPrefix("copy "), let position = PGOutput.LSN(String(tag.dropFirst(5))) {
                record(ReplicaCommit(version: version, position: position, isCopy: true))
            } else if let position = PGOutput.LSN(tag) {
                record(ReplicaCommit(version: version, position: position, isCopy: false))
            }
        }
    }

    /// Notes a finished replica commit; returns the position the replica now stands at.
    @discardableResult
    func record(_ commit: ReplicaCommit) -> PGOutput.LSN {
        state.withLock { state in
            if commit.isCopy {
                state.versions = []
                state.positions = []
                state.resumableFrom = commit.position.value
            }
            let position = max(commit.position.value, state.positions.last ?? state.resumableFrom)
            state.versions.append(commit.version)
            state.positions.append(position)
            if state.versions.count > capacity + capacity / 4 {
                state.versions.removeFirst(state.versions.count - capacity)
                state.positions.removeFirst(state.positions.count - capacity)
            }
            state.completedVersion = max(state.completedVersion, commit.version)
            state.completedPosition = PGOutput.LSN(max(state.completedPosition.value, position))
            return state.completedPosition
        }
    }

    /// The newest finished version and its position.
    var completed: (version: Int64, position: PGOutput.LSN) {
        state.withLock { ($0.completedVersion, $0.completedPosition) }
    }

    /// The position a finished version stands for (the newest copy's for versions before the
    /// ones remembered).
    func position(of version: Int64) -> PGOutput.LSN {
        state.withLock { state in
            var (low, high) = (0, state.versions.count)
            while low < high {
                let middle = (low + high) / 2
                if state.versions[middle] <= version { low = middle + 1 } else { high = middle }
            }
            return PGOutput.LSN(low == 0 ? state.resumableFrom : state.positions[low - 1])
        }
    }

    /// The replica version equal to Postgres at `position`: `.version` (the newest version at or
    /// before it), `.ahead` when the replica has not reached it yet, `.unknown` when it is from
    /// before the newest copy or older than the versions remembered.
    enum Lookup: Equatable { case version(Int64), ahead, unknown }

    func version(at position: PGOutput.LSN) -> Lookup {
        state.withLock { state in
            guard position.value >= state.resumableFrom, let first = state.positions.first else { return .unknown }
            if position.value > state.completedPosition.value { return .ahead }
            guard position.value >= first else { return .unknown }
            // The last index whose position is at or before `position`.
            var (low, high) = (0, state.positions.count)
            while low < high {
                let middle = (low + high) / 2
                if state.positions[middle] <= position.value { low = middle + 1 } else { high = middle }
            }
            return .version(state.versions[low - 1])
        }
    }
}
#endif
