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
    private var subscriptions: [String: Active] = [:]
    private var nextGeneration = 0
    private var pending: [Int64: Pending] = [:]
    /// The position of the last frame or heartbeat queued.
    private var lastPosition = PGOutput.LSN(0)
    private var outbox: [ByteBuffer] = []
    private var outboxHead = 0
    private var queuedBytes = 0
    private var closing = false
    private var writer: CheckedContinuation<Void, Never>?
    private let opened = ContinuousClock.now

    enum Phase {
        case greeting
        case open(user: String, expires: Date)
    }

    struct Active {
        var generation: Int
        var token: SubscriptionToken?
    }

    /// What one version brings the socket.
    struct Pending {
        var snapshots: [(id: String, generation: Int, json: [UInt8])] = []
        var changesets: [(id: String, generation: Int, json: [UInt8])] = []
        var ended: [(id: String, reason: String)] = []
    }

    init(server: SyncServer) { self.server = server }

    private var configuration: SyncServerConfiguration { server.configuration }

    // MARK: The socket's life

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        guard server.register(self) else {
            server.metrics.refusedSockets.withLock { $0 += 1 }
            closeAfter(.error(code: .retryLater, message: "the server holds as many sockets as it may (\(configuration.maxSockets)); "
                              + "try again later", id: nil))
            await writeLoop(outbound)
            return
        }
        await withTaskGroup(of: Role.self) { group in
            group.addTask { await self.writeLoop(outbound); return .writer }
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
                    if !self.lock.withLock({ self.closing }) { self.close() }
                }
            }
            self.close()
            group.cancelAll()
        }
        let ended = lock.withLock { () -> [SubscriptionToken] in
            defer { subscriptions = [:]; pending = [:] }
            return subscriptions.values.compactMap(\.token)
        }
        server.metrics.subscriptions.withLock { $0 -= ended.count }
        for token in ended { token.cancel() }
        server.unregister(self)
    }

    private enum Role { case writer, reader, clock }

    private func readLoop(_ inbound: WebSocketInboundStream) async {
        do {
            for try await message in inbound.messages(maxSize: configuration.maxMessageBytes * 4) {
                switch message {
                case .text(let text): await receive(text)
                case .binary: send(.error(code: .malformed, message: "frames are JSON text; a binary frame is not a message", id: nil))
                }
                if lock.withLock({ closing }) { return }
            }
        } catch {
            // The client went away, or sent what WebSocket itself refuses (the socket closes).
        }
    }

    /// Closes a socket that said no valid `hello` in time, and one whose token expired.
    private func watchClock() async {
        while true {
            let (phase, closing) = lock.withLock { (self.phase, self.closing) }
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

    private struct Envelope: Decodable { var type: String }

    private func receive(_ text: String) async {
        guard text.utf8.count <= configuration.maxMessageBytes else {
            send(.error(code: .messageTooLarge, message: "a message may hold at most \(configuration.maxMessageBytes) bytes; "
                        + "this one holds \(text.utf8.count)", id: nil))
            return
        }
        let data = Data(text.utf8)
        let type: String
        do {
            type = try JSONDecoder().decode(Envelope.self, from: data).type
        } catch {
            let isJSON = (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil
            send(.error(code: .malformed, message: isJSON ? "a message is a JSON object with a \"type\"" : "the message is not JSON",
                        id: nil))
            return
        }
        guard ["hello", "subscribe", "unsubscribe", "ping"].contains(type) else {
            send(.error(code: .unknownMessage, message: "there is no message \"\(type)\" (hello, subscribe, unsubscribe, ping)",
                        id: nil))
            return
        }
        let message: ClientMessage
        do {
            message = try JSONDecoder().decode(ClientMessage.self, from: data)
        } catch let error as DecodingError {
            let (isQuery, description) = Self.describe(error)
            let id = (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["id"] as? String
            send(.error(code: isQuery ? .invalidQuery : .malformed, message: "\(type): \(description)", id: id))
            return
        } catch {
            send(.error(code: .malformed, message: "\(type): \(error)", id: nil))
            return
        }
        if case .greeting = lock.withLock({ phase }) {
            guard case .hello = message else {
                send(.error(code: .outOfOrder, message: "say hello first", id: nil))
                return
            }
        }
        switch message {
        case .hello(let version, let token): hello(protocol: version, token: token)
        case .subscribe(let id, let query, let resume): await subscribe(id: id, query: query, resume: resume)
        case .unsubscribe(let id): unsubscribe(id: id)
        case .ping: send(.pong(lsn: lock.withLock { lastPosition }.description))
        }
    }

    /// A decoding error in words: which field, what was wrong; whether it is in the query.
    private static func describe(_ error: DecodingError) -> (inQuery: Bool, String) {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let at = path(context)
            return (at.hasPrefix("query"), "missing \"\(key.stringValue)\"" + (at.isEmpty ? "" : " in \(at)"))
        case .typeMismatch(let type, let context):
            return (path(context).hasPrefix("query"), "\(path(context)) is not \(type == String.self ? "a string" : "a \(type)")")
        case .valueNotFound(_, let context):
            return (path(context).hasPrefix("query"), "\(path(context)) is null")
        case .dataCorrupted(let context):
            let at = path(context)
            return (at.hasPrefix("query"), context.debugDescription + (at.isEmpty ? "" : " (at \(at))"))
        @unknown default:
            return (false, "\(error)")
        }
    }

    private func hello(protocol version: Int, token: String) {
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
        let position = server.timeline.completed.position
        lock.withLock {
            phase = .open(user: claims.user, expires: claims.expires)
            lastPosition = position
        }
        send(.welcome(.init(protocol: SyncProtocol.version, user: claims.user, lsn: position.description,
                            heartbeatMilliseconds: Int(configuration.heartbeatInterval.components.seconds * 1000
                                                       + configuration.heartbeatInterval.components.attoseconds / 1_000_000_000_000_000),
                            maxSubscriptions: configuration.maxSubscriptionsPerSocket,
                            maxMessageBytes: configuration.maxMessageBytes)))
    }

    private func subscribe(id: String, query: QueryDescription, resume: ResumePoint?) async {
        guard case .open(let user, _) = lock.withLock({ phase }) else {
            send(.error(code: .outOfOrder, message: "say hello first", id: id))
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
            guard subscriptions[id] == nil else { return .duplicate }
            guard subscriptions.count < configuration.maxSubscriptionsPerSocket else { return .full }
            nextGeneration += 1
            subscriptions[id] = Active(generation: nextGeneration, token: nil)
            return .reserved(nextGeneration)
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
        var old: [[WireValue]]?
        if let resume, resume.basis == basis, let position = PGOutput.LSN(resume.lsn) {
            switch await resumeVersion(for: position) {
            case .version(let version):
                guard await server.resumeGate.admit() else {
                    lock.withLock { if subscriptions[id]?.generation == generation { subscriptions[id] = nil } }
                    send(.error(code: .retryLater, message: "too many resumes at once; subscribe again later", id: id))
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
            guard subscriptions[id]?.generation == generation else { return false }
            subscriptions[id]?.token = token
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
            guard let active = subscriptions.removeValue(forKey: id) else { return nil }
            return .some(active.token)
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
        lock.withLock {
            guard let active = subscriptions[id], active.generation == generation else { return }
            switch event.kind {
            case .snapshot: pending[version, default: Pending()].snapshots.append((id, generation, event.json))
            case .changes: pending[version, default: Pending()].changesets.append((id, generation, event.json))
            case .ended(let reason):
                pending[version, default: Pending()].ended.append((id, reason))
                subscriptions[id] = nil
                server.metrics.subscriptions.withLock { $0 -= 1 }
            }
        }
    }

    /// Sends what waits for versions up to `version`, one frame per version.
    func flush(upTo version: Int64) {
        lock.withLock {
            guard !pending.isEmpty else { return }
            for next in pending.keys.filter({ $0 <= version }).sorted() {
                let items = pending.removeValue(forKey: next)!
                let position = max(server.position(of: next), lastPosition)
                let live = { (item: (id: String, generation: Int, json: [UInt8])) in
                    self.subscriptions[item.id]?.generation == item.generation
                }
                let (snapshots, changesets) = (items.snapshots.filter(live), items.changesets.filter(live))
                if !snapshots.isEmpty || !changesets.isEmpty {
                    var out = JSONBytes(reservingCapacity: 64 + (snapshots + changesets).reduce(0) { $0 + $1.json.count + $1.id.utf8.count + 4 })
                    out.raw(#"{"type":"changes","lsn":"#)
                    out.string(position.description)
                    for (name, list) in [("snapshots", snapshots), ("changesets", changesets)] where !list.isEmpty {
                        out.raw(",\"\(name)\":{")
                        for (offset, item) in list.enumerated() {
                            if offset > 0 { out.raw(",") }
                            out.string(item.id)
                            out.raw(":")
                            out.raw(item.json)
                        }
                        out.raw("}")
                    }
                    out.raw("}")
                    queue(out.bytes)
                }
                for (id, reason) in items.ended {
                    queue(ServerMessage.error(code: .subscriptionEnded, message: reason, id: id).json)
                }
                lastPosition = position
            }
        }
    }

    /// Flushes what the finished version holds, then, when the socket heard nothing since an
    /// earlier position, tells it that its subscriptions stand at `position`.
    func heartbeat(version: Int64, position: PGOutput.LSN) {
        flush(upTo: version)
        lock.withLock {
            guard case .open = phase, !closing, position > lastPosition, !pending.keys.contains(where: { $0 <= version }) else { return }
            lastPosition = position
            queue(ServerMessage.heartbeat(lsn: position.description).json)
        }
    }

    // MARK: The outbound queue

    private func send(_ message: ServerMessage) {
        lock.withLock { queue(message.json) }
    }

    /// Queues a frame (the lock held). A socket whose unread frames pass the bound is dropped:
    /// its queue is emptied, it is told why, and it closes (its client resumes later).
    private func queue(_ bytes: [UInt8]) {
        guard !closing else { return }
        // The bound is on what already waits: one frame larger than it is still sent.
        let alreadyWaiting = queuedBytes
        queuedBytes += bytes.count
        if alreadyWaiting > configuration.maxQueuedBytes {
            server.metrics.droppedSockets.withLock { $0 += 1 }
            outbox = []
            outboxHead = 0
            let error = ServerMessage.error(code: .slowConsumer, message: "more than \(configuration.maxQueuedBytes) bytes of frames "
                                            + "waited for this socket; reconnect and resume", id: nil).json
            queuedBytes = error.count
            outbox.append(ByteBuffer(bytes: error))
            closing = true
        } else {
            outbox.append(ByteBuffer(bytes: bytes))
        }
        let waiting = writer
        writer = nil
        waiting?.resume()
    }

    /// Queues `message` as the socket's last frame: the socket closes once it is written.
    private func closeAfter(_ message: ServerMessage) {
        lock.withLock {
            queue(message.json)
            closing = true
        }
    }

    private func close() {
        let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            closing = true
            outbox = []
            outboxHead = 0
            defer { writer = nil }
            return writer
        }
        waiting?.resume()
    }

    /// The next frame to write; `nil` once the socket closes and its queue is empty.
    private func nextFrame() async -> ByteBuffer? {
        while true {
            let next = lock.withLock { () -> ByteBuffer?? in
                if outboxHead < outbox.count {
                    let frame = outbox[outboxHead]
                    outboxHead += 1
                    if outboxHead == outbox.count || outboxHead > 1024 {
                        outbox.removeFirst(outboxHead)
                        outboxHead = 0
                    }
                    return .some(frame)
                }
                return closing ? .some(nil) : nil
            }
            if let next { return next }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = lock.withLock { () -> Bool in
                    if outboxHead < outbox.count || closing { return true }
                    writer = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    private func writeLoop(_ outbound: WebSocketOutboundWriter) async {
        while let frame = await nextFrame() {
            let count = frame.readableBytes
            let written: Bool
            if lock.withLock({ closing }) {
                // A closing socket's last frames: given up on after a second (a client that
                // does not read must not hold the socket open).
                written = await withTaskGroup(of: Bool.self) { group in
                    group.addTask { (try? await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: frame)))) != nil }
                    group.addTask { (try? await Task.sleep(for: .seconds(1))) == nil }
                    let first = await group.next() ?? false
                    group.cancelAll()
                    return first
                }
            } else {
                written = (try? await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: frame)))) != nil
            }
            guard written else { return }
            lock.withLock { queuedBytes -= count }
            server.metrics.sentBytes.withLock { $0 += count }
            server.metrics.sentFrames.withLock { $0 += 1 }
        }
    }
}
