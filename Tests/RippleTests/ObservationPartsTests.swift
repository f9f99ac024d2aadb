@testable import Ripple
import RippleTesting
import Testing

/// The parts that decide what a commit can change, each on its own: values ordered as SQLite
/// orders them, the interval index, a filter's plan, a query's row order, the recent commits.
/// Seeded; SQLite itself is the oracle where it has one.
@Suite struct ObservationPartsTests {
    static func connection() throws -> Database {
        try Database(path: ":memory:", readOnly: false, configuration: Store.Configuration())
    }

    /// Values of every kind, with the awkward ones often: Int64 extremes, integral and huge
    /// reals, empty text and blobs, bytes that are text in one and blob in the other.
    static func value(_ random: inout SeededGenerator) -> SQLValue {
        switch Int.random(in: 0..<8, using: &random) {
        case 0: .integer([Int64.min, -1, 0, 1, 2, Int64.max].randomElement(using: &random)!)
        case 1: .integer(Int64.random(in: -5...5, using: &random))
        case 2: .real([-1.5, 0.5, 1.0, 2.0, 1e19, -1e19, 9.223372036854776e18, 2.5].randomElement(using: &random)!)
        case 3: .text(["", "a", "A", "b", "ab", "é", "e\u{301}", "1", "\0"].randomElement(using: &random)!)
        case 4: .blob([[], [0], [0x61], [0x61, 0], [0xFF]].randomElement(using: &random)!)
        default: .integer(Int64.random(in: -3...3, using: &random))
        }
    }

    @Test(arguments: 1...5)
    func indexedValuesAreOrderedAsSQLiteOrdersThem(seed: UInt64) throws {
        let db = try Self.connection()
        var random = SeededGenerator(seed: seed)
        for _ in 0..<500 {
            let (a, b) = (Self.value(&random), Self.value(&random))
            guard let left = IndexedValue(a), let right = IndexedValue(b) else { continue }
            let less = try db.fetchValue("SELECT ? < ?", [a, b], as: Int.self) == 1
            let equal = try db.fetchValue("SELECT ? = ?", [a, b], as: Int.self) == 1
            #expect((left < right) == less, "\(a) < \(b)")
            #expect((left == right) == equal, "\(a) = \(b)")
        }
    }

