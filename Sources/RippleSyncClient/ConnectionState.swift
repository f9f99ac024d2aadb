#if Sync
/// The pure core of a ``SyncClient``'s connection: which phase it is in, and what to do next
/// when something happens. It performs nothing itself: the client (an actor) feeds it events
/// (a socket opened, a frame heard, the welcome, the watch's tick, a connection ended) and
/// performs the actions it returns (connect, say hello and resubscribe, ping, push, give up on
/// a connection, reconnect after a delay, stop).
///
/// ```
///            start                socket opened               welcome
///   idle ───────────► connecting ───────────────► greeting ────────────► welcomed
///                        ▲   │ no welcome within the handshake timeout      │ silent for the
///       backoff elapsed  │   └──────────────► closing ◄──────────────────────┘ silence timeout,
///                        │                      │ (the socket's end,             or stop
///                    backingOff ◄───────────────┘  boundedly awaited)
///                              connection ended (any connected phase, too)
///
///   stop: the connection in progress is given up on, and once it ended ──► stopped
/// ```
///
/// Reconnecting waits ``Timing/minBackoff`` after a connection the server had welcomed; after
/// each attempt it did not welcome, the delay doubles, up to ``Timing/maxBackoff``. Each wait is
/// the delay times a random factor between 0.5 and 1, drawn from `Random` (a seeded generator
/// makes a test's delays known). A welcomed connection silent for half the silence timeout is
/// pinged once; silent for all of it, it is given up on.
///
/// ``checkInvariants()`` runs after every event in debug builds.
struct ConnectionState<Random: RandomNumberGenerator> {
    /// The client's timeouts and delays.
    struct Timing: Equatable {
        var minBackoff: Duration = .milliseconds(100)
        var maxBackoff: Duration = .seconds(30)
        var handshakeTimeout: Duration = .seconds(10)
        var silenceTimeout: Duration = .seconds(30)
        /// How long mutations may wait unanswered on a welcomed connection before they are sent
        /// again from the first.
        var pushRetryInterval: Duration = .seconds(5)
    }

    enum Phase: Equatable {
        /// Not started.
        case idle
        /// Opening the socket of `attempt`.
        case connecting(attempt: Int, started: ContinuousClock.Instant)
        /// Hello sent on the socket of `attempt`, the connection numbered `connection`; waiting
        /// for the welcome.
        case greeting(attempt: Int, connection: Int, started: ContinuousClock.Instant)
        /// Welcomed; `pinged` once a ping was sent for the current silence.
        case welcomed(attempt: Int, connection: Int, pinged: Bool)
        /// Given up on `attempt` (for `reason`): waiting for its socket to end.
        case closing(attempt: Int, reason: String)
        /// Waiting `delay` before the next attempt.
        case backingOff(delay: Duration)
        /// Stopped: nothing happens until the next start.
        case stopped
    }

    /// What the client must do next.
    enum Action: Equatable {
        /// Nothing.
        case none
        /// Open a socket for `attempt` to the address at `address` (of the client's list), then
        /// report ``socketOpened(attempt:now:)``, or ``connectionEnded()`` when it ends.
        case connect(attempt: Int, address: Int)
        /// Say hello on the socket just opened, and subscribe every subscription again.
        case greet(connection: Int)
        /// Close the socket just opened: its attempt was given up on.
        case closeSocket
        /// Give up on the connection: close its socket, wait (boundedly) for its end, then
        /// report ``connectionEnded()``.
        case giveUp(reason: String)
        /// Ping the server.
        case ping
        /// Push what is pending (from ``pushedThrough`` on).
        case pushPending
        /// Mutations may wait unanswered: if the outbox holds any, report ``pushFromFirst()``.
        case pushAgainIfPending
        /// Wait `delay`, then report ``backoffElapsed(now:)``.
        case reconnect(after: Duration)
        /// End the connection loop.
        case stop
    }

