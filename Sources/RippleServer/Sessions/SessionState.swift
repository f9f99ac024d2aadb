#if Sync
import Foundation
import RippleSync

/// The pure core of one socket session: which phase the conversation is in, what the socket
/// holds (subscriptions, their hub tokens, the attachments in progress, the outbound queue and
/// its writer), and what to do next when something happens. It performs nothing itself:
/// ``SyncSession`` holds it under a lock, feeds it the socket's events, and performs the
/// actions it returns (queue frames and wake the writer, ask the hub, verify a token, push,
/// resume a waiter) outside the lock.
///
/// ```
///              hello (valid token)
///   greeting ──────────────────────► open
///      │                               │
///      │ no hello in time, a refused   │ token expired, node stopping (retry_later),
///      │ hello (protocol, token)       │ the client does not read (slow_consumer)
///      └──────────────► closing ◄──────┘
///                          │ its last frame written (or its grace passed), or the socket closed
///                          ▼
///                        ended (subscriptions released; absorbing)
/// ```
///
/// The outbound queue is ``SocketFrames``: bounded in bytes, a socket that does not read is
/// dropped (its queue emptied, one `slow_consumer` error left to write). The writer is woken
/// once per batch of frames: ``Output/wakeWriter`` says when, and the writer's
/// ``takeFrames(budget:)`` re-arms it when it empties the queue. `Token` is what the hub gives
/// for a subscription, `Attachment` the work attaching one, `Waiter` what waits for the writer
/// to finish: generic, so that tests drive the machine with plain values.
///
/// ``checkInvariants()`` runs after every event in debug builds.
struct SessionState<Token, Attachment, Waiter> {
    /// The limits the node sets (``SyncServerConfiguration``) and the moment the socket opened.
    struct Limits {
        var maxQueuedBytes: Int
        var maxMessageBytes: Int
        var maxSubscriptions: Int
        var helloTimeout: Duration
        var heartbeatMilliseconds: Int
        var opened: ContinuousClock.Instant
    }

    enum Phase: Equatable {
        /// Waiting for a valid `hello` (within ``Limits/helloTimeout``).
        case greeting
        /// Welcomed: `identity` from the token (the user, its claims, valid until its
        /// `expires`); `clientID` the id its mutations go under (`nil`: a reader, or Postgres
        /// out of reach at hello).
        case open(identity: SyncIdentity, clientID: String?)
    }

    /// The writer's state, as far as the session knows it.
    enum Writer {
        /// Writing (or idle until woken).
        case running
        /// Writing, and `Waiter` waits for it to finish.
        case awaited(Waiter)
        /// Done: everything written, given up on, or the channel closed.
        case finished
    }

    /// What the shell does to the writer after an event that may have queued frames.
    struct Output: Equatable {
        /// Frames were queued and the writer is not yet woken for them (or the socket started
        /// closing): wake it.
        var wakeWriter = false
        /// This event dropped the socket for not reading (count it).
        var droppedSlowConsumer = false

        static var none: Output { Output() }

        /// Both outputs' effects.
        func merged(_ other: Output) -> Output {
            Output(wakeWriter: wakeWriter || other.wakeWriter, droppedSlowConsumer: droppedSlowConsumer || other.droppedSlowConsumer)
        }
    }

    /// What the shell does with a message the client sent.
    enum Received {
        /// The machine answered it (an error, a pong; or the socket closes): perform `Output`.
        case answered(Output)
        /// A `hello` to verify: check `token` and report with ``hello(verified:claimed:)``.
        case verifyHello(token: String, client: String?)
        /// An `auth` renewal to verify: check `token` and report with ``renewed(verified:ruleClaims:)``.
        case verifyRenewal(token: String)
        /// A subscription to compile for `identity` and then ``reserve(_:)``.
        case subscribe(id: String, query: QueryDescription, resume: ResumePoint?, identity: SyncIdentity)
        /// Subscription `id` is gone: cancel its hub token (`nil`: it was still attaching).
        case unsubscribed(Token?)
        /// Mutations to apply for `clientID` and `user`, answered with ``pushed(_:)``.
        case push([Mutation], clientID: String, user: String)
    }

