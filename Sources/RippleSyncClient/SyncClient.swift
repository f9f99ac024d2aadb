#if Sync
import Foundation
import Logging
import Ripple
import RippleDiff
import RippleSync
import WSClient

/// A Ripple Sync client: keeps the rows of its subscriptions in a local Ripple store, so that
/// the app's own live queries over that store fire as the server's data changes, and hands
/// remote live queries the server's changesets directly.
///
/// ```swift
/// let client = SyncClient(url: "ws://127.0.0.1:8080/sync", store: store) { try await fetchToken() }
/// await client.start()
/// try await client.subscribe("open-todos", QueryDescription(table: "todos",
///     filter: .compare(column: "done", op: .equal, value: .bool(false))))
/// // The app reads `todos` from `store` as usual; its live queries follow the server.
/// ```
///
/// The client reconnects by itself (with backoff) and resumes each subscription from the
/// position it reached: one changeset brings it up to date, or a snapshot when the server
/// cannot (see the protocol article of `RippleSync`, *The sync protocol*). Each `changes` frame
/// is applied in one local write, so a Postgres transaction reaches the app's live queries whole.
/// The same write keeps each subscription's result and position in the store (a snapshot's
/// result in the write right after): after a relaunch,
/// a new client over the same file that subscribes again under the same ids with the same
/// queries resumes them the same way (see ``subscribe(_:_:)-(_,QueryDescription)``).
public actor SyncClient {
    /// The local store the rows are kept in.
    public nonisolated let store: Store
    /// The server's `/sync` address (`ws://…` or `wss://…`): the first of ``urls``.
    public nonisolated var url: String { urls[0] }
    /// The addresses of the nodes the client may connect to (one, usually: a load balancer's).
    /// Each connection attempt takes the next, so a client whose node goes away reconnects to
    /// another and resumes there (nodes of one Postgres cluster share positions).
    public nonisolated let urls: [String]
    let token: @Sendable () async throws -> String
    private let logger: Logger
    /// What happens on the connection, for an app's status line and for tests. It keeps the
    /// newest 10,000 events not read yet; iterate it from one task at a time.
    public nonisolated let events: AsyncStream<SyncClientEvent>
    private let eventSink: AsyncStream<SyncClientEvent>.Continuation

    /// The delay before reconnecting after a connection the server had welcomed; after each
    /// attempt it did not welcome, the delay doubles, up to ``maxBackoff``. Each wait is the
    /// delay times a random factor between 0.5 and 1.
    public var minBackoff: Duration {
        get { machine.timing.minBackoff }
        set { machine.timing.minBackoff = newValue }
    }
    /// The longest delay between two attempts to connect.
    public var maxBackoff: Duration {
        get { machine.timing.maxBackoff }
        set { machine.timing.maxBackoff = newValue }
    }

    /// Sets the reconnect delays: `min` after a connection that was welcomed, doubling up to `max`.
    public func setBackoff(min: Duration, max: Duration) { (minBackoff, maxBackoff) = (min, max) }

    /// How long a connection may take to be welcomed before the client gives up on it and
    /// connects again: a server that accepted the socket but never answers (stopping at that
    /// moment, or wedged) must not hold the client. 10 s.
    public var handshakeTimeout: Duration {
        get { machine.timing.handshakeTimeout }
        set { machine.timing.handshakeTimeout = newValue }
    }
    /// How long a welcomed connection may stay silent: after half of it the client pings (the
    /// server answers `pong`), after all of it the client gives up on the connection and
    /// connects again. 30 s.
    public var silenceTimeout: Duration {
        get { machine.timing.silenceTimeout }
        set { machine.timing.silenceTimeout = newValue }
    }

    /// Sets ``handshakeTimeout`` and ``silenceTimeout``.
    public func setTimeouts(handshake: Duration, silence: Duration) { (handshakeTimeout, silenceTimeout) = (handshake, silence) }

    /// The connection's phase, attempts, timeouts and pushes: the actor performs its actions.
    private var machine: ConnectionState<SystemRandomNumberGenerator>
    private var subscriptions: [String: ClientSubscription] = [:]
    private var outbound: WebSocketOutboundWriter?
    private var connection: Task<Void, Never>?
    /// Follows the store's commits, to push what the app wrote.
    private var follower: Task<Void, Never>?
    /// The newest position the server named (a frame, a heartbeat).
    private var serverPosition: SyncPosition?
    /// Whether results are kept that wait for the rows that contain them.
    private var awaitingRows = false
    /// The last answer the client pushes again after (for ``connectionState()``).
    private var lastAgain = ""
    /// How long mutations may wait unanswered on a welcomed connection before the client sends
    /// them again from the first (a push or its answer lost in a reconnect or a node restart).
    /// Sending again is always safe: the node applies each mutation once and answers a repeat
    /// with the stored result.
    static let pushRetryInterval: Duration = .seconds(5)
    private var nextRemote = 0
    /// Whether ``start()`` is under way (it waits for the store; a second call meanwhile returns).
    private var starting = false
    /// Whether ``pushPending()`` is reading the outbox, and whether it was called again meanwhile
    /// (the reading call then reads again before it stops).
    private var readingOutbox = false
    private var pushRequested = false
    /// The client's last store call: each store call runs after the one before it ended, so the
    /// store sees the calls in the order the actor made them.
    private var lastStoreCall: Task<Void, Never>?
    /// Who waits for a subscription's first rows to be in the local store (a sectioned list):
    /// resumed with `true` once they are, `false` when it ends first or the waiter is cancelled.
    private var rowWaiters: [String: [Int: CheckedContinuation<Bool, Never>]] = [:]
    private var nextWaiter = 0
    /// What the client received (see ``traffic()``).
    private var received = SyncClientTraffic()

    struct ClientSubscription {
        var query: QueryDescription
        /// The query as the local store keeps it (see ``StoredSubscriptions``); `nil` for a
        /// remote query, which the store does not keep.
        var storedQuery: String?
        var remote: AsyncThrowingStream<RemoteQueryEvent, any Error>.Continuation?
        var result: WireResult?
        var isFirstLocal = true
        /// The connection it was subscribed on (`nil`: not yet on the current one).
        var sentOn: Int?
        /// Whether its first frame on the current connection arrived: until then its position
        /// stays where its rows are (a frame or heartbeat for the socket does not move it).
        var live = false
    }

    /// A subscription's result as the server last sent it, includes and all, and its position.
    struct WireResult {
        var tree: WireTree
        var lsn: String

        var basis: String { tree.basis }
        var columns: [String] { tree.columns }
        var types: [String] { tree.types }
        var key: [Int] { tree.key }
        var rows: [[WireValue]] { tree.rows }
    }

    /// A client of the server at `url` keeping rows in `store`; `token` gives a signed token
    /// each time the client connects (fetch a fresh one when it expires).
    public init(url: String, store: Store, logger: Logger? = nil, token: @escaping @Sendable () async throws -> String) {
        self.init(urls: [url], store: store, logger: logger, token: token)
    }

    /// A client of the nodes at `urls` (of one Postgres cluster), keeping rows in `store`:
    /// each connection attempt goes to the next address in turn, and the client resumes its
    /// subscriptions on whichever node it reaches. `token` as for ``init(url:store:logger:token:)``.
    ///
    /// - Precondition: `urls` is not empty.
    public init(urls: [String], store: Store, logger: Logger? = nil, token: @escaping @Sendable () async throws -> String) {
        precondition(!urls.isEmpty, "a SyncClient needs at least one address")
        self.urls = urls
        self.store = store
        self.token = token
        self.logger = logger ?? Logger(label: "ripple.sync.client", factory: { _ in SwiftLogNoOpLogHandler() })
        machine = ConnectionState(timing: .init(pushRetryInterval: Self.pushRetryInterval), addresses: urls.count,
                                  random: SystemRandomNumberGenerator(), now: .now)
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(10_000))
    }

    /// Connects, and keeps connecting until ``stop()``.
    ///
    /// - Throws: what preparing the local store throws.
    public func start() async throws {
        guard connection == nil, !starting else { return }
        starting = true
        defer { starting = false }
        let version = try await storeCall { store in try await store.asyncCurrentVersion() }
        awaitingRows = try await write(tag: nil) { db in
            try LocalRows.prepare(db)
            try Outbox.prepare(db)
            try StoredSubscriptions.prepare(db)
            try Outbox.refreshCaptures(db)
            // What other stores on the file wrote while no client ran: one mutation.
            try Outbox.seal(db)
            return try Outbox.hasResultsWaiting(db)
        }
        Self.sealing.withLock { stores in
            // (A store released earlier may have left its identifier to this one: only a live
            // store of that identifier is this one.)
            if let known = stores[ObjectIdentifier(store)], known.store === store { return }
            stores = stores.filter { $0.value.store != nil }
            stores[ObjectIdentifier(store)] = SealedStore(store: store)
            // Each local commit's captured writes become one mutation, in that commit.
            _ = store.addCommitParticipant { db, origin in
                if origin != .sync { try Outbox.seal(db) }
            }
        }
        follower = Task { [store] in
            do {
                for try await commit in store.commits(after: version) where commit.origin != .sync {
                    await self.pushPending()
                }
            } catch {
                self.eventSink.yield(.localFailure(message: "the client stopped following the store's commits: \(error)"))
            }
        }
        connection = Task { await self.connectLoop() }
    }

    /// The stores whose commits already seal mutations (one participant per store; its lock is a
    /// leaf: taken alone), held weakly: a store released gives its place up.
    private static let sealing = Locked<[ObjectIdentifier: SealedStore]>([:])

    /// A store whose commits seal mutations, as ``sealing`` remembers it.
    private final class SealedStore: @unchecked Sendable {   // `store` is written once, at init
        weak var store: Store?
        init(store: Store) { self.store = store }
    }

    /// Disconnects and stops reconnecting; the local rows stay.
    public func stop() async {
        let task = connection
        connection = nil
        _ = machine.stopRequested()
        follower?.cancel()
        follower = nil
        task?.cancel()
        await task?.value
    }

    /// How many of the app's mutations the outbox keeps: not yet pushed, pushed without a
    /// result, or waiting for the rows that contain them.
    public func pendingMutations() async throws -> Int {
        try await read { db in try Outbox.count(db) }
    }

    /// Subscribes under `id` (the app's name for it, stable across launches); its rows are kept
    /// in the local store.
    ///
    /// The store keeps each subscription (its query, its rows as the server sent them, its
    /// position) across launches. Subscribing again under the same `id` with the same query, in a
    /// later launch, resumes from the stored position: one changeset brings the rows up to date
    /// (or a snapshot, where the node cannot make one). Under another query (the app changed
    /// it), the subscription starts afresh: its first result replaces the rows it held. See
    /// ``storedSubscriptions()`` and ``resumeStoredSubscriptions()`` to resume without declaring.
    ///
    /// The rows of the query's includes (see `IncludeDescription`) are kept too, each in the local
    /// table of the included table's name, while the subscription holds them: the app's own
    /// queries join them as any table (each todo with its project), and a to-many include reads
    /// as a sectioned list with ``sectionedList(of:include:)``.
    ///
    /// - Throws: ``SyncClientError`` when the client already has a subscription `id`, or `id`
    ///   contains U+001F (the unit separator: the local store names an include's rows by the id,
    ///   U+001F and the include's path).
    public func subscribe(_ id: String, _ query: QueryDescription) async throws {
        guard !id.contains(LocalRows.partSeparator) else { throw SyncClientError("a subscription id cannot contain U+001F") }
        guard subscriptions[id] == nil else { throw SyncClientError("the client already has a subscription \(id)") }
        let queryText = try StoredSubscriptions.queryText(query)
        var subscription = ClientSubscription(query: query, storedQuery: queryText)
        // The same query stored by an earlier launch: its rows and position resume.
        if let stored = try await read({ db in try StoredSubscriptions.load(id, in: db) }), stored.query == queryText {
            subscription.result = WireResult(tree: stored.tree, lsn: stored.lsn)
        }
        guard subscriptions[id] == nil else { throw SyncClientError("the client already has a subscription \(id)") }
        subscriptions[id] = subscription
        await sendSubscribe(id)
    }

    /// The subscriptions the local store keeps from earlier launches (and this one), by id, with
    /// their queries: those ``resumeStoredSubscriptions()`` subscribes.
    public func storedSubscriptions() async throws -> [String: QueryDescription] {
        try await read { db in try StoredSubscriptions.queries(in: db) }
    }

    /// Subscribes every subscription the local store keeps that the client does not have yet,
    /// each resuming from its stored position, as ``subscribe(_:_:)-(_,QueryDescription)`` with its stored query
    /// would; returns their ids, sorted. An app that declares its subscriptions itself does not
    /// need this: it declares them again with ``subscribe(_:_:)-(_,QueryDescription)``.
    @discardableResult
    public func resumeStoredSubscriptions() async throws -> [String] {
        var resumed: [String] = []
        for (id, query) in try await storedSubscriptions().sorted(by: { $0.key < $1.key }) where subscriptions[id] == nil {
            try await subscribe(id, query)
            resumed.append(id)
        }
        return resumed
    }

    /// Ends subscription `id`, and the local store forgets it (a later launch does not resume it);
    /// `removingRows`: also deletes the local rows no other subscription holds, its included rows
    /// too (otherwise they stay, no longer updated).
    public func unsubscribe(_ id: String, removingRows: Bool = true) async throws {
        let existed = subscriptions.removeValue(forKey: id) != nil
        resumeRowWaiters(of: id, with: false)
        if existed { await send(.unsubscribe(id: id)) }
        try await write(tag: nil) { db in
            try StoredSubscriptions.remove(id, in: db)
            if removingRows { try LocalRows.release(id, in: db) }
        }
    }

    /// A live query evaluated by the server: its events carry the rows and a changeset to
    /// apply to a list, without keeping a copy in the local store. The subscription ends when
    /// the task iterating the sequence is cancelled, or, with an error, when the server refuses
    /// or ends it; leaving the loop early does not end it.
    public func remoteQuery(_ query: QueryDescription) -> RemoteLiveQuery {
        nextRemote += 1
        let id = "remote-\(nextRemote)"
        let (stream, continuation) = AsyncThrowingStream<RemoteQueryEvent, any Error>.makeStream(bufferingPolicy: .unbounded)
        subscriptions[id] = ClientSubscription(query: query, remote: continuation)
        continuation.onTermination = { _ in Task { await self.endRemote(id) } }
        Task { await self.sendSubscribe(id) }
        return RemoteLiveQuery(stream: stream)
    }

    private func endRemote(_ id: String) async {
        guard subscriptions.removeValue(forKey: id) != nil else { return }
        await send(.unsubscribe(id: id))
    }

    /// The position subscription `id` stands at (`nil` before its first result): the local
    /// store holds its rows at that position (it returns once the frame that moved it there is
    /// written).
    public func position(of id: String) async -> String? {
        await storeCallsEnded()
        return subscriptions[id]?.result?.lsn
    }

    /// What the client received from the nodes since it was made: frames, their bytes, and the
    /// snapshots and changesets of each subscription (a subscription resumed after a relaunch
    /// gets one changeset, and no snapshot, when the node could make one).
    public func traffic() -> SyncClientTraffic { received }

    /// Keeps the position of the local subscriptions whose rows stand at `lsn` (a heartbeat: the
    /// server moved on without changing them), so that a later launch resumes from it and the
    /// node needs little history to answer.
    private func keepPositions(at lsn: String) async {
        let ids = subscriptions.filter { $0.value.live && $0.value.remote == nil && $0.value.result != nil }.keys.sorted()
        guard !ids.isEmpty else { return }
        do {
            try await write(tag: nil) { db in try StoredSubscriptions.advance(ids, to: lsn, in: db) }
        } catch {
            eventSink.yield(.localFailure(message: "the subscriptions' position \(lsn) could not be kept: \(error)"))
        }
    }

    /// The codes of rejections the node did not store (no `lsn`): not a mutation's fate, so it
    /// is pushed again.
    static let notStored: Set<String> = ["out_of_order", "internal", "unavailable"]

    /// The rows subscription `id` holds, in the query's order, as the wire has them — and as the
    /// local store holds them: it returns once the frame that brought them is written.
    public func rows(of id: String) async -> [[WireValue]]? {
        await storeCallsEnded()
        return subscriptions[id]?.result?.rows
    }

    /// The rows subscription `id` holds of its include at `path` (`"project"`, `"todos.assignee"`),
    /// as the server last sent them, in a snapshot's form: a to-one include's keyed set, or a
    /// to-many include's children parent after parent with `counts` per parent (in the order of
    /// ``rows(of:)``). It returns once the frame that brought them is written; `nil` before the
    /// subscription's first rows, or for a path its snapshot did not have.
    public func includedRows(of id: String, include path: String) async -> WireIncludedSnapshot? {
        await storeCallsEnded()
        return subscriptions[id]?.result?.tree.included[path]?.snapshot
    }

    /// A to-many include of local subscription `id` (its top-level include named `path`) as a
    /// sectioned list for a collection view, read from the local store: see ``SectionedLiveList``.
    ///
    /// ```swift
    /// for try await event in try await client.sectionedList(of: "projects", include: "todos") {
    ///     apply(event.changeset, to: collectionView, sections: event.sections)
    /// }
    /// ```
    ///
    /// - Throws: ``SyncClientError`` when the client has no subscription `id` keeping its rows in
    ///   the local store (a remote query keeps none), or its query has no top-level include `path`.
    public func sectionedList(of id: String, include path: String) throws -> SectionedLiveList {
        guard let subscription = subscriptions[id], subscription.remote == nil else {
            throw SyncClientError("the client has no subscription \(id) keeping its rows in the local store")
        }
        guard subscription.query.include?[path] != nil else {
            throw SyncClientError("the query of \(id) has no top-level include \(path)")
        }
        return SectionedLiveList(client: self, id: id, path: path)
    }

    /// The queries of a sectioned list over the local store, once subscription `id`'s first rows
    /// are written there (its tables exist); `nil` when it ends first, or the task is cancelled.
    func sectionedListPlan(of id: String, include path: String) async throws -> SectionedListPlan? {
        guard await rowsWritten(of: id), let subscription = subscriptions[id], let result = subscription.result,
              let include = subscription.query.include?[path] else { return nil }
        guard let part = result.tree.included[path] else {
            throw SyncClientError("the server sent no rows of \(id)'s include \(path)")
        }
        return SectionedListPlan(id: id, rootTable: subscription.query.table, rootKey: result.key.map { result.columns[$0] },
                                 order: subscription.query.order, include: include, part: LocalRows.partKey(id, path),
                                 childKey: part.key.map { part.columns[$0] })
    }

    /// Returns once subscription `id` has rows in the local store (`true`), or when it ends or
    /// the calling task is cancelled first (`false`).
    private func rowsWritten(of id: String) async -> Bool {
        await storeCallsEnded()
        guard let subscription = subscriptions[id] else { return false }
        if subscription.result != nil { return true }
        nextWaiter += 1
        let token = nextWaiter
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(returning: false)
                } else {
                    rowWaiters[id, default: [:]][token] = continuation
                }
            }
        } onCancel: {
            Task { await self.resumeRowWaiter(of: id, token: token) }
        }
    }

    private func resumeRowWaiter(of id: String, token: Int) {
        rowWaiters[id]?.removeValue(forKey: token)?.resume(returning: false)
    }

    private func resumeRowWaiters(of id: String, with value: Bool) {
        for (_, continuation) in rowWaiters.removeValue(forKey: id) ?? [:] { continuation.resume(returning: value) }
    }

    // MARK: The connection

    /// Performs the connection machine's actions until it stops.
    private func connectLoop() async {
        var action = machine.start(now: .now)
        while true {
            switch action {
            case .connect(let attempt, let address):
                let reason = await connectOnce(attempt, url: urls[address])
                eventSink.yield(.disconnected(reason: reason))
                outbound = nil
                action = machine.connectionEnded()
            case .reconnect(let delay):
                try? await Task.sleep(for: delay)
                if Task.isCancelled { _ = machine.stopRequested() }
                action = machine.backoffElapsed(now: .now)
            case .none, .greet, .closeSocket, .giveUp, .ping, .pushPending, .pushAgainIfPending, .stop:
                return
            }
        }
    }

    /// One connection, until it ends, is given up on (no welcome within ``handshakeTimeout``,
    /// silent for ``silenceTimeout``) or the client stops; why it ended.
    private func connectOnce(_ number: Int, url: String) async -> String {
        // Why the socket ended (its lock is a leaf: taken alone).
        let ended = Locked<String?>(nil)
        // The socket runs in a task of its own: the WebSocket client cannot be interrupted
        // before the server answers its upgrade, so a socket given up on is left to end by
        // itself (its frames, if any come, are ignored and it is closed).
        let socket = Task { [logger, token] in
            let reason: String
            do {
                let token = try await token()
                var configuration = WebSocketClientConfiguration()
                configuration.maxFrameSize = 1 << 30
                try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
                    guard await self.open(number, outbound, token: token) else {
                        try? await outbound.close(.goingAway, reason: "given up on")
                        return
                    }
                    for try await message in inbound.messages(maxSize: Int(Int32.max)) {
                        guard await self.isCurrent(number) else { return }
                        if case .text(let text) = message { await self.receive(text) }
                    }
                }
                reason = "the server closed the connection"
            } catch {
                reason = "\(error)"
            }
            ended.withLock { $0 = reason }
        }
        while true {
            if let reason = ended.withLock({ $0 }) { return reason }
            if Task.isCancelled { _ = machine.stopRequested() }
            for action in machine.tick(now: .now) {
                switch action {
                case .giveUp(let givenUp):
                    let writer = outbound
                    outbound = nil
                    // (Closing, like any write, can wait on a socket the server does not read: it
                    // is not waited for here, only the socket's end below, boundedly.)
                    Task { try? await writer?.close(.goingAway, reason: nil) }
                    socket.cancel()
                    // A socket that ends promptly is waited for, even by a client stopping (so that,
                    // stopped, it is disconnected); one that does not is left behind after 2 s.
                    let closed = FirstOutcome<Bool>()
                    Task.detached { _ = await socket.value; closed.finish(true) }
                    Task.detached {
                        try? await Task.sleep(for: .seconds(2))
                        closed.finish(false)
                    }
                    _ = await closed.value
                    return givenUp
                case .pushAgainIfPending:
                    if let waiting = try? await read({ db in try Outbox.pending(after: 0, limit: 1, in: db) }), !waiting.isEmpty,
                       machine.pushFromFirst() == .pushPending {
                        pushSoon()
                    }
                case .ping:
                    // Not waited for: a write stuck on a socket the server no longer reads must not
                    // stop this watch (the silence then ends the connection).
                    Task { await self.send(.ping) }
                case .none, .connect, .greet, .closeSocket, .pushPending, .reconnect, .stop:
                    break
                }
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
    func isCurrent(_ number: Int) -> Bool { machine.isCurrent(number) }

    /// The connection's state in words, for a stress run's findings.
    package func connectionState() -> String {
        "\(machine.description), socket \(outbound == nil ? "none" : "open"), last heard \(ContinuousClock.now - machine.lastHeard) ago, "
            + "connect loop \(connection == nil ? "stopped" : "running"), last pushed again after: \(lastAgain)"
    }

    /// The socket of attempt `number` is open: says hello and subscribes; `false` when that
    /// attempt was given up on.
    private func open(_ number: Int, _ writer: WebSocketOutboundWriter, token: String) async -> Bool {
        // (Read before the socket becomes the client's: nothing is sent on it before `hello`.)
        let client = (try? await read { db in try Outbox.clientID(db) }) ?? nil
        guard case .greet = machine.socketOpened(attempt: number, now: .now) else { return false }
        outbound = writer
        for id in subscriptions.keys { subscriptions[id]?.live = false }
        await send(.hello(protocol: SyncProtocol.version, token: token, client: client ?? ""))
        renewTokens(on: number, current: token)
        for id in subscriptions.keys.sorted() { await sendSubscribe(id) }
        return true
    }

    /// Subscribes `id` on the current connection, once, resuming from where its rows stand.
    private func sendSubscribe(_ id: String) async {
        guard outbound != nil, let subscription = subscriptions[id], subscription.sentOn != machine.connection else { return }
        subscriptions[id]?.sentOn = machine.connection
        subscriptions[id]?.live = false
        let resume = subscription.result.map { ResumePoint(basis: $0.basis, lsn: $0.lsn) }
        await send(.subscribe(id: id, query: subscription.query, resume: resume))
    }

    func send(_ message: ClientMessage) async {
        guard let outbound, let data = try? JSONEncoder().encode(message) else { return }
        try? await outbound.write(.text(String(decoding: data, as: UTF8.self)))
    }

    /// Takes one frame as if the server had sent it on the current connection (the client's
    /// tests play a server's frames with it).
    package func receive(frame text: String) async {
        await receive(text)
    }

    private func receive(_ text: String) async {
        machine.heard(now: .now)
        received.frames += 1
        received.bytes += text.utf8.count
        let message: ServerMessage
        do {
            message = try ServerMessage(json: text.utf8)
        } catch {
            eventSink.yield(.serverError(code: .malformed, message: "the client could not read a frame: \(error)", subscription: nil))
            return
        }
        switch message {
        case .welcome(let welcome):
            machine.welcomed(now: .now)
            serverPosition = SyncPosition(welcome.lsn)
            eventSink.yield(.connected(user: welcome.user, lsn: welcome.lsn))
            if let id = welcome.client {
                await adopt(clientID: id, lastApplied: welcome.lastMutation ?? 0)
            } else {
                // The node could not give this socket a client id (Postgres out of its reach at
                // hello): with mutations waiting, connect again after a while.
                let connection = machine.connection
                Task {
                    try? await Task.sleep(for: .seconds(1))
                    await self.reconnectToPush(from: connection)
                }
            }
        case .changes(let lsn, let snapshots, let changesets):
            serverPosition = SyncPosition(lsn)
            for id in snapshots.keys { received.snapshots[id, default: 0] += 1 }
            for id in changesets.keys { received.changesets[id, default: 0] += 1 }
            await apply(lsn: lsn, snapshots: snapshots, changesets: changesets, text: text)
        case .authed:
            break   // the renewal's own token says when to renew again (see renewTokens(on:current:))
        case .pushed(let results):
            // A rejection the node did not store (out of order, Postgres unavailable for now, or
            // its result could not be stored) is not the mutation's fate: it is pushed again,
            // from the first of them (a moment later when Postgres was unavailable).
            // (`out_of_order` is never stored, whatever position a node names.)
            let again = results.filter { result in
                result.status == .rejected && result.code == "out_of_order"
                    || result.status == .rejected && result.lsn == nil && Self.notStored.contains(result.code ?? "")
            }
            machine.pushAnswered(now: .now, again: again.map(\.id).min())
            if !again.isEmpty {
                lastAgain = again.first.map { "\($0.id): \($0.code ?? "") \($0.message ?? "")" } ?? ""
            }
            await settle(recording: results.filter { result in !again.contains { $0.id == result.id } })
            if again.contains(where: { $0.code == "unavailable" }) {
                Task {
                    try? await Task.sleep(for: .milliseconds(200))
                    await self.pushPending()
                }
            } else if !again.isEmpty {
                pushSoon()
            }
        case .heartbeat(let lsn), .pong(let lsn):
            serverPosition = SyncPosition(lsn)
            for (id, subscription) in subscriptions where subscription.live { subscriptions[id]?.result?.lsn = lsn }
            eventSink.yield(.caughtUp(lsn: lsn))
            await keepPositions(at: lsn)
            await settle()
        case .error(let code, let message, let id):
            eventSink.yield(.serverError(code: code, message: message, subscription: id))
            if code == .unavailable && id == nil {
                // A push the node could not take (it had no client id for this socket): the
                // mutations go again on a new connection.
                machine.pushUnavailable()
                try? await outbound?.close(.normalClosure, reason: "reconnecting to push")
                return
            }
            guard let id, let subscription = subscriptions[id] else { return }
            switch code {
            case .retryLater:
                subscriptions[id]?.sentOn = nil
                Task {
                    try? await Task.sleep(for: .seconds(1))
                    await self.sendSubscribe(id)
                }
            case .subscriptionEnded:
                // Its table's columns changed (or it was dropped): subscribed afresh, its rows
                // are replaced by the new result (a dropped table is refused, and ends it).
                subscriptions[id]?.sentOn = nil
                if subscription.remote == nil {
                    subscriptions[id]?.result = nil
                    subscriptions[id]?.isFirstLocal = true
                }
                await sendSubscribe(id)
            default:
                subscription.remote?.finish(throwing: SyncClientError("\(code.rawValue): \(message)"))
                subscriptions[id] = nil
                resumeRowWaiters(of: id, with: false)
            }
        }
    }

    /// Applies one frame: each subscription's new rows, the local ones in one write.
    private func apply(lsn: String, snapshots: [String: WireSnapshot], changesets: [String: WireChangeset], text: String) async {
        var local: [LocalChange] = []
        var remote: [(AsyncThrowingStream<RemoteQueryEvent, any Error>.Continuation, RemoteQueryEvent)] = []
        var broken: [String] = []
        // Per local subscription given a snapshot: the holders of its includes' rows now (those
        // of its other includes are released in the frame's write).
        var keptParts: [String: Set<String>] = [:]
        // What the local store keeps of the subscriptions, in the same write as their rows.
        var kept: [KeptResult] = []
        for (id, snapshot) in snapshots {
            guard var subscription = subscriptions[id] else { continue }
            subscription.live = true
            let old = subscription.result?.rows ?? []
            var result = WireResult(tree: WireTree(snapshot), lsn: lsn)
            // The frame as it came, when it is this snapshot alone: the store keeps it without
            // encoding the rows again.
            var frame = snapshots.count == 1 && changesets.isEmpty ? text : nil
            do {
                result.tree = try WireTree.checked(snapshot, of: subscription.query)
            } catch {
                frame = nil
                // Subscribing again would bring the same snapshot: its root rows are kept alone.
                result.tree.included = [:]
                eventSink.yield(.localFailure(message: "the included rows of \(id) at \(lsn) were left out: \(error)"))
            }
            let sameColumns = subscription.result.map { $0.columns == result.columns } ?? true
            subscription.result = result
            if let continuation = subscription.remote {
                let key = result.key
                let changeset = sameColumns
                    ? Changeset(from: old, to: result.rows, identifiedBy: { row in key.map { row[$0] } }, contentEqual: ==)
                    : (try? Changeset(oldCount: old.count, newCount: result.rows.count, deletes: Array(old.indices),
                                      inserts: Array(result.rows.indices), updates: [], moves: [])) ?? .initial(count: result.rows.count)
                remote.append((continuation, RemoteQueryEvent(lsn: lsn, columns: result.columns, rows: result.rows, changeset: changeset)))
            } else {
                local.append(LocalChange(subscription: id, table: subscription.query.table, columns: result.columns, types: result.types,
                                         key: result.key, old: old, new: result.rows, written: nil,
                                         isFirst: subscription.isFirstLocal))
                // Each include's rows, held under a holder of its own; what each held before is
                // read from the store's holds (the tree may have changed shape since).
                let tables = WireTree.includedTables(of: subscription.query)
                for (path, part) in result.tree.included.sorted(by: { $0.key < $1.key }) {
                    guard let table = tables[path] else { continue }
                    local.append(LocalChange(subscription: LocalRows.partKey(id, path), table: table, columns: part.columns,
                                             types: part.types, key: part.key, old: [], new: part.flatRows, written: nil, isFirst: true))
                }
                keptParts[id] = Set(result.tree.included.keys.map { LocalRows.partKey(id, $0) })
                subscription.isFirstLocal = false
                if let query = subscription.storedQuery { kept.append(.snapshot(id: id, query: query, tree: result.tree, frame: frame)) }
            }
            subscriptions[id] = subscription
        }
        for (id, wire) in changesets {
            guard var subscription = subscriptions[id], var result = subscription.result else { continue }
            subscription.live = true
            let old = result.rows
            let oldTree = result.tree
            do {
                // The root's changeset, then each include's (a to-many include's lists follow the
                // root's rows).
                try result.tree.apply(wire)
            } catch {
                broken.append(id)
                continue
            }
            result.lsn = lsn
            subscription.result = result
            if let continuation = subscription.remote {
                let changeset = (try? Changeset(oldCount: old.count, newCount: result.rows.count, deletes: wire.deletes,
                                                inserts: wire.inserts.map(\.index),
                                                updates: wire.updates.map { .init(old: $0.old, new: $0.new) },
                                                moves: wire.moves.map { .init(old: $0.old, new: $0.new) }))
                    ?? Changeset(from: old, to: result.rows, identifiedBy: { [key = result.key] row in key.map { row[$0] } }, contentEqual: ==)
                remote.append((continuation, RemoteQueryEvent(lsn: lsn, columns: result.columns, rows: result.rows, changeset: changeset)))
            } else {
                local.append(LocalChange(subscription: id, table: subscription.query.table, columns: result.columns, types: result.types,
                                         key: result.key, old: old, new: result.rows,
                                         written: wire.inserts.map(\.index) + wire.updates.map(\.new), isFirst: false))
                if !wire.isEmpty { kept.append(.changeset(id: id, wire, tree: result.tree)) }
                // The includes that changed: those the frame names, and the to-many ones whose
                // sections came or went with the root's rows (in the same write as the root's).
                let sectionsChanged = !wire.deletes.isEmpty || !wire.inserts.isEmpty
                let tables = WireTree.includedTables(of: subscription.query)
                let written = result.tree.written(by: wire)
                for (path, part) in result.tree.included.sorted(by: { $0.key < $1.key })
                where wire.included?[path] != nil || (part.sections != nil && sectionsChanged) {
                    guard let table = tables[path] else { continue }
                    local.append(LocalChange(subscription: LocalRows.partKey(id, path), table: table, columns: part.columns,
                                             types: part.types, key: part.key, old: oldTree.included[path]?.flatRows ?? [],
                                             new: part.flatRows, written: written[path] ?? [], isFirst: false))
                }
            }
            subscriptions[id] = subscription
        }
        for (id, subscription) in subscriptions where subscription.live { subscriptions[id]?.result?.lsn = lsn }
        // (Not those whose changeset did not fit: their kept rows are still of their old position.)
        let advanced = subscriptions.filter { $0.value.live && $0.value.remote == nil && $0.value.result != nil && !broken.contains($0.key) }
            .keys.sorted()
        if !local.isEmpty {
            let position = settlingPosition
            let awaiting = awaitingRows
            do {
                // The server's rows, the subscriptions' results and positions, then the outbox
                // rebased on them: one local write, one change.
                let (settled, conflicts) = try await write(tag: lsn) { [local, keptParts, kept] db in
                    let touched = try LocalRows.apply(local, in: db)
                    for (id, kept) in keptParts { try LocalRows.releaseParts(of: id, except: kept, in: db) }
                    for result in kept {
                        switch result {
                        case .snapshot(let id, let query, _, _):
                            // (Its result follows in the next write, below.)
                            try StoredSubscriptions.keepPosition(id, query: query, lsn: lsn, in: db)
                        case .changeset(let id, let changeset, let tree):
                            try StoredSubscriptions.keepChangeset(id, changeset, tree: tree, lsn: lsn, in: db)
                        }
                    }
                    try StoredSubscriptions.advance(advanced, to: lsn, in: db)
                    let settled = awaiting ? try position.map { try Outbox.settled(through: $0, in: db) } ?? [] : []
                    return (settled, try Rebase.run(touched: touched, settled: settled.map(\.id), in: db))
                }
                report(settled: settled, conflicts: conflicts)
            } catch {
                eventSink.yield(.localFailure(message: "the frame at \(lsn) could not be written to the local store: \(error)"))
                // (An include's holder names its subscription before U+001F.)
                broken.append(contentsOf: Set(local.map { String($0.subscription.prefix { $0 != LocalRows.partSeparator }) }))
            }
        } else {
            await settle()
        }
        for (continuation, event) in remote { continuation.yield(event) }
        for id in snapshots.keys where subscriptions[id]?.result != nil && !broken.contains(id) { resumeRowWaiters(of: id, with: true) }
        // The snapshots' results, kept for the next launch once their rows are visible.
        let bases = kept.compactMap { result -> (id: String, query: String, tree: WireTree, frame: String?)? in
            guard case .snapshot(let id, let query, let tree, let frame) = result, !broken.contains(id) else { return nil }
            return (id, query, tree, frame)
        }
        // A changeset that does not fit (the client's rows are not the server's): start afresh.
        for id in broken {
            subscriptions[id]?.result = nil
            subscriptions[id]?.isFirstLocal = true
            await send(.unsubscribe(id: id))
            subscriptions[id]?.sentOn = nil
            await sendSubscribe(id)
        }
        eventSink.yield(.applied(lsn: lsn, subscriptions: Set(snapshots.keys).union(changesets.keys).sorted()))
        if !bases.isEmpty {
            do {
                try await write(tag: lsn) { db in
                    for base in bases {
                        try StoredSubscriptions.keepBase(base.id, query: base.query, tree: base.tree, lsn: lsn, frame: base.frame, in: db)
                    }
                }
            } catch {
                // Kept without their results: the next launch subscribes them afresh.
                eventSink.yield(.localFailure(message: "the results at \(lsn) could not be kept for the next launch: \(error)"))
            }
        }
    }

    /// A subscription's new result, as the frame's write keeps it in the local store.
    private enum KeptResult: Sendable {
        /// `frame`: the frame that brought it, when it holds nothing else.
        case snapshot(id: String, query: String, tree: WireTree, frame: String?)
        case changeset(id: String, WireChangeset, tree: WireTree)
    }

    // MARK: Writes

    /// The position every local subscription's rows stand at (the oldest of them): a mutation
    /// whose result stands at or before it is in those rows. With no subscription, the server's.
    private var settlingPosition: SyncPosition? {
        let local = subscriptions.values.filter { $0.remote == nil }
        guard !local.isEmpty else { return serverPosition }
        var oldest: SyncPosition?
        for subscription in local {
            guard let lsn = subscription.result?.lsn, let position = SyncPosition(lsn) else { return nil }
            oldest = oldest.map { min($0, position) } ?? position
        }
        return oldest
    }

    /// Takes the client id `welcome` gave, and pushes what is pending.
    private func adopt(clientID id: String, lastApplied: Int64) async {
        do {
            let restored = try await write(tag: nil) { db -> Bool in
                // The server applied more of this id than the device ever numbered: the device
                // was restored from a backup. Its id is given up (a new one comes on reconnecting).
                if try Outbox.clientID(db) == id, try Outbox.lastAssigned(db) < lastApplied {
                    try db.execute("DELETE FROM ripple_sync_state WHERE name = 'client_id'")
                    return true
                }
                try Outbox.adopt(clientID: id, lastApplied: lastApplied, in: db)
                return false
            }
            if restored {
                eventSink.yield(.localFailure(message: "this device is behind its client id (restored from a backup?): reconnecting with a new one"))
                try? await outbound?.close(.normalClosure, reason: "a new client id")
                return
            }
        } catch {
            eventSink.yield(.localFailure(message: "the client id could not be kept: \(error)"))
            return
        }
        if machine.clientIDAdopted() == .pushPending { pushSoon() }
    }

    /// Pushes what is pending from a task of its own: a frame being handled never waits for a
    /// push to be written (a write waits while the server is not reading, and the server may be
    /// waiting for this client to read).
    private func pushSoon() {
        Task { await self.pushPending() }
    }

    /// The most mutations one `push` carries.
    public static let pushSize = 500

    /// Closes connection `number` when it still cannot push and mutations wait (the next one
    /// asks for a client id again).
    private func reconnectToPush(from number: Int) async {
        guard machine.connection == number, !machine.canPush, outbound != nil, (try? await pendingMutations()).map({ $0 > 0 }) == true else { return }
        try? await outbound?.close(.normalClosure, reason: "reconnecting to push")
    }

    /// Sends the mutations not sent on this connection, in order, in pushes of up to ``pushSize``.
    private func pushPending() async {
        while machine.canPush, outbound != nil {
            // One read of the outbox at a time, so no batch goes twice; a call meanwhile leaves
            // it to the reading one to read again.
            guard !readingOutbox else {
                pushRequested = true
                return
            }
            (readingOutbox, pushRequested) = (true, false)
            let (after, connection) = (machine.pushedThrough, machine.connection)
            let batch: [Mutation]
            do {
                batch = try await read { db in try Outbox.pending(after: after, limit: Self.pushSize, in: db) }
                readingOutbox = false
            } catch {
                readingOutbox = false
                eventSink.yield(.localFailure(message: "the outbox could not be read: \(error)"))
                return
            }
            // The connection or its push position moved while the outbox was read: read again.
            guard machine.pushedThrough == after, machine.connection == connection else { continue }
            guard let last = batch.last else {
                if pushRequested { continue }
                return
            }
            machine.pushSent(through: last.id, now: .now)
            await send(.push(mutations: batch))
        }
    }

    /// Lets go of the mutations whose results the local rows now reflect (their effects arrived
    /// with the server's rows, or, rejected, they did nothing), rebasing the rows they touched.
    /// `recording`: results of a push, kept first in the same write.
    private func settle(recording results: [MutationResult] = []) async {
        guard awaitingRows || !results.isEmpty else { return }
        let position = settlingPosition
        do {
            let (settled, conflicts, left) = try await write(tag: nil) { db in
                try Outbox.record(results, in: db)
                let settled = try position.map { try Outbox.settled(through: $0, in: db) } ?? []
                let conflicts = try Rebase.run(touched: [:], settled: settled.map(\.id), in: db)
                let left = try Outbox.hasResultsWaiting(db)
                return (settled, conflicts, left)
            }
            awaitingRows = left
            report(settled: settled, conflicts: conflicts)
        } catch {
            eventSink.yield(.localFailure(message: "settled mutations could not leave the outbox: \(error)"))
        }
    }

    // MARK: The store

    /// Runs `work` on the store once the client's store calls before it have ended, without
    /// holding the actor (or a thread) while it waits or runs: the store sees the client's calls
    /// in the order the actor made them. The calling task's cancellation does not reach the
    /// work: what the actor already counts as done (a frame taken, a push answered) is written
    /// whole, and a given-up connection's last frame is not rolled back half-way.
    private func storeCall<T: Sendable>(_ work: @escaping @Sendable (Store) async throws -> T) async throws -> T {
        let previous = lastStoreCall
        let call = Task.detached { [store] in
            await previous?.value
            return try await work(store)
        }
        lastStoreCall = Task.detached { _ = await call.result }
        return try await call.value
    }

    /// Returns once no store call of the client is in flight. A frame changes the actor's
    /// subscriptions before its local write runs (the actor is free meanwhile), so what the
    /// actor says of its rows waits for that write: the app never hears of rows its local store
    /// does not hold yet.
    private func storeCallsEnded() async {
        while let last = lastStoreCall {
            await last.value
            if lastStoreCall == last { return }
        }
    }

    /// A write of the client's (origin `.sync`), in order with its other store calls.
    private func write<T: Sendable>(tag: String?, _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await storeCall { store in try await store.asyncWrite(origin: .sync, tag: tag, body) }
    }

    /// A read of the client's, in order with its other store calls.
    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await storeCall { store in try await store.asyncRead(body) }
    }

    private func report(settled: [MutationResult], conflicts: [(mutation: Int64, reason: String)]) {
        for result in settled where result.status == .rejected { eventSink.yield(.rejected(result)) }
        if !settled.isEmpty { eventSink.yield(.settled(mutations: settled.map(\.id))) }
        for (mutation, reason) in conflicts { eventSink.yield(.conflicted(mutation: mutation, reason: reason)) }
    }
}

