import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Time travel over a query that reads several tables: every table named is rewound together,
/// so that at each version the result is the query's over the whole database as it was then.
@Suite struct HistoryTablesTests {
    /// Queries over `todos`, `members` and `projects`, bound to a user, each with the tables it reads.
    static let queries: [(name: String, sql: String, tables: [String])] = [
        ("in", """
            SELECT id, project_id, title FROM todos
            WHERE project_id IN (SELECT project_id FROM members WHERE user_id = ?) ORDER BY id
            """, ["todos", "members"]),
        ("exists", """
            SELECT t.id, t.title FROM todos AS t
            WHERE EXISTS (SELECT 1 FROM members AS m WHERE m.project_id = t.project_id AND m.user_id = ?)
            ORDER BY t.title, t.id
            """, ["todos", "members"]),
        ("join", """
            SELECT t.id, t.title, p.name, m.role FROM todos AS t
            JOIN projects AS p ON p.id = t.project_id
            JOIN members AS m ON m.project_id = t.project_id AND m.user_id = ?
            ORDER BY p.name, t.id
            """, ["members", "todos", "projects"]),
        // A sub-query over a table's rowid key inside another: SQLite's authorizer reports one of
        // its reads of `projects` without a schema name (it is still the copy in temp).
        ("nested in", """
            SELECT id, project_id, title FROM todos
            WHERE project_id IN (SELECT id FROM projects WHERE id IN (SELECT project_id FROM members WHERE user_id = ?)) ORDER BY id
            """, ["todos", "projects", "members"]),
    ]

    static func makeStore(_ directory: TemporaryDirectory) throws -> Store {
        let store = try Store(path: directory.path("history.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE todos (id INTEGER PRIMARY KEY, project_id INTEGER, title TEXT)")
            try db.execute("CREATE INDEX todos_by_project ON todos (project_id)")
            try db.execute("CREATE TABLE members (user_id TEXT, project_id INTEGER, role TEXT, PRIMARY KEY (user_id, project_id))")
            try db.execute("CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT) ")
        }
        return store
    }