    /// What the shell does after a `hello`'s token was checked.
    enum HelloStep {
        /// Refused: the socket closes after the error (perform `Output`).
        case refused(Output)
        /// Accepted: find the client id (when `claimed` is not `nil`) and call
        /// ``welcome(identity:client:position:)``.
        case lookUpClient(identity: SyncIdentity, claimed: String?)
    }

    /// The outcome of reserving a subscription id.
    enum Reservation: Equatable {
        /// Reserved under `generation`: attach it, then report ``attached(_:generation:token:)``.
        case reserved(generation: Int)
        /// Refused (duplicate, too many): perform `Output`.
        case refused(Output)
    }

    /// What the session's clock does next.
    enum ClockStep: Equatable {
        /// Look again at `instant`.
        case sleep(until: ContinuousClock.Instant)
        /// The socket closes after the error queued (no hello in time, the token expired).
        case closing(Output)
        /// Nothing more to watch: the socket is closing.
        case stop
    }

    /// What the socket had when it ended, for the shell to release.
    struct Released {
        var tokens: [Token]
        var attachments: [Attachment]
        /// What waited for the writer (the writer is done once the socket ended).
        var waiter: Waiter?
        /// What the WebSocket layer refused in the client's frames, when that ended the
        /// reading: the socket closes with that refusal's status code (1007, 1009…).
        var refusal: (any Error)?
    }

    let limits: Limits
    private(set) var phase = Phase.greeting
    /// The subscriptions' generations, what waits per version, the outbound queue.
    private(set) var frames: SocketFrames
    /// The hub's token of each attached subscription.
    private(set) var tokens: [String: Token] = [:]
    /// The subscriptions being attached, by generation.
    private(set) var attaching: [Int: Attachment] = [:]
    private(set) var writer = Writer.running
    /// Whether the writer was woken since it last found the queue empty.
    private(set) var writerWoken = false
    /// The socket ended: its subscriptions were released; nothing attaches any more.
    private(set) var hasEnded = false
    /// What the WebSocket layer refused in the client's frames, if that ended the reading.
    private(set) var refusal: (any Error)?
    /// The message the socket is handling, and since when (for a node that cannot stop).
    private(set) var activity: (what: String, since: ContinuousClock.Instant)?

    init(limits: Limits) {
        self.limits = limits
        frames = SocketFrames(maxQueuedBytes: limits.maxQueuedBytes)
    }

    /// Whether the socket is closing (its last frames wait, or it closed).
    var isClosing: Bool { frames.isClosing }

    /// Whether nothing more will ever be queued and nothing waits.
    var isDrained: Bool { frames.isFinished }

    // MARK: The outbound queue

    /// Runs `change` on the frames; the output says whether to wake the writer (it then counts
    /// as woken: the caller wakes it, alone or with other sockets of its loop).
    private mutating func queue(_ change: (inout SocketFrames) -> Bool) -> Output {
        let (wasDropped, wasClosing) = (frames.wasDropped, frames.isClosing)
        guard change(&frames) else { return .none }
        defer { writerWoken = true }
        // (A socket that starts closing always wakes its writer: one that waits for the
        // channel to become writable starts the closing grace.)
        return Output(wakeWriter: !writerWoken || frames.isClosing != wasClosing,
                      droppedSlowConsumer: frames.wasDropped && !wasDropped)
    }

    /// Queues `message`.
    mutating func send(_ message: ServerMessage) -> Output {
        defer { checkInvariantsInDebug() }
        return queue { $0.push(message.json) }
    }

