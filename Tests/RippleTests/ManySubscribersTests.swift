import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Issue 15: thousands of live queries on one table. A write never fails or is skipped because
/// of them; the commit finds the subscribers it concerns through an index of their filters (with
/// SQLite's comparison rules), and tells only those; every other subscriber's list stays right.
@Suite struct ManySubscribersTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("many.sqlite"))
    }

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var owner: Int
        var score: Double
        var name: String
        var tag: String?
    }

    /// The last list each of many subscribers was given (a list view per subscriber).
    final class Lists: @unchecked Sendable {   // guarded by `condition`
        private let condition = NSCondition()
        private var lists: [[Item]]
        private var failures: [String] = []

        init(count: Int) { lists = Array(repeating: [], count: count) }

        func receive(_ event: LiveQueryEvent<Item>, at index: Int) {
            condition.lock()
            defer { condition.unlock() }
            // Every changeset applies: the old list, changed by it, is the new snapshot.
            if event.changeset.apply(to: lists[index], using: event.snapshot) != event.snapshot {
                failures.append("subscriber \(index): the changeset of version \(event.version) does not apply")
            }
            lists[index] = event.snapshot
            condition.broadcast()
        }

        /// Waits until subscriber `index`'s list equals `expected` (a safety net: ``Wait/limit``).
        func waitFor(_ index: Int, _ expected: [Item]) -> Bool {
            let deadline = Date().addingTimeInterval(Wait.limit.timeInterval)
            condition.lock()
            defer { condition.unlock() }
            while lists[index] != expected {
                if !condition.wait(until: deadline) { return false }
            }
            return true
        }

        var problems: [String] { condition.withLock { failures } }
        func list(_ index: Int) -> [Item] { condition.withLock { lists[index] } }
    }

    /// 2,000 result columns was SQLite's limit on one evaluation, and 30,000 bound values the
    /// point past which the check was skipped (every subscriber re-read every commit): with
    /// 2,500 and 25,000 subscribers on one table, every write succeeds, and the subscribers of
    /// the rows it moves — and only those — hear of it, exactly.
    @Test(arguments: [2_500, 25_000])
    func thousandsOfEqualitySubscribersOnOneTable(count: Int) throws {
        let items = try store.collection("items", of: Item.self)
        try store.write { _ in
            for id in 0..<200 { try items.insert(Item(id: id, owner: id % 50, score: Double(id), name: "n\(id)")) }
        }
        let lists = Lists(count: count)
        let queries = (0..<count).map { owner in items.filter(Column("owner") == owner).order(by: Column("id")) }
        let subscriptions = try queries.enumerated().map { index, query in
            try query.live().subscribe { lists.receive($0, at: index) }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        let fetchesBefore = store.observation.diagnostics.withLock { $0.fetches }
        // Rows move between owners with rows, and to owners that had none.
        let moves = [(3, 7), (10, count - 1), (11, count / 2), (10, 3)]
        for (id, owner) in moves {
            var item = try #require(try items.fetch(id: id))
            let old = item.owner
            item.owner = owner
            try items.update(item)
            for affected in [old, owner] {
                #expect(lists.waitFor(affected, try queries[affected].fetchAll()), "subscriber of owner \(affected)")
            }
        }
        // Each move re-read at most its two subscribers' queries.
        #expect(store.observation.diagnostics.withLock { $0.fetches } - fetchesBefore <= 2 * moves.count)
        for owner in [0, 1, 7, count / 2, count - 1] {
            #expect(lists.list(owner) == (try queries[owner].fetchAll()), "subscriber of owner \(owner)")
        }
        #expect(lists.problems.isEmpty, "\(lists.problems.prefix(3))")
    }

    /// A subscriber told of more commits than it keeps (its handler held while 300 commits
    /// change its rows) reads what they changed from the change log: its list ends exact.
    @Test func aSubscriberToldOfTooManyCommitsStaysExact() throws {
        let items = try store.collection("items", of: Item.self)
        try store.write { _ in
            for id in 0..<20 { try items.insert(Item(id: id, owner: id % 2, score: 0, name: "n\(id)")) }
        }
        let query = items.filter(Column("owner") == 0).order(by: Column("id"))
        let queue = DispatchQueue(label: "held")
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try query.live(), on: .queue(queue))
        defer { subscription.cancel() }
        #expect(subscriber.waitFor(items: try query.fetchAll()))
        let held = DispatchSemaphore(value: 0)
        queue.async { _ = try? Wait.for(held, "the test to free the subscriber's queue") }
        // Row 1 joins the result and changes, then only row 3 (never in it) changes: what the
        // first commits told must not be forgotten.
        for round in 0..<300 {
            var item = try #require(try items.fetch(id: round < 260 ? 1 : 3))
            item.score = Double(round)
            if round < 260 { item.owner = round % 2 == 0 ? 0 : 1 } else { item.owner = 1 }
            try items.update(item)
        }
        held.signal()
        #expect(subscriber.waitFor(items: try query.fetchAll()))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    /// A database in UTF-16 compares text by its UTF-16 bytes, an order unlike UTF-8's: "😀" sorts
    /// before "～" there, after it in UTF-8. A text range filter on such a file is left to SQLite,
    /// so a row entering it is told.
    @Test func aTextRangeInAUTF16DatabaseFollowsSQLitesOrder() throws {
        let path = directory.path("utf16.sqlite")
        #expect(try SQLiteShell.run("PRAGMA encoding = 'UTF-16le'; CREATE TABLE seed(x); DROP TABLE seed;", on: path).status == 0)
        var configuration = Store.Configuration()
        configuration.watchesFile = false
        let store = try Store(path: path, configuration: configuration)
        #expect(try store.read { db in try db.fetchValue("PRAGMA encoding", as: String.self) } == "UTF-16le")
        let items = try store.collection("items", of: Item.self)
        let query = items.filter(Column("name") < "～").order(by: Column("id"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try query.live())
        defer { subscription.cancel() }
        try items.insert(Item(id: 1, owner: 0, score: 0, name: "😀"))
        #expect(try query.fetchAll().map(\.id) == [1])
        #expect(subscriber.items == (try query.fetchAll()))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    /// Subscribers with the same filter share one evaluation.
    @Test func equalFiltersShareAnEvaluation() throws {
        let items = try store.collection("items", of: Item.self)
        let subscriptions = try (0..<100).map { index in
            try items.filter(Column("owner") == index % 10).live().subscribe { _ in }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        #expect(store.observation.filterGroups(of: "items") == 10)
    }

    /// One write of the seeded model checks, by `choice`: insert row `nextID` (choice 0), delete
    /// row `id` (1), or put `make(id)` in its place (otherwise).
    func randomWrite(_ items: RecordCollection<Item>, choice: Int, id: Int, nextID: inout Int,
                     make: (Int) throws -> Item) throws {
        switch choice {
        case 0:
            try items.insert(make(nextID))
            nextID += 1
        case 1:
            _ = try items.delete(id: id)
        default:
            try items.upsert(make(id))
        }
    }

    /// A seeded model check of the index against SQLite: subscribers with random filters of every
    /// kind (equality and IN by value, ranges, LIKE, OR, NOT, IS NULL, and constants of another
    /// type than the column's, which SQLite converts); after random writes, every list equals
    /// its query read afresh.
    @Test(arguments: [UInt64(1), 2, 3])
    func randomFiltersStayExact(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let items = try store.collection("items", of: Item.self)
        let names = ["a", "b", "B", "ab", "é", "e\u{301}", "10", ""]
        func randomItem(_ id: Int) -> Item {
            Item(id: id, owner: Int.random(in: -2...6, using: &random), score: [0, 1, 1.5, 2, -3, 1e20].randomElement(using: &random)!,
                 name: names.randomElement(using: &random)!, tag: Bool.random(using: &random) ? nil : names.randomElement(using: &random))
        }
        try store.write { _ in for id in 0..<40 { try items.insert(randomItem(id)) } }
        let constants: [SQLValue] = [.integer(0), .integer(1), .integer(2), .integer(5), .integer(-2), .real(1.0), .real(1.5),
                                     .real(2.0), .text("1"), .text("a"), .text("b"), .text("é"), .text("10"), .real(1e20)]
        func randomTerm() -> Filter {
            let column = Column(["owner", "score", "name", "tag"].randomElement(using: &random)!)
            let constant = constants.randomElement(using: &random)!
            switch Int.random(in: 0..<9, using: &random) {
            case 0, 1: return .comparison(column, .equal, constant)
            case 2: return .comparison(column, .less, constant)
            case 3: return .comparison(column, .greaterOrEqual, constant)
            case 4: return .in(column, [constant, constants.randomElement(using: &random)!])
            case 5: return column.like(["a%", "%b", "_"].randomElement(using: &random)!)
            case 6: return .isNull(Column("tag"))
            case 7: return .comparison(column, .notEqual, constant)
            default: return .comparison(column, .greater, constant)
            }
        }
        func randomFilter() -> Filter {
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1: return randomTerm()
            case 2: return randomTerm() && randomTerm()
            case 3: return randomTerm() || randomTerm()
            case 4: return !randomTerm()
            default: return randomTerm() && randomTerm() && randomTerm()
            }
        }
        let count = 300
        let queries = (0..<count).map { _ in items.filter(randomFilter()).order(by: Column("id")) }
        let lists = Lists(count: count)
        let subscriptions = try queries.enumerated().map { index, query in
            try query.live().subscribe { lists.receive($0, at: index) }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        var nextID = 40
        for _ in 0..<60 {
            try randomWrite(items, choice: Int.random(in: 0..<4, using: &random), id: Int.random(in: 0..<nextID, using: &random),
                            nextID: &nextID) { id in
                var replacement = randomItem(id)
                if Bool.random(using: &random), let old = try items.fetch(id: id) { replacement.owner = old.owner }
                return replacement
            }
        }
        for (index, query) in queries.enumerated() {
            #expect(lists.waitFor(index, try query.fetchAll()), "seed \(seed), subscriber \(index): \(query)")
        }
        #expect(lists.problems.isEmpty, "\(lists.problems.prefix(3))")
    }

    /// A seeded model check of placing rows in place: ordered queries without a window (one to
    /// three terms over integers, reals, text with canonically equivalent spellings and NULLs,
    /// ascending and descending) see rows enter, leave, move and change, one row per commit.
    /// Every list equals its query read afresh after each commit, every changeset applies, and
    /// no query runs again: each changed row is read alone and placed by the order's values.
    @Test(arguments: [UInt64(4), 5, 6])
    func rowsArePlacedWhereTheOrderPutsThem(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let items = try store.collection("items", of: Item.self)
        let names = ["a", "b", "B", "ab", "é", "e\u{301}", "10", "", "😀", "～"]
        func randomItem(_ id: Int) -> Item {
            Item(id: id, owner: Int.random(in: -2...3, using: &random), score: [0, 1, 1.5, -3, 1e20, -0.0].randomElement(using: &random)!,
                 name: names.randomElement(using: &random)!, tag: Bool.random(using: &random) ? nil : names.randomElement(using: &random))
        }
        try store.write { _ in for id in 0..<30 { try items.insert(randomItem(id)) } }
        func randomOrder() -> [any OrderingTerm] {
            let columns = ["owner", "score", "name", "tag", "id"].shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random))
            return columns.map { ColumnOrdering(Column($0), descending: Bool.random(using: &random)) }
        }
        let filters: [Filter?] = [nil, Column("owner") >= 0, Column("name") != "b", .isNull(Column("tag")), Column("score") < 2]
        let queries = (0..<40).map { index in
            let query = items.all.order(by: randomOrder())
            return filters[index % filters.count].map(query.filter) ?? query
        }
        let lists = Lists(count: queries.count)
        let subscriptions = try queries.enumerated().map { index, query in
            try query.live().subscribe { lists.receive($0, at: index) }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        let fetchesBefore = store.observation.diagnostics.withLock { $0.fetches }
        var nextID = 30
        for step in 0..<80 {
            try randomWrite(items, choice: Int.random(in: 0..<4, using: &random), id: Int.random(in: 0..<nextID, using: &random),
                            nextID: &nextID, make: randomItem)
            for (index, query) in queries.enumerated() {
                #expect(lists.list(index) == (try query.fetchAll()), "seed \(seed), step \(step), subscriber \(index): \(query)")
            }
        }
        #expect(store.observation.diagnostics.withLock { $0.fetches } == fetchesBefore, "a query ran again")
        #expect(lists.problems.isEmpty, "\(lists.problems.prefix(3))")
    }

    /// A column SQLite orders with another collation than by bytes (NOCASE) cannot be placed in
    /// Swift: a row entering the result re-runs the query, and the list stays exact.
    @Test func anOrderByAnotherCollationRunsTheQueryAgain() throws {
        try store.write { db in
            try db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, owner INTEGER NOT NULL, score REAL NOT NULL, "
                           + "name TEXT NOT NULL COLLATE NOCASE, tag TEXT)")
        }
        let items = try store.collection("items", of: Item.self)
        try items.insert(contentsOf: ["b", "C", "a"].enumerated().map { Item(id: $0, owner: 0, score: 0, name: $1) })
        let query = items.order(by: Column("name"))
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try query.live())
        defer { subscription.cancel() }
        let fetchesBefore = store.observation.diagnostics.withLock { $0.fetches }
        try items.insert(Item(id: 3, owner: 0, score: 0, name: "B"))
        #expect(try query.fetchAll().map(\.name) == ["a", "b", "B", "C"])
        #expect(subscriber.items == (try query.fetchAll()))
        #expect(store.observation.diagnostics.withLock { $0.fetches } == fetchesBefore + 1)
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    /// Subscribers of the same query share one re-read: a commit that makes 50 subscribers of
    /// one windowed query run it again runs it once. Each list stays exact, and its changeset
    /// is its own. Queries whose arguments differ only by Swift's string equality are two.
    @Test func subscribersOfTheSameQueryShareOneRead() throws {
        let items = try store.collection("items", of: Item.self)
        try store.write { _ in
            for id in 0..<10 { try items.insert(Item(id: id, owner: id % 2, score: 0, name: "é")) }
        }
        let query = items.filter(Column("owner") == 1).order(by: Column("id")).limit(3)
        let lists = Lists(count: 50)
        var subscriptions = try (0..<50).map { index in try query.live().subscribe { lists.receive($0, at: index) } }
        let fetchesBefore = store.observation.diagnostics.withLock { $0.fetches }
        _ = try items.delete(id: 1)   // leaves a full window: another row comes in, so the query runs again
        #expect(store.observation.diagnostics.withLock { $0.fetches } == fetchesBefore + 1)
        for index in 0..<50 { #expect(lists.list(index) == (try query.fetchAll())) }
        // One leaves: the others still share.
        subscriptions.removeLast().cancel()
        _ = try items.delete(id: 3)
        #expect(store.observation.diagnostics.withLock { $0.fetches } == fetchesBefore + 2)
        for index in 0..<49 { #expect(lists.list(index) == (try query.fetchAll())) }
        subscriptions.forEach { $0.cancel() }
        #expect(lists.problems.isEmpty, "\(lists.problems.prefix(3))")
    }

    /// The live queries one commit concerns read together: 40 queries on a queue, all concerned
    /// by one write, read in three transactions (batches of at most 16), not forty. Each list
    /// is still exact, and its changeset applies.
    @Test func theQueriesOneCommitConcernsReadInBatches() throws {
        let items = try store.collection("items", of: Item.self)
        try store.write { _ in
            for id in 0..<30 { try items.insert(Item(id: id, owner: 0, score: 0, name: "a")) }
        }
        // Forty different windows (no shared read): every one holds row 0.
        let queries = (0..<40).map { items.filter(Column("owner") == 0).order(by: Column("id")).limit(5 + $0) }
        let lists = Lists(count: 40)
        let queue = DispatchQueue(label: "ripple.tests.batches")
        let subscriptions = try queries.enumerated().map { index, query in
            try query.live().subscribe(on: .queue(queue)) { lists.receive($0, at: index) }
        }
        defer { subscriptions.forEach { $0.cancel() } }
        for (index, query) in queries.enumerated() { #expect(lists.waitFor(index, try query.fetchAll())) }
        let before = store.observation.diagnostics.withLock { $0.batchReads }
        try items.update(Item(id: 0, owner: 0, score: 1, name: "changed"))
        for (index, query) in queries.enumerated() { #expect(lists.waitFor(index, try query.fetchAll())) }
        #expect(store.observation.diagnostics.withLock { $0.batchReads } - before == 3)
        #expect(lists.problems.isEmpty, "\(lists.problems.prefix(3))")
    }

    /// A refresh that fails in a batch ends its own stream only: the others read in the same
    /// transaction deliver their events.
    @Test func aRefreshThatFailsInABatchFailsAlone() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, owner: 0, score: 0, name: "a"))
        try store.write { db in try db.execute("CREATE TABLE doomed(id INTEGER PRIMARY KEY, name TEXT)") }
        let queue = DispatchQueue(label: "ripple.tests.batch-failure")
        let doomed = ListViewSubscriber<DoomedRow>()
        let doomedSubscription = doomed.subscribe(
            to: store.liveQuery(DoomedRow.self, sql: "SELECT id, name FROM doomed ORDER BY id", identity: "id"), on: .queue(queue))
        defer { doomedSubscription.cancel() }
        let lists = Lists(count: 2)
        let query = items.order(by: Column("id"))
        let subscriptions = try (0..<2).map { index in try query.live().subscribe(on: .queue(queue)) { lists.receive($0, at: index) } }
        defer { subscriptions.forEach { $0.cancel() } }
        for index in 0..<2 { #expect(lists.waitFor(index, try query.fetchAll())) }
        #expect(doomed.waitFor(items: []))
        let before = store.observation.diagnostics.withLock { $0.batchReads }
        // One commit concerns all three (a schema change): the doomed query's read fails.
        try store.write { db in
            try db.execute("DROP TABLE doomed")
            try items.insert(Item(id: 2, owner: 0, score: 0, name: "b"))
        }
        for index in 0..<2 { #expect(lists.waitFor(index, try query.fetchAll())) }
        #expect(doomed.waitForError())
        #expect(store.observation.diagnostics.withLock { $0.batchReads } - before == 1)
        #expect(lists.problems.isEmpty, "\(lists.problems.prefix(3))")
    }

    /// A subscriber whose handler holds each event until `release()` while `holding`: it stays
    /// busy (delivering) while the test commits.
    final class HeldSubscriber: @unchecked Sendable {   // `lists` is thread-safe; the rest is behind `holding`'s lock
        let lists = Lists(count: 1)
        private let holding = Locked(false)
        private let entered = DispatchSemaphore(value: 0)
        private let gate = DispatchSemaphore(value: 0)

        func receive(_ event: LiveQueryEvent<Item>) {
            lists.receive(event, at: 0)
            guard holding.withLock({ $0 }) else { return }
            entered.signal()
            _ = try? Wait.for(gate, "the test to release the held handler")
        }

        /// Runs `commit`, whose event the handler then holds; returns once the handler holds it.
        func hold(during commit: () throws -> Void) throws {
            holding.withLock { $0 = true }
            try commit()
            try Wait.for(entered, "the handler to hold the commit's event")
        }

        /// Lets the held handler return.
        func release() {
            holding.withLock { $0 = false }
            gate.signal()
        }
    }

    /// A subscriber that is reading or delivering is told only of the commits that may change its
    /// result, as an idle one is: five commits to other owners' rows while its handler holds an
    /// event make it read nothing more. (It was told of every commit to its table while busy, and
    /// read again after each event: with thousands of subscribers and writes back to back, those
    /// reads fed each other, and the writes ran 2.6× slower than with two subscribers.)
    @Test func aBusySubscriberIsToldOnlyOfTheCommitsThatConcernIt() throws {
        let (items, query, subscriber, subscription) = try heldSubscriberOfOwnerZero(rows: 10)
        defer { subscription.cancel() }
        let before = store.observation.diagnostics.withLock { $0.refreshes }
        try subscriber.hold { try items.update(Item(id: 0, owner: 0, score: 1, name: "a")) }
        for id in [1, 3, 5, 7, 9] { try items.update(Item(id: id, owner: 1, score: 1, name: "b")) }
        subscriber.release()
        try items.update(Item(id: 2, owner: 0, score: 1, name: "a"))
        #expect(subscriber.lists.waitFor(0, try query.fetchAll()))
        // At most one read for each of the two commits to its rows, none for the five others.
        // (One read in all when a read counted before `before`, still looking at the rows'
        // insert, takes its snapshot after the first commit: its first statement fixes it.)
        let reads = store.observation.diagnostics.withLock { $0.refreshes } - before
        #expect((1...2).contains(reads), "\(reads) reads")
        #expect(subscriber.lists.problems.isEmpty, "\(subscriber.lists.problems.prefix(3))")
    }

    /// A row that entered a subscriber's result in the read it is delivering, then left its filter
    /// before the subscriber was idle again, leaves its list: that commit matched no filter and
    /// changed no row the store knew the subscriber held, but the subscriber is told of the
    /// commits since its read that changed a row that entered then: on becoming idle, or, when
    /// it reads again at once (a commit to a row it held made it stale), in that read. Past the
    /// commits the store keeps to check against, it reads what changed from the change log.
    @Test(arguments: [false, true], [false, true])
    func aRowThatLeavesWhileItsEntryIsDeliveredLeaves(readAgainAtOnce: Bool, pastTheRecentCommits: Bool) throws {
        let (items, query, subscriber, subscription) = try heldSubscriberOfOwnerZero(rows: 4)
        defer { subscription.cancel() }
        try subscriber.hold { try items.insert(Item(id: 10, owner: 0, score: 0, name: "new")) }
        try items.update(Item(id: 10, owner: 1, score: 0, name: "new"))
        if pastTheRecentCommits {
            for score in 0...RecentCommits.limit { try items.update(Item(id: 1, owner: 1, score: Double(score), name: "b")) }
        }
        if readAgainAtOnce { try items.update(Item(id: 2, owner: 0, score: 1, name: "a")) }
        subscriber.release()
        #expect(subscriber.lists.waitFor(0, try query.fetchAll()))
        #expect(subscriber.lists.list(0).map(\.id) == [0, 2])
        #expect(subscriber.lists.problems.isEmpty, "\(subscriber.lists.problems.prefix(3))")
    }

    /// Rows `0..<rows` (owner `id % 2`), and a ``HeldSubscriber`` to owner 0's, in id order, that
    /// received them.
    func heldSubscriberOfOwnerZero(rows: Int) throws
        -> (RecordCollection<Item>, RecordQuery<Item>, HeldSubscriber, Subscription) {
        let items = try store.collection("items", of: Item.self)
        try items.insert(contentsOf: (0..<rows).map { Item(id: $0, owner: $0 % 2, score: 0, name: "a") })
        let query = items.filter(Column("owner") == 0).order(by: Column("id"))
        let subscriber = HeldSubscriber()
        let subscription = try query.live().subscribe(on: .queue(DispatchQueue(label: "ripple.tests.held"))) {
            subscriber.receive($0)
        }
        #expect(subscriber.lists.waitFor(0, try query.fetchAll()))
        return (items, query, subscriber, subscription)
    }

    struct DoomedRow: Codable, Sendable, Equatable {
        var id: Int
        var name: String
    }

    /// "\u{e9}" and "e\u{301}" are equal Swift strings but two SQLite texts: filters on them are
    /// two filters (each evaluated with its own constant), and two queries (neither shares the
    /// other's read).
    @Test func argumentsThatSwiftFindsEqualButSQLiteDoesNotAreTwo() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, owner: 0, score: 0, name: "\u{e9}"))
        let composed = items.filter(Column("name") == "\u{e9}").order(by: Column("id")).limit(3)
        let decomposed = items.filter(Column("name") == "e\u{301}").order(by: Column("id")).limit(3)
        let two = Lists(count: 2)
        let pair = [try composed.live().subscribe { two.receive($0, at: 0) },
                    try decomposed.live().subscribe { two.receive($0, at: 1) }]
        defer { pair.forEach { $0.cancel() } }
        try items.insert(Item(id: 100, owner: 5, score: 0, name: "e\u{301}"))
        #expect(two.list(0) == (try composed.fetchAll()))
        #expect(two.list(1) == (try decomposed.fetchAll()))
        #expect(two.list(1).map(\.id) == [100])
    }
}
