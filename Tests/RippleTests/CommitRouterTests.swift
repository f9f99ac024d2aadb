@testable import Ripple
import RippleTesting
import Testing

/// The decision "which observers can this commit affect" (``CommitRouter``), without SQLite,
/// threads or observers: plain values in, identities out.
@Suite struct CommitRouterTests {
    static func key(_ value: Int64) -> RowKey { RowKey(integer: value) }

    /// A commit of `version` that changed the rows `keys` of `table`, every changed row known.
    static func commit(_ version: Int64, _ table: String, _ keys: [Int64], inserted: Bool = false) -> CommitSummary {
        var summary = CommitSummary(version: version, tables: [table])
        summary.rowKeys = [table: Set(keys.map(key))]
        if inserted { summary.insertedOrDeleted = [table] }
        return summary
    }

    /// The filters of `table` were evaluated; `matching` matched.
    static func evaluated(_ table: String, matching: Set<CommitRouter.ObserverID> = []) -> FilterMatches {
        FilterMatches(evaluatedTables: [table], matching: matching, unevaluated: [])
    }

    /// A row-precise observer of `items` that has read (at `version`) a result holding `keys`.
    static func idleObserver(_ id: CommitRouter.ObserverID, holding keys: [Int64], in router: inout CommitRouter,
                             at version: Int64 = 0) {
        router.registerRowPrecise(id, table: "items", registeredDuring: 0)
        _ = router.told(id, through: version)
        let readsAgain = router.observerBecameIdle(id, keys: keys.map(key), version: version)
        #expect(!readsAgain)
    }

    @Test func aRowPreciseObserverIsToldOnlyOfTheCommitsThatConcernIt() {
        var router = CommitRouter()
        Self.idleObserver(1, holding: [10, 11], in: &router)
        Self.idleObserver(2, holding: [20], in: &router)
        // Changes row 10: only observer 1 holds it.
        #expect(router.route(Self.commit(1, "items", [10]), Self.evaluated("items")) == [1])
        // Changes a row nobody holds, which matches observer 2's filter.
        #expect(router.route(Self.commit(2, "items", [99], inserted: true), Self.evaluated("items", matching: [2])) == [2])
        // Changes a row nobody holds or matches: nobody.
        #expect(router.route(Self.commit(3, "items", [98]), Self.evaluated("items")).isEmpty)
        #expect(router.skipped == 1 + 1 + 2)
        // What observer 1 reads: commit 1's keys, then nothing more.
        let told = router.told(1, through: 3)
        #expect(told.commits.map(\.version) == [1])
        #expect(told.commits.first?.keys == [Self.key(10)])
        #expect(told.commits.first?.updatesOnly == true)
        #expect(told.routedThrough == 3)
        #expect(router.invariantViolations().isEmpty)
    }

    @Test func withoutEvaluatedFiltersEveryRowPreciseObserverOfTheTableIsTold() {
        var router = CommitRouter()
        Self.idleObserver(1, holding: [10], in: &router)
        Self.idleObserver(2, holding: [], in: &router)
        // The changed rows are not known (another connection's commit): both read the log.
        let summary = CommitSummary(version: 1, coveredFrom: 1, tables: ["items"])
        #expect(Set(router.route(summary, FilterMatches())) == [1, 2])
        #expect(router.told(2, through: 1).commits.first?.keys == nil)
        // A change of unknown extent reaches every observer, of every kind.
        router.registerByTable(3)
        router.observer(3, reads: ["other"], at: 0)
        #expect(Set(router.route(CommitSummary(version: 2, tables: [ChangeLog.everyTable]), FilterMatches())) == [1, 2, 3])
    }

    @Test func anObserverByTableHearsEveryCommitUntilItsTablesAreKnownThenOnlyThose() {
        var router = CommitRouter()
        router.registerByTable(7)
        #expect(router.route(Self.commit(1, "other", [1]), Self.evaluated("other")) == [7])
        router.observer(7, reads: ["items"], at: 0)
        #expect(router.route(Self.commit(2, "other", [1]), Self.evaluated("other")).isEmpty)
        #expect(router.route(Self.commit(3, "items", [1]), Self.evaluated("items")) == [7])
        #expect(router.unregister(7) == false)
        #expect(router.count == 0)
        #expect(router.invariantViolations().isEmpty)
    }