    /// Queues `message` as the socket's last frame: the socket closes once it is written.
    mutating func closeAfter(_ message: ServerMessage) -> Output {
        defer { checkInvariantsInDebug() }
        return queue { frames in
            frames.pushLast(message.json)
            return true
        }
    }

    /// The node is stopping (or refuses the socket): it closes after telling the client to
    /// come back later.
    mutating func shutDown(_ reason: String = "the node is stopping; connect again") -> Output {
        closeAfter(.error(code: .retryLater, message: reason, id: nil))
    }

    // MARK: Messages

    /// The client sent `text`.
    mutating func received(_ text: String) -> Received {
        defer { checkInvariantsInDebug() }
        guard text.utf8.count <= limits.maxMessageBytes else {
            return .answered(send(.error(code: .messageTooLarge, message: "a message may hold at most \(limits.maxMessageBytes) bytes; "
                                         + "this one holds \(text.utf8.count)", id: nil)))
        }
        let message: ClientMessage
        do {
            message = try ClientMessage.read(json: text.utf8)
        } catch {
            return .answered(send(.error(code: error.code, message: error.message, id: error.id)))
        }
        return received(message)
    }

    /// Reading the client's frames failed with `error` (what WebSocket itself refuses: text that
    /// is not UTF-8, a message beyond the frame bound…): unless the socket closes for a reason
    /// of its own, it closes with that refusal's status code.
    mutating func readingFailed(_ error: any Error) {
        defer { checkInvariantsInDebug() }
        guard !frames.isClosing else { return }
        refusal = error
    }

    /// The shell handles a message that waits (`what`, in words) since `since`; `nil` once done.
    mutating func handling(_ what: String?, since: ContinuousClock.Instant) {
        activity = what.map { ($0, since) }
    }

    /// The client sent a binary frame: not a message.
    mutating func receivedBinary() -> Output {
        send(.error(code: .malformed, message: "frames are JSON text; a binary frame is not a message", id: nil))
    }

    /// The client sent `message` (read and within the size limit).
    mutating func received(_ message: ClientMessage) -> Received {
        defer { checkInvariantsInDebug() }
        guard case .open(let identity, let clientID) = phase else {
            guard case .hello(let version, let token, let client) = message else {
                return .answered(send(.error(code: .outOfOrder, message: "say hello first", id: nil)))
            }
            guard version == SyncProtocol.version else {
                return .answered(closeAfter(.error(code: .unsupportedProtocol,
                                                   message: "this server speaks protocol \(SyncProtocol.version), not \(version)", id: nil)))
            }
            return .verifyHello(token: token, client: client)
        }
        switch message {
        case .hello:
            return .answered(send(.error(code: .outOfOrder, message: "hello was already received", id: nil)))
        case .auth(let token):
            return .verifyRenewal(token: token)
        case .subscribe(let id, let query, let resume):
            guard !id.isEmpty, id.utf8.count <= 256 else {
                return .answered(send(.error(code: .malformed, message: "a subscription id is 1 to 256 bytes of text", id: nil)))
            }
            return .subscribe(id: id, query: query, resume: resume, identity: identity)
        case .unsubscribe(let id):
            guard frames.remove(id) else {
                return .answered(send(.error(code: .unknownSubscription, message: "the socket has no subscription \(id)", id: id)))
            }
            return .unsubscribed(tokens.removeValue(forKey: id))
        case .ping:
            return .answered(send(.pong(lsn: frames.lastPosition.description)))
        case .push(let mutations):
            guard let clientID else {
                return .answered(send(.error(code: .unavailable, message: "this socket has no client id: say hello with \"client\" (your "
                                             + "id, or \"\" for a new one) to push; if you did, the server could not reach Postgres "
                                             + "then: reconnect", id: nil)))
            }
            return .push(mutations, clientID: clientID, user: identity.user)
        }
    }

