@testable import RippleServer
import Testing

/// Resumes are admitted at a bounded rate: a burst takes the bucket's tokens, the next caller
/// waits for one, and callers beyond those allowed to wait are refused at once.
@Suite struct ResumeGateTests {
    @Test func aBurstIsAdmittedAtTheRateAndTheExcessRefused() async throws {
        let gate = ResumeGate(perSecond: 1, maxWaiting: 1)
        let clock = ContinuousClock()
        let start = clock.now
        // The bucket holds a second's worth: one at once.
        #expect(await gate.admit())
        // A second waits for the next token; a third, meanwhile, finds the waiting room full.
        let second = Task { await gate.admit() }
        while gate.waiting == 0 {
            #expect(clock.now - start < .seconds(30), "the second caller never waited")
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(await gate.admit() == false, "beyond maxWaiting: refused at once")
        #expect(await second.value)
        #expect(clock.now - start >= .milliseconds(900), "the second waited for a token (a second at 1 per second)")
    }
}