/// What a ``SyncClient`` received from the nodes (see ``SyncClient/traffic()``).
public struct SyncClientTraffic: Sendable, Hashable {
    /// The frames received.
    public var frames = 0
    /// Their bytes (the text of each frame, in UTF-8).
    public var bytes = 0
    /// The snapshots received, by subscription id.
    public var snapshots: [String: Int] = [:]
    /// The changesets received (an empty one too), by subscription id.
    public var changesets: [String: Int] = [:]

    /// Nothing received.
    public init() {}
}

/// What happens on a client's connection.
public enum SyncClientEvent: Sendable, Hashable {
    /// The server welcomed the client.
    case connected(user: String, lsn: String)
    /// A frame was applied: these subscriptions changed, every subscription stands at `lsn`.
    case applied(lsn: String, subscriptions: [String])
    /// A heartbeat: every subscription stands at `lsn`.
    case caughtUp(lsn: String)
    /// The server refused something or ended a subscription.
    case serverError(code: SyncErrorCode, message: String, subscription: String?)
    /// The local store refused a frame (the subscriptions concerned start afresh).
    case localFailure(message: String)
    /// The connection ended; the client reconnects.
    case disconnected(reason: String)
    /// These mutations left the outbox: the local rows now hold the server's rows with their
    /// effects (the rejected ones, reported by ``rejected(_:)`` before, changed nothing).
    case settled(mutations: [Int64])
    /// The server rejected a mutation (the result's `code` and `message`
    /// say why): it left the outbox, and its changes left the local rows.
    case rejected(MutationResult)
    /// A pending mutation no longer applies to the local rows (the server deleted or changed
    /// what it changes): its changes are left out of them, with `reason`. It stays pending, and
    /// the server decides.
    case conflicted(mutation: Int64, reason: String)
}

/// One event of a remote live query: the rows at `lsn` and the changeset from the previous
/// event's rows (the first event: from no rows), ready for a list's batch update.
public struct RemoteQueryEvent: Sendable {
    /// The Postgres position the rows stand at.
    public var lsn: String
    /// The result's column names, in the rows' order.
    public var columns: [String]
    /// The query's result, in its order, values as the wire has them.
    public var rows: [[WireValue]]
    /// The change from the previous event's rows to ``rows``, by index.
    public var changeset: Changeset
}

/// A live query evaluated by the server (see ``SyncClient/remoteQuery(_:)``).
public struct RemoteLiveQuery: AsyncSequence, Sendable {
    /// Each event: the rows and the changeset from the event before.
    public typealias Element = RemoteQueryEvent
    let stream: AsyncThrowingStream<RemoteQueryEvent, any Error>

    /// An iterator over the query's events. It throws ``SyncClientError`` when the server
    /// refuses or ends the subscription.
    public func makeAsyncIterator() -> AsyncThrowingStream<RemoteQueryEvent, any Error>.AsyncIterator {
        stream.makeAsyncIterator()
    }
}
#endif
