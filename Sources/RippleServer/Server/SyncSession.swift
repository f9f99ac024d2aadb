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
final class SyncSession: @unchecked Sendable {   // every mutable field is guarded by `lock`
    private let server: SyncServer
    private let lock = NSLock()
    private var phase = Phase.greeting
    /// The client id the socket's mutations go under (after hello).
    private var clientID: String?
    /// The frames: subscriptions' generations, what waits per version, the outbound queue.
    private var frames: SocketFrames
    /// The hub's token of each subscription (ended when the socket unsubscribes or closes).
    private var tokens: [String: SubscriptionToken] = [:]
    /// Subscriptions being attached, by generation (cancelled when the socket closes).
    private var attaching: [Int: Task<Void, Never>] = [:]
    /// Writes the queued frames into the channel (see ``SocketWriter``).
    private let writer: SocketWriter
    /// Whether the writer was woken since it last found the queue empty.
    private var writerWoken = false
    private var writerState = WriterState.running
    private let opened = ContinuousClock.now

    private enum WriterState {
        case running
        case waited(CheckedContinuation<Void, Never>)
        case finished
    }

    enum Phase {
        case greeting
        case open(user: String, expires: Date)
    }

    init(server: SyncServer, channel: any Channel) {
        self.server = server
        frames = SocketFrames(maxQueuedBytes: server.configuration.maxQueuedBytes)
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
            closeAfter(.error(code: .retryLater, message: "the server holds as many sockets as it may (\(configuration.maxSockets)); "
                              + "try again later", id: nil))
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
        let (ended, unfinished) = lock.withLock { () -> ([SubscriptionToken], [Task<Void, Never>]) in
            defer { (tokens, attaching) = ([:], [:]) }
            for id in frames.subscriptions.keys { frames.remove(id) }
            return (Array(tokens.values), Array(attaching.values))
        }
        for task in unfinished { task.cancel() }
        for task in unfinished { await task.value }
        server.metrics.subscriptions.withLock { $0 -= ended.count }
        for token in ended { token.cancel() }
        server.unregister(self)
        if let refused = inboundRefusal.withLock({ $0 }) { throw refused }
    }