    var timing: Timing
    /// The number of addresses the client connects to in turn.
    let addresses: Int
    private var random: Random
    private(set) var phase = Phase.idle
    /// Numbers attempts to connect: a socket of an attempt given up on is closed, not used.
    private(set) var attempt = 0
    /// Counts connections (sockets opened and greeted), so that a subscription is sent once on each.
    private(set) var connection = 0
    /// The delay the next backoff starts from.
    private(set) var delay: Duration
    /// Whether the current attempt was welcomed.
    private(set) var wasWelcomed = false
    /// Stopping: the connection in progress is given up on, and no other starts.
    private(set) var isStopping = false
    /// When the current connection last heard from the server.
    private(set) var lastHeard: ContinuousClock.Instant
    /// Whether the current connection has a client id to push under.
    private(set) var canPush = false
    /// The last mutation sent on the current connection.
    private(set) var pushedThrough: Int64 = 0
    /// When a push was last sent or answered on the current connection.
    private(set) var lastPushProgress: ContinuousClock.Instant

    init(timing: Timing = Timing(), addresses: Int, random: Random, now: ContinuousClock.Instant) {
        precondition(addresses > 0, "a connection needs at least one address")
        self.timing = timing
        self.addresses = addresses
        self.random = random
        delay = timing.minBackoff
        (lastHeard, lastPushProgress) = (now, now)
    }

    /// Whether the current connection was welcomed.
    var isWelcomed: Bool {
        if case .welcomed = phase { return true }
        return false
    }

    /// Whether a socket of `attempt` is the one in use (frames of another are ignored).
    func isCurrent(_ attempt: Int) -> Bool {
        switch phase {
        case .connecting(let current, _), .greeting(let current, _, _), .welcomed(let current, _, _): current == attempt
        case .idle, .closing, .backingOff, .stopped: false
        }
    }

    // MARK: Connecting

    /// The client starts (again, after a stop).
    mutating func start(now: ContinuousClock.Instant) -> Action {
        defer { checkInvariantsInDebug() }
        switch phase {
        case .idle, .stopped:
            isStopping = false
            delay = timing.minBackoff
            return connect(now: now)
        case .connecting, .greeting, .welcomed, .closing, .backingOff:
            return .none
        }
    }

    private mutating func connect(now: ContinuousClock.Instant) -> Action {
        attempt += 1
        wasWelcomed = false
        lastHeard = now
        phase = .connecting(attempt: attempt, started: now)
        return .connect(attempt: attempt, address: (attempt - 1) % addresses)
    }

    /// The socket of `attempt` opened.
    mutating func socketOpened(attempt opened: Int, now: ContinuousClock.Instant) -> Action {
        defer { checkInvariantsInDebug() }
        guard case .connecting(let current, let started) = phase, current == opened else { return .closeSocket }
        connection += 1
        lastHeard = now
        phase = .greeting(attempt: current, connection: connection, started: started)
        return .greet(connection: connection)
    }

    /// A frame came on the current connection.
    mutating func heard(now: ContinuousClock.Instant) {
        defer { checkInvariantsInDebug() }
        lastHeard = now
    }

    /// The server welcomed the current connection.
    mutating func welcomed(now: ContinuousClock.Instant) {
        defer { checkInvariantsInDebug() }
        lastHeard = now
        guard case .greeting(let attempt, let connection, _) = phase else { return }
        wasWelcomed = true
        phase = .welcomed(attempt: attempt, connection: connection, pinged: false)
    }

