#if Sync
import Logging
import PostgresNIO
import Ripple
import ServiceLifecycle

/// The feed as a part of the node: prepares the replica (a fresh copy when it cannot resume),
/// catches up, makes the subscription hub, then follows Postgres until asked to stop.
///
/// When Postgres fails or goes away while following, the node says so on `/health` and tries
/// again, waiting longer each time (up to 5 s): the feed replays from its slot, so nothing is
/// skipped or applied twice. What fails before the node is ready (Postgres refusing, a slot
/// that cannot be made) ends the node, with the error naming the feed.
struct FeedService: Service {
    let server: SyncServer

    func run() async throws {
        try await untilGracefulShutdown { [server] in
            try await Self.start(server)
            try await Self.follow(server)
        }
    }

    /// Prepares the feed and the hub, and catches up once.
    private static func start(_ server: SyncServer) async throws {
        let (feed, store, timeline) = (server.feed, server.store, server.timeline)
        try await feed.prepare()
        try await server.writer.prepare()
        try await timeline.load(from: store)
        try await feed.catchUp()
        let cluster = try await feed.clusterIdentity()
        if try await feed.slotRetentionLimit() == "-1" {
            server.logger.warning("""
                max_slot_wal_keep_size is -1: while this node is down, its slot keeps all of Postgres's WAL; set a limit \
                (a node whose slot passes it starts again from a fresh copy, and its clients get snapshots)
                """)
        }
        let hub = SubscriptionHub(store: store, rules: server.configuration.rules, cluster: cluster)
        // The replica stands still until the feed follows (below): every version so far is
        // finished, as subscriptions with includes need to know.
        hub.complete(version: try await store.asyncCurrentVersion())
        server.hubs.withLock { $0 = hub }
        let read = try await feed.flushedPosition()
        server.feedStatus.withLock { ($0.readThrough, $0.caughtUpAt, $0.ready) = (read, .now, true) }
        if timeline.completed.version == 0 {
            // A replica with no commit yet (nothing synced moved since its copy): it stands
            // where the feed read through.
            timeline.record(ReplicaCommit(version: try await store.asyncCurrentVersion(), position: await feed.consistentFrom, isCopy: true))
        }
        server.started.open()
    }

    /// Follows Postgres (``ReplicaFeed/follow(pollInterval:activePollInterval:read:progress:)``), and
    /// starts it again when it fails.
    private static func follow(_ server: SyncServer) async throws {
        let (configuration, feedStatus) = (server.configuration, server.feedStatus)
        let delay = Locked(Duration.milliseconds(50))
        while true {
            do {
                // A feed that makes no progress for `feedStallLimit` (5 minutes) is given up on
                // and started again: a wait for a pooled connection was seen never to end under
                // repeated Postgres restarts (each read itself has an answer limit). Cheaper than
                // bounding each lease on the poll's hot path. Progress is each look at Postgres
                // answered and each transaction applied, so a long catch-up is never cut short.
                let limit = configuration.feedStallLimit
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        try await server.feed.follow(pollInterval: configuration.pollInterval,
                                                     activePollInterval: configuration.activePollInterval,
                                                     read: { position in
                            feedStatus.withLock { ($0.readThrough, $0.caughtUpAt, $0.failure) = (position, .now, nil) }
                            delay.withLock { $0 = .milliseconds(50) }
                        }, progress: {
                            feedStatus.withLock { $0.progressAt = .now }
                        })
                    }
                    group.addTask {
                        let started = ContinuousClock.now
                        while true {
                            try await Task.sleep(for: min(.seconds(5), limit / 4))
                            let last = feedStatus.withLock { $0.progressAt } ?? started
                            if ContinuousClock.now - max(last, started) > limit {
                                throw SyncServerError("the feed made no progress for \(limit)")
                            }
                        }
                    }
                    defer { group.cancelAll() }
                    try await group.next()
                }
            } catch where !Task.isCancelled {
                let wait = delay.withLock { value -> Duration in
                    defer { value = min(value * 2, .seconds(5)) }
                    return value
                }
                let why = Self.told(error)
                feedStatus.withLock { $0.failure = why }
                server.metrics.feedRestarts.withLock { $0 += 1 }
                server.logger.warning("the feed failed; trying again in \(wait): \(why)")
                try await Task.sleep(for: wait)
            }
        }
    }

    /// `error` as the log and `/health` tell it: a Postgres error by its kind and SQLSTATE
    /// (`PSQLError`'s own description says nothing; its message and DETAIL can hold values, and
    /// stay out), anything else as it describes itself.
    static func told(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let state = error.serverInfo?[.sqlState] { return "Postgres error (\(error.code), SQLSTATE \(state))" }
        return "Postgres error (\(error.code))"
    }
}
#endif
