#if Sync
import ServiceLifecycle

/// The heartbeats as a part of the node: every interval, each socket hears where the replica
/// stands (a socket with nothing else to hear learns it is still up to date).
struct HeartbeatService: Service {
    let interval: Duration
    let sessions: SessionRegistry

    func run() async throws {
        try await untilGracefulShutdown { [interval, sessions] in
            while true {
                try await Task.sleep(for: interval)
                sessions.beat()
            }
        }
    }
}
#endif