    /// The watch looks at the time (every 100 ms): gives up on a connection not welcomed
    /// within the handshake timeout, or silent for the silence timeout (or on any, stopping);
    /// pings a connection silent for half of it; pushes again what waits unanswered.
    mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        defer { checkInvariantsInDebug() }
        switch phase {
        case .connecting(_, let started), .greeting(_, _, let started):
            if isStopping { return [giveUp("the client stopped")] }
            if now - started > timing.handshakeTimeout { return [giveUp("no welcome within \(timing.handshakeTimeout)")] }
            return []
        case .welcomed(let attempt, let connection, let pinged):
            if isStopping { return [giveUp("the client stopped")] }
            if now - lastHeard > timing.silenceTimeout { return [giveUp("the server was silent for \(timing.silenceTimeout)")] }
            var actions: [Action] = []
            if canPush, now - lastPushProgress > timing.pushRetryInterval {
                lastPushProgress = now
                actions.append(.pushAgainIfPending)
            }
            let quiet = now - lastHeard > timing.silenceTimeout / 2
            if quiet, !pinged { actions.append(.ping) }
            phase = .welcomed(attempt: attempt, connection: connection, pinged: quiet)
            return actions
        case .idle, .closing, .backingOff, .stopped:
            return []
        }
    }

    private mutating func giveUp(_ reason: String) -> Action {
        canPush = false
        phase = .closing(attempt: attempt, reason: reason)
        return .giveUp(reason: reason)
    }

    /// The client stops: the connection in progress is given up on at the next tick, and none
    /// follows it.
    mutating func stopRequested() -> Action {
        defer { checkInvariantsInDebug() }
        isStopping = true
        switch phase {
        case .idle, .backingOff:
            phase = .stopped
            return .stop
        case .connecting, .greeting, .welcomed, .closing, .stopped:
            return .none
        }
    }

    /// The connection of the current attempt ended (its socket closed, or it was given up on
    /// and its socket's end awaited): reconnect after a backoff, or stop.
    mutating func connectionEnded() -> Action {
        defer { checkInvariantsInDebug() }
        switch phase {
        case .connecting, .greeting, .welcomed, .closing:
            canPush = false
            if isStopping {
                phase = .stopped
                return .stop
            }
            delay = wasWelcomed ? timing.minBackoff : min(delay * 2, timing.maxBackoff)
            let wait = delay * Double.random(in: 0.5...1.0, using: &random)
            phase = .backingOff(delay: wait)
            return .reconnect(after: wait)
        case .idle, .backingOff, .stopped:
            return .none
        }
    }

    /// The backoff's delay passed: the next attempt.
    mutating func backoffElapsed(now: ContinuousClock.Instant) -> Action {
        defer { checkInvariantsInDebug() }
        guard case .backingOff = phase else { return .none }
        if isStopping {
            phase = .stopped
            return .stop
        }
        return connect(now: now)
    }

    // MARK: Pushing

    /// The welcome gave a client id and the client adopted it: push what is pending.
    mutating func clientIDAdopted() -> Action {
        defer { checkInvariantsInDebug() }
        guard isWelcomed else { return .none }
        canPush = true
        pushedThrough = 0
        return .pushPending
    }

    /// The node could not take a push (it has no client id for this socket).
    mutating func pushUnavailable() {
        defer { checkInvariantsInDebug() }
        canPush = false
    }

    /// A push of the mutations through `last` was sent.
    mutating func pushSent(through last: Int64, now: ContinuousClock.Instant) {
        defer { checkInvariantsInDebug() }
        pushedThrough = last
        lastPushProgress = now
    }

    /// A push was answered; `again`: the first mutation to send again (its result was not the
    /// mutation's fate), if any.
    mutating func pushAnswered(now: ContinuousClock.Instant, again: Int64?) {
        defer { checkInvariantsInDebug() }
        lastPushProgress = now
        if let again { pushedThrough = min(pushedThrough, again - 1) }
    }

    /// Mutations waited unanswered: they are sent again from the first.
    mutating func pushFromFirst() -> Action {
        defer { checkInvariantsInDebug() }
        guard canPush else { return .none }
        pushedThrough = 0
        return .pushPending
    }

    // MARK: Invariants

    /// The connection's state in words.
    var description: String {
        "attempt \(attempt), connection \(connection), welcomed \(isWelcomed), can push \(canPush), pushed through \(pushedThrough)"
    }

    /// Traps when the state contradicts itself.
    func checkInvariants() {
        switch phase {
        case .idle:
            precondition(attempt == 0 && connection == 0, "an idle connection that attempted")
        case .connecting(let current, _), .closing(let current, _):
            precondition(current == attempt, "a phase of attempt \(current), not the current \(attempt)")
        case .greeting(let current, let number, _), .welcomed(let current, let number, _):
            precondition(current == attempt && number == connection, "a phase of another attempt or connection")
            precondition(connection >= 1, "greeting without a connection")
        case .backingOff(let wait):
            precondition(wait >= .zero && wait <= delay, "a backoff beyond its delay")
        case .stopped:
            break
        }
        precondition(!canPush || isWelcomed, "pushing without a welcome")
        precondition(connection <= attempt, "more connections than attempts")
        precondition(pushedThrough >= 0, "a negative push position")
        precondition(delay >= .zero, "a negative delay")
        precondition(!wasWelcomed || attempt > 0, "welcomed before any attempt")
    }

    private func checkInvariantsInDebug() {
        #if DEBUG
        checkInvariants()
        #endif
    }
}
#endif
