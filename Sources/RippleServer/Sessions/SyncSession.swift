#if Sync
import Foundation
import HummingbirdWebSocket
import NIOCore
import NIOWebSocket
import Ripple
import RippleSync

/// One client's socket: its conversation (hello, subscriptions), the frames waiting for their
/// replica version to finish, and the queue of frames it has not read yet.
///
/// Frames are assembled per replica version: the hub hands each subscription's change to
/// ``SyncServer/file(_:subscription:generation:for:)`` inside the replica's commit, and when the
/// feed finishes that commit the socket sends one `changes` frame holding every subscription
/// the transaction changed. A subscription that starts (or resumes) at a version already
/// finished is sent at once, labelled with the position the socket stands at.
///
/// The session is the I/O shell of a ``SessionState``: it feeds the machine the socket's events
/// (messages, the clock, the hub's events, the writer's progress) and performs what it returns.
final class SyncSession: @unchecked Sendable {   // `machine` is guarded by `lock`
    private typealias State = SessionState<SubscriptionToken, Task<Void, Never>, CheckedContinuation<Void, Never>>

    private let server: SyncServer
    /// Guards `machine`; taken inside the server's frame lock (``enqueue(_:subscription:generation:at:)``), and takes
    /// only the replica timeline's lock inside it (a flush labels its frames). Metrics are counted after it is let go.
    private let lock = NSLock()
    private var machine: State
    /// Writes the queued frames into the channel (see ``SocketWriter``).
    private let writer: SocketWriter

    init(server: SyncServer, channel: any Channel) {
        self.server = server
        let configuration = server.configuration
        let heartbeat = configuration.heartbeatInterval.components
        machine = State(limits: .init(maxQueuedBytes: configuration.maxQueuedBytes, maxMessageBytes: configuration.maxMessageBytes,
                                      maxSubscriptions: configuration.maxSubscriptionsPerSocket, helloTimeout: configuration.helloTimeout,
                                      heartbeatMilliseconds: Int(heartbeat.seconds * 1000 + heartbeat.attoseconds / 1_000_000_000_000_000),
                                      opened: .now))
        writer = SocketWriter(channel: channel)
        writer.serve(self)
    }

    /// The event loop the socket's frames are written on.
    var eventLoop: any EventLoop { writer.eventLoop }

    private var configuration: SyncServerConfiguration { server.configuration }

    /// The largest message a client may send (its frames joined).
    private var messageLimit: Int { configuration.maxMessageBytes * 4 }

    // MARK: The socket's life

    /// Serves the socket until it closes. Throws what the WebSocket layer refused in the
    /// client's frames (text that is not UTF-8, a message beyond the frame bound…), for it to
    /// close the socket with that refusal's status code (1007, 1009…).
    func run(inbound: WebSocketInboundStream) async throws {
        do {
            try await writer.install()
        } catch {
            return   // the channel closed already
        }
        switch server.register(self) {
        case .admitted:
            break
        case .full:
            server.metrics.refusedSockets.withLock { $0 += 1 }
            await firstMessage(inbound)
            perform { $0.shutDown("the server holds as many sockets as it may (\(configuration.maxSockets)); try again later") }
            await writerDone()
            return
        case .stopping:
            await firstMessage(inbound)
            shutDown()
            await writerDone()
            return
        }
        await withTaskGroup(of: Role.self) { group in
            group.addTask { await self.writerDone(); return .writer }
            group.addTask { await self.readLoop(inbound); return .reader }
            group.addTask { await self.watchClock(); return .clock }
            loop: while let role = await group.next() {
                switch role {
                case .writer:
                    // Written out (or given up on: a client that does not read its last frame).
                    break loop
                case .clock:
                    continue
                case .reader:
                    // The client went away (stop writing), or the socket is closing after its
                    // last frame (the writer ends once it is written).
                    if !self.isClosing { self.close() }
                }
            }
            self.close()
            group.cancelAll()
        }
        let released = lock.withLock { machine.ended() }
        released.waiter?.resume()
        for task in released.attachments { task.cancel() }
        for task in released.attachments { await task.value }
        server.metrics.subscriptions.withLock { $0 -= released.tokens.count }
        for token in released.tokens { token.cancel() }
        server.unregister(self)
        if let refused = released.refusal { throw refused }
    }

