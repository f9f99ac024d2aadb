@testable import RippleServer
import Testing

/// Resumes are admitted at a bounded rate: a burst takes the bucket's tokens, the next caller
/// waits for one, and callers beyond those allowed to wait are refused at once.
@Suite struct ResumeGateTests {
    @Test func aBurstIsAdmittedAtTheRateAndTheExcessRefused() async {
        let gate = ResumeGate(perSecond: 4, maxWaiting: 1)
        let clock = ContinuousClock()
        let start = clock.now
        // The bucket holds a second's worth: four at once.
        for _ in 0..<4 { #expect(await gate.admit()) }
        #expect(clock.now - start < .milliseconds(100))
        // A fifth waits for the next token; a sixth, meanwhile, finds the waiting room full.
        async let fifth = gate.admit()
        try? await Task.sleep(for: .milliseconds(50))
        #expect(await gate.admit() == false, "beyond maxWaiting: refused at once")
        #expect(await fifth)
        #expect(clock.now - start >= .milliseconds(200), "the fifth waited for a token (a quarter second at 4 per second)")
    }
}
