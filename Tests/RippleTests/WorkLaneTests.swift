import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// The lanes async store calls run on: never more work at once than the width, the first work
/// first, and every piece run once.
@Suite struct WorkLaneTests {
    @Test func aLaneRunsAtMostItsWidthAtOnceInTheOrderWorkCame() throws {
        let lane = WorkLane(label: "test.lane", width: 2)
        let gate = DispatchSemaphore(value: 0)
        let state = Locked((running: 0, most: 0, started: [Int]()))
        let done = DispatchGroup()
        for n in 0..<10 {
            done.enter()
            lane.submit {
                state.withLock { state in
                    state.running += 1
                    state.most = max(state.most, state.running)
                    state.started.append(n)
                }
                _ = gate.wait(timeout: .now() + 120)
                state.withLock { $0.running -= 1 }
                done.leave()
            }
        }
        try Wait.blockingUntil("two pieces of work to start") { state.withLock { $0.started.count } == 2 }
        #expect(state.withLock { $0.started } == [0, 1])
        for _ in 0..<10 { gate.signal() }
        try Wait.for(done, "every piece of work to run")
        #expect(state.withLock { $0.most } == 2)
        #expect(state.withLock { $0.started }.sorted() == Array(0..<10))
        // Idle again: new work starts at once.
        let again = DispatchSemaphore(value: 0)
        lane.submit { again.signal() }
        try Wait.for(again, "work submitted to an idle lane")
    }
}
