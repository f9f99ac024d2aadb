@testable import Ripple
import RippleTesting
import Testing

/// ``CommitRouter`` with dependencies (the tables a routed query reads in sub-queries), on its
/// own: a dependent is told of a commit to a dependency's table only when a changed row matches
/// its dependency's filter (evaluated in the commit), was selected by it at its last read (held),
/// could not be evaluated, or while it is busy — and is then told to run its query again.
@Suite struct CommitRouterDependencyTests {
    static func key(_ value: Int64) -> RowKey { RowKey(integer: value) }

    /// A commit of `version` that changed the rows `keys` of each table.
    static func commit(_ version: Int64, _ changes: [String: [Int64]]) -> CommitSummary {
        var summary = CommitSummary(version: version, tables: Set(changes.keys))
        summary.rowKeys = changes.mapValues { Set($0.map(key)) }
        return summary
    }

    /// The filters of `tables` were evaluated; `matching` matched its own table's filter,
    /// `dependencies` a dependency's.
    static func evaluated(_ tables: Set<String>, matching: Set<CommitRouter.ObserverID> = [],
                          dependencies: Set<CommitRouter.ObserverID> = []) -> FilterMatches {
        FilterMatches(evaluatedTables: tables, matching: matching, unevaluated: [], dependencyMatching: dependencies)
    }

    /// A row-precise observer of `todos` with a dependency on `members`, idle at `version`
    /// holding `keys` of its result and `members` keys its dependency selected.
    static func idleDependent(_ id: CommitRouter.ObserverID, holding keys: [Int64] = [], members: [Int64],
                              in router: inout CommitRouter, at version: Int64 = 0) {
        router.registerRowPrecise(id, table: "todos", dependencies: ["members"], registeredDuring: 0)
        _ = router.told(id, through: version)
        let readsAgain = router.observerBecameIdle(id, keys: keys.map(key), dependencyKeys: ["members": members.map(key)],
                                                   version: version)
        #expect(!readsAgain)
    }

    @Test func aDependentIsToldOnlyOfTheCommitsThatMatchOrChangeARowItsDependencySelected() {
        var router = CommitRouter()
        Self.idleDependent(1, members: [5], in: &router)
        Self.idleDependent(2, members: [6], in: &router)
        // A new row matches observer 1's dependency (a membership granted).
        #expect(router.route(Self.commit(1, ["members": [7]]), Self.evaluated(["members"], dependencies: [1])) == [1])
        // Row 6, which observer 2's dependency selected, is deleted: it matches nothing now.
        #expect(router.route(Self.commit(2, ["members": [6]]), Self.evaluated(["members"])) == [2])
        // Another user's row: nobody.
        #expect(router.route(Self.commit(3, ["members": [8]]), Self.evaluated(["members"])).isEmpty)
        #expect(router.skipped == 1 + 1 + 2)
        // Told to run again, not to patch from the changed keys.
        let told = router.told(1, through: 3)
        #expect(told.commits.map(\.version) == [1])
        #expect(told.commits.first?.rerun == true)
        #expect(told.commits.first?.keys == nil)
        #expect(router.told(2, through: 3).commits.map(\.rerun) == [true])
        // A commit to its own table routes as it did: keys held, no rerun.
        let ownTable = router.route(Self.commit(4, ["todos": [40]]), Self.evaluated(["todos"], matching: [2]))
        #expect(ownTable == [2])
        let own = router.told(2, through: 4).commits
        #expect(own.map(\.rerun) == [false] && own.first?.keys == [Self.key(40)] && own.first?.matched == true)
        #expect(router.invariantViolations().isEmpty)
    }

    @Test func aCommitWhoseDependencyRowsAreUnknownTellsEveryDependentToRunAgain() {
        var router = CommitRouter()
        Self.idleDependent(1, members: [], in: &router)
        Self.idleDependent(2, members: [3], in: &router)
        // Another connection's commit: the changed rows are not known.
        #expect(Set(router.route(CommitSummary(version: 1, coveredFrom: 1, tables: ["members"]), FilterMatches())) == [1, 2])
        #expect(router.told(1, through: 1).commits.map(\.rerun) == [true])
        // A dependency's filter that could not be evaluated.
        var matches = Self.evaluated(["members"])
        matches.dependencyUnevaluated = [2]
        #expect(router.route(Self.commit(2, ["members": [9]]), matches) == [2])
        #expect(router.told(2, through: 2).commits.map(\.rerun) == [true, true])
    }

    /// Registered while commit 5 was evaluated without its filters: it hears every commit to its
    /// dependencies' tables until it read version 5.
    @Test func aBusyDependentHearsEveryCommitToItsDependencies() {
        var router = CommitRouter()
        router.registerRowPrecise(1, table: "todos", dependencies: ["members"], registeredDuring: 5)
        #expect(router.route(Self.commit(5, ["members": [42]]), Self.evaluated(["members"])) == [1])
        let readsAgain = router.observerBecameIdle(1, keys: [], dependencyKeys: ["members": [Self.key(42)]], version: 5)
        #expect(!readsAgain)
        #expect(router.route(Self.commit(6, ["members": [43]]), Self.evaluated(["members"])).isEmpty)
        #expect(router.route(Self.commit(7, ["members": [42]]), Self.evaluated(["members"])) == [1])
        #expect(router.told(1, through: 7).commits.map(\.version) == [5, 7])
    }

