/// The pure core of one subscription: which phase it is in, and what to do next when something
/// happens. It performs nothing itself; ``LiveObserver`` holds it under a lock, applies its
/// actions outside the lock, and reports back.
///
/// At most one refresh and one delivery are in flight at a time, and never both: a commit that
/// arrives while the subscription is refreshing or delivering only marks it *stale*, and one
/// refresh follows when the current step ends. That is what coalesces a burst of commits into
/// one changeset for a slow subscriber, and what bounds its memory to two snapshots (the one it
/// last received, and the one being compared with it).
///
/// ```
///            start / invalidate            refreshed(event)
///   idle ─────────────────────► refreshing ────────────────► delivering
///    ▲                             │  ▲                          │
///    │     refreshed(no event)     │  │  delivered, stale        │
///    └─────────────────────────────┘  └──────────────────────────┤
///    └───────────────────────────────────────────────────────────┘
///                               delivered, not stale
///   any phase ── cancel / fail ──► finished (absorbing)
///
///   refreshing ── refresh failed for a passing reason ──► backingOff ── retry ──► refreshing
/// ```
///
/// A refresh that fails for a reason that may pass (a reader that cannot be opened for a moment,
/// the file busy beyond the timeout) does not end the stream: the subscription backs off and
/// refreshes again (commits meanwhile only mark it stale, as while refreshing).
struct ObserverState: Equatable {
    enum Phase: Equatable {
        /// Waiting for a commit.
        case idle
        /// Reading the queries' new results.
        case refreshing
        /// The subscriber is handling an event.
        case delivering
        /// A refresh failed for a reason that may pass: waiting to refresh again.
        case backingOff
        /// Cancelled, or ended by an error: nothing more happens.
        case finished
    }

    /// What the owner must do next.
    enum Action: Equatable {
        /// Nothing.
        case none
        /// Refresh the results (and report with ``refreshed(hasEvent:)``).
        case refresh
        /// Hand the refreshed event to the subscriber (and report with ``delivered()``).
        case deliver
        /// Tell the subscriber the stream ended with an error (the state is already finished).
        case deliverError
    }

    private(set) var phase: Phase = .idle
    /// A commit arrived during the current refresh or delivery: refresh once more after it.
    private(set) var isStale = false

    /// The subscription starts: its first refresh reads the initial snapshot.
    mutating func start() -> Action {
        guard phase == .idle else { return .none }
        phase = .refreshing
        return .refresh
    }

    /// A commit may have changed the results.
    mutating func invalidate() -> Action {
        switch phase {
        case .idle:
            phase = .refreshing
            return .refresh
        case .refreshing, .delivering, .backingOff:
            isStale = true
            return .none
        case .finished:
            return .none
        }
    }

    /// The refresh ended; `hasEvent` when the results changed and an event is ready.
    mutating func refreshed(hasEvent: Bool) -> Action {
        guard phase == .refreshing else { return .none }
        if hasEvent {
            phase = .delivering
            return .deliver
        }
        return next()
    }

    /// The subscriber finished handling the event.
    mutating func delivered() -> Action {
        guard phase == .delivering else { return .none }
        return next()
    }

    /// The refresh failed for a reason that may pass: the owner retries later (``retry()``).
    /// Returns whether it must schedule that retry.
    mutating func refreshFailedForNow() -> Bool {
        guard phase == .refreshing else { return false }
        phase = .backingOff
        return true
    }

    /// The time to retry a refresh that failed for a passing reason has come.
    mutating func retry() -> Action {
        guard phase == .backingOff else { return .none }
        isStale = false
        phase = .refreshing
        return .refresh
    }

    /// The refresh failed: the stream ends, and the subscriber hears why (unless already finished).
    mutating func fail() -> Action {
        guard phase != .finished else { return .none }
        phase = .finished
        isStale = false
        return .deliverError
    }

    /// The subscription is cancelled: nothing more happens.
    mutating func cancel() {
        phase = .finished
        isStale = false
    }

    private mutating func next() -> Action {
        if isStale {
            isStale = false
            phase = .refreshing
            return .refresh
        }
        phase = .idle
        return .none
    }
}
