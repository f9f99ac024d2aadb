@testable import Ripple
import Testing

/// The subscription state machine, driven directly (no store, no threads).
@Suite struct ObserverStateTests {
    @Test func startRefreshesThenDeliversThenIdles() {
        var state = ObserverState()
        #expect(state.start() == .refresh)
        #expect(state.phase == .refreshing)
        #expect(state.start() == .none, "a second start does nothing")
        #expect(state.refreshed(hasEvent: true) == .deliver)
        #expect(state.phase == .delivering)
        #expect(state.delivered() == .none)
        #expect(state.phase == .idle)
    }

    @Test func commitsDuringARefreshOrDeliveryCoalesceIntoOneRefresh() {
        var state = ObserverState()
        _ = state.start()
        #expect(state.invalidate() == .none)
        #expect(state.invalidate() == .none)
        #expect(state.isStale)
        #expect(state.refreshed(hasEvent: true) == .deliver)
        #expect(state.isStale, "the commits still need a refresh after the delivery")
        #expect(state.invalidate() == .none)
        #expect(state.delivered() == .refresh, "one refresh for every commit that came meanwhile")
        #expect(!state.isStale)
        #expect(state.refreshed(hasEvent: false) == .none)
        #expect(state.phase == .idle)
        #expect(state.invalidate() == .refresh)
    }

    @Test func aRefreshWithoutChangesRefreshesAgainOnlyWhenStale() {
        var state = ObserverState()
        _ = state.start()
        _ = state.invalidate()
        #expect(state.refreshed(hasEvent: false) == .refresh)
        #expect(state.refreshed(hasEvent: false) == .none)
    }

    @Test func cancelIsFinal() {
        var state = ObserverState()
        _ = state.start()
        _ = state.invalidate()
        state.cancel()
        #expect(state.phase == .finished)
        #expect(state.refreshed(hasEvent: true) == .none, "a refresh that ends after cancel delivers nothing")
        #expect(state.invalidate() == .none)
        #expect(state.delivered() == .none)
        #expect(state.start() == .none)
        #expect(state.fail() == .none, "an error after cancel is not reported")
    }

    @Test func failureEndsTheStreamOnce() {
        var state = ObserverState()
        _ = state.start()
        #expect(state.fail() == .deliverError)
        #expect(state.phase == .finished)
        #expect(state.fail() == .none)
        #expect(state.invalidate() == .none)
    }

    @Test func outOfPhaseReportsAreIgnored() {
        var state = ObserverState()
        #expect(state.delivered() == .none)
        #expect(state.refreshed(hasEvent: true) == .none)
        #expect(state.phase == .idle)
    }
}
