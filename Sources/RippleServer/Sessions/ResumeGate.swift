#if Sync
import Ripple

/// Admits resumes at a bounded rate (a token bucket), so that a storm of reconnects costs the
/// node a bounded amount of history reading per second: callers beyond the rate wait their
/// turn, and beyond `maxWaiting` waiting callers are refused (told to retry later).
final class ResumeGate: Sendable {
    private struct State {
        var tokens: Double
        var refilled: Duration = .zero
        var waiting = 0
    }

    private let perSecond: Double
    private let maxWaiting: Int
    private let state: Locked<State>
    /// The time on `clock` since the gate was made.
    private let elapsed: @Sendable () -> Duration
    private let sleep: @Sendable (Duration) async throws -> Void

    /// A gate admitting `perSecond` callers a second (a burst of up to a second's worth, at
    /// least one), with at most `maxWaiting` callers waiting, its tokens coming as `clock`
    /// tells the time (a test's clock decides the schedule alone).
    init(perSecond: Double, maxWaiting: Int, clock: some Clock<Duration> = ContinuousClock()) {
        self.perSecond = perSecond > 0 ? perSecond : 1
        self.maxWaiting = maxWaiting
        state = Locked(State(tokens: max(self.perSecond, 1)))
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        sleep = { try await clock.sleep(for: $0) }
    }

    /// How many callers wait for admission now.
    var waiting: Int { state.withLock { $0.waiting } }

    /// Waits for admission; `false` when too many wait already, or the caller's task is
    /// cancelled while it waits.
    func admit() async -> Bool {
        var counted = false
        defer { if counted { state.withLock { $0.waiting -= 1 } } }
        while true {
            let wait = state.withLock { state -> Duration? in
                let now = elapsed()
                let passed = now - state.refilled
                let seconds = Double(passed.components.seconds) + Double(passed.components.attoseconds) / 1e18
                state.tokens = min(max(perSecond, 1), state.tokens + seconds * perSecond)
                state.refilled = now
                if state.tokens >= 1 {
                    state.tokens -= 1
                    return nil
                }
                return .milliseconds(Int64(((1 - state.tokens) / perSecond * 1000).rounded(.up)))
            }
            guard let wait else { return true }
            if !counted {
                let admitted = state.withLock { state -> Bool in
                    guard state.waiting < maxWaiting else { return false }
                    state.waiting += 1
                    return true
                }
                guard admitted else { return false }
                counted = true
            }
            do { try await sleep(wait) } catch { return false }
        }
    }
}
#endif
