@testable import Ripple
import Testing

/// The decisions of the detection of other connections' commits, driven directly: headers are
/// integers, instants are given, no file, watch, lock or timer.
@Suite struct CommitDetectionStateTests {
    typealias State = CommitDetectionState<Int>
    typealias Actions = State.Actions
    static let ms: UInt64 = 1_000_000

    /// A state watching, whose writer was used and released once with the store knowing every
    /// commit: the known header is `header`, the mapping at 1, settling under way.
    static func watching(header: Int = 7, at now: UInt64 = 0) -> State {
        var state = State()
        state.activate()
        #expect(state.writerWillStart() == true)
        _ = state.writerReleased(index: 1, header: header, foreign: (dataVersion: 1, noticed: true), at: now)
        return state
    }

    @Test func anInactiveStateDecidesNothing() {
        var state = State()
        #expect(state.wake(at: 0) { _ in 1 } == Actions())
        #expect(state.settle { _ in 1 } == State.SettleActions())
        #expect(state.writerWillStart() == false, "no watch to mute")
        #expect(state.writerReleased(index: 1, header: 1, foreign: (dataVersion: 2, noticed: false), at: 0) == State.ReleaseActions())
        #expect(state.known == nil && state.index == 0)
    }

    @Test func aWakeBeforeTheHeaderIsKnownLooks() {
        var state = State()
        state.activate()
        #expect(state.wake(at: 0) { _ in 1 } == Actions(look: true, armSettling: true))
        #expect(state.settleStep == 0)
    }

    @Test func aWakeThatFindsTheKnownHeaderDoesNotLookButSettles() {
        var state = Self.watching(header: 7)
        let first = state.settle { _ in 7 }   // the release's settling: nothing new
        #expect(!first.look)
        let actions = state.wake(at: 10 * Self.ms) { index in
            #expect(index == 1, "the header is read from the writer's mapping")
            return 7
        }
        #expect(!actions.look)
        #expect(state.settleStep == 0 && state.settleStart == 10 * Self.ms, "settling starts again from the wake")
    }

    @Test func aWakeThatFindsAnotherHeaderLooks() {
        var state = Self.watching(header: 7)
        #expect(state.wake(at: 0) { _ in 8 }.look)
        #expect(state.wake(at: 0) { _ in nil }.look, "a header being rewritten: look")
    }

    @Test func aWakeWhileWritingIsAnsweredByTheRelease() {
        var state = Self.watching(header: 7)
        #expect(state.writerWillStart() == true)
        #expect(state.wake(at: 0) { _ in 8 } == Actions(), "the writer is in use: no look now")
        #expect(state.wokeWhileWriting)
        let released = state.writerReleased(index: 1, header: 9, foreign: (dataVersion: 1, noticed: true), at: 0)
        #expect(released.decide, "the release decides for the wake")
        #expect(!state.wokeWhileWriting)
        #expect(state.known == 9, "the store knows every commit in the header it kept")
        #expect(!state.decide(at: 0) { _ in 9 }.look, "its own commit: nothing to look for")
    }

    @Test func aReleaseThatFindsAnUnheardCommitDecidesOncePerDataVersion() {
        var state = Self.watching(header: 7)
        #expect(state.writerWillStart() == true)
        var released = state.writerReleased(index: 1, header: 8, foreign: (dataVersion: 5, noticed: false), at: 0)
        #expect(released.decide)
        #expect(state.known == nil, "in doubt: the header is not trusted")
        #expect(state.decide(at: 0) { _ in 8 }.look, "an unknown header: look")
        #expect(state.writerWillStart() == true)
        released = state.writerReleased(index: 1, header: 8, foreign: (dataVersion: 5, noticed: false), at: 0)
        #expect(!released.decide, "the same data_version: not again")
        #expect(state.writerWillStart() == true)
        released = state.writerReleased(index: 1, header: 9, foreign: (dataVersion: 6, noticed: false), at: 0)
        #expect(released.decide, "another one")
    }

    @Test func aReleaseWithoutAnAnswerKeepsNoHeader() {
        var state = Self.watching(header: 7)
        #expect(state.writerWillStart() == true)
        let released = state.writerReleased(index: 1, header: 8, foreign: nil, at: 0)
        #expect(!released.decide)
        #expect(state.known == nil)
        #expect(state.wake(at: 0) { _ in 8 }.look, "the next wake looks")
    }

    @Test func settlingLooksAtTheHeaderAtGrowingDelaysThenStops() {
        var state = State()
        state.activate()
        #expect(state.wake(at: 100 * Self.ms) { _ in 1 }.armSettling)
        var nexts: [UInt64] = []
        while true {
            let actions = state.settle { _ in 1 }
            guard let next = actions.next else { break }
            nexts.append(next)
        }
        #expect(nexts == State.settleDelays.dropFirst().map { 100 * Self.ms + $0 * Self.ms })
        #expect(state.settleStep == nil)
        #expect(state.settle { _ in 1 } == State.SettleActions(), "settled: nothing more")
    }

    @Test func aSettlingLookThatFindsTheHeaderMovedLooks() {
        var state = Self.watching(header: 7)
        #expect(!state.settle { _ in 7 }.look)
        #expect(state.settle { _ in 8 }.look)
    }

    @Test func aSettlingLookWhileWritingLeavesItToTheRelease() {
        var state = Self.watching(header: 7)
        #expect(state.writerWillStart() == true)
        #expect(!state.settle { _ in 8 }.look)
        #expect(state.wokeWhileWriting)
    }

    @Test func aBurstOfWakesArmsTheFirstSettlingLookOnce() {
        var state = Self.watching(header: 7)
        _ = state.settle { _ in 7 }   // the release's first settling look came
        #expect(state.wake(at: 1) { _ in 7 }.armSettling)
        #expect(!state.wake(at: 2) { _ in 7 }.armSettling, "armed already: only the start moves")
        #expect(state.settleStart == 2)
        _ = state.settle { _ in 7 }
        #expect(state.wake(at: 3) { _ in 7 }.armSettling, "it came: armed again")
    }

    @Test func releasesArmSettlingOnlyWhenNoneIsPending() {
        var state = State()
        state.activate()
        #expect(state.writerWillStart() == true)
        #expect(state.writerReleased(index: 1, header: 7, foreign: (dataVersion: 1, noticed: true), at: 0).armSettling)
        #expect(state.writerWillStart() == true)
        #expect(!state.writerReleased(index: 1, header: 7, foreign: (dataVersion: 1, noticed: true), at: 1).armSettling,
                "a settling look is pending: no timer per commit")
        while state.settleStep != nil { _ = state.settle { _ in 7 } }
        #expect(state.writerWillStart() == true)
        #expect(state.writerReleased(index: 1, header: 7, foreign: (dataVersion: 1, noticed: true), at: 2).armSettling)
    }

    @Test func deactivatingForgetsEverything() {
        var state = Self.watching(header: 7)
        state.deactivate()
        #expect(!state.active && state.known == nil && state.index == 0 && state.settleStep == nil)
        #expect(state.wake(at: 0) { _ in 8 } == Actions())
        state.activate()
        #expect(state.known == nil, "a new watch starts in doubt")
    }
}