    /// The `hello`'s token was checked: its identity, or why it is refused.
    mutating func hello(verified: Result<SyncIdentity, TokenRefusal>, claimed client: String?) -> HelloStep {
        defer { checkInvariantsInDebug() }
        guard case .greeting = phase else { return .refused(.none) }
        switch verified {
        case .success(let identity):
            return .lookUpClient(identity: identity, claimed: client)
        case .failure(let refusal):
            return .refused(closeAfter(.error(code: refusal.code, message: Self.refusalMessage(refusal), id: nil)))
        }
    }

    /// The words of a token's refusal: why, and what to do.
    private static func refusalMessage(_ refusal: TokenRefusal) -> String {
        refusal.code == .tokenExpired ? "\(refusal.message); reconnect with a new one" : "the token is not valid: \(refusal.message)"
    }

    /// An `auth` renewal's token was checked: the socket takes its identity when it is the same
    /// user with the same values of the claims the rules use (`ruleClaims`), and answers
    /// `authed`; otherwise the socket closes after the error (`token_identity_changed`, or why
    /// the token is refused): its subscriptions were made for the old identity.
    mutating func renewed(verified: Result<SyncIdentity, TokenRefusal>, ruleClaims: Set<String>) -> Output {
        defer { checkInvariantsInDebug() }
        guard case .open(let old, let clientID) = phase, !frames.isClosing else { return .none }
        switch verified {
        case .success(let identity):
            guard identity.user == old.user, identity.claims(named: ruleClaims) == old.claims(named: ruleClaims) else {
                let what = identity.user == old.user ? "other values of the claims the rules use" : "another user"
                return closeAfter(.error(code: .tokenIdentityChanged,
                                         message: "the renewed token names \(what) than the socket's: connect again with it", id: nil))
            }
            phase = .open(identity: identity, clientID: clientID)
            return send(.authed(expires: Int64(identity.expires.timeIntervalSince1970.rounded(.down))))
        case .failure(let refusal):
            return closeAfter(.error(code: refusal.code, message: Self.refusalMessage(refusal), id: nil))
        }
    }

    /// The socket is welcomed at `position`: open for `identity` (its token valid until its
    /// `expires`), its mutations under `client` (`nil`: it has no client id).
    mutating func welcome(identity: SyncIdentity, client: (id: String, lastMutation: Int64)?, position: PGOutput.LSN) -> Output {
        defer { checkInvariantsInDebug() }
        guard case .greeting = phase else { return .none }
        phase = .open(identity: identity, clientID: client?.id)
        frames.start(at: position)
        return send(.welcome(.init(protocol: SyncProtocol.version, user: identity.user, lsn: position.description,
                                   heartbeatMilliseconds: limits.heartbeatMilliseconds, maxSubscriptions: limits.maxSubscriptions,
                                   maxMessageBytes: limits.maxMessageBytes, client: client?.id, lastMutation: client?.lastMutation)))
    }

    /// The results of a push, to send.
    mutating func pushed(_ results: [MutationResult]) -> Output {
        send(.pushed(results: results))
    }

    // MARK: Subscriptions

    /// Reserves `id` for a subscription the shell compiled (a second subscribe under it is
    /// refused while it attaches).
    mutating func reserve(_ id: String) -> Reservation {
        defer { checkInvariantsInDebug() }
        guard !hasEnded else { return .refused(.none) }
        guard frames.subscriptions[id] == nil else { return .refused(duplicate(id)) }
        guard frames.subscriptions.count < limits.maxSubscriptions else {
            return .refused(send(.error(code: .tooManySubscriptions, message: "a socket may hold \(limits.maxSubscriptions) subscriptions",
                                        id: id)))
        }
        guard let generation = frames.reserve(id) else { return .refused(duplicate(id)) }
        return .reserved(generation: generation)
    }

    private mutating func duplicate(_ id: String) -> Output {
        send(.error(code: .duplicateSubscription, message: "the socket already has a subscription \(id)", id: id))
    }