    /// Registered while commit 5's filters were evaluated without its filter: it hears every
    /// commit to its table until it has read version 5.
    @Test func aNewObserverIsBusyUntilItReadPastTheCommitEvaluatedWithoutIt() {
        var router = CommitRouter()
        router.registerRowPrecise(1, table: "items", registeredDuring: 5)
        #expect(router.route(Self.commit(5, "items", [42]), Self.evaluated("items")) == [1])
        var readsAgain = router.observerBecameIdle(1, keys: [], version: 4)   // read before 5: still busy
        #expect(!readsAgain)
        #expect(router.route(Self.commit(6, "items", [43]), Self.evaluated("items")) == [1])
        readsAgain = router.observerBecameIdle(1, keys: [], version: 6)
        #expect(!readsAgain)
        #expect(router.route(Self.commit(7, "items", [44]), Self.evaluated("items")).isEmpty)
    }

    /// A row entered the result in a read at version 1; commit 2, routed while that read was
    /// under way, changed it. Becoming idle, the observer is told of commit 2 and reads again.
    @Test func aRowThatEnteredDuringTheReadAndChangedSinceIsToldWhenTheObserverBecomesIdle() {
        var router = CommitRouter()
        Self.idleObserver(1, holding: [], in: &router)
        #expect(router.route(Self.commit(2, "items", [10]), Self.evaluated("items")).isEmpty)
        let readsAgain = router.observerBecameIdle(1, keys: [Self.key(10)], version: 1)
        #expect(readsAgain)
        #expect(router.told(1, through: 2).commits.map(\.version) == [2])
        // Or, reading again at once (not idle in between), from the recent commits.
        Self.idleObserver(2, holding: [], in: &router, at: 2)
        #expect(router.route(Self.commit(3, "items", [20]), Self.evaluated("items")).isEmpty)
        let told = router.told(2, through: 3, after: 2, holding: [Self.key(20)])
        #expect(told.commits.map(\.version) == [3])
        #expect(router.invariantViolations().isEmpty)
    }

    @Test func pastTheToldLimitWhatWasToldIsLostAndReadFromTheLog() {
        var router = CommitRouter()
        Self.idleObserver(1, holding: [10], in: &router)
        let count = Int64(CommitRouter.toldLimit) + 1
        for version in 1...count {
            #expect(router.route(Self.commit(version, "items", [10]), Self.evaluated("items")) == [1])
        }
        let told = router.told(1, through: count - 1)
        #expect(told.lostThrough == count)
        #expect(router.invariantViolations().isEmpty)
    }

    /// Seeded random sequences of every operation keep the router's indexes consistent, and a
    /// row-precise observer is told of every commit that changed a row it holds.
    @Test(arguments: 1...20)
    func randomSequencesKeepTheInvariants(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var router = CommitRouter()
        var registered: Set<CommitRouter.ObserverID> = []
        var held: [CommitRouter.ObserverID: Set<Int64>] = [:]
        var rowPrecise: Set<CommitRouter.ObserverID> = []
        var version: Int64 = 0
        var nextID: CommitRouter.ObserverID = 1
        for _ in 0..<400 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0, 1:
                let id = nextID
                nextID += 1
                if Bool.random(using: &random) {
                    router.registerRowPrecise(id, table: "items", registeredDuring: version)
                    rowPrecise.insert(id)
                } else {
                    router.registerByTable(id)
                    if Bool.random(using: &random) { router.observer(id, reads: ["items"], at: 0) }
                }
                registered.insert(id)
            case 2:
                guard let id = registered.randomElement(using: &random) else { continue }
                router.unregister(id)
                registered.remove(id)
                rowPrecise.remove(id)
                held[id] = nil
            case 3, 4:
                guard let id = rowPrecise.randomElement(using: &random) else { continue }
                _ = router.told(id, through: version)
                let keys = Set((0..<Int.random(in: 0...4, using: &random)).map { _ in Int64.random(in: 0..<12, using: &random) })
                _ = router.observerBecameIdle(id, keys: keys.sorted().map(Self.key), version: version)
                held[id] = keys
            default:
                version += 1
                let changed = (0..<Int.random(in: 1...3, using: &random)).map { _ in Int64.random(in: 0..<12, using: &random) }
                let told = Set(router.route(Self.commit(version, "items", changed), Self.evaluated("items")))
                for (id, keys) in held where !keys.isDisjoint(with: changed) {
                    #expect(told.contains(id), "seed \(seed): observer \(id) holds a changed row and was not told")
                }
            }
            #expect(router.invariantViolations().isEmpty, "seed \(seed)")
        }
    }
}