    /// What the WebSocket layer refused in the client's frames, if that ended the reading.
    private let inboundRefusal = Locked<(any Error)?>(nil)

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
                case .binary: send(.error(code: .malformed, message: "frames are JSON text; a binary frame is not a message", id: nil))
                }
                if isClosing || Task.isCancelled { return }
            }
        } catch is CancellationError {
            // The socket is closing.
        } catch {
            // The client went away, or sent what WebSocket itself refuses: the socket closes,
            // with the refusal's status code unless it closes for a reason of its own.
            if !Task.isCancelled, !isClosing { inboundRefusal.withLock { $0 = error } }
        }
    }

    /// Closes a socket that said no valid `hello` in time, and one whose token expired.
    private func watchClock() async {
        while true {
            let (phase, closing) = lock.withLock { (self.phase, frames.isClosing) }
            guard !closing else { return }
            let deadline: ContinuousClock.Instant
            switch phase {
            case .greeting:
                let end = opened + configuration.helloTimeout
                if ContinuousClock.now >= end {
                    closeAfter(.error(code: .outOfOrder, message: "no hello within \(configuration.helloTimeout)", id: nil))
                    return
                }
                // Looked at again each second while greeting: the token's expiry counts once
                // hello came (no hello wakes this task).
                deadline = min(end, .now + .seconds(1))
            case .open(_, let expires):
                let left = expires.timeIntervalSinceNow
                if left <= 0 {
                    closeAfter(.error(code: .tokenExpired, message: "the token expired; reconnect with a new one", id: nil))
                    return
                }
                // Looked at again at least hourly (the wall clock may be set meanwhile).
                deadline = .now + .milliseconds(Int64(min(left, 3600) * 1000) + 1)
            }
            do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
        }
    }

    // MARK: Messages

    /// The message the socket is handling, and since when (for a node that cannot stop).
    private let activity = Locked<(String, ContinuousClock.Instant)?>(nil)

    /// What the socket is doing, in words: its phase and the message it handles.
    var state: String {
        let (current, waiting) = lock.withLock { (phase, attaching.count) }
        let words = switch current {
        case .greeting: "before hello"
        case .open(let user, _): "open for \(user)"
        }
        let busy = activity.withLock { $0 }.map { what, since in ", handling its \(what) for \(ContinuousClock.now - since)" } ?? ""
        return words + busy + (waiting > 0 ? ", \(waiting) subscriptions attaching" : "")
    }

    private func receive(_ text: String) async {
        guard text.utf8.count <= configuration.maxMessageBytes else {
            send(.error(code: .messageTooLarge, message: "a message may hold at most \(configuration.maxMessageBytes) bytes; "
                        + "this one holds \(text.utf8.count)", id: nil))
            return
        }
        let message: ClientMessage
        do {
            message = try ClientMessage.read(json: text.utf8)
        } catch {
            send(.error(code: error.code, message: error.message, id: error.id))
            return
        }
        if case .greeting = lock.withLock({ phase }) {
            guard case .hello = message else {
                send(.error(code: .outOfOrder, message: "say hello first", id: nil))
                return
            }
        }
        let what = switch message {
        case .hello: "hello"
        case .subscribe(let id, _, _): "subscribe \(id)"
        case .unsubscribe(let id): "unsubscribe \(id)"
        case .ping: "ping"
        case .push(let mutations): "push of \(mutations.count) mutations"
        }
        activity.withLock { $0 = (what, .now) }
        defer { activity.withLock { $0 = nil } }
        switch message {
        case .hello(let version, let token, let client): await hello(protocol: version, token: token, client: client)
        case .subscribe(let id, let query, let resume): await subscribe(id: id, query: query, resume: resume)
        case .unsubscribe(let id): unsubscribe(id: id)
        case .ping: send(.pong(lsn: lock.withLock { frames.lastPosition }.description))
        case .push(let mutations): await push(mutations)
        }
    }

    private func hello(protocol version: Int, token: String, client claimed: String?) async {
        guard case .greeting = lock.withLock({ phase }) else {
            send(.error(code: .outOfOrder, message: "hello was already received", id: nil))
            return
        }
        guard version == SyncProtocol.version else {
            closeAfter(.error(code: .unsupportedProtocol, message: "this server speaks protocol \(SyncProtocol.version), not \(version)",
                              id: nil))
            return
        }
        let claims: SyncToken.Claims
        do {
            claims = try SyncToken.verify(token, secret: configuration.secret)
        } catch SyncToken.Failure.expired {
            closeAfter(.error(code: .tokenExpired, message: "the token expired; reconnect with a new one", id: nil))
            return
        } catch {
            closeAfter(.error(code: .unauthorized, message: "the token is not valid: \(error)", id: nil))
            return
        }
        // The client id its mutations go under, for a client that means to write (`client` in
        // hello: its id, or empty for a new one); a reader gets none, and costs Postgres nothing.
        var client: (id: String, lastMutation: Int64)?
        if let claimed {
            do {
                client = try await server.writer.client(claimed: claimed.isEmpty ? nil : claimed, user: claims.user)
            } catch {
                server.logger.warning("no client id for a socket of \(claims.user): \(String(reflecting: error))")
            }
        }
        let position = server.timeline.completed.position
        lock.withLock {
            phase = .open(user: claims.user, expires: claims.expires)
            clientID = client?.id
            frames.start(at: position)
        }
        send(.welcome(.init(protocol: SyncProtocol.version, user: claims.user, lsn: position.description,
                            heartbeatMilliseconds: Int(configuration.heartbeatInterval.components.seconds * 1000
                                                       + configuration.heartbeatInterval.components.attoseconds / 1_000_000_000_000_000),
                            maxSubscriptions: configuration.maxSubscriptionsPerSocket,
                            maxMessageBytes: configuration.maxMessageBytes, client: client?.id, lastMutation: client?.lastMutation)))
    }

    /// Applies the mutations in order and answers with their results (the socket's next
    /// messages wait: mutations of one client are applied in the order they came).
    private func push(_ mutations: [Mutation]) async {
        guard case .open(let user, _) = lock.withLock({ phase }), let clientID = lock.withLock({ clientID }) else {
            send(.error(code: .unavailable, message: "this socket has no client id: say hello with \"client\" (your id, or \"\" for a "
                        + "new one) to push; if you did, the server could not reach Postgres then: reconnect", id: nil))
            return
        }
        send(.pushed(results: await server.positioned(await server.writer.apply(mutations, client: clientID, user: user))))
    }

    private func subscribe(id: String, query: QueryDescription, resume: ResumePoint?) async {
        guard case .open(let user, _) = lock.withLock({ phase }) else {
            send(.error(code: .outOfOrder, message: "say hello first", id: nil))
            return
        }
        guard !id.isEmpty, id.utf8.count <= 256 else {
            send(.error(code: .malformed, message: "a subscription id is 1 to 256 bytes of text", id: nil))
            return
        }
        guard let hub = server.hub else {
            send(.error(code: .retryLater, message: "the server is starting", id: id))
            return
        }
        guard let schema = await server.schema(of: query.table) else {
            send(.error(code: .invalidQuery, message: "there is no synced table \(query.table)", id: id))
            return
        }
        let compiled: CompiledQuery
        let basis: String
        do {
            (compiled, basis) = try hub.compile(query, user: user, schema: schema)
        } catch let error as RulesError {
            send(.error(code: .forbidden, message: error.description, id: id))
            return
        } catch {
            send(.error(code: .invalidQuery, message: "\(error)", id: id))
            return
        }
        // Reserve the id before any wait: a second subscribe under it is refused.
        enum Reservation { case reserved(Int), duplicate, full }
        let reservation = lock.withLock { () -> Reservation in
            guard frames.subscriptions[id] == nil else { return .duplicate }
            guard frames.subscriptions.count < configuration.maxSubscriptionsPerSocket else { return .full }
            return frames.reserve(id).map(Reservation.reserved) ?? .duplicate
        }
        let generation: Int
        switch reservation {
        case .reserved(let value): generation = value
        case .duplicate:
            send(.error(code: .duplicateSubscription, message: "the socket already has a subscription \(id)", id: id))
            return
        case .full:
            send(.error(code: .tooManySubscriptions, message: "a socket may hold \(configuration.maxSubscriptionsPerSocket) subscriptions",
                        id: id))
            return
        }
        // Attaching may wait (a resume for a position the replica has not reached, the resume
        // gate) and read (history, a first result): it runs beside the socket's other messages.
        lock.withLock {
            attaching[generation] = Task { [self] in
                await attach(id: id, generation: generation, compiled: compiled, basis: basis, schema: schema, resume: resume, hub: hub)
                lock.withLock { attaching[generation] = nil }
            }
        }
    }

    /// Attaches a reserved subscription to the hub: from the client's rows at its resume point
    /// when the replica still has them, otherwise from nothing (a snapshot).
    private func attach(id: String, generation: Int, compiled: CompiledQuery, basis: String, schema: SyncedTableSchema,
                        resume: ResumePoint?, hub: SubscriptionHub) async {
        var old: [[WireValue]]?
        if let resume, resume.basis == basis, let position = PGOutput.LSN(resume.lsn) {
            switch await resumeVersion(for: position) {
            case .version(let version):
                guard await server.resumeGate.admit() else {
                    let held = lock.withLock { () -> Bool in
                        guard frames.holds(id, generation: generation) else { return false }
                        return frames.remove(id)
                    }
                    if held { send(.error(code: .retryLater, message: "too many resumes at once; subscribe again later", id: id)) }
                    return
                }
                // Beyond the change log's reach, or across a schema change: a snapshot.
                old = try? hub.rows(of: compiled, schema: schema, at: version)
            case .ahead, .unknown:
                break
            }
        }
        let token = hub.subscribe(compiled, basis: basis, schema: schema, resumingFrom: old) { [weak self] event in
            guard let self else { return }
            self.server.file(event, subscription: id, generation: generation, for: self)
        }
        let kept = lock.withLock { () -> Bool in
            guard frames.holds(id, generation: generation) else { return false }
            tokens[id] = token
            return true
        }
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

    private func unsubscribe(id: String) {
        let token = lock.withLock { () -> SubscriptionToken?? in
            guard frames.remove(id) else { return nil }
            return .some(tokens.removeValue(forKey: id))
        }
        guard let token else {
            send(.error(code: .unknownSubscription, message: "the socket has no subscription \(id)", id: id))
            return
        }
        if let token {
            server.metrics.subscriptions.withLock { $0 -= 1 }
            token.cancel()
        }
    }

    // MARK: Frames

    /// Files a subscription's event under `version` (called by the server under its frame lock).
    func enqueue(_ event: SubscriptionEvent, subscription id: String, generation: Int, at version: Int64) {
        let ended = lock.withLock { () -> Bool in
            guard frames.file(event, subscription: id, generation: generation, at: version) else { return false }
            tokens[id] = nil
            return true
        }
        if ended { server.metrics.subscriptions.withLock { $0 -= 1 } }
    }

    /// Sends what waits for versions up to `version`, one frame per version.
    func flush(upTo version: Int64) {
        if queueFlush(upTo: version) { writer.wake() }
    }

    /// Queues what waits for versions up to `version`; whether the writer must be woken (see
    /// ``SyncServer/wake(_:queue:)``).
    func queueFlush(upTo version: Int64, memo: FrameMemo? = nil) -> Bool {
        queue { frames in frames.flush(upTo: version, position: server.position(of:), memo: memo) }
    }

    /// Queues what the finished version holds, then, when the socket heard nothing since an
    /// earlier position, that its subscriptions stand at `position`; whether the writer must be
    /// woken.
    func queueHeartbeat(version: Int64, position: PGOutput.LSN) -> Bool {
        let flushed = queueFlush(upTo: version)
        let beat = queue { frames in
            guard case .open = phase else { return false }
            return frames.heartbeat(version: version, position: position)
        }
        return flushed || beat
    }

    /// Writes what waits (on the socket's event loop).
    func pump(_ cache: inout SocketWriter.WireCache) { writer.pump(&cache) }

    // MARK: The outbound queue

    /// Runs `change` on the frames under the lock; wakes the writer when it queued something
    /// (and counts a socket dropped for not reading).
    private func perform(_ change: (inout SocketFrames) -> Bool) {
        if queue(change) { writer.wake() }
    }

    /// Runs `change` on the frames under the lock; `true` when the writer must be woken (it
    /// then counts as woken: the caller wakes it, alone or with other sockets of its loop).
    private func queue(_ change: (inout SocketFrames) -> Bool) -> Bool {
        let (wake, dropped) = lock.withLock { () -> (Bool, Bool) in
            let (wasDropped, wasClosing) = (frames.wasDropped, frames.isClosing)
            guard change(&frames) else { return (false, false) }
            defer { writerWoken = true }
            // (A socket that starts closing always wakes its writer: one that waits for the
            // channel to become writable starts the closing grace.)
            return (!writerWoken || frames.isClosing != wasClosing, frames.wasDropped && !wasDropped)
        }
        if dropped { server.metrics.droppedSockets.withLock { $0 += 1 } }
        return wake
    }

    private func send(_ message: ServerMessage) {
        perform { $0.push(message.json) }
    }

    /// The node is stopping: the socket closes after telling the client to come back later.
    func shutDown() {
        closeAfter(.error(code: .retryLater, message: "the node is stopping; connect again", id: nil))
    }

    /// Queues `message` as the socket's last frame: the socket closes once it is written.
    private func closeAfter(_ message: ServerMessage) {
        perform { frames in
            frames.pushLast(message.json)
            return true
        }
    }

    /// Closes at once: what waits is not written (and the writer is done).
    private func close() {
        lock.withLock { frames.close() }
        writerFinished()
        writer.released()
    }

    /// Returns once the writer is done: the closing socket's frames written (or given up on),
    /// or the channel closed.
    private func writerDone() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = lock.withLock { () -> Bool in
                if case .finished = writerState { return true }
                writerState = .waited(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}

extension SyncSession: SocketWriter.Source {
    func takeFrames(budget: Int) -> (frames: [[UInt8]], drained: Bool) {
        lock.withLock {
            var taken: [[UInt8]] = []
            var bytes = 0
            while bytes < budget, let frame = frames.next() {
                frames.written(frame.count)
                taken.append(frame)
                bytes += frame.count
            }
            // An empty queue: the next frame queued wakes the writer again.
            if !frames.hasNext { writerWoken = false }
            return (taken, frames.isFinished)
        }
    }

    var isClosing: Bool { lock.withLock { frames.isClosing } }

    var isDrained: Bool { lock.withLock { frames.isFinished } }

    func wrote(frames: Int, bytes: Int) {
        server.metrics.sent.withLock {
            $0.frames += frames
            $0.bytes += bytes
        }
    }

    func writerFinished() {
        let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { writerState = .finished }
            if case .waited(let continuation) = writerState { return continuation }
            return nil
        }
        waiting?.resume()
    }
}
