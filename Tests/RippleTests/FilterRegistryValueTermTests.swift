import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// The filter index's value terms (``RowValueTerm``) on a real database: an observer's values
/// are changed in place (the table's index is not built again, whatever the number of other
/// observers), a changed row whose column holds one of them matches it alone, and a term SQLite
/// would compare with a conversion (the columns' affinities differ) tells its observer of every
/// commit to the table.
@Suite struct FilterRegistryValueTermTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("registry.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE todos (id INTEGER PRIMARY KEY, owner TEXT, project_id INTEGER, title TEXT)")
            try db.execute("CREATE TABLE members (id INTEGER PRIMARY KEY, project_id INTEGER, user_id TEXT)")
            try db.execute("CREATE TABLE loose_members (id INTEGER PRIMARY KEY, project_id TEXT, user_id TEXT)")
            for id in 1...8 { try db.execute("INSERT INTO todos VALUES (?, 'nobody', ?, 't')", [id, id]) }
        }
    }

    /// A membership query's interest: rows of the user's projects (read from `members`, or from
    /// `loose_members`, whose `project_id` is TEXT).
    static func interest(_ user: String, from members: String = "members") -> RowInterest {
        let dependency = RowInterest(table: members, quotedTable: "main.\"\(members)\"", quotedKey: "", filterSQL: "user_id = ?",
                                     filterArguments: [.text(user)], filter: Column("user_id") == user)
        return RowInterest(table: "todos", quotedTable: "main.\"todos\"", quotedKey: "\"id\"",
                           filterSQL: "project_id IN (SELECT project_id FROM \(members) WHERE user_id = ?)",
                           filterArguments: [.text(user)], filter: .in(Column("project_id"), []), dependencies: [dependency],
                           valueTerms: [.init(column: "project_id", dependency: 0, dependencyTable: members, selectedColumn: "project_id")])
    }

    /// The observers of `todos` a change of the rows `ids` concerns by their values, and those told unevaluated.
    func evaluate(_ registry: inout FilterRegistry, _ ids: [Int64], version: Int64) throws
        -> (values: Set<CommitRouter.ObserverID>, unevaluated: Set<CommitRouter.ObserverID>) {
        var summary = CommitSummary(version: version, tables: ["todos"])
        summary.rowKeys = ["todos": Set(ids.map { RowKey(integer: $0) })]
        let matches = try store.write { db in registry.evaluate(summary, in: db) }
        return (matches.valueMatching, matches.unevaluated)
    }

    @Test func valuesChangeInPlaceWithoutABuild() throws {
        var registry = FilterRegistry()
        for id: CommitRouter.ObserverID in 1...1_000 { _ = registry.add(id, Self.interest("user\(id)")) }
        for id: CommitRouter.ObserverID in 1...1_000 { _ = registry.setValues(id, [[.integer(Int64(id) + 100)]]) }
        #expect(registry.setValues(1, [[.integer(3)]]) == 0)
        #expect(registry.setValues(2, [[.integer(3), .integer(4)]]) == 0)
        var found = try evaluate(&registry, [3], version: 1)
        #expect(found.values == [1, 2] && found.unevaluated.isEmpty)
        #expect(registry.buildCount(of: "todos") == 1)
        // Observer 1 leaves project 3 for 5: one observer's entries change; the index is not built again.
        #expect(registry.setValues(1, [[.integer(5)]]) == 1)
        #expect(registry.setValues(1, [[.integer(5)]]) == nil, "unchanged values change nothing")
        found = try evaluate(&registry, [3, 5], version: 2)
        #expect(found.values == [1, 2])
        found = try evaluate(&registry, [3], version: 3)
        #expect(found.values == [2])
        #expect(registry.buildCount(of: "todos") == 1)
        // Gone: its values with it (its filter group goes too, which builds the index again, as
        // any filter that comes or goes does).
        registry.remove(2)
        found = try evaluate(&registry, [3, 4, 6], version: 4)
        #expect(found.values.isEmpty)
    }

    @Test func aTermComparedWithAConversionTellsEveryCommit() throws {
        var registry = FilterRegistry()
        _ = registry.add(1, Self.interest("alice"))
        _ = registry.add(2, Self.interest("bob", from: "loose_members"))
        _ = registry.setValues(1, [[.integer(3)]])
        _ = registry.setValues(2, [[.text([UInt8]("3".utf8))]])
        // todos.project_id is INTEGER, loose_members.project_id TEXT: '3' and 3 are equal to
        // SQLite there, not to the index; bob hears of every commit to todos.
        var found = try evaluate(&registry, [3], version: 1)
        #expect(found.values == [1] && found.unevaluated == [2])
        found = try evaluate(&registry, [6], version: 2)
        #expect(found.values.isEmpty && found.unevaluated == [2])
    }

    /// What a membership change costs the index among 10,000 observers: in place, against the
    /// build a change of filter costs (measured and printed; the assertion is on the count).
    @Test func anInPlaceChangeCostsNoBuildAmongTenThousandObservers() throws {
        var registry = FilterRegistry()
        for id: CommitRouter.ObserverID in 1...10_000 {
            _ = registry.add(id, Self.interest("user\(id)"))
            _ = registry.setValues(id, [[.integer(Int64(id % 50)), .integer(Int64(id % 7) + 100)]])
        }
        var start = ContinuousClock.now
        _ = try evaluate(&registry, [3], version: 1)
        let build = ContinuousClock.now - start
        start = ContinuousClock.now
        for round in 0..<1_000 {
            _ = registry.setValues(CommitRouter.ObserverID(round + 1), [[.integer(Int64(round % 50) + 1), .integer(200)]])
        }
        let changes = ContinuousClock.now - start
        start = ContinuousClock.now
        for version in 2...101 { _ = try evaluate(&registry, [Int64(version % 8) + 1], version: Int64(version)) }
        let evaluations = ContinuousClock.now - start
        #expect(registry.buildCount(of: "todos") == 1)
        print("10,000 observers: first evaluation (with the build) \(build); 1,000 in-place value changes \(changes); "
              + "100 evaluations after \(evaluations)")
    }
}
