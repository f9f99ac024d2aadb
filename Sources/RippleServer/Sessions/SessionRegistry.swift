#if Sync
import NIOCore
import Ripple

/// The node's open sockets, and those with frames waiting for a replica version to finish.
///
/// A socket registers when it opens and unregisters when it closes; events are filed here under
/// the version they belong to and sent once that version finishes (``complete(_:)``), so that a
/// socket hears each Postgres transaction as one frame. Stopping (``beginStopping()``) tells
/// every socket, and every socket that opens from then on, to come back later.
final class SessionRegistry: Sendable {
    private let timeline: ReplicaTimeline
    private let metrics: SyncMetrics
    private let maxSockets: Int
    private let state = Locked(State())

    private struct State {
        var dirty: [ObjectIdentifier: SyncSession] = [:]
        var sessions: [ObjectIdentifier: SyncSession] = [:]
        /// Set once the node starts stopping: a socket that opens from then on (accepted before
        /// the listener closed) is told to come back later instead of staying open, which
        /// would keep the node from ever stopping.
        var stopping = false
        /// Who waits for the last socket to close (``drained()``), by the number each took.
        var drainWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    /// Whether a socket may stay.
    enum Admission { case admitted, full, stopping }

    init(timeline: ReplicaTimeline, metrics: SyncMetrics, maxSockets: Int) {
        (self.timeline, self.metrics, self.maxSockets) = (timeline, metrics, maxSockets)
    }

    func register(_ session: SyncSession) -> Admission {
        state.withLock { state in
            guard !state.stopping else { return .stopping }
            guard state.sessions.count < maxSockets else { return .full }
            state.sessions[ObjectIdentifier(session)] = session
            metrics.sockets.withLock { $0 = state.sessions.count }
            return .admitted
        }
    }

    func unregister(_ session: SyncSession) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.sessions[ObjectIdentifier(session)] = nil
            state.dirty[ObjectIdentifier(session)] = nil
            metrics.sockets.withLock { $0 = state.sessions.count }
            guard state.sessions.isEmpty else { return [] }
            defer { state.drainWaiters = [:] }
            return Array(state.drainWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Every open socket.
    var sessions: [SyncSession] { state.withLock { Array($0.sessions.values) } }

    /// Closes every socket (each told to come back later), and every socket that opens from now
    /// on: the node is stopping.
    func beginStopping() {
        let sessions = state.withLock { state in
            state.stopping = true
            return Array(state.sessions.values)
        }
        for session in sessions { session.shutDown() }
    }

    /// Returns once no socket is open (at once when none is), or when the task is cancelled.
    func drained() async {
        let id = state.withLock { state -> Int in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let open = state.withLock { state -> Bool in
                    guard !state.sessions.isEmpty, !Task.isCancelled else { return false }
                    state.drainWaiters[id] = continuation
                    return true
                }
                if !open { continuation.resume() }
            }
        } onCancel: {
            // Resumed once: by whoever takes it out of the waiters (this, or the last unregister).
            state.withLock { $0.drainWaiters.removeValue(forKey: id) }?.resume()
        }
    }

    // MARK: Frames

    /// A replica commit finished: the sockets with frames waiting for it send them.
    func complete(_ commit: ReplicaCommit) {
        let waiting = state.withLock { state -> [SyncSession] in
            timeline.record(commit)
            defer { state.dirty = [:] }
            return Array(state.dirty.values)
        }
        let (version, _) = timeline.completed
        let memo = FrameMemo()
        Self.wake(waiting) { $0.queueFlush(upTo: version, memo: memo) }
    }

    /// Tells every socket where the replica stands (a heartbeat).
    func beat() {
        let (version, position) = timeline.completed
        Self.wake(sessions) { $0.queueHeartbeat(version: version, position: position) }
    }

    /// Files `event` for `session` under the version it belongs to: sent at once when that
    /// version is finished, otherwise with the version's frame when it finishes.
    func file(_ event: SubscriptionEvent, subscription id: String, generation: Int, for session: SyncSession) {
        let flushNow = state.withLock { state -> Int64? in
            let completed = timeline.completed.version
            let version = max(event.version, completed)
            session.enqueue(event, subscription: id, generation: generation, at: version)
            if version > completed {
                state.dirty[ObjectIdentifier(session)] = session
                return nil
            }
            return completed
        }
        if let flushNow { session.flush(upTo: flushNow) }
    }

    /// Queues frames for `sessions` (`queue` returns whether the session's writer must be
    /// woken) and wakes those writers: on each event loop, a task per batch of its sockets (a
    /// change that reaches 10,000 sockets makes a few dozen tasks, not 10,000; the first batches
    /// are written while later ones are still being queued).
    static func wake(_ sessions: [SyncSession], queue: (SyncSession) -> Bool) {
        let batch = 256
        var byLoop: [ObjectIdentifier: [SyncSession]] = [:]
        func hand(_ sessions: [SyncSession]) {
            guard let loop = sessions.first?.eventLoop else { return }
            loop.execute {
                var cache = SocketWriter.WireCache()
                for session in sessions { session.pump(&cache) }
            }
        }
        for session in sessions where queue(session) {
            let loop = ObjectIdentifier(session.eventLoop)
            byLoop[loop, default: []].append(session)
            if byLoop[loop]!.count == batch { hand(byLoop.removeValue(forKey: loop)!) }
        }
        for sessions in byLoop.values { hand(sessions) }
    }
}
#endif