    /// One random write over the three tables: a few changes, often to several tables at once.
    static func randomWrite(_ db: Database, _ rng: inout HistoryTests.SeededGenerator) throws {
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let project = Int64.random(in: 0..<4, using: &rng)
            let user = ["alice", "bob"].randomElement(using: &rng)!
            switch Int.random(in: 0..<9, using: &rng) {
            case 0, 1:
                try db.execute("INSERT OR REPLACE INTO todos (id, project_id, title) VALUES (?, ?, ?)",
                               [Int64.random(in: 0..<12, using: &rng), project, "t\(Int.random(in: 0..<6, using: &rng))"])
            case 2:   // a todo moves to another project
                try db.execute("UPDATE todos SET project_id = ? WHERE id = ?", [project, Int64.random(in: 0..<12, using: &rng)])
            case 3:
                try db.execute("DELETE FROM todos WHERE id = ?", [Int64.random(in: 0..<12, using: &rng)])
            case 4, 5:   // a membership granted (or its role changed)
                try db.execute("INSERT OR REPLACE INTO members (user_id, project_id, role) VALUES (?, ?, ?)",
                               [user, project, ["owner", "reader"].randomElement(using: &rng)!])
            case 6:   // a membership revoked
                try db.execute("DELETE FROM members WHERE user_id = ? AND project_id = ?", [user, project])
            case 7:
                try db.execute("INSERT OR REPLACE INTO projects (id, name) VALUES (?, ?)",
                               [project, "p\(Int.random(in: 0..<5, using: &rng))"])
            default:   // granted and revoked in the same transaction
                try db.execute("INSERT OR IGNORE INTO members (user_id, project_id, role) VALUES (?, ?, 'reader')", [user, project])
                try db.execute("DELETE FROM members WHERE user_id = ? AND project_id = ?", [user, project])
            }
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func everyTableNamedIsRewoundTogether(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let store = try Self.makeStore(directory)
        let start = try store.currentVersion()
        let users = ["alice", "bob"]
        // The universal check: each version's result, read right after its commit.
        var expected: [Int64: [String: [Row]]] = [:]
        func record() throws {
            try store.read { db in
                let version = try ChangeLog.version(db)
                var results: [String: [Row]] = [:]
                for query in Self.queries {
                    for user in users { results["\(query.name) \(user)"] = try db.fetchAll(query.sql, [user]) }
                }
                expected[version] = results
            }
        }
        try record()
        var rng = HistoryTests.SeededGenerator(state: seed)
        for _ in 0..<50 {
            try store.write { db in try Self.randomWrite(db, &rng) }
            try record()
        }
        let current = try store.currentVersion()
        #expect(expected.count == Int(current - start) + 1, "one write, one version")

        for query in Self.queries {
            for user in users {
                let label = "\(query.name) \(user)"
                for version in start...current {
                    let steps = try store.history(tables: query.tables, sql: query.sql, arguments: [user], identity: "id",
                                                  from: version, to: version)
                    #expect(steps.count == 1)
                    #expect(steps.first?.snapshot == expected[version]?[label], "seed \(seed), \(label) at version \(version)")
                }
                // The whole range: each changeset applies, each step is the result at its version,
                // and a step comes exactly at each version that changed the result.
                let steps = try store.history(tables: query.tables, sql: query.sql, arguments: [user], identity: "id",
                                              from: start, to: current)
                var list: [Row] = []
                for step in steps {
                    #expect(step.changeset.apply(to: list, using: step.snapshot) == step.snapshot,
                            "seed \(seed), \(label) at version \(step.version)")
                    #expect(step.snapshot == expected[step.version]?[label], "seed \(seed), \(label) at version \(step.version)")
                    list = step.snapshot
                }
                let changed = (start + 1...current).filter { expected[$0]?[label] != expected[$0 - 1]?[label] }
                #expect(steps.dropFirst().map(\.version) == changed, "seed \(seed), \(label)")
                // Rewinding the tables the SQL reads, as SQLite reports them, is the same history.
                var read: [HistoryStep<Row>] = []
                try store.history(rewindingTablesReadBy: query.sql, arguments: [.text(user)], identity: "id",
                                  from: start, to: current) { read.append($0) }
                #expect(read.map(\.version) == steps.map(\.version) && read.map(\.snapshot) == steps.map(\.snapshot),
                        "seed \(seed), \(label)")
            }
        }
    }

    /// A revoked membership: rewinding only `todos` shows today's memberships at the old version
    /// (the todos the membership gave are missing); rewinding both shows them.
    @Test func aRevokedMembershipIsSeenAtTheVersionBeforeIt() throws {
        let directory = try TemporaryDirectory()
        let store = try Self.makeStore(directory)
        try store.write { db in
            try db.execute("INSERT INTO members (user_id, project_id, role) VALUES ('alice', 1, 'owner'), ('alice', 2, 'reader')")
            try db.execute("INSERT INTO todos (id, project_id, title) VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c')")
        }
        let before = try store.currentVersion()
        try store.write { db in try db.execute("DELETE FROM members WHERE user_id = 'alice' AND project_id = 2") }
        let sql = Self.queries[0].sql
        let ids = { (steps: [HistoryStep<Row>]) in steps.first?.snapshot.map { $0.values[0] } }
        let both = try store.history(tables: ["todos", "members"], sql: sql, arguments: ["alice"], identity: "id",
                                     from: before, to: before)
        #expect(ids(both) == [.integer(1), .integer(2)])
        let onlyTodos = try store.history(table: "todos", sql: sql, arguments: ["alice"], identity: "id", from: before, to: before)
        #expect(ids(onlyTodos) == [.integer(1)])
        // To now: the revocation deletes the todo the membership gave.
        let steps = try store.history(tables: ["todos", "members"], sql: sql, arguments: ["alice"], identity: "id",
                                      from: before, to: try store.currentVersion())
        #expect(steps.count == 2)
        if steps.count == 2 {
            #expect(steps[1].changeset.deletes == [1] && steps[1].changeset.inserts.isEmpty)
            #expect(steps[1].changeset.apply(to: steps[0].snapshot, using: steps[1].snapshot) == steps[1].snapshot)
        }
    }

    @Test func aSchemaChangeOfAnyTableNamedCannotBeCrossed() throws {
        let directory = try TemporaryDirectory()
        let store = try Self.makeStore(directory)
        try store.write { db in try db.execute("INSERT INTO members (user_id, project_id, role) VALUES ('alice', 1, 'owner')") }
        let before = try store.currentVersion()
        try store.write { db in try db.execute("ALTER TABLE members ADD COLUMN since INTEGER") }
        let error = #expect(throws: StoreError.self) {
            try store.history(tables: ["todos", "members"], sql: Self.queries[0].sql, arguments: ["alice"], identity: "id",
                              from: before, to: before)
        }
        #expect(error?.kind == .history)
    }

    @Test func badTablesAreRefusedClearly() throws {
        let directory = try TemporaryDirectory()
        let store = try Self.makeStore(directory)
        let version = try store.currentVersion()
        let sql = Self.queries[0].sql
        let empty = #expect(throws: StoreError.self) {
            try store.history(tables: [], sql: sql, arguments: ["alice"], identity: "id", from: version, to: version)
        }
        #expect(empty?.kind == .invalidQuery)
        let unknown = #expect(throws: StoreError.self) {
            try store.history(tables: ["todos", "nowhere"], sql: sql, arguments: ["alice"], identity: "id", from: version, to: version)
        }
        #expect(unknown?.kind == .invalidQuery)
        // SQL naming `main.members` would read today's memberships at every version.
        let main = #expect(throws: StoreError.self) {
            try store.history(tables: ["todos", "members"],
                              sql: "SELECT id FROM todos WHERE project_id IN (SELECT project_id FROM main.members WHERE user_id = ?)",
                              arguments: ["alice"], identity: "id", from: version, to: version)
        }
        #expect(main?.kind == .history)
        // A table named twice (as SQLite matches names) is rewound once.
        let twice = try store.history(tables: ["todos", "members", "Members"], sql: sql, arguments: ["alice"], identity: "id",
                                      from: version, to: version)
        #expect(twice.count == 1)
        // The connection is left as it was: its copies dropped.
        #expect(try store.read { db in try db.fetchAll("SELECT name FROM temp.sqlite_schema") }.isEmpty)
    }
}
