import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Every table SQLite accepts as a collection is observed exactly, or refused (issue 38, item 2):
/// a rowid table keyed by a `UNIQUE NOT NULL` column, a view, a `TEMP` table of the same name,
/// an attached database's table. The check is the universal one: after each write, the list a
/// subscriber holds (every changeset applied) equals the query read afresh.
@Suite struct CollectionTableKindTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("kinds.sqlite"))
    }

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var owner: Int
        var val: Int
    }

    /// Keyed by a stored property that is not called `id`.
    struct Coded: Codable, Sendable, Identifiable, Equatable {
        var code: String
        var val: Int
        var id: String { code }
    }

    /// Subscribes `query` immediately; after each of `writes`, the delivered list must equal `fresh()`.
    func expectLive<Element: Equatable & Sendable>(_ query: LiveQuery<Element>, fresh: () throws -> [Element],
                                                   writes: [() throws -> Void],
                                                   sourceLocation: SourceLocation = #_sourceLocation) throws {
        let subscriber = ListViewSubscriber<Element>()
        let subscription = subscriber.subscribe(to: query)
        defer { subscription.cancel() }
        #expect(subscriber.items == (try fresh()), "initial", sourceLocation: sourceLocation)
        for (index, write) in writes.enumerated() {
            try write()   // delivered before it returns (immediate delivery)
            #expect(subscriber.items == (try fresh()), "after write \(index)", sourceLocation: sourceLocation)
            #expect((subscriber.version ?? .max) <= (try store.currentVersion()), "after write \(index)",
                    sourceLocation: sourceLocation)
        }
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)", sourceLocation: sourceLocation)
        #expect(subscriber.error == nil, sourceLocation: sourceLocation)
    }

    /// The change log names a rowid table's rows by rowid; a collection keyed by a `UNIQUE NOT
    /// NULL` column must not compare those rowids with its keys (its filtered queries missed
    /// rows entering and leaving the filter).
    @Test func aUniqueNotNullKeyOfARowidTableKeepsFilteredQueriesCurrent() throws {
        try store.write { db in try db.execute("CREATE TABLE coded(code TEXT UNIQUE NOT NULL, val INTEGER NOT NULL)") }
        let coded = try store.collection("coded", of: Coded.self, primaryKey: "code")
        try coded.insert(Coded(code: "a", val: 1))
        let query = coded.filter(Column("val") >= 5).order(by: Column("val"))
        try expectLive(try query.live(), fresh: { try query.fetchAll() }, writes: [
            { try coded.upsert(Coded(code: "a", val: 7)) },
            { try coded.insert(Coded(code: "b", val: 9)) },
            { try coded.upsert(Coded(code: "b", val: 2)) },
            { try self.store.write { db in try db.execute("UPDATE coded SET val = 6 WHERE code = 'b'") } },
            { try self.store.write { db in try db.execute("DELETE FROM coded WHERE code = 'a'") } },
        ])
        let unordered = coded.filter(Column("val") < 5)
        try expectLive(try unordered.live(), fresh: { try unordered.fetchAll() }, writes: [
            { try coded.insert(Coded(code: "c", val: 1)) },
            { try self.store.write { db in try db.execute("UPDATE coded SET val = 0 WHERE code = 'b'") } },
        ])
    }

    /// A view's rows change with the tables it reads: its collection's live queries follow them.
    @Test func aViewOpenedAsACollectionFollowsTheTablesItReads() throws {
        let items = try store.collection("items", of: Item.self)
        try store.write { db in try db.execute("CREATE VIEW big AS SELECT id, owner, val FROM items WHERE val >= 500") }
        let big = try store.collection("big", of: Item.self)
        try items.insert(Item(id: 1, owner: 1, val: 600))
        let mine = big.filter(Column("owner") == 1).order(by: Column("val"))
        try expectLive(try mine.live(), fresh: { try mine.fetchAll() }, writes: [
            { try items.insert(Item(id: 2, owner: 1, val: 700)) },
            { try items.upsert(Item(id: 1, owner: 1, val: 5)) },
            { try items.insert(Item(id: 3, owner: 2, val: 900)) },
            { try items.upsert(Item(id: 3, owner: 1, val: 900)) },
            { try self.store.write { db in try db.execute("DELETE FROM items WHERE id = 2") } },
        ])
        try expectLive(try big.live(), fresh: { try big.fetchAll() }, writes: [
            { try items.insert(Item(id: 4, owner: 3, val: 800)) },
        ])
        // History rewinds one table: a view's is refused, saying why.
        let version = try store.currentVersion()
        #expect { try store.history(of: big.all, from: version, to: version) } throws: { error in
            (error as? StoreError)?.kind == .history && "\(error)".contains("view")
        }
    }

    /// A `TEMP` table of the collection's name on the writer's connection takes none of the
    /// collection's reads and writes, nor its live queries' checks: they name `main`.
    @Test func aTempTableUnderACollectionsNameTakesNoneOfItsStatements() throws {
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, owner: 1, val: 10))
        let start = try store.currentVersion()
        try store.writeWithoutTransaction { db in
            try db.execute("CREATE TEMP TABLE items(id INTEGER PRIMARY KEY, owner INTEGER, val INTEGER)")
        }
        let query = items.filter(Column("owner") == 1).order(by: Column("val"))
        try expectLive(try query.live(), fresh: { try query.fetchAll() }, writes: [
            { try items.insert(Item(id: 2, owner: 1, val: 20)) },
            { try items.upsert(Item(id: 1, owner: 1, val: 30)) },
            { try items.update(Item(id: 2, owner: 2, val: 20)) },
            { try items.insert(Item(id: 3, owner: 1, val: 5)) },
            { try items.delete(id: 3) },
            { try items.filter(Column("val") == 30).deleteAll() },
        ])
        let (inMain, inTemp) = try store.write { db in
            (try db.fetchValue("SELECT count(*) FROM main.items", as: Int.self),
             try db.fetchValue("SELECT count(*) FROM temp.items", as: Int.self))
        }
        #expect(inMain == 1)
        #expect(inTemp == 0)
        #expect(try items.count() == 1)
        // History still reads its own rewound copy.
        let steps = try store.history(of: items.all.order(by: Column("id")), from: start, to: try store.currentVersion())
        #expect(steps.first?.snapshot == [Item(id: 1, owner: 1, val: 10)])
        #expect(steps.last?.snapshot == [Item(id: 2, owner: 2, val: 20)])
    }

    /// A table of an attached database with the collection's name is not the collection's: the
    /// change log records `main` only, so the collection's table is made in `main`, and a live
    /// query over the attached table is refused with a typed error.
    @Test func anAttachedDatabasesTableIsNeverTakenForTheCollections() throws {
        let other = directory.path("other.sqlite")
        try store.writeWithoutTransaction { db in
            try db.execute("ATTACH DATABASE ? AS aux", [other])
            try db.execute("CREATE TABLE aux.items(id INTEGER PRIMARY KEY, owner INTEGER, val INTEGER)")
            try db.execute("INSERT INTO aux.items VALUES (100, 1, 1)")
        }
        let items = try store.collection("items", of: Item.self)
        let query = items.filter(Column("owner") == 1)
        try expectLive(try query.live(), fresh: { try query.fetchAll() }, writes: [
            { try items.insert(Item(id: 1, owner: 1, val: 10)) },
            { try items.upsert(Item(id: 1, owner: 1, val: 11)) },
        ])
        let inAux = try store.write { db in try db.fetchValue("SELECT count(*) FROM aux.items", as: Int.self) }
        #expect(inAux == 1)
        #expect(try items.fetchAll() == [Item(id: 1, owner: 1, val: 11)])

        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: "SELECT * FROM aux.items", identity: "id"))
        defer { subscription.cancel() }
        #expect(subscriber.waitForError(), "the live query over aux.items ends with an error")
        let error = subscriber.error
        #expect(error is StoreError || error is DatabaseError, "\(String(describing: error))")
    }

    /// What the store's authorizer learns while preparing a raw live query: a table outside
    /// `main` (here `temp`, on a connection that has one) is refused with a typed error.
    @Test func aRawQueryReadingATempTableIsRefused() throws {
        let refused = try store.writeWithoutTransaction { db -> StoreError? in
            try db.execute("CREATE TEMP TABLE scratch(id INTEGER PRIMARY KEY)")
            do {
                _ = try db.tablesRead(by: "SELECT id FROM scratch")
                return nil
            } catch let error as StoreError {
                return error
            }
        }
        #expect(refused?.kind == .invalidQuery)
        #expect(refused.map { "\($0)".contains("temp.scratch") } == true)
    }
}