    private enum Role { case writer, reader, clock }

    /// How long a refused socket's answer waits for the client to speak first.
    static let firstMessageWait = Duration.seconds(1)

    /// Waits for the client's first message (its `hello`, not handled), at most
    /// ``firstMessageWait``. A frame the node wrote at once could reach the client in the same
    /// read as the upgrade's answer, and WebSocket clients are known to lose such a frame, and
    /// then to hear nothing more (the Swift WebSocket client the tests use did, about one time
    /// in twenty); once a client spoke, its upgrade is done.
    private func firstMessage(_ inbound: WebSocketInboundStream) async {
        let limit = messageLimit
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var messages = inbound.messages(maxSize: limit).makeAsyncIterator()
                _ = try? await messages.next()
            }
            group.addTask { try? await Task.sleep(for: Self.firstMessageWait) }
            await group.next()
            group.cancelAll()
        }
    }

    private func readLoop(_ inbound: WebSocketInboundStream) async {
        do {
            for try await message in inbound.messages(maxSize: messageLimit) {
                // A socket whose handling was cancelled (the node stopping it) takes no more
                // messages: each push would fail (every wait for Postgres is cancelled at once)
                // for as long as the client kept the socket. It closes, and the client
                // connects again to a session that can serve it.
                guard !Task.isCancelled else { return }
                switch message {
                case .text(let text): await receive(text)
                case .binary: perform { $0.receivedBinary() }
                }
                if isClosing || Task.isCancelled { return }
            }
        } catch is CancellationError {
            // The socket is closing.
        } catch {
            // The client went away, or sent what WebSocket itself refuses: the socket closes,
            // with the refusal's status code unless it closes for a reason of its own.
            if !Task.isCancelled { lock.withLock { machine.readingFailed(error) } }
        }
    }

    /// Closes a socket that said no valid `hello` in time, and one whose token expired (the
    /// machine decides; this task sleeps until it asks to look again).
    private func watchClock() async {
        while true {
            let step = lock.withLock { machine.clockFired(now: .now, date: Date()) }
            switch step {
            case .stop:
                return
            case .closing(let output):
                perform(output)
                return
            case .sleep(let deadline):
                do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
            }
        }
    }

    // MARK: Messages

    /// What the socket is doing, in words: its phase and the message it handles.
    var state: String { lock.withLock { machine.description(at: .now) } }

    private func receive(_ text: String) async {
        let received = lock.withLock { machine.received(text) }
        switch received {
        case .answered(let output):
            perform(output)
        case .unsubscribed(let token):
            if let token {
                server.metrics.subscriptions.withLock { $0 -= 1 }
                token.cancel()
            }
        case .verifyHello(let token, let client):
            await busy("hello") { await hello(token: token, client: client) }
        case .verifyRenewal(let token):
            await busy("auth") { await renew(token: token) }
        case .subscribe(let id, let query, let resume, let identity):
            await busy("subscribe \(id)") { await subscribe(id: id, query: query, resume: resume, identity: identity) }
        case .push(let mutations, let clientID, let user):
            await busy("push of \(mutations.count) mutations") {
                let results = await server.positioned(await server.writer.apply(mutations, client: clientID, user: user))
                perform { $0.pushed(results) }
            }
        }
    }

    /// Runs `work`, the handling of a message the socket waits for (`what`, in words).
    private func busy(_ what: String, _ work: () async -> Void) async {
        lock.withLock { machine.handling(what, since: .now) }
        defer { lock.withLock { machine.handling(nil, since: .now) } }
        await work()
    }

    private func hello(token: String, client claimed: String?) async {
        let verified = await verify(token)
        let step = lock.withLock { machine.hello(verified: verified, claimed: claimed) }
        guard case .lookUpClient(let identity, let claimed) = step else {
            if case .refused(let output) = step { perform(output) }
            return
        }
        // The client id its mutations go under, for a client that means to write (`client` in
        // hello: its id, or empty for a new one); a reader gets none, and costs Postgres nothing.
        let user = identity.user
        var client: (id: String, lastMutation: Int64)?
        if let claimed {
            do {
                client = try await server.writer.client(claimed: claimed.isEmpty ? nil : claimed, user: user)
            } catch {
                server.logger.warning("no client id for a socket of \(user): \(String(reflecting: error))")
            }
        }
        let position = server.timeline.completed.position
        perform { $0.welcome(identity: identity, client: client, position: position) }
    }

    /// `token` checked by the node's authenticator.
    private func verify(_ token: String) async -> Result<SyncIdentity, TokenRefusal> {
        do throws(TokenRefusal) {
            return .success(try await server.authenticator.verify(token))
        } catch {
            server.tokenRefused(error)
            return .failure(error)
        }
    }

    /// An `auth` renewal: the socket keeps its subscriptions under the new token when it names
    /// the same user and rule claims.
    private func renew(token: String) async {
        let verified = await verify(token)
        let ruleClaims = configuration.rules.claimsUsed
        perform { $0.renewed(verified: verified, ruleClaims: ruleClaims) }
    }

    private func subscribe(id: String, query: QueryDescription, resume: ResumePoint?, identity: SyncIdentity) async {
        guard let hub = server.hub else {
            send(.error(code: .retryLater, message: "the server is starting", id: id))
            return
        }
        guard let schema = await server.schema(of: query.table) else {
            send(.error(code: .invalidQuery, message: "there is no synced table \(query.table)", id: id))
            return
        }
        // The schemas of the tables its sub-queries and its read rules' may read.
        var tables: [String: SyncedTableSchema] = [:]
        for name in hub.tablesNeeded(byQueryWithIncludes: query) {
            if let other = await server.schema(of: name) { tables[name] = other }
        }
        let compiled: HubQuery
        let basis: String
        do {
            (compiled, basis) = try hub.compileSubscription(query, identity: identity, schema: schema, tables: tables)
        } catch let error as RulesError {
            send(.error(code: .forbidden, message: error.description, id: id))
            return
        } catch {
            send(.error(code: .invalidQuery, message: "\(error)", id: id))
            return
        }
        // Reserve the id before any wait: a second subscribe under it is refused.
        let reservation = lock.withLock { machine.reserve(id) }
        guard case .reserved(let generation) = reservation else {
            if case .refused(let output) = reservation { perform(output) }
            return
        }
        // Attaching may wait (a resume for a position the replica has not reached, the resume
        // gate) and read (history, a first result): it runs beside the socket's other messages.
        // (Started under the lock: its end, which takes the lock, comes after its start.)
        lock.withLock {
            machine.attachStarted(generation, Task { [self] in
                await attach(id: id, generation: generation, compiled: compiled, basis: basis, schema: schema, resume: resume, hub: hub)
                lock.withLock { machine.attachEnded(generation) }
            })
        }
    }

    /// Attaches a reserved subscription to the hub: from the client's rows at its resume point
    /// when the replica still has them, otherwise from nothing (a snapshot).
    private func attach(id: String, generation: Int, compiled: HubQuery, basis: String, schema: SyncedTableSchema,
                        resume: ResumePoint?, hub: SubscriptionHub) async {
        var old: HubRows?
        if let resume, resume.basis == basis, let position = PGOutput.LSN(resume.lsn) {
            switch await resumeVersion(for: position) {
            case .version(let version):
                guard await server.resumeGate.admit() else {
                    perform { $0.resumeRefused(id, generation: generation) }
                    return
                }
                // Beyond the change log's reach, or across a schema change: a snapshot.
                old = try? await hub.asyncRows(of: compiled, schema: schema, at: version)
            case .ahead, .unknown:
                break
            }
        }
        let token = hub.subscribe(compiled, basis: basis, schema: schema, resumingFrom: old) { [weak self] event in
            guard let self else { return }
            self.server.file(event, subscription: id, generation: generation, for: self)
        }
        let kept = lock.withLock { machine.attached(id, generation: generation, token: token) }
        if kept { server.metrics.subscriptions.withLock { $0 += 1 } } else { token.cancel() }
    }

    /// The replica version for a client's position, waiting (boundedly) for the replica to
    /// reach a position it has not.
    private func resumeVersion(for position: PGOutput.LSN) async -> ReplicaTimeline.Lookup {
        let deadline = ContinuousClock.now + configuration.resumeCatchUpTimeout
        while true {
            let lookup = server.timeline.version(at: position)
            guard lookup == .ahead, ContinuousClock.now < deadline else { return lookup }
            do { try await Task.sleep(for: .milliseconds(5)) } catch { return .unknown }
        }
    }

    // MARK: Frames

    /// Files a subscription's event under `version` (called by the server under its frame lock).
    func enqueue(_ event: SubscriptionEvent, subscription id: String, generation: Int, at version: Int64) {
        let ended = lock.withLock { machine.file(event, subscription: id, generation: generation, at: version) }
        if ended { server.metrics.subscriptions.withLock { $0 -= 1 } }
    }

    /// Sends what waits for versions up to `version`, one frame per version.
    func flush(upTo version: Int64) {
        if queueFlush(upTo: version) { writer.wake() }
    }

    /// Queues what waits for versions up to `version`; whether the writer must be woken (see
    /// ``SyncServer/wake(_:queue:)``).
    func queueFlush(upTo version: Int64, memo: FrameMemo? = nil) -> Bool {
        queue { $0.flush(upTo: version, position: server.position(of:), memo: memo) }
    }

    /// Queues what the finished version holds, then, when the socket heard nothing since an
    /// earlier position, that its subscriptions stand at `position`; whether the writer must be
    /// woken.
    func queueHeartbeat(version: Int64, position: PGOutput.LSN) -> Bool {
        queue { $0.heartbeat(version: version, position: position, positions: server.position(of:)) }
    }

    /// Writes what waits (on the socket's event loop).
    func pump(_ cache: inout SocketWriter.WireCache) { writer.pump(&cache) }

    // MARK: Performing the machine's output

    /// Runs `event` on the machine under the lock and performs its output: wakes the writer when
    /// it queued something (and counts a socket dropped for not reading).
    private func perform(_ event: (inout State) -> State.Output) {
        if queue(event) { writer.wake() }
    }

    /// Performs `output` (of an event already run).
    private func perform(_ output: State.Output) {
        if count(output) { writer.wake() }
    }

    /// Runs `event` on the machine under the lock; `true` when the writer must be woken (it then
    /// counts as woken: the caller wakes it, alone or with other sockets of its loop).
    private func queue(_ event: (inout State) -> State.Output) -> Bool {
        count(lock.withLock { event(&machine) })
    }

    /// Counts a dropped socket; whether the writer must be woken.
    private func count(_ output: State.Output) -> Bool {
        if output.droppedSlowConsumer { server.metrics.droppedSockets.withLock { $0 += 1 } }
        return output.wakeWriter
    }

    private func send(_ message: ServerMessage) {
        perform { $0.send(message) }
    }

    /// The node is stopping: the socket closes after telling the client to come back later.
    func shutDown() {
        perform { $0.shutDown() }
    }

    /// Closes at once: what waits is not written (and the writer is done).
    private func close() {
        lock.withLock { machine.close() }?.resume()
        writer.released()
    }

    /// Returns once the writer is done: the closing socket's frames written (or given up on),
    /// or the channel closed.
    private func writerDone() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !lock.withLock({ machine.awaitWriter(continuation) }) { continuation.resume() }
        }
    }
}

extension SyncSession: SocketWriter.Source {
    func takeFrames(budget: Int) -> (frames: [[UInt8]], drained: Bool) {
        lock.withLock { machine.takeFrames(budget: budget) }
    }

    var isClosing: Bool { lock.withLock { machine.isClosing } }

    var isDrained: Bool { lock.withLock { machine.isDrained } }

    func wrote(frames: Int, bytes: Int) {
        server.metrics.sent.withLock {
            $0.frames += frames
            $0.bytes += bytes
        }
    }

    func writerFinished() {
        lock.withLock { machine.writerFinished() }?.resume()
    }
}
#endif