    /// A membership row its read at version 1 selected (not yet held) is deleted by commit 2,
    /// routed while that read was under way: becoming idle, the observer is told to run again.
    @Test func aDependencyRowThatEnteredDuringTheReadAndChangedSinceIsTold() {
        var router = CommitRouter()
        Self.idleDependent(1, members: [], in: &router)
        #expect(router.route(Self.commit(2, ["members": [10]]), Self.evaluated(["members"])).isEmpty)
        var readsAgain = router.observerBecameIdle(1, keys: [], dependencyKeys: ["members": [Self.key(10)]], version: 1)
        #expect(readsAgain)
        #expect(router.told(1, through: 2).commits.map(\.rerun) == [true])

        // A commit told for the observer's own table that also changed an entered membership row:
        // the told commit becomes one to run again.
        Self.idleDependent(2, holding: [20], members: [], in: &router, at: 2)
        #expect(router.route(Self.commit(3, ["todos": [20], "members": [11]]), Self.evaluated(["todos", "members"])) == [2])
        readsAgain = router.observerBecameIdle(2, keys: [Self.key(20)], dependencyKeys: ["members": [Self.key(11)]], version: 2)
        #expect(readsAgain)
        let merged = router.told(2, through: 3).commits
        #expect(merged.map(\.version) == [3] && merged.first?.rerun == true)

        // Or, reading again at once (not idle in between), from the recent commits.
        Self.idleDependent(3, members: [], in: &router, at: 3)
        #expect(router.route(Self.commit(4, ["members": [12]]), Self.evaluated(["members"])).isEmpty)
        let told = router.told(3, through: 4, after: 3, holding: [], holdingDependencies: ["members": [Self.key(12)]])
        #expect(told.commits.map(\.version) == [4] && told.commits.first?.rerun == true)
        #expect(router.invariantViolations().isEmpty)
    }

    /// One user's membership change tells that user's observers, and the work is the same with
    /// 10 or 10,000 other users' observers: the router looks only at the changed rows' holders
    /// and the observers the filter index matched.
    @Test(arguments: [10, 10_000])
    func oneUsersChangeTellsOnlyThatUserWhateverTheOthers(others: Int) {
        var router = CommitRouter()
        Self.idleDependent(1, members: [1], in: &router)
        Self.idleDependent(2, members: [1], in: &router)
        for index in 0..<others {
            Self.idleDependent(CommitRouter.ObserverID(10 + index), members: [Int64(100 + index)], in: &router)
        }
        // Granted (matched by the index), moved (held, and matched), revoked (held).
        #expect(Set(router.route(Self.commit(1, ["members": [2]]), Self.evaluated(["members"], dependencies: [1, 2]))) == [1, 2])
        #expect(Set(router.route(Self.commit(2, ["members": [1]]), Self.evaluated(["members"], dependencies: [1, 2]))) == [1, 2])
        #expect(Set(router.route(Self.commit(3, ["members": [1]]), Self.evaluated(["members"]))) == [1, 2])
        #expect(router.skipped == 3 * others)
    }

    /// Seeded random sequences: the indexes stay consistent, a dependent is told (to run again)
    /// of every commit that changed a row its dependency selected at its last read, or matched,
    /// and of no other commit to the dependency's table unless busy.
    @Test(arguments: 1...20)
    func randomSequencesTellEveryDependentWhatConcernsItAndNothingElse(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var router = CommitRouter()
        var held: [CommitRouter.ObserverID: Set<Int64>] = [:]
        var busy: Set<CommitRouter.ObserverID> = []
        var version: Int64 = 0
        var nextID: CommitRouter.ObserverID = 1
        for _ in 0..<400 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0, 1:
                let id = nextID
                nextID += 1
                router.registerRowPrecise(id, table: "todos", dependencies: ["members"], registeredDuring: version)
                held[id] = []
                busy.insert(id)
            case 2:
                guard let id = held.keys.randomElement(using: &random) else { continue }
                let wasRowPrecise = router.unregister(id)
                #expect(wasRowPrecise)
                held[id] = nil
                busy.remove(id)
            case 3, 4:
                guard let id = held.keys.randomElement(using: &random) else { continue }
                _ = router.told(id, through: version)
                let keys = Set((0..<Int.random(in: 0...3, using: &random)).map { _ in Int64.random(in: 0..<12, using: &random) })
                _ = router.observerBecameIdle(id, keys: [], dependencyKeys: ["members": keys.sorted().map(Self.key)],
                                              version: version)
                held[id] = keys
                busy.remove(id)
            default:
                version += 1
                let changed = Set((0..<Int.random(in: 1...3, using: &random)).map { _ in Int64.random(in: 0..<12, using: &random) })
                let matching = Set(held.keys.filter { _ in Int.random(in: 0..<6, using: &random) == 0 })
                let told = Set(router.route(Self.commit(version, ["members": Array(changed)]),
                                            Self.evaluated(["members"], dependencies: matching)))
                for (id, keys) in held {
                    let concerns = !keys.isDisjoint(with: changed) || matching.contains(id) || busy.contains(id)
                    #expect(told.contains(id) == concerns, "seed \(seed): observer \(id) told \(told.contains(id))")
                }
                for id in told {
                    #expect(router.told(id, through: version).commits.last?.rerun == true, "seed \(seed)")
                }
            }
            #expect(router.invariantViolations().isEmpty, "seed \(seed)")
        }
    }
}