    @Test(arguments: 1...5)
    func theIntervalIndexFindsExactlyTheIntervalsHoldingAValue(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let operators: [ComparisonOperator] = [.less, .lessOrEqual, .greater, .greaterOrEqual]
        var intervals: [(ValueInterval, Int)] = []
        for member in 0..<Int.random(in: 1...60, using: &random) {
            var interval = ValueInterval()
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                guard let bound = IndexedValue(Self.value(&random)) else { continue }
                interval.narrow(operators.randomElement(using: &random)!, bound)
            }
            intervals.append((interval, member))
        }
        let index = IntervalIndex(intervals)
        for _ in 0..<300 {
            guard let value = IndexedValue(Self.value(&random)) else { continue }
            var found: [Int] = []
            index.members(containing: value, into: &found)
            let expected = intervals.filter { $0.0.contains(value) }.map(\.1)
            #expect(found.sorted() == expected.sorted(), "seed \(seed), value \(value)")
        }
    }

    @Test func aFiltersPlanUsesWhatTheIndexCanDecideExactly() throws {
        let db = try Self.connection()
        try db.execute("CREATE TABLE t(n INTEGER, s TEXT, c TEXT COLLATE NOCASE)")
        let comparison = { (column: String) in ColumnComparison(table: "t", column: column, in: db) }
        func plan(_ filter: Filter?) -> FilterPlan { FilterPlan.of(filter, comparison: comparison) }

        guard case .everyRow = plan(nil) else { Issue.record("no filter: every row"); return }
        guard case .equality("n", let values, exact: true) = plan(Column("n") == 3), values == [.integer(3)] else {
            Issue.record("n = 3: an exact equality"); return
        }
        guard case .equality("n", let list, exact: false) = plan(Column("n").in([1, 2]) && Column("s") == "x"),
              Set(list) == [.integer(1), .integer(2)] else {
            Issue.record("n IN (1, 2) AND s = 'x': the first equality, not exact"); return
        }
        guard case .interval("n", let interval, exact: true) = plan(Column("n") >= 10 && Column("n") < 20),
              interval.contains(.integer(10)), !interval.contains(.integer(20)) else {
            Issue.record("10 <= n < 20: an exact interval"); return
        }
        // What only SQLite decides: LIKE, OR, <>, a text constant on an INTEGER column (converted
        // by its affinity), a NOCASE column.
        for filter: Filter in [Column("s").like("a%"), Column("n") == 1 || Column("n") == 2, Column("n") != 1,
                               Column("n") == "1", Column("c") == "a"] {
            guard case .unindexed = plan(filter) else { Issue.record("\(filter) must be left to SQLite"); continue }
        }
    }

    @Test(arguments: [false, true])
    func aRowOrderPlacesRowsAsSQLiteOrdersThem(descending: Bool) throws {
        let db = try Self.connection()
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v)")
        var random = SeededGenerator(seed: descending ? 2 : 1)
        for id in 0..<200 {
            let value = Int.random(in: 0..<10, using: &random) == 0 ? SQLValue.null : Self.value(&random)
            try db.execute("INSERT INTO t(id, v) VALUES (?, ?)", [id, value])
        }
        let order = try #require(RowOrder(terms: [.init(column: "v", isDescending: descending)], table: "t", in: db))
        let rows = try db.fetchAll("SELECT id, v FROM t")
        let values = rows.map { row in (id: try! row.value("id", as: Int64.self), v: row.values[1]) }
        let sorted = values.sorted { a, b in
            let (left, right) = ([IndexedValue(a.v)][...], [IndexedValue(b.v)][...])
            if order.precedes(left, right) { return true }
            if order.precedes(right, left) { return false }
            return a.id < b.id
        }.map(\.id)
        let expected = try db.fetchAll("SELECT id FROM t ORDER BY v \(descending ? "DESC" : "ASC"), id")
            .map { try $0.value("id", as: Int64.self) }
        #expect(sorted == expected)
    }

    @Test func recentCommitsKeepTheNewestAndSayWhenOlderOnesAreGone() {
        var recent = RecentCommits()
        func commit(_ version: Int64, _ keys: [Int64]?) -> ObservationCenter.ToldCommit {
            var summary = CommitSummary(version: version, tables: ["items"])
            summary.rowKeys = keys.map { ["items": Set($0.map(RowKey.init(integer:)))] }
            return ObservationCenter.ToldCommit(summary, table: "items", keys: keys.map { Set($0.map(RowKey.init(integer:))) },
                                                matched: false)
        }
        recent.append(commit(1, [1]), to: "items")
        recent.append(commit(2, [2]), to: "items")
        recent.append(commit(3, nil), to: "items")   // its rows unknown: it concerns every row
        recent.append(commit(4, [1]), to: "other")
        let found = recent.commits(to: "items", after: 0, changingAnyOf: [RowKey(integer: 1)], besides: [])
        #expect(found?.map(\.version) == [1, 3])
        #expect(recent.commits(to: "items", after: 1, changingAnyOf: [RowKey(integer: 1)], besides: [commit(3, nil)])?.isEmpty == true)
        #expect(recent.newestVersion == 4)
        // Past the limit, the oldest give way: a question about them has no answer.
        for version in 5...Int64(RecentCommits.limit + 5) { recent.append(commit(version, [9]), to: "items") }
        #expect(recent.commits(to: "items", after: 0, changingAnyOf: [RowKey(integer: 9)], besides: []) == nil)
        #expect(recent.commits(to: "items", after: Int64(RecentCommits.limit), changingAnyOf: [RowKey(integer: 9)],
                               besides: [])?.count == 5)
        // A commit of many rows is kept without its keys: it concerns any row.
        recent.append(commit(Int64(RecentCommits.limit + 6), Array(0...Int64(RecentCommits.keyLimit))), to: "items")
        #expect(recent.commits(to: "items", after: Int64(RecentCommits.limit + 5), changingAnyOf: [RowKey(integer: 999)],
                               besides: [])?.count == 1)
    }
}
