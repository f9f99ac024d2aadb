#if Sync
import PostgresNIO
import Ripple
import ServiceLifecycle

/// The node's Postgres connection pool as a part of the node. The pool's `run()` returns once
/// its last connection closed, and a connection being made when the node stops is not cancelled:
/// it ends at its connect timeout (10 s), and a machine under load was seen to hold a stopping
/// node up to 15 s past its grace that way. Once told to stop (a graceful shutdown, or
/// cancelled), the part waits for the pool at most ``letGoAfter``; the pool closes the rest on
/// its own (its run was cancelled: nothing new is made).
struct PoolService: Service {
    let client: PostgresClient
    /// How long a stopping node waits for its pool to close.
    static let letGoAfter = Duration.seconds(1)

    func run() async throws {
        let pool = Task { await client.run() }
        let done = Locked<CheckedContinuation<Void, Never>?>(nil)
        @Sendable func finish() { done.withLock { $0.take() }?.resume() }
        @Sendable func letGo() {
            pool.cancel()
            Task {
                try? await Task.sleep(for: Self.letGoAfter)
                finish()
            }
        }
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { continuation in
                    done.withLock { $0 = continuation }
                    Task {
                        await pool.value
                        finish()
                    }
                }
            } onGracefulShutdown: {
                letGo()
            }
        } onCancel: {
            letGo()
        }
    }
}
#endif
