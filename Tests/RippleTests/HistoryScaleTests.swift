import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// History at scale and with awkward schemas: columns that take the rowid's names, and the
/// streaming, incremental history compared with a re-query of a rewound copy per version.
@Suite struct HistoryScaleTests {
    typealias SeededGenerator = HistoryTests.SeededGenerator

    // MARK: Columns named like the rowid

    /// A record whose properties take every name SQLite gives the rowid, and one with a quote.
    /// Its `Int` id is the table's INTEGER PRIMARY KEY: the one name left for the rowid.
    struct Shadowing: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var rowid: Int
        var oid: String
        var _rowid_: Double
        var weird: String

        enum CodingKeys: String, CodingKey {
            case id, rowid, oid, _rowid_
            case weird = "we\"ird"
        }

        static func random(_ rng: inout SeededGenerator, id: Int) -> Shadowing {
            Shadowing(id: id, rowid: Int.random(in: 0..<4, using: &rng), oid: "o\(Int.random(in: 0..<4, using: &rng))",
                      _rowid_: Double(Int.random(in: 0..<4, using: &rng)), weird: "w\"\(Int.random(in: 0..<9, using: &rng))")
        }
    }

    /// The same with a text id: a declared primary key that is not the rowid, so no name is left
    /// for the rowid at all.
    struct ShadowingByText: Codable, Sendable, Identifiable, Equatable {
        var id: String
        var rowid: Int
        var oid: String
        var _rowid_: Double
        var weird: String

        enum CodingKeys: String, CodingKey {
            case id, rowid, oid, _rowid_
            case weird = "we\"ird"
        }

        static func random(_ rng: inout SeededGenerator, id: Int) -> ShadowingByText {
            let other = Shadowing.random(&rng, id: id)
            return ShadowingByText(id: "k\(id)", rowid: other.rowid, oid: other.oid, _rowid_: other._rowid_, weird: other.weird)
        }
    }

    /// Random inserts, updates, deletes and re-inserts of `Record`s with ids 0..<12, in
    /// transactions of one to three writes; `make` draws a record for an id.
    static func randomWrites<Record>(_ collection: RecordCollection<Record>, _ rng: inout SeededGenerator, versions: Int,
                                     make: (inout SeededGenerator, Int) -> Record) throws where Record: Equatable {
        var live: Set<Int> = []
        for _ in 0..<versions {
            try collection.store.write { db in
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    let id = Int.random(in: 0..<12, using: &rng)
                    let record = make(&rng, id)
                    if live.contains(id) {
                        switch Int.random(in: 0..<3, using: &rng) {
                        case 0:
                            _ = try collection.delete(id: record.id, in: db)
                            live.remove(id)
                        case 1:
                            _ = try collection.delete(id: record.id, in: db)
                            try collection.insert(record, in: db)
                        default:
                            try collection.update(record, in: db)
                        }
                    } else {
                        try collection.insert(record, in: db)
                        live.insert(id)
                    }
                }
            }
        }
    }

    /// Checks that `store.snapshot(of:at:)` at every version and `store.history(of:from:to:)`
    /// over the whole range give what live subscribers received.
    static func expectTimeTravelMatchesSubscribers<Record: Equatable>(
        _ store: Store, queries: [RecordQuery<Record>], subscribers: [ListViewSubscriber<Record>],
        from start: Int64, to current: Int64, _ comment: Comment
    ) throws {
        for subscriber in subscribers { #expect(subscriber.failures.isEmpty, "\(subscriber.failures)") }
        for (query, subscriber) in zip(queries, subscribers) {
            #expect(subscriber.items == (try query.fetchAll()), "\(comment): the live query ends where a fresh read is")
            for version in start...current {
                #expect(try store.snapshot(of: query, at: version) == HistoryTests.expected(subscriber.events, at: version),
                        "\(comment), version \(version)")
            }
            let steps = try store.history(of: query, from: start, to: current)
            var list: [Record] = []
            for step in steps {
                #expect(step.changeset.apply(to: list, using: step.snapshot) == step.snapshot)
                #expect(step.snapshot == HistoryTests.expected(subscriber.events, at: step.version), "\(comment)")
                list = step.snapshot
            }
            let changed = subscriber.events.dropFirst().filter { !$0.changeset.isEmpty }.map(\.version)
            #expect(steps.dropFirst().map(\.version) == changed, "\(comment)")
        }
    }

    @Test(arguments: [1, 2] as [UInt64])
    func propertiesNamedRowidOidAndRowidTravelInTime(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("shadow.sqlite"))
        let items = try store.collection("we\"ird items", of: Shadowing.self)
        let start = try store.currentVersion()
        let queries = [items.all, items.filter(Column("rowid") < 2).order(by: Column("oid"), Column("we\"ird").descending),
                       items.order(by: Column("_rowid_")).limit(4)]
        let subscribers = queries.map { _ in ListViewSubscriber<Shadowing>() }
        let subscriptions = try zip(queries, subscribers).map { query, subscriber in subscriber.subscribe(to: try query.live()) }
        defer { subscriptions.forEach { $0.cancel() } }
        var rng = SeededGenerator(state: seed)
        try Self.randomWrites(items, &rng, versions: 40) { Shadowing.random(&$0, id: $1) }
        try Self.expectTimeTravelMatchesSubscribers(store, queries: queries, subscribers: subscribers,
                                                    from: start, to: try store.currentVersion(), "seed \(seed)")
    }

    @Test func propertiesNamedLikeTheRowidWithATextKeyTravelInTimeWhenOrdered() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("shadow-text.sqlite"))
        let items = try store.collection("items", of: ShadowingByText.self)
        let start = try store.currentVersion()
        let queries = [items.order(by: Column("id")), items.filter(Column("oid") != "o1").order(by: Column("we\"ird")).limit(5)]
        let subscribers = queries.map { _ in ListViewSubscriber<ShadowingByText>() }
        let subscriptions = try zip(queries, subscribers).map { query, subscriber in subscriber.subscribe(to: try query.live()) }
        defer { subscriptions.forEach { $0.cancel() } }
        var rng = SeededGenerator(state: 3)
        try Self.randomWrites(items, &rng, versions: 40) { ShadowingByText.random(&$0, id: $1) }
        let current = try store.currentVersion()
        try Self.expectTimeTravelMatchesSubscribers(store, queries: queries, subscribers: subscribers,
                                                    from: start, to: current, "text key")
        // Unordered, the result is in rowid order, and SQLite has no name left for the rowid: the
        // order of a past version cannot be rebuilt, which is said rather than guessed.
        let error = #expect(throws: StoreError.self) { try store.snapshot(of: items.all, at: start + 1) }
        #expect(error?.kind == .history)
        #expect(error?.message.contains("rowid") == true, "\(String(describing: error))")
    }

    @Test func rawTablesWithColumnsNamedLikeTheRowidTravelInTime() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("raw-shadow.sqlite"))
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE one (rowid TEXT, body);
                CREATE TABLE three ("rowid", "OID", "_ROWID_", id INTEGER PRIMARY KEY, body);
                CREATE TABLE keyed ("rowid", oid, _rowid_, code TEXT PRIMARY KEY, body);
                """)
        }
        let start = try store.currentVersion()
        let queries = [("one", "SELECT oid AS k, rowid, body FROM one", "k"),
                       ("three", "SELECT id, rowid, oid, _rowid_, body FROM three ORDER BY body, id", "id")]
        let subscribers = queries.map { _ in ListViewSubscriber<Row>() }
        let subscriptions = zip(queries, subscribers).map { query, subscriber in
            subscriber.subscribe(to: store.liveQuery(sql: query.1, identity: query.2))
        }
        defer { subscriptions.forEach { $0.cancel() } }
        var rng = SeededGenerator(state: 9)
        for _ in 0..<40 {
            try store.write { db in
                let n = Int64.random(in: 0..<6, using: &rng)
                let body = HistoryTests.randomValue(&rng)
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: try db.execute("INSERT INTO one (rowid, body) VALUES (?, ?)", ["r\(n)", body])
                case 1: try db.execute("UPDATE one SET body = ?, rowid = rowid || 'x' WHERE oid = ?", [body, n])
                case 2: try db.execute("DELETE FROM one WHERE oid = ?", [n])
                case 3: try db.execute("INSERT OR REPLACE INTO three VALUES (?, ?, ?, ?, ?)", [n, n, n, n, body])
                case 4: try db.execute("UPDATE OR REPLACE three SET id = (id + 2) % 7, \"rowid\" = ? WHERE id = ?", [body, n])
                default:
                    try db.execute("INSERT OR REPLACE INTO keyed VALUES (?, ?, ?, ?, ?)", [n, n, n, "c\(n)", body])
                    try db.execute("DELETE FROM keyed WHERE code = ?", ["c\(Int64.random(in: 0..<6, using: &rng))"])
                }
            }
        }
        let current = try store.currentVersion()
        for (query, subscriber) in zip(queries, subscribers) {
            #expect(subscriber.failures.isEmpty)
            for version in start...current {
                let steps = try store.history(table: query.0, sql: query.1, identity: query.2, from: version, to: version)
                #expect(steps.first?.snapshot == HistoryTests.expected(subscriber.events, at: version), "\(query.0) v\(version)")
            }
            let steps = try store.history(table: query.0, sql: query.1, identity: query.2, from: start, to: current)
            #expect(steps.map(\.snapshot) == steps.map { HistoryTests.expected(subscriber.events, at: $0.version) ?? [] })
        }
        // A declared key, but no name left for the rowid: raw SQL may show rows in rowid order,
        // which cannot be rebuilt for a past version; refused by name rather than guessed.
        let error = #expect(throws: StoreError.self) {
            try store.history(table: "keyed", sql: "SELECT code, body FROM keyed ORDER BY code", identity: "code",
                              from: start, to: current)
        }
        #expect(error?.kind == .history)
        #expect(error?.message.contains("rowid") == true, "\(String(describing: error))")
    }

    @Test func aTableWhoseRowidHasNoNameLeftIsRefusedByName() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("no-name.sqlite"))
        try store.write { db in try db.execute("CREATE TABLE hidden (rowid, oid, _rowid_, body)") }
        try store.write { db in try db.execute("INSERT INTO hidden VALUES (1, 2, 3, 'a')") }
        let version = try store.currentVersion()
        try store.write { db in try db.execute("UPDATE hidden SET body = 'b'") }
        // Keyed by the rowid, which no SQL can name: the change log's keys cannot be found.
        let error = #expect(throws: StoreError.self) {
            try store.history(table: "hidden", sql: "SELECT body FROM hidden", identity: "body", from: version, to: version)
        }
        #expect(error?.kind == .history)
        #expect(error?.message.contains("rowid") == true, "\(String(describing: error))")
    }

    @Test(.timeLimit(.minutes(1)))
    func rippleHistoryFollowsRowsOfATableWithAColumnNamedRowid() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("cli-shadow.sqlite")
        let start: Int64
        do {
            let store = try Store(path: path)
            try store.write { db in
                try db.execute("CREATE TABLE notes (rowid TEXT, body TEXT)")
                try db.execute("INSERT INTO notes (rowid, body) VALUES ('same', 'a'), ('same', 'b')")
            }
            start = try store.currentVersion()
            try store.write { db in try db.execute("DELETE FROM notes WHERE body = 'a'") }
            try store.write { db in try db.execute("UPDATE notes SET body = 'c'") }
        }
        let run = try MisuseErrorTests().ripple(["history", path, "--table", "notes", "--from", String(start), "--to",
                                                 String(start + 2)])
        #expect(run.status == 0, "\(run.errors)")
        // Two rows whose rowid column holds the same text are two rows: the first is deleted,
        // the second (only) updated.
        #expect(run.output.contains("version \(start + 1): 1 deleted, 0 inserted, 0 updated, 0 moved (1 rows)"), "\(run.output)")
        #expect(run.output.contains("  - [0] rowid='same' body='a'"), "\(run.output)")
        #expect(run.output.contains("version \(start + 2): 0 deleted, 0 inserted, 1 updated, 0 moved (1 rows)"), "\(run.output)")
    }
}
