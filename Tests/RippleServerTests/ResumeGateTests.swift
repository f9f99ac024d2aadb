#if Sync
@testable import RippleServer
import RippleTesting
import Testing

/// Resumes are admitted at a bounded rate: a burst takes the bucket's tokens, the next caller
/// waits for one, and callers beyond those allowed to wait are refused at once. The gate tells
/// time by a manual clock, so its schedule alone decides: no token comes until the test moves
/// the clock, however slow the machine.
@Suite struct ResumeGateTests {
    /// Starts a caller and returns once it sleeps on the clock, waiting for a token.
    func waitingCaller(_ gate: ResumeGate, _ clock: ManualClock, sleepers: Int = 1) async throws -> Task<Bool, Never> {
        let caller = Task { await gate.admit() }
        try await Wait.until("a caller to sleep on the clock for a token") { clock.sleepers == sleepers }
        return caller
    }

    @Test func aBurstIsAdmittedAndTheNextWaitsAndTheExcessIsRefused() async throws {
        let clock = ManualClock()
        let gate = ResumeGate(perSecond: 1, maxWaiting: 1, clock: clock)
        #expect(await gate.admit(), "the bucket's one token")
        let second = try await waitingCaller(gate, clock)
        #expect(gate.waiting == 1)
        #expect(await gate.admit() == false, "beyond maxWaiting: refused at once")
        clock.advance(by: .seconds(1))
        #expect(try await Wait.value("the waiting caller's admission") { await second.value },
                "admitted when the token came")
        #expect(gate.waiting == 0)
    }

    @Test func aWaitingCallerWhoseTaskIsCancelledIsNotAdmitted() async throws {
        let clock = ManualClock()
        let gate = ResumeGate(perSecond: 1, maxWaiting: 1, clock: clock)
        #expect(await gate.admit(), "the bucket's one token")
        let second = try await waitingCaller(gate, clock)
        second.cancel()
        #expect(try await Wait.value("the cancelled caller's answer") { await second.value } == false)
        #expect(gate.waiting == 0, "its place is free")
        clock.advance(by: .seconds(1))
        #expect(await gate.admit(), "the token it did not take")
    }

    /// Tokens come at the rate, not sooner: half a token's time admits nobody.
    @Test func aWaitingCallerIsAdmittedOnlyOnceATokenCame() async throws {
        let clock = ManualClock()
        let gate = ResumeGate(perSecond: 20, maxWaiting: 10, clock: clock)
        for _ in 0..<20 { #expect(await gate.admit(), "a burst of a second's worth") }
        let next = try await waitingCaller(gate, clock)
        clock.advance(by: .milliseconds(25))
        #expect(clock.sleepers == 1 && gate.waiting == 1, "half a token's time admits nobody")
        clock.advance(by: .milliseconds(25))
        #expect(try await Wait.value("the waiting caller's admission") { await next.value },
                "admitted after a token's time (1/20 s)")
        #expect(gate.waiting == 0)
    }

    /// The gate on the real clock: a waiting caller is admitted once a token comes.
    @Test func onTheContinuousClockAWaitingCallerIsAdmittedWhenATokenComes() async throws {
        let gate = ResumeGate(perSecond: 20, maxWaiting: 10)
        for _ in 0..<20 { _ = await gate.admit() }
        #expect(try await Wait.value("a token's time (1/20 s)") { await gate.admit() })
    }
}
#endif
