@testable import Ripple
import RippleTesting
import Testing

/// ``CommitRouter`` with value terms (``RowValueTerm``) on its own: an observer is told of a
/// commit to its table whose changed row holds one of its values (``FilterMatches/valueMatching``);
/// from a commit that tells it to run again (its values may be stale) until it became idle with
/// a read past that commit and past the commits evaluated before it registered its new values,
/// it hears every commit to its table; values that changed after commits were routed to it
/// unevaluated by them make it read the change log.
@Suite struct CommitRouterValueTermTests {
    typealias Router = CommitRouterDependencyTests

    /// A row-precise observer of `todos` with a dependency on `members` and value terms, idle at `version`.
    static func idle(_ id: CommitRouter.ObserverID, in router: inout CommitRouter, at version: Int64 = 0) {
        router.registerRowPrecise(id, table: "todos", dependencies: ["members"], hasValueTerms: true, registeredDuring: 0)
        _ = router.told(id, through: version)
        let readsAgain = router.observerBecameIdle(id, keys: [], dependencyKeys: ["members": [Router.key(Int64(id))]],
                                                   version: version)
        #expect(!readsAgain)
    }

    @Test func aChangedRowHoldingAValueTellsOnlyItsObservers() {
        var router = CommitRouter()
        for id: CommitRouter.ObserverID in 1...10 { Self.idle(id, in: &router) }
        var matches = Router.evaluated(["todos"])
        matches.valueMatching = [3, 4]
        #expect(Set(router.route(Router.commit(1, ["todos": [7]]), matches)) == [3, 4])
        #expect(router.skipped == 8)
        let told = router.told(3, through: 1).commits
        #expect(told.map(\.rerun) == [false] && told.first?.keys == [Router.key(7)] && told.first?.matched == false)
        #expect(router.invariantViolations().isEmpty)
    }

    @Test func aRerunMakesItHearEveryCommitToItsTableUntilItReadPastIt() {
        var router = CommitRouter()
        Self.idle(1, in: &router)
        Self.idle(2, in: &router)
        // Observer 1's membership changes: it runs again, and until then hears every todos commit.
        #expect(router.route(Router.commit(1, ["members": [9]]), Router.evaluated(["members"], dependencies: [1])) == [1])
        #expect(router.route(Router.commit(2, ["todos": [7]]), Router.evaluated(["todos"])) == [1])
        // It read at version 1 (its values changed, nothing evaluated past 1 when registered):
        // version 2 was told, not lost; it still hears until it read past it.
        _ = router.told(1, through: 1)
        var readsAgain = router.observerBecameIdle(1, keys: [], dependencyKeys: ["members": [Router.key(9)]],
                                                   valuesChangedDuring: 2, version: 1)
        #expect(!readsAgain)
        #expect(router.route(Router.commit(3, ["todos": [8]]), Router.evaluated(["todos"])) == [1])
        #expect(router.told(1, through: 3).commits.map(\.version) == [2, 3])
        readsAgain = router.observerBecameIdle(1, keys: [], dependencyKeys: ["members": [Router.key(9)]], version: 3)
        #expect(!readsAgain)
        // Read past it, idle: a commit its values do not hold skips it again.
        #expect(router.route(Router.commit(4, ["todos": [8]]), Router.evaluated(["todos"])).isEmpty)
        #expect(router.invariantViolations().isEmpty)
    }

    @Test func valuesThatChangedAfterUnheardCommitsReadTheChangeLog() {
        var router = CommitRouter()
        Self.idle(1, in: &router)
        // Commit 1 changed what its dependency selects but was routed before it was told (its
        // read at version 1 saw it); commit 2 was evaluated with the old values and skipped it.
        #expect(router.route(Router.commit(2, ["todos": [7]]), Router.evaluated(["todos"])).isEmpty)
        let readsAgain = router.observerBecameIdle(1, keys: [], dependencyKeys: ["members": [Router.key(9)]],
                                                   valuesChangedDuring: 2, version: 1)
        #expect(readsAgain)
        let told = router.told(1, through: 2, after: 1)
        #expect(told.lostThrough == 2)
        // Busy until it has read past the version evaluated when it registered its values.
        #expect(router.route(Router.commit(3, ["todos": [8]]), Router.evaluated(["todos"])) == [1])
        #expect(router.invariantViolations().isEmpty)
    }
}
