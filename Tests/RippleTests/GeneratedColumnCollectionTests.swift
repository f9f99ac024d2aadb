import Foundation
@testable import Ripple
import Testing
import RippleTesting

/// Generated columns, `VIRTUAL` and `STORED`, in `STRICT` tables and others, read, filtered and
/// ordered through a collection whose type names them; the collection's writes leave them to
/// SQLite.
@Suite struct GeneratedColumnCollectionTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("generated.sqlite"))
    }

    struct Shape: Codable, Sendable, Identifiable, Equatable {
        var id: String
        var area: Int
        var w: Int
        var h: Int
        var label: String?
    }

    /// The tables: a generated column first and last in the table's order, each kind of each.
    static let schemas = [
        """
        CREATE TABLE shapes(id TEXT PRIMARY KEY NOT NULL, area INTEGER GENERATED ALWAYS AS (w * h) VIRTUAL,
            w INTEGER NOT NULL, h INTEGER NOT NULL, label TEXT AS ('shape ' || id) STORED) STRICT
        """,
        """
        CREATE TABLE shapes(id TEXT PRIMARY KEY, area INTEGER AS (w * h) STORED, w INTEGER, h INTEGER,
            label TEXT GENERATED ALWAYS AS ('shape ' || id) VIRTUAL)
        """,
    ]

    @Test(arguments: schemas)
    func generatedColumnsAreReadFilteredAndOrdered(_ schema: String) throws {
        try store.write { db in try db.execute(schema) }
        let shapes = try store.collection("shapes", of: Shape.self)
        // The values given for generated columns are not written: SQLite computes them.
        try shapes.insert(contentsOf: [Shape(id: "a", area: -1, w: 2, h: 3), Shape(id: "b", area: -1, w: 5, h: 5, label: "x")])
        try shapes.insert(Shape(id: "c", area: 0, w: 1, h: 1))
        try shapes.upsert(Shape(id: "a", area: 0, w: 4, h: 3))
        try shapes.update(Shape(id: "c", area: 0, w: 1, h: 2))
        #expect(try shapes.fetch(id: "a") == Shape(id: "a", area: 12, w: 4, h: 3, label: "shape a"))
        #expect(try shapes.filter(Column("area") > 5).order(by: Column("area").descending).fetchAll().map(\.id) == ["b", "a"])
        #expect(try shapes.filter(Column("label") == "shape c").fetchAll().map(\.area) == [2])

        let live = try shapes.filter(Column("area") >= 10).order(by: Column("area")).live()
        let subscriber = ListViewSubscriber<Shape>()
        let subscription = subscriber.subscribe(to: live)
        defer { subscription.cancel() }
        #expect(subscriber.items.map(\.id) == ["a", "b"])
        try shapes.update(Shape(id: "c", area: 0, w: 10, h: 10))
        try store.write { db in try db.execute("UPDATE shapes SET w = 1 WHERE id = 'a'") }
        #expect(subscriber.items.map(\.id) == ["b", "c"])
        #expect(subscriber.items == (try shapes.filter(Column("area") >= 10).order(by: Column("area")).fetchAll()))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    /// A type need not name the generated columns, and naming one it reads does not add a
    /// column: opening the collection again changes nothing.
    @Test func openingAgainAddsNoColumn() throws {
        struct Plain: Codable, Sendable, Identifiable, Equatable {
            var id: String
            var w: Int
            var h: Int
        }
        try store.write { db in try db.execute(Self.schemas[0]) }
        let plain = try store.collection("shapes", of: Plain.self)
        try plain.insert(Plain(id: "a", w: 2, h: 2))
        let version = try store.currentVersion()
        _ = try store.collection("shapes", of: Shape.self)
        _ = try store.collection("shapes", of: Shape.self)
        #expect(try store.currentVersion() == version)
        #expect(try store.collection("shapes", of: Shape.self).fetchAll() == [Shape(id: "a", area: 4, w: 2, h: 2, label: "shape a")])
    }
}
