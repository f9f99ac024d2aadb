@testable import RippleServer
import Testing

/// Resumes are admitted at a bounded rate: a burst takes the bucket's tokens, the next caller
/// waits for one, and callers beyond those allowed to wait are refused at once.
@Suite struct ResumeGateTests {
    /// At one token per 100 seconds, what waits cannot be admitted during the test, whatever
    /// the machine's load: the schedule is the gate's alone.
    @Test func aBurstIsAdmittedAndTheNextWaitsAndTheExcessIsRefused() async throws {
        let gate = ResumeGate(perSecond: 0.01, maxWaiting: 1)
        #expect(await gate.admit(), "the bucket's one token")
        let second = Task { await gate.admit() }
        while gate.waiting == 0 { await Task.yield() }
        #expect(await gate.admit() == false, "beyond maxWaiting: refused at once")
        second.cancel()
        #expect(await second.value == false, "a waiting caller whose task is cancelled is not admitted")
        #expect(gate.waiting == 0)
    }

    /// A waiting caller is admitted once a token comes.
    @Test func aWaitingCallerIsAdmittedWhenATokenComes() async {
        let gate = ResumeGate(perSecond: 20, maxWaiting: 10)
        for _ in 0..<20 { _ = await gate.admit() }
        #expect(await gate.admit(), "admitted after a token's time (1/20 s)")
    }
}
