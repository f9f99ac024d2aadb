import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import PostgresNIO
import Ripple
import RippleSync

/// A Ripple Sync node: follows PostgreSQL into its replica (``ReplicaFeed``), evaluates
/// subscriptions there (``SubscriptionHub``), and serves them over WebSocket at `/sync`, with
/// `/health` and plain-text `/metrics` beside.
///
/// ```swift
/// let server = try SyncServer(configuration: configuration)
/// try await server.run()          // until the task is cancelled
/// ```
///
/// The conversation on `/sync` is the protocol of `RippleSync` (its catalog's protocol page):
/// one `changes` frame per Postgres transaction per socket, resumes by position, heartbeats.
public final class SyncServer: Sendable {
    public let configuration: SyncServerConfiguration
    /// The replica (this node's SQLite store).
    public let store: Store
    let client: PostgresClient
    let feed: ReplicaFeed
    /// Applies clients' mutations to Postgres.
    let writer: MutationWriter
    let timeline: ReplicaTimeline
    let logger: Logger
    let metrics = SyncMetrics()
    let resumeGate: ResumeGate
    /// The hub, made once the cluster is known (resume bases name it).
    private let hubs = Locked<SubscriptionHub?>(nil)
    /// Sockets with frames waiting for a version to finish, and every open socket.
    private let frames = Locked(FrameState())
    /// The port once listening, or why the node will never listen; and who waits for either.
    private let listening = Locked<(port: Int?, failure: (any Error)?, waiters: [CheckedContinuation<Int, any Error>])>((nil, nil, []))
    private let feedStatus = Locked(FeedStatus())

    struct FrameState {
        var dirty: [ObjectIdentifier: SyncSession] = [:]
        var sessions: [ObjectIdentifier: SyncSession] = [:]
        /// Set once the node starts stopping: a socket that opens from then on (accepted just
        /// before the listener closed) is told to come back later instead of staying open, which
        /// would keep the node from ever stopping.
        var stopping = false
    }

    /// Whether a socket may stay.
    enum Admission { case admitted, full, stopping }

    struct FeedStatus {
        var readThrough = PGOutput.LSN(0)
        var caughtUpAt: ContinuousClock.Instant?
        /// When the feed last made progress (a look answered, a transaction applied).
        var progressAt: ContinuousClock.Instant?
        var ready = false
        var failure: String?
    }

    /// A server as `configuration` says (nothing runs until ``run()``).
    ///
    /// - Throws: ``SyncServerError`` for a secret shorter than 32 bytes; what opening the
    ///   replica throws.
    public init(configuration: SyncServerConfiguration, logger: Logger? = nil) throws {
        guard configuration.secret.count >= 32 else { throw SyncServerError("the token secret must be at least 32 bytes") }
        self.configuration = configuration
        self.logger = logger ?? Logger(label: "ripple.server", factory: { _ in SwiftLogNoOpLogHandler() })
        var storeConfiguration = Store.Configuration()
        storeConfiguration.changeLogRetention = .versions(configuration.retainedVersions)
        store = try Store(path: configuration.replicaPath, configuration: storeConfiguration)
        // PostgresNIO's own log at errors only: it warns of a lease before run() starts, which
        // the node does at once (the feed's failures are logged by the node itself).
        var postgresLogger = self.logger
        // PostgresNIO's own messages (its pool's connection attempts) only when debugging.
        if postgresLogger.logLevel > .debug { postgresLogger.logLevel = max(postgresLogger.logLevel, .error) }
        client = PostgresClient(configuration: configuration.postgres, backgroundLogger: postgresLogger)
        writer = MutationWriter(client: client, rules: configuration.rules, resolvers: configuration.resolvers, logger: self.logger)
        timeline = ReplicaTimeline(capacity: configuration.retainedVersions)
        resumeGate = ResumeGate(perSecond: Double(configuration.resumesPerSecond), maxWaiting: configuration.maxWaitingResumes)
        var feedConfiguration = FeedConfiguration(tables: configuration.tables)
        feedConfiguration.slot = configuration.slot
        feedConfiguration.publication = configuration.publication
        feedConfiguration.batchSize = configuration.feedBatchSize
        let timeline = timeline
        let frames = frames
        let hubs = hubs
        feed = ReplicaFeed(store: store, client: client, configuration: feedConfiguration) { commit in
            Self.complete(commit, timeline: timeline, frames: frames)
            // Subscriptions compiled for columns that are no more end, after this version's frame.
            for table in commit.reshapedTables {
                hubs.withLock { $0 }?.endSubscriptions(on: table, reason: "the columns of \(table) changed, or it was dropped: "
                                                       + "subscribe again")
            }
        }
    }

