import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// A write transaction that appends columns or renames them in place, and declares so
/// (`Database.declareHistoryPreservingSchemaChange()`), leaves history whole: a query over the
/// kept columns rewinds across it, rows from before it reading NULL in the appended columns.
@Suite struct HistoryPreservingSchemaChangeTests {
    static let sql = "SELECT id, a FROM t ORDER BY id"

    /// Rows, updates and deletes on both sides of the change; `declared`: whether the change is
    /// declared. Returns the store and the versions before the change and after the last write,
    /// with the expected rows of ``sql`` at each version.
    static func history(declared: Bool, directory: TemporaryDirectory) throws -> (Store, [Int64: [[SQLValue]]]) {
        let store = try Store(path: directory.path("history.sqlite"))
        var expected: [Int64: [[SQLValue]]] = [:]
        func record() throws {
            expected[try store.currentVersion()] = try store.read { db in try db.fetchAll(sql).map(\.values) }
        }
        try store.write { db in
            try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, gone TEXT)")
            try db.execute("INSERT INTO t VALUES (1, 'one', 'x'), (2, 'two', 'y'), (3, 'three', 'z'), (4, 'four', 'w')")
        }
        try record()
        try store.write { db in
            try db.execute("UPDATE t SET a = 'uno' WHERE id = 1")
            try db.execute("DELETE FROM t WHERE id = 2")   // a whole row's image, of three columns
        }
        try record()
        try store.write { db in
            try db.execute("ALTER TABLE t RENAME COLUMN gone TO \"ripple_dropped:0:gone\"")
            try db.execute("ALTER TABLE t ADD COLUMN b TEXT")
            if declared { try db.declareHistoryPreservingSchemaChange() }
            try db.execute("UPDATE t SET b = 'default'")   // every row: only b changes
        }
        try record()
        try store.write { db in
            try db.execute("UPDATE t SET a = 'tres', b = 'B' WHERE id = 3")
            try db.execute("DELETE FROM t WHERE id = 4")   // a whole row's image, of four columns
            try db.execute("INSERT INTO t (id, a, b) VALUES (5, 'five', 'b5')")
        }
        try record()
        return (store, expected)
    }

    @Test func aDeclaredChangeKeepsHistory() throws {
        let directory = try TemporaryDirectory()
        let (store, expected) = try Self.history(declared: true, directory: directory)
        let versions = expected.keys.sorted()
        for version in versions {
            let steps = try store.history(table: "t", sql: Self.sql, identity: "id", from: version, to: version)
            #expect(steps.first?.snapshot.map(\.values) == expected[version], "at version \(version)")
        }
        // Across the change, the rows of kept columns did not change: no step at its version.
        let steps = try store.history(table: "t", sql: Self.sql, identity: "id", from: versions[0], to: versions.last!)
        #expect(steps.map(\.version) == [versions[0], versions[1], versions[3]])
        // A row from before the change reads NULL in the appended column.
        let all = try store.history(table: "t", sql: "SELECT id, b FROM t ORDER BY id", identity: "id", from: versions[1], to: versions[1])
        #expect(all.first?.snapshot.map(\.values) == [[.integer(1), .null], [.integer(3), .null], [.integer(4), .null]])
    }

    @Test func anUndeclaredChangeStopsHistory() throws {
        let directory = try TemporaryDirectory()
        let (store, expected) = try Self.history(declared: false, directory: directory)
        let versions = expected.keys.sorted()
        #expect(throws: StoreError.self) {
            try store.history(table: "t", sql: Self.sql, identity: "id", from: versions[1], to: versions[1])
        }
        let steps = try store.history(table: "t", sql: Self.sql, identity: "id", from: versions[2], to: versions[2])
        #expect(steps.first?.snapshot.map(\.values) == expected[versions[2]])
    }
}
