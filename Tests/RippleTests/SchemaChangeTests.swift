import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Live queries and history across schema changes: after any ALTER TABLE, DROP or CREATE, a live
/// query delivers rows equal to its query read afresh, or ends with an error that names the
/// change — never a stale list.
@Suite struct SchemaChangeTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("schema.sqlite"))
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE items(id INTEGER PRIMARY KEY, title TEXT, rank INTEGER);
                INSERT INTO items VALUES (1, 'a', 10), (2, 'b', 20);
                CREATE TABLE others(id INTEGER PRIMARY KEY, title TEXT, rank INTEGER);
                INSERT INTO others VALUES (7, 'x', 70);
                """)
        }
    }

    func fresh(_ sql: String) throws -> [Row] { try store.read { db in try db.fetchAll(sql) } }

    /// After each change (and a write after it), the live rows equal the query read afresh —
    /// column names included.
    @Test(arguments: [
        "ALTER TABLE items RENAME COLUMN title TO name",
        "ALTER TABLE items ADD COLUMN note TEXT DEFAULT 'fresh'",
        "ALTER TABLE items DROP COLUMN rank",
        "ALTER TABLE items RENAME TO renamed; CREATE TABLE items(id INTEGER PRIMARY KEY, title TEXT)",
        "DROP TABLE items; CREATE TABLE ITEMS(id INTEGER PRIMARY KEY, title TEXT, rank INTEGER); INSERT INTO ITEMS VALUES (3, 'c', 30)",
        "CREATE INDEX items_by_rank ON items(rank DESC)",
    ])
    func aLiveSelectStarFollowsTheSchema(_ change: String) throws {
        let sql = "SELECT * FROM items ORDER BY id"
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: sql, identity: "id"))
        defer { subscription.cancel() }
        try store.write { db in try db.executeScript(change) }
        #expect(subscriber.items == (try fresh(sql)))
        #expect(subscriber.items.first?.columnNames == (try fresh(sql)).first?.columnNames)
        try store.write { db in try db.execute("INSERT INTO items(id) VALUES (9)") }
        #expect(subscriber.items == (try fresh(sql)))
        try store.write { db in try db.execute("UPDATE items SET id = 10 WHERE id = 1") }
        #expect(subscriber.items == (try fresh(sql)))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        #expect(subscriber.error == nil)
    }

    /// A view redefined to read another table: the live query follows the new table's writes.
    @Test func aRedefinedViewIsFollowedToItsNewTable() throws {
        try store.write { db in try db.execute("CREATE VIEW shown AS SELECT * FROM items") }
        let sql = "SELECT * FROM shown ORDER BY id"
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: sql, identity: "id"))
        defer { subscription.cancel() }
        try store.write { db in try db.executeScript("DROP VIEW shown; CREATE VIEW shown AS SELECT * FROM others") }
        #expect(subscriber.items == (try fresh(sql)))
        try store.write { db in try db.execute("INSERT INTO others VALUES (8, 'y', 80)") }
        #expect(subscriber.items == (try fresh(sql)))
        #expect(subscriber.items.count == 2)
    }

    /// A table dropped under a live query ends it with an error naming the table.
    @Test func aDroppedTableEndsTheLiveQueryWithAnErrorNamingIt() throws {
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: "SELECT * FROM items", identity: "id"))
        defer { subscription.cancel() }
        try store.write { db in try db.execute("DROP TABLE items") }
        #expect(subscriber.waitForError())
        #expect("\(subscriber.error.map { "\($0)" } ?? "")".contains("items"))
    }

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String?
        var rank: Int?
    }

    /// A collection's live query across a renamed column its records need: an error naming the
    /// column, not a stale list. Across a column it does not need: still exact.
    @Test func aCollectionsLiveQueryAcrossARenamedColumn() throws {
        let items = try store.collection("items", of: Item.self)
        let subscriber = ListViewSubscriber<Item>()
        let subscription = subscriber.subscribe(to: try items.order(by: Column("id")).live())
        defer { subscription.cancel() }
        try store.write { db in try db.execute("ALTER TABLE items ADD COLUMN extra TEXT DEFAULT 'e'") }
        try items.insert(Item(id: 5, title: "e", rank: 50))
        #expect(subscriber.items == (try items.order(by: Column("id")).fetchAll()))
        try store.write { db in try db.execute("ALTER TABLE items RENAME COLUMN title TO name") }
        try? store.write { db in try db.execute("UPDATE items SET rank = 0") }
        let fetched = try? items.order(by: Column("id")).fetchAll()
        if let fetched, subscriber.error == nil {
            #expect(subscriber.items == fetched)
        } else {
            #expect(subscriber.waitForError())
            #expect("\(subscriber.error.map { "\($0)" } ?? "")".contains("title"))
        }
    }

    /// History from after an ADD COLUMN with a default: rows that existed before it show the
    /// default (their records predate the column), not NULL.
    @Test func historyAfterAnAddedColumnShowsItsDefaultForOlderRows() throws {
        try store.write { db in try db.execute("ALTER TABLE items ADD COLUMN note TEXT NOT NULL DEFAULT 'dflt'") }
        let start = try store.currentVersion()
        let sql = "SELECT * FROM items ORDER BY id"
        let before = try fresh(sql)
        try store.write { db in try db.execute("DELETE FROM items WHERE id = 1") }
        try store.write { db in try db.execute("UPDATE items SET rank = 21 WHERE id = 2") }
        try store.write { db in try db.execute("UPDATE items SET note = 'set' WHERE id = 2") }
        let steps = try store.history(table: "items", sql: sql, identity: "id", from: start, to: try store.currentVersion())
        #expect(steps.first?.snapshot == before)
        #expect(before.allSatisfy { $0["note"] == .text("dflt") })
        #expect(steps.last?.snapshot == (try fresh(sql)))
    }

    struct Renamed: Codable, Equatable {
        var id: Int
        var name: String?
    }

    /// A statement prepared before a column was renamed reads the new names: the columns are
    /// matched once it stepped (SQLite prepares it again there), for rows and for records.
    @Test func aCachedStatementReadsColumnsRenamedSinceItWasPrepared() throws {
        let sql = "SELECT id, * FROM items ORDER BY id"
        try store.write { db in
            _ = try db.fetchAll(sql)
            _ = try db.fetchAll(Item.self, sql)
            _ = try db.fetchOne(Item.self, sql)
        }
        // Renamed by another connection: this one's statements learn it in their first step.
        let other = try Store(path: directory.path("schema.sqlite"))
        try other.write { db in try db.execute("ALTER TABLE items RENAME COLUMN title TO name") }
        let (names, all, one) = try store.write { db in
            (try db.fetchAll(sql).first?.columnNames, try db.fetchAll(Renamed.self, sql), try db.fetchOne(Renamed.self, sql))
        }
        #expect(names == ["id", "id", "name", "rank"])
        #expect(all == [Renamed(id: 1, name: "a"), Renamed(id: 2, name: "b")])
        #expect(one == Renamed(id: 1, name: "a"))
    }
}
