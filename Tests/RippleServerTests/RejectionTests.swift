#if Sync
import NIOCore
@testable import RippleServer
import Testing

/// Which failures reject a mutation for good, and which are tried again: a failure that is not
/// the mutation's (the node stopping, its connection to Postgres lost or silent) must never
/// become a stored rejection.
struct RejectionTests {
    @Test func aLostConnectionOrAStoppingNodeIsAFailureThatPasses() {
        let passing: [any Error] = [CancellationError(), ChannelError.ioOnClosedChannel, ChannelError.eof,
                                    IOError(errnoCode: 104, reason: "read"), PostgresAnswerTimeout(seconds: 15)]
        for error in passing {
            let rejection = Rejection(error)
            #expect(rejection.isTransient, "\(error)")
            #expect(rejection.code == "unavailable", "\(error)")
        }
    }

    @Test func postgresStatesSayWhetherTheyPass() {
        for state in ["40001", "40P01", "08006", "57P01", "53300"] { #expect(Rejection(state: state, constraint: nil).isTransient, "\(state)") }
        for state in ["23505", "23514", "22P02", "42501"] { #expect(!Rejection(state: state, constraint: nil).isTransient, "\(state)") }
    }
}
#endif
