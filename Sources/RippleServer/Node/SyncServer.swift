#if Sync
import Logging
import PostgresNIO
import Ripple
import ServiceLifecycle

/// A Ripple Sync node: follows PostgreSQL into its replica (``ReplicaFeed``), evaluates
/// subscriptions there (``SubscriptionHub``), and serves them over WebSocket at `/sync`, with
/// `/health` and Prometheus `/metrics` beside.
///
/// A node is a `Service` (swift-service-lifecycle): run it in your own `ServiceGroup`, which
/// shuts it down gracefully on a signal, or run it alone and cancel its task:
///
/// ```swift
/// let node = try SyncServer(configuration: configuration, logger: logger)
/// let group = ServiceGroup(configuration: .init(services: [node], gracefulShutdownSignals: [.sigterm, .sigint],
///                                               logger: logger))
/// try await group.run()        // until SIGTERM or SIGINT: sockets are told retry_later, then it returns
/// ```
///
/// Inside, the node is a group of parts, shut down in reverse order: Postgres's connections,
/// the feed, the heartbeats, the HTTP listener, and the sockets (told to come back later
/// first). A part that fails stops the node with a ``SyncServerError`` naming it.
///
/// The conversation on `/sync` is the protocol of `RippleSync` (its catalog's protocol page):
/// one `changes` frame per Postgres transaction per socket, resumes by position, heartbeats.
public final class SyncServer: Service, Sendable {
    /// What the node serves, from where, and within which limits.
    public let configuration: SyncServerConfiguration
    /// The replica (this node's SQLite store).
    public let store: Store
    let logger: Logger
    let client: PostgresClient
    let feed: ReplicaFeed
    /// Applies clients' mutations to Postgres.
    let writer: MutationWriter
    let timeline: ReplicaTimeline
    let metrics = SyncMetrics()
    let resumeGate: ResumeGate
    let sessions: SessionRegistry
    /// Verifies the sockets' tokens (`v1.` and JSON Web Tokens).
    public let authenticator: SyncAuthenticator
    let feedStatus = Locked(FeedStatus())
    /// Opens once the feed is ready and the hub made: the HTTP listener starts then.
    let started = Latch()
    /// The hub, made once the cluster is known (resume bases name it).
    let hubs = Locked<SubscriptionHub?>(nil)
    /// The parts running now, by name.
    private let running = Locked<[String]>([])
    /// The port once listening, or why the node will never listen; and who waits for either.
    private let listening = Locked<(port: Int?, failure: (any Error)?, waiters: [CheckedContinuation<Int, any Error>])>((nil, nil, []))

    /// A node as `configuration` says (nothing runs until ``run()``).
    ///
    /// - Throws: ``SyncServerError`` for a secret shorter than 32 bytes (or none, without
    ///   ``SyncServerConfiguration/jwt``), or a JWT key that cannot be read; what opening the
    ///   replica throws.
    public init(configuration: SyncServerConfiguration, logger: Logger? = nil) throws {
        guard configuration.secret.count >= 32 || configuration.secret.isEmpty && configuration.jwt != nil else {
            throw SyncServerError("the token secret must be at least 32 bytes")
        }
        self.configuration = configuration
        let logger = logger ?? Logger(label: "ripple.server", factory: { _ in SwiftLogNoOpLogHandler() })
        self.logger = logger
        do {
            authenticator = SyncAuthenticator(secret: configuration.secret.isEmpty ? nil : configuration.secret,
                                              jwt: try configuration.jwt.map { try JWTVerifier($0, logger: logger) })
        } catch {
            throw SyncServerError("a JWT key cannot be read: \(error)")
        }
        var storeConfiguration = Store.Configuration()
        storeConfiguration.changeLogRetention = .versions(configuration.retainedVersions)
        store = try Store(path: configuration.replicaPath, configuration: storeConfiguration)
        // PostgresNIO's own messages (its pool's connection attempts) only when debugging: the
        // feed's failures are logged by the node itself.
        var postgresLogger = self.logger
        if postgresLogger.logLevel > .debug { postgresLogger.logLevel = max(postgresLogger.logLevel, .error) }
        client = PostgresClient(configuration: configuration.postgres, backgroundLogger: postgresLogger)
        writer = MutationWriter(client: client, rules: configuration.rules, resolvers: configuration.resolvers, logger: self.logger)
        timeline = ReplicaTimeline(capacity: configuration.retainedVersions)
        resumeGate = ResumeGate(perSecond: Double(configuration.resumesPerSecond), maxWaiting: configuration.maxWaitingResumes)
        let sessions = SessionRegistry(timeline: timeline, metrics: metrics, maxSockets: configuration.maxSockets)
        self.sessions = sessions
        var feedConfiguration = FeedConfiguration(tables: configuration.tables)
        feedConfiguration.slot = configuration.slot
        feedConfiguration.publication = configuration.publication
        feedConfiguration.batchSize = configuration.feedBatchSize
        feedConfiguration.catalogCheckInterval = configuration.catalogCheckInterval
        let hubs = hubs
        let writer = writer
        feed = ReplicaFeed(store: store, client: client, configuration: feedConfiguration, onCommit: { commit in
            // Subscriptions with includes send their version's event first (their parts heard
            // the commit), then the sockets make the version's frames.
            hubs.withLock { $0 }?.complete(version: commit.version)
            sessions.complete(commit)
            // Subscriptions over a table made again (or dropped) end, after this version's frame.
            for table in commit.reshapedTables {
                hubs.withLock { $0 }?.endSubscriptions(on: table, reason: "the columns of \(table) changed, or it was dropped: "
                                                       + "subscribe again")
            }
        }, onSchemaChange: { change in
            // Before the commit that applies it: writes describe the table again; subscriptions
            // that cannot go on end first (the others go on through the commit; those over a
            // table made again or gone end after it). Compiling over the table waits until the
            // commit is told (`ReplicaFeed.schema(of:)`), and a subscription compiled before the
            // change was found ends as soon as it subscribes, as those it follows did.
            if case .inPlace(_, let dropped) = change.kind {
                writer.tableChanged(change.table, dropped: dropped)
            } else {
                writer.tableChanged(change.table, dropped: [])
            }
            hubs.withLock { $0 }?.followSchemaChange(change)
        })
    }

