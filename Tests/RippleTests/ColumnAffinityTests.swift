import Foundation
@testable import Ripple
import Testing
import RippleTesting

/// Column affinity as SQLite applies it, in tables that are `STRICT` and tables that are not
/// (where `ANY` has NUMERIC affinity): the filters checked inside a commit agree with SQLite's
/// comparison after its conversions, and a collection refuses, before anything is written, a
/// property whose values its column would convert.
@Suite struct ColumnAffinityTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("affinity.sqlite"))
    }

    /// Every declared type SQLite's rules tell apart, in tables that are not `STRICT`, and the
    /// types a `STRICT` table allows.
    static let declaredTypes: [(type: String, strict: Bool)] =
        ["ANY", "", "INT", "INTEGER", "BIGINT", "TEXT", "VARCHAR(5)", "CLOB", "BLOB", "REAL", "DOUBLE", "FLOAT",
         "FLOATING POINT", "NUMERIC", "DECIMAL(10,2)", "BOOLEAN", "DATE", "STRING"].map { ($0, false) }
        + ["ANY", "INT", "INTEGER", "TEXT", "BLOB", "REAL"].map { ($0, true) }

    static let storedValues: [SQLValue] = [
        .integer(5), .text("5"), .real(5.0), .text("5.0"), .text(" 5"), .text("007"), .text("x"), .blob(Array("5".utf8)),
        .real(2.5), .text("2.5"), .integer(-3), .text("1e3"), .null,
    ]

    static let constants: [SQLValue] = [
        .integer(5), .text("5"), .real(5.0), .text("5.0"), .text(" 5"), .text("7"), .text("x"), .blob(Array("5".utf8)),
        .real(2.5), .integer(1000),
    ]

    /// Where the filter index decides a comparison without SQLite (``ColumnComparison/comparesAsIs(_:)``),
    /// its answer is SQLite's, for every stored value and constant.
    @Test(arguments: declaredTypes.indices)
    func theIndexComparesAsSQLiteDoes(_ index: Int) throws {
        let (type, strict) = Self.declaredTypes[index]
        try store.write { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v \(type))" + (strict ? " STRICT" : ""))
            for value in Self.storedValues { _ = try? db.execute("INSERT INTO t(v) VALUES (?)", [value]) }
        }
        try store.read { db in
            let comparison = try #require(ColumnComparison(table: "t", column: "v", in: db))
            let rows = try db.fetchAll("SELECT id, v FROM t")
            for constant in Self.constants {
                guard let indexed = IndexedValue(constant), comparison.comparesAsIs(indexed) else { continue }
                for row in rows {
                    let stored = row["v"].flatMap(IndexedValue.init)
                    for op in ["=", "<", ">"] {
                        let sqlite = try db.fetchValue("SELECT v \(op) ? FROM t WHERE id = ?", [constant, row["id"]!], as: Int.self) == 1
                        let swift = stored.map { op == "=" ? $0 == indexed : op == "<" ? $0 < indexed : indexed < $0 } ?? false
                        #expect(sqlite == swift, "\(type)\(strict ? " STRICT" : ""): \(row["v"]!) \(op) \(constant)")
                    }
                }
            }
        }
    }

    struct Tagged: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var tag: Int?
    }

    /// The issue's case: in a table that is not `STRICT`, `tag ANY` turned the text `'5'` into 5,
    /// and a live query filtering `tag == "5"` must see the row.
    @Test func aLiveQueryFilteringTextSeesTheNumberTheColumnMadeOfIt() throws {
        try store.write { db in try db.execute("CREATE TABLE tagged(id INTEGER PRIMARY KEY, tag ANY)") }
        let tagged = try store.collection("tagged", of: Tagged.self)
        try tagged.insert(Tagged(id: 1, tag: 4))
        let subscriber = ListViewSubscriber<Tagged>()
        let subscription = subscriber.subscribe(to: try tagged.filter(Column("tag") == "5").live())
        defer { subscription.cancel() }
        #expect(subscriber.items.isEmpty)
        try store.write { db in try db.execute("INSERT INTO tagged VALUES (2, '5')") }
        try tagged.update(Tagged(id: 1, tag: 5))
        #expect(subscriber.items == [Tagged(id: 1, tag: 5), Tagged(id: 2, tag: 5)])
        #expect(subscriber.items == (try tagged.filter(Column("tag") == "5").fetchAll()))
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
    }

    struct Labelled: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var label: String
    }

    struct Dated: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var due: Date?
    }

    /// A property whose values the column would convert (text into a column of NUMERIC affinity,
    /// as `ANY` has in a table that is not `STRICT`) is refused when the collection opens, naming
    /// the column, and nothing is written.
    @Test(arguments: ["ANY", "NUMERIC", "DATE", "BOOLEAN", "STRING"])
    func aPropertyTheColumnWouldConvertIsRefusedBeforeAnyWrite(_ type: String) throws {
        try store.write { db in try db.execute("CREATE TABLE labels(id INTEGER PRIMARY KEY, label \(type) NOT NULL)") }
        let version = try store.currentVersion()
        #expect {
            try store.collection("labels", of: Labelled.self)
        } throws: { error in
            (error as? StoreError)?.kind == .schemaMismatch && "\(error)".contains("\"label\"")
        }
        #expect(try store.currentVersion() == version)
    }

    /// Dates are text from 1970 on: a column of NUMERIC affinity would make them numbers.
    @Test func aDateOverAnANYColumnOfATableThatIsNotStrictIsRefused() throws {
        try store.write { db in try db.execute("CREATE TABLE dated(id INTEGER PRIMARY KEY, due ANY)") }
        #expect(throws: StoreError.self) { try store.collection("dated", of: Dated.self) }
    }

    /// In a `STRICT` table `ANY` keeps values as given: text stays text.
    @Test func anANYColumnOfAStrictTableKeepsText() throws {
        try store.write { db in try db.execute("CREATE TABLE labels(id INTEGER PRIMARY KEY, label ANY NOT NULL) STRICT") }
        let labels = try store.collection("labels", of: Labelled.self)
        try labels.insert(Labelled(id: 1, label: "5"))
        #expect(try labels.fetchAll() == [Labelled(id: 1, label: "5")])
    }

    /// A new optional date added to a table that is not `STRICT` is declared so that its text is
    /// kept as given, and reads back exactly.
    @Test func aDateAddedToATableThatIsNotStrictReadsBackExactly() throws {
        try store.write { db in try db.execute("CREATE TABLE dated(id INTEGER PRIMARY KEY)") }
        let dated = try store.collection("dated", of: Dated.self)
        let due = Date(timeIntervalSinceReferenceDate: 786_000_000.123456789)
        try dated.insert(Dated(id: 1, due: due))
        #expect(try dated.fetchAll() == [Dated(id: 1, due: due)])
        #expect(try store.read { db in try db.fetchValue("SELECT typeof(due) FROM dated", as: String.self) } == "text")
    }
}
