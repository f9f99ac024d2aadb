#if Sync
import Logging
import Ripple
import ServiceLifecycle

/// One part of a node run by its `ServiceGroup`: a service and the name an error gives it.
///
/// A part that throws stops the group with ``SyncServerError`` naming it ("the feed from
/// Postgres stopped: …"); a part that ends without being asked to stops it the same way.
/// Cancellation stays cancellation (the group is stopping).
struct NodePart: Service {
    let name: String
    let service: any Service
    /// The node's parts running now, by name (what a stop that takes long still waits for).
    let running: Locked<[String]>
    let logger: Logger

    func run() async throws {
        running.withLock { $0.append(name) }
        defer {
            running.withLock { names in names.firstIndex(of: name).map { _ = names.remove(at: $0) } }
            if Task.isShuttingDownGracefully || Task.isCancelled { logger.info("stopping: \(name) stopped") }
        }
        do {
            try await service.run()
        } catch let error as CancellationError {
            throw error
        } catch where Task.isCancelled {
            // Cancelled (the node's stop grace ran out, or its task was cancelled): what the part
            // threw on its way out — a Postgres connection its pool closed under it — is the
            // stop, not a failure.
            throw CancellationError()
        } catch {
            throw SyncServerError(part: name, stoppedBy: error)
        }
        if !Task.isCancelled, !Task.isShuttingDownGracefully {
            throw SyncServerError(part: name, stoppedBy: SyncServerError("it ended by itself"))
        }
    }

    /// The part as its group takes it: the group stops when it ends or throws.
    var configuration: ServiceGroupConfiguration.ServiceConfiguration {
        .init(service: self, successTerminationBehavior: .cancelGroup, failureTerminationBehavior: .cancelGroup,
              serviceName: name)
    }
}

/// Runs `body` until it ends or the service is asked to shut down gracefully (then `body` is
/// cancelled and this returns normally): the shape of a part whose work is a loop.
func untilGracefulShutdown(_ body: @escaping @Sendable () async throws -> Void) async throws {
    do {
        try await cancelWhenGracefulShutdown(body)
    } catch where Task.isShuttingDownGracefully {
        // Asked to stop: whatever the cancelled work threw on its way out is not a failure.
    }
}
#endif