    /// The port the server listens on, once it does.
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

    var hub: SubscriptionHub? { hubs.withLock { $0 } }

    /// Runs the node until the task is cancelled: connects to Postgres, prepares the feed (a
    /// fresh copy when the replica cannot resume), catches up, then listens and follows.
    ///
    /// - Throws: what Postgres, the feed or the listener throws (`CancellationError` when
    ///   cancelled).
    public func run() async throws {
        // Stopping, the node closes its sockets itself (each told to come back later): the
        // HTTP server's shutdown waits for them, and a client connected to a node that stops
        // must not hold it. Whatever still runs after ``SyncServerConfiguration/stopGrace``
        // is left behind, named in a warning: the node stops when told to.
        let parts = Task { try await self.runParts() }
        // The first outcome (the parts' end, or the grace running out) ends run(), whichever
        // comes first and whether or not run() is waiting yet.
        let ending = FirstOutcome<Result<Void, any Error>>()
        Task { ending.finish(await parts.result) }
        try await withTaskCancellationHandler {
            try await ending.value.get()
        } onCancel: {
            beginStopping()
            parts.cancel()
            Task { [configuration, logger] in
                try? await Task.sleep(for: configuration.stopGrace)
                guard !ending.isDecided else { return }
                let busy = frames.withLock { Array($0.sessions.values) }.map(\.state)
                logger.warning("""
                    stopping: still busy after \(configuration.stopGrace), left behind: \(busy.count) sockets\
                    \(busy.isEmpty ? "" : " (" + busy.joined(separator: "; ") + ")")\
                    \(feedStatus.withLock { $0.failure }.map { "; the feed: \($0)" } ?? "")
                    """)
                ending.finish(.failure(CancellationError()))
            }
        }
    }

    private func runParts() async throws {
        // Postgres's connections outlive the node's other parts: a socket still applying a push
        // when the node stops finishes it (and ends) before the pool goes, instead of waiting
        // for a connection from a pool that is gone.
        let postgres = Task { await self.client.run() }
        let outcome: Result<Void, any Error>
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                defer { group.cancelAll() }
                try await self.start()
                group.addTask { try await self.follow() }
                group.addTask { try await self.beat() }
                group.addTask { try await self.serve() }
                try await group.next()
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        // Whatever ended the node, nobody waits for a port that will not come.
        if case .failure(let error) = outcome { failListening(error) } else { failListening(CancellationError()) }
        postgres.cancel()
        await postgres.value
        try outcome.get()
    }

    /// Prepares the feed and the hub, and catches up once.
    private func start() async throws {
        try await feed.prepare()
        try await writer.prepare()
        try timeline.load(from: store)
        try await feed.catchUp()
        let cluster = try await feed.clusterIdentity()
        if try await feed.slotRetentionLimit() == "-1" {
            logger.warning("""
                max_slot_wal_keep_size is -1: while this node is down, its slot keeps all of Postgres's WAL; set a limit \
                (a node whose slot passes it starts again from a fresh copy, and its clients get snapshots)
                """)
        }
        hubs.withLock { $0 = SubscriptionHub(store: store, rules: configuration.rules, cluster: cluster) }
        let read = try await feed.flushedPosition()
        feedStatus.withLock { ($0.readThrough, $0.caughtUpAt, $0.ready) = (read, .now, true) }
        if timeline.completed.version == 0 {
            // A replica with no commit yet (nothing synced moved since its copy): it stands
            // where the feed read through.
            timeline.record(ReplicaCommit(version: try store.currentVersion(), position: await feed.consistentFrom, isCopy: true))
        }
    }

