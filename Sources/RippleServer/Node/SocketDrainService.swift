#if Sync
import Logging
import ServiceLifecycle

/// The node's sockets as a part of the node, for its graceful shutdown: asked to shut down
/// (first of the parts: it is the last in the group), it tells every socket to come back later
/// (`retry_later`, then the socket closes) and returns once none is open. Sockets that open
/// meanwhile (accepted before the listener closes) are told the same. Then the HTTP listener
/// closes, the heartbeats and the feed stop, and Postgres's connections go last, so that a
/// socket finishing a push still has them.
struct SocketDrainService: Service {
    let sessions: SessionRegistry
    let logger: Logger

    func run() async throws {
        try await gracefulShutdown()
        sessions.beginStopping()
        await sessions.drained()
        if Task.isCancelled {
            // The group's grace ran out (``SyncServerConfiguration/stopGrace``).
            let busy = sessions.sessions.map(\.state)
            logger.warning("""
                stopping: sockets still open when the stop grace ran out, left to be cancelled: \(busy.count)\
                \(busy.isEmpty ? "" : " (" + busy.joined(separator: "; ") + ")")
                """)
        }
    }
}
#endif