    /// The node's parts, in the order they start; they shut down in reverse.
    private var parts: [NodePart] {
        [
            part("the Postgres connection pool", PoolService(client: client)),
            part("the feed from Postgres", FeedService(server: self)),
            part("the heartbeats", HeartbeatService(interval: configuration.heartbeatInterval, sessions: sessions)),
            part("the HTTP listener", HTTPService(server: self, listening: { [weak self] in self?.listened(on: $0) })),
            part("the sockets", SocketDrainService(sessions: sessions, logger: logger)),
        ]
    }

    private func part(_ name: String, _ service: any Service) -> NodePart {
        NodePart(name: name, service: service, running: running, logger: logger)
    }

    /// Runs the node until it is shut down gracefully (by the `ServiceGroup` it runs in) or its
    /// task is cancelled — either way, its sockets are told to come back later and closed, and
    /// its parts stop in reverse order within ``SyncServerConfiguration/stopGrace``.
    ///
    /// - Throws: ``SyncServerError`` naming the part that failed (the feed from Postgres, the
    ///   HTTP listener, …).
    public func run() async throws {
        var group = ServiceGroupConfiguration(services: parts.map(\.configuration), logger: logger)
        group.maximumGracefulShutdownDuration = configuration.stopGrace
        let parts = ServiceGroup(configuration: group)
        // (A task of its own, so that cancelling the node's task shuts it down gracefully
        // instead of cancelling every part at once; it inherits a parent group's shutdown.)
        let running = Task { try await parts.run() }
        let watch = StopWatch(parts: self.running, grace: configuration.stopGrace, logger: logger)
        let outcome = await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await running.result
            } onGracefulShutdown: {
                watch.begin()
            }
        } onCancel: {
            watch.begin()
            Task { await parts.triggerGracefulShutdown() }
        }
        watch.end()
        // Whatever ended the node, nobody waits for a port that will not come.
        switch outcome {
        case .failure(let error) where !(error is CancellationError):
            logger.error("the node stopped: \(error)")
            failListening(error)
            throw error
        case .failure, .success:
            // Stopped as asked. (Parts still running when the stop grace ran out were cancelled,
            // and say `CancellationError`: the stop took longer, it did not fail. A part's own
            // failure is a `SyncServerError` naming it.)
            failListening(CancellationError())
        }
    }

    /// The port the node listens on, once it does.
    ///
    /// - Throws: why the node stopped (or failed) before it listened, whenever asked.
    public var port: Int {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let known = listening.withLock { state -> Result<Int, any Error>? in
                    if let port = state.port { return .success(port) }
                    if let failure = state.failure { return .failure(failure) }
                    state.waiters.append(continuation)
                    return nil
                }
                if let known { continuation.resume(with: known) }
            }
        }
    }

    private func listened(on port: Int) {
        let waiters = listening.withLock { state -> [CheckedContinuation<Int, any Error>] in
            state.port = port
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: port) }
    }

    /// The node will not listen (any more): those waiting for its port, and those who ask
    /// later, hear `error` (a node that listened keeps its port).
    private func failListening(_ error: any Error) {
        let waiters = listening.withLock { state -> [CheckedContinuation<Int, any Error>] in
            if state.port == nil, state.failure == nil { state.failure = error }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }
}
#endif
