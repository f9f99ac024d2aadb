#if Sync
import RippleSync

extension SyncServer {
    /// The node's subscriptions, for an app that runs the node in its own process and subscribes
    /// without a socket (a test, a benchmark, a server-side consumer): `nil` until the node has
    /// followed Postgres far enough to know its cluster (its first ``run()`` steps).
    public var subscriptionHub: SubscriptionHub? { hubs.withLock { $0 } }
}
#endif