    /// The shell started `attachment` for the subscription reserved under `generation`.
    mutating func attachStarted(_ generation: Int, _ attachment: Attachment) {
        defer { checkInvariantsInDebug() }
        guard !hasEnded else { return }
        attaching[generation] = attachment
    }

    /// The attachment of `generation` ended (attached or not).
    mutating func attachEnded(_ generation: Int) {
        defer { checkInvariantsInDebug() }
        attaching[generation] = nil
    }

    /// The resume gate refused subscription `id`'s resume: the client is told to retry later
    /// (unless it unsubscribed meanwhile).
    mutating func resumeRefused(_ id: String, generation: Int) -> Output {
        defer { checkInvariantsInDebug() }
        guard frames.holds(id, generation: generation), tokens[id] == nil, frames.remove(id) else { return .none }
        return send(.error(code: .retryLater, message: "too many resumes at once; subscribe again later", id: id))
    }

    /// The hub attached subscription `id` of `generation` with `token`; `false` when the
    /// subscription is gone meanwhile, or attached already (the shell cancels the token).
    mutating func attached(_ id: String, generation: Int, token: Token) -> Bool {
        defer { checkInvariantsInDebug() }
        guard frames.holds(id, generation: generation), tokens[id] == nil else { return false }
        tokens[id] = token
        return true
    }

    /// Files a subscription's event under `version`; `true` when it ended an attached
    /// subscription (its token is released).
    mutating func file(_ event: SubscriptionEvent, subscription id: String, generation: Int, at version: Int64) -> Bool {
        defer { checkInvariantsInDebug() }
        guard frames.file(event, subscription: id, generation: generation, at: version) else { return false }
        tokens[id] = nil
        return true
    }

    // MARK: Frames

    /// A replica version finished: what waits for versions up to `version` is queued, one
    /// frame per version labelled with `position(version)`.
    mutating func flush(upTo version: Int64, position: (Int64) -> PGOutput.LSN, memo: FrameMemo? = nil) -> Output {
        defer { checkInvariantsInDebug() }
        return queue { frames in frames.flush(upTo: version, position: position, memo: memo) }
    }

    /// A heartbeat: what waits for `version` is queued, then, when the socket is open and heard
    /// nothing since an earlier position, that its subscriptions stand at `position`.
    mutating func heartbeat(version: Int64, position: PGOutput.LSN, positions: (Int64) -> PGOutput.LSN) -> Output {
        defer { checkInvariantsInDebug() }
        let flushed = queue { frames in frames.flush(upTo: version, position: positions) }
        let beat = queue { [phase] frames in
            guard case .open = phase else { return false }
            return frames.heartbeat(version: version, position: position)
        }
        return flushed.merged(beat)
    }

    // MARK: The clock

    /// The session's clock looks at the time (`now`, and the wall clock's `date` for the
    /// token's expiry): a socket without hello after ``Limits/helloTimeout`` closes, so does one
    /// whose token expired.
    mutating func clockFired(now: ContinuousClock.Instant, date: Date) -> ClockStep {
        defer { checkInvariantsInDebug() }
        guard !frames.isClosing else { return .stop }
        switch phase {
        case .greeting:
            let end = limits.opened + limits.helloTimeout
            if now >= end {
                return .closing(closeAfter(.error(code: .outOfOrder, message: "no hello within \(limits.helloTimeout)", id: nil)))
            }
            // Looked at again each second while greeting: the token's expiry counts once
            // hello came (no hello wakes the clock).
            return .sleep(until: min(end, now + .seconds(1)))
        case .open(let identity, _):
            let left = identity.expires.timeIntervalSince(date)
            if left <= 0 {
                return .closing(closeAfter(.error(code: .tokenExpired, message: "the token expired; reconnect with a new one", id: nil)))
            }
            // Looked at again at least hourly (the wall clock may be set meanwhile).
            return .sleep(until: now + .milliseconds(Int64(min(left, 3600) * 1000) + 1))
        }
    }