    /// Follows Postgres (``ReplicaFeed/follow(pollInterval:activePollInterval:read:progress:)``). When Postgres fails or goes
    /// away, the node says so on `/health` and tries again, waiting longer each time (up to
    /// 5 s): the feed replays from its slot, so nothing is skipped or applied twice.
    private func follow() async throws {
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
                        try await self.feed.follow(pollInterval: self.configuration.pollInterval,
                                                   activePollInterval: self.configuration.activePollInterval,
                                                   read: { [feedStatus = self.feedStatus] position in
                            feedStatus.withLock { ($0.readThrough, $0.caughtUpAt, $0.failure) = (position, .now, nil) }
                            delay.withLock { $0 = .milliseconds(50) }
                        }, progress: { [feedStatus = self.feedStatus] in
                            feedStatus.withLock { $0.progressAt = .now }
                        })
                    }
                    group.addTask { [feedStatus = self.feedStatus] in
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
                feedStatus.withLock { $0.failure = "\(error)" }
                metrics.feedRestarts.withLock { $0 += 1 }
                logger.warning("the feed failed; trying again in \(wait): \(error)")
                try await Task.sleep(for: wait)
            }
        }
    }

    /// Tells idle sockets where they stand, every heartbeat interval.
    private func beat() async throws {
        while true {
            try await Task.sleep(for: configuration.heartbeatInterval)
            let (version, position) = timeline.completed
            Self.wake(frames.withLock({ Array($0.sessions.values) })) { $0.queueHeartbeat(version: version, position: position) }
        }
    }

    // MARK: Frames

    /// A replica commit finished: the sockets with frames waiting for it send them.
    private static func complete(_ commit: ReplicaCommit, timeline: ReplicaTimeline, frames: Locked<FrameState>) {
        let waiting = frames.withLock { state -> [SyncSession] in
            timeline.record(commit)
            defer { state.dirty = [:] }
            return Array(state.dirty.values)
        }
        let (version, _) = timeline.completed
        let memo = FrameMemo()
        wake(waiting) { $0.queueFlush(upTo: version, memo: memo) }
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

    /// Files `event` for `session` under the version it belongs to: sent at once when that
    /// version is finished, otherwise with the version's frame when it finishes.
    func file(_ event: SubscriptionEvent, subscription id: String, generation: Int, for session: SyncSession) {
        let flushNow = frames.withLock { state -> Int64? in
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

    /// `results` with the position a socket of this node reaches once its frames contain them.
    ///
    /// The writer names a position just past each result's commit; a socket's positions are
    /// those of replica commits (and a rejected mutation's commit changes no synced table: it
    /// makes none). So, once the feed has read past the commit (boundedly waited for), each
    /// result takes the newest finished replica position: the client reaches it with the frames
    /// it already has or that are on their way, without waiting for another commit. A feed that
    /// lags beyond the wait leaves the writer's position (reached at the next synced commit).
    func positioned(_ results: [MutationResult]) async -> [MutationResult] {
        guard let committed = results.compactMap({ $0.lsn.flatMap(PGOutput.LSN.init) }).max() else { return results }
        // (Longer than a read's answer limit: a feed that lost Postgres for a moment and tries
        // again still names a position in time. The writer's own position would only be
        // reached at the next synced commit, which a quiet server may not have: the client
        // would keep the mutation waiting. Seen in the sync stress checker.)
        let deadline = ContinuousClock.now + max(configuration.resumeCatchUpTimeout, .seconds(40))
        while feedStatus.withLock({ $0.readThrough }) < committed {
            guard ContinuousClock.now < deadline, (try? await Task.sleep(for: .milliseconds(1))) != nil else { return results }
        }
        let position = timeline.completed.position.description
        return results.map { result in
            var positioned = result
            if positioned.lsn != nil { positioned.lsn = position }
            return positioned
        }
    }

    /// The position of a finished replica version (for labelling frames).
    func position(of version: Int64) -> PGOutput.LSN { timeline.position(of: version) }

    /// Closes every socket (each told to come back later), and every socket that opens from now
    /// on: the node is stopping.
    package func beginStopping() {
        let sessions = frames.withLock { state in
            state.stopping = true
            return Array(state.sessions.values)
        }
        for session in sessions { session.shutDown() }
    }

    func register(_ session: SyncSession) -> Admission {
        frames.withLock { state in
            guard !state.stopping else { return .stopping }
            guard state.sessions.count < configuration.maxSockets else { return .full }
            state.sessions[ObjectIdentifier(session)] = session
            metrics.sockets.withLock { $0 = state.sessions.count }
            return .admitted
        }
    }

    func unregister(_ session: SyncSession) {
        frames.withLock { state in
            state.sessions[ObjectIdentifier(session)] = nil
            state.dirty[ObjectIdentifier(session)] = nil
            metrics.sockets.withLock { $0 = state.sessions.count }
        }
    }

    /// The schema of a synced table, as the replica holds it now.
    func schema(of table: String) async -> SyncedTableSchema? { await feed.schema(of: table) }

    // MARK: HTTP

    private func serve() async throws {
        let router = Router()
        router.get("/health") { _, _ -> Response in
            let status = self.health()
            return Response(status: status.ok ? .ok : .serviceUnavailable,
                            headers: [.contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: status.text)))
        }
        router.get("/metrics") { _, _ -> Response in
            let text = await self.metricsText()
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        // The live-list page (see ``LiveListPage``) and the tables it may choose from.
        let page: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-cache",
                                .contentSecurityPolicy: "default-src 'self'; style-src 'self' 'unsafe-inline'"]
        router.get("/") { _, _ -> Response in
            Response(status: .ok, headers: page, body: .init(byteBuffer: ByteBuffer(bytes: LiveListPage.html)))
        }
        router.get("/live-list.js") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/javascript; charset=utf-8", .cacheControl: "no-cache"],
                     body: .init(byteBuffer: ByteBuffer(bytes: LiveListPage.script)))
        }
        router.get("/tables") { _, _ -> Response in
            var schemas: [SyncedTableSchema] = []
            for table in self.configuration.tables {
                if let schema = await self.schema(of: table) { schemas.append(schema) }
            }
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-cache"],
                            body: .init(byteBuffer: ByteBuffer(string: LiveListPage.tablesJSON(schemas))))
        }
        let sockets = Router(context: SocketRequestContext.self)
        sockets.ws("/sync") { inbound, _, context in
            // (Frames are written by the session's own writer, straight into the channel.)
            let session = SyncSession(server: self, channel: context.requestContext.channel)
            try await session.run(inbound: inbound)
        }
        let ws = WebSocketServerConfiguration(maxFrameSize: max(configuration.maxMessageBytes * 4, 1 << 16),
                                              autoPing: .enabled(timePeriod: .seconds(30)), closeTimeout: .seconds(2),
                                              // Text that is not UTF-8 closes the socket with 1007.
                                              validateUTF8: true)
        let app = Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: sockets, configuration: .init(ws: ws)),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "ripple-server",
                                 availableConnectionsDelegate: Self.connectionLimit().map { .maximum($0, logger: logger) }),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                let waiters = self.listening.withLock { state -> [CheckedContinuation<Int, any Error>] in
                    state.port = port
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume(returning: port) }
            },
            logger: logger)
        try await app.run()
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

    private func health() -> (ok: Bool, text: String) {
        let status = feedStatus.withLock { $0 }
        guard status.ready else { return (false, "starting\n") }
        if let failure = status.failure { return (false, "failing: \(failure)\n") }
        return (true, "ok\n")
    }

    /// The node's figures in Prometheus's text format.
    public func metricsText() async -> String {
        let status = feedStatus.withLock { $0 }
        let flushed = (try? await feed.flushedPosition()) ?? status.readThrough
        let lagBytes = flushed.value > status.readThrough.value ? flushed.value - status.readThrough.value : 0
        let behind = lagBytes == 0 ? Duration.zero : status.caughtUpAt.map { ContinuousClock.now - $0 } ?? .zero
        let lagSeconds = Double(behind.components.seconds) + Double(behind.components.attoseconds) / 1e18
        let (version, position) = timeline.completed
        var lines: [String] = []
        func add(_ name: String, _ help: String, _ type: String, _ value: String) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
            lines.append("\(name) \(value)")
        }
        add("ripple_sockets", "Open WebSocket connections.", "gauge", String(metrics.sockets.withLock { $0 }))
        add("ripple_subscriptions", "Subscriptions held by open sockets.", "gauge", String(metrics.subscriptions.withLock { $0 }))
        add("ripple_live_queries", "Live queries evaluating them (equal subscriptions share one).", "gauge",
            String(hub?.liveQueryCount ?? 0))
        add("ripple_sent_bytes_total", "Bytes of frames sent to clients.", "counter", String(metrics.sent.withLock { $0.bytes }))
        add("ripple_sent_frames_total", "Frames sent to clients.", "counter", String(metrics.sent.withLock { $0.frames }))
        add("ripple_dropped_sockets_total", "Sockets dropped for not reading their frames.", "counter",
            String(metrics.droppedSockets.withLock { $0 }))
        add("ripple_refused_sockets_total", "Sockets refused beyond the configured limit.", "counter",
            String(metrics.refusedSockets.withLock { $0 }))
        add("ripple_feed_restarts_total", "Times the feed failed (Postgres gone, no progress) and started again.", "counter",
            String(metrics.feedRestarts.withLock { $0 }))
        add("ripple_replica_version", "The replica's newest finished version.", "gauge", String(version))
        add("ripple_replica_position", "The Postgres position the replica stands at (as a number).", "gauge", String(position.value))
        add("ripple_replica_lag_bytes", "WAL Postgres flushed that the feed has not read yet.", "gauge", String(lagBytes))
        add("ripple_replica_lag_seconds", "How long the feed has been behind (0 when caught up).", "gauge", String(lagSeconds))
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The node's counters.
final class SyncMetrics: Sendable {
    let sockets = Locked(0)
    let subscriptions = Locked(0)
    let sent = Locked((frames: 0, bytes: 0))
    let droppedSockets = Locked(0)
    let refusedSockets = Locked(0)
    let feedRestarts = Locked(0)
}