    // MARK: The writer and the socket's end

    /// The writer takes the next frames (about `budget` bytes); and whether nothing more will
    /// ever come. When they empty the queue, the next frame queued wakes the writer again.
    mutating func takeFrames(budget: Int) -> (frames: [[UInt8]], drained: Bool) {
        defer { checkInvariantsInDebug() }
        var taken: [[UInt8]] = []
        var bytes = 0
        while bytes < budget, let frame = frames.next() {
            frames.written(frame.count)
            taken.append(frame)
            bytes += frame.count
        }
        if !frames.hasNext { writerWoken = false }
        return (taken, frames.isFinished)
    }

    /// `waiter` waits for the writer to finish; `false` when it is finished already (the
    /// shell resumes the waiter at once).
    mutating func awaitWriter(_ waiter: Waiter) -> Bool {
        defer { checkInvariantsInDebug() }
        switch writer {
        case .finished:
            return false
        case .awaited:
            preconditionFailure("the writer is awaited twice")
        case .running:
            writer = .awaited(waiter)
            return true
        }
    }

    /// The writer is done; what waited for it, to resume.
    mutating func writerFinished() -> Waiter? {
        defer { checkInvariantsInDebug() }
        defer { writer = .finished }
        if case .awaited(let waiter) = writer { return waiter }
        return nil
    }

    /// Closes at once: what waits is not written, and the writer is done; what waited for it.
    mutating func close() -> Waiter? {
        defer { checkInvariantsInDebug() }
        frames.close()
        return writerFinished()
    }

    /// The socket ended: every subscription is released; what the shell must cancel.
    mutating func ended() -> Released {
        defer { checkInvariantsInDebug() }
        let waiter = close()
        for id in frames.subscriptions.keys { frames.remove(id) }
        defer { (tokens, attaching, hasEnded) = ([:], [:], true) }
        return Released(tokens: Array(tokens.values), attachments: Array(attaching.values), waiter: waiter, refusal: refusal)
    }

    // MARK: Invariants

    /// What the socket is doing at `now`, in words: its phase, the message it handles, the
    /// subscriptions attaching.
    func description(at now: ContinuousClock.Instant) -> String {
        let words = switch phase {
        case .greeting: "before hello"
        case .open(let identity, _): "open for \(identity.user)"
        }
        let busy = activity.map { ", handling its \($0.what) for \(now - $0.since)" } ?? ""
        return words + busy + (attaching.isEmpty ? "" : ", \(attaching.count) subscriptions attaching")
    }

    /// Traps when the state contradicts itself.
    func checkInvariants() {
        // Every attached subscription is a held one.
        for id in tokens.keys { precondition(frames.subscriptions[id] != nil, "a token for \(id), which the socket does not hold") }
        if case .greeting = phase {
            precondition(frames.subscriptions.isEmpty && tokens.isEmpty, "subscriptions before hello")
        }
        // (An expiring subscription count may pass the limit only by resubscribing, never.)
        precondition(frames.subscriptions.count <= limits.maxSubscriptions, "more subscriptions than the limit")
        // A frame that waits has woken the writer: none is stranded in the queue.
        precondition(!frames.hasNext || writerWoken, "a frame waits and the writer was not woken")
        precondition(!frames.wasDropped || frames.isClosing, "a dropped socket that does not close")
        precondition(frames.queuedBytes >= 0, "negative queued bytes")
        if hasEnded {
            precondition(frames.subscriptions.isEmpty && tokens.isEmpty && attaching.isEmpty, "an ended socket holds subscriptions")
            precondition(frames.isClosing, "an ended socket that takes frames")
            if case .finished = writer {} else { preconditionFailure("an ended socket's writer runs") }
        }
    }

    private func checkInvariantsInDebug() {
        #if DEBUG
        checkInvariants()
        #endif
    }
}
#endif
