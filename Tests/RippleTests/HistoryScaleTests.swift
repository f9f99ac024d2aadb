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

    // MARK: Memory and time

    /// A record that counts its instances: how many were decoded, how many are alive, and the
    /// most alive at once (what history holds, whatever the collections around it).
    final class Tracked: Codable, Sendable, Identifiable {
        let id: Int
        let group: Int
        let value: Int

        struct Counts {
            var decoded = 0
            var alive = 0
            var peak = 0
        }

        /// Only ``historyHoldsAFewSnapshotsAndReadsOnlyWhatChanged()`` decodes `Tracked`.
        static let counts = Locked(Counts())

        init(id: Int, group: Int, value: Int) {
            (self.id, self.group, self.value) = (id, group, value)
            Self.counts.withLock { $0.alive += 1; $0.peak = max($0.peak, $0.alive) }
        }

        required init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(Int.self, forKey: .id)
            group = try container.decode(Int.self, forKey: .group)
            value = try container.decode(Int.self, forKey: .value)
            Self.counts.withLock { $0.decoded += 1; $0.alive += 1; $0.peak = max($0.peak, $0.alive) }
        }

        deinit { Self.counts.withLock { $0.alive -= 1 } }

        static func resetCounts() { counts.withLock { $0 = Counts(decoded: 0, alive: $0.alive, peak: $0.alive) } }
    }

    /// 300 rows, a window of 20; 200 versions change rows outside it, 10 change rows in it. The
    /// history holds a few snapshots at once (not one per version), and decodes the window once
    /// plus the rows that changed in it (not the window at every version).
    @Test func historyHoldsAFewSnapshotsAndReadsOnlyWhatChanged() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("tracked.sqlite"))
        let items = try store.collection("tracked", of: Tracked.self)
        try items.insert(contentsOf: (0..<300).map { Tracked(id: $0, group: $0 % 3, value: $0) })
        let start = try store.currentVersion()
        for round in 0..<210 {
            // Group 0 holds ids 0, 3, 6, …; the window is its 20 lowest values (ids 0…57).
            let id = round % 21 == 20 ? 3 * (round % 20) : 1 + 3 * (round % 99)
            try items.update(Tracked(id: id, group: id % 3, value: id % 3 == 0 ? id + 1 : id + round % 2))
        }
        let end = try store.currentVersion()
        let window = items.filter(Column("group") == 0).order(by: Column("value")).limit(20)
        Tracked.resetCounts()
        let steps = try store.history(of: window, from: start, to: end)
        let counts = Tracked.counts.withLock { $0 }
        #expect(steps.count == 11)
        #expect(steps.allSatisfy { $0.snapshot.count == 20 })
        #expect(counts.decoded <= 20 + 10 * 2, "decoded \(counts.decoded) records for 210 versions")
        #expect(counts.peak - Tracked.counts.withLock { $0.alive } <= 3 * 20 + 10,
                "\(counts.peak) records alive at once, \(counts.alive) after")
    }

    // MARK: Equivalence with re-querying a rewound copy

    /// A collection keyed by an INTEGER PRIMARY KEY (its rowid), with a nullable ordering column.
    struct Counter: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var bucket: Int
        var score: Double?
        var label: String

        static func random(_ rng: inout SeededGenerator, id: Int) -> Counter {
            Counter(id: id, bucket: Int.random(in: 0..<3, using: &rng),
                    score: Bool.random(using: &rng) ? Double(Int.random(in: 0..<6, using: &rng)) : nil,
                    label: "l\(Int.random(in: 0..<4, using: &rng))")
        }
    }

    /// The history as the first implementation rebuilt it, kept as the oracle: the copy rewound
    /// newest first, the query run again after each version's undo, every snapshot kept, then
    /// the steps oldest first, each where the result changed.
    static func referenceHistory<Element>(_ store: Store, table: String, from: Int64, to: Int64,
                                          fetch: (Database) throws -> Snapshot<Element>) throws -> [HistoryStep<Element>] {
        try store.read { db in
            var rewinder = try TableRewinder(db, table: table, back: from, to: to)
            defer { rewinder.close() }
            try rewinder.rewind(after: to)
            var snapshots: [(version: Int64, snapshot: Snapshot<Element>)] = [(to, try fetch(db))]
            for version in rewinder.versions(in: from + 1...max(to, from + 1)).reversed() where version <= to {
                try rewinder.undo(version)
                snapshots[snapshots.count - 1].version = version
                snapshots.append((from, try fetch(db)))
            }
            snapshots[snapshots.count - 1].version = from
            var steps: [HistoryStep<Element>] = []
            var previous: [SnapshotItem] = []
            for (index, entry) in snapshots.reversed().enumerated() {
                if index > 0 && entry.snapshot.items == previous { continue }
                steps.append(HistoryStep(version: entry.version, snapshot: entry.snapshot.elements,
                                         changeset: Changeset(from: previous, to: entry.snapshot.items)))
                previous = entry.snapshot.items
            }
            return steps
        }
    }

    /// Expects `steps` to be `expected`: the same versions, snapshots and changesets.
    static func expectSame<Element: Equatable>(_ steps: [HistoryStep<Element>], _ expected: [HistoryStep<Element>],
                                               _ comment: String) {
        #expect(steps.map(\.version) == expected.map(\.version), "\(comment): versions")
        for (step, reference) in zip(steps, expected) {
            #expect(step.snapshot == reference.snapshot, "\(comment): snapshot at \(step.version)")
            #expect(step.changeset == reference.changeset, "\(comment): changeset at \(step.version)")
        }
    }

    /// One random transaction over every table of ``streamedHistoryEqualsReQueryingARewoundCopy(seed:)``.
    static func randomTransaction(_ db: Database, _ rng: inout SeededGenerator, todos: RecordCollection<Todo>,
                                  counters: RecordCollection<Counter>, existing: inout [Todo]) throws {
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let n = Int64.random(in: 0..<8, using: &rng)
            let value = HistoryTests.randomValue(&rng)
            switch Int.random(in: 0..<16, using: &rng) {
            case 0, 1:
                let todo = HistoryTests.randomTodo(&rng)
                try todos.insert(todo, in: db)
                existing.append(todo)
            case 2 where !existing.isEmpty, 3 where !existing.isEmpty:
                let index = Int.random(in: existing.indices, using: &rng)
                existing[index] = HistoryTests.randomTodo(&rng, id: existing[index].id)
                try todos.update(existing[index], in: db)
                if Bool.random(using: &rng) {   // updated twice in one transaction
                    existing[index].rank = Int.random(in: 0..<20, using: &rng)
                    try todos.update(existing[index], in: db)
                }
            case 4 where !existing.isEmpty:
                _ = try todos.delete(id: existing.remove(at: Int.random(in: existing.indices, using: &rng)).id, in: db)
            case 5:   // inserted and deleted in the same transaction
                let todo = HistoryTests.randomTodo(&rng)
                try todos.insert(todo, in: db)
                _ = try todos.delete(id: todo.id, in: db)
            case 6 where !existing.isEmpty:   // deleted and inserted again
                let index = Int.random(in: existing.indices, using: &rng)
                _ = try todos.delete(id: existing[index].id, in: db)
                existing[index] = HistoryTests.randomTodo(&rng, id: existing[index].id)
                try todos.insert(existing[index], in: db)
            case 7:
                try counters.upsert(Counter.random(&rng, id: Int(n)), in: db)
            case 8:
                if Bool.random(using: &rng) {
                    _ = try counters.delete(id: Int(n), in: db)
                } else {   // a key change, through raw SQL; a row holding the new key is replaced
                    try db.execute("UPDATE OR REPLACE counters SET id = ? WHERE id = ?", [Int64.random(in: 0..<8, using: &rng), n])
                }
            case 9:
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: try db.execute("INSERT INTO plain (body, n) VALUES (?, ?)", [value, n - 2])
                case 1: try db.execute("UPDATE plain SET n = n + ?, body = ? WHERE rowid % 5 = ?", [n - 4, value, n % 5])
                case 2: try db.execute("DELETE FROM plain WHERE n = ?", [n])
                default:   // a bulk insert: logged without exact keys
                    if Int.random(in: 0..<6, using: &rng) == 0 {
                        for index in 0..<300 { try db.execute("INSERT INTO plain (body, n) VALUES ('bulk', ?)", [Int64(index % 7) - 3]) }
                    }
                }
            case 10:
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: try db.execute("INSERT OR REPLACE INTO notes (id, body) VALUES (?, ?)", [n, value])
                case 1: try db.execute("UPDATE OR REPLACE notes SET id = (id + 3) % 8 WHERE id = ?", [n])
                default: try db.execute("DELETE FROM notes WHERE id = ?", [n])
                }
            case 11:
                let a = "k\(n % 3)", b = n % 4
                if Bool.random(using: &rng) {
                    try db.execute("INSERT OR REPLACE INTO kv (a, b, v) VALUES (?, ?, ?)", [a, b, value])
                } else {
                    try db.execute("DELETE FROM kv WHERE a = ? AND b = ?", [a, b])
                }
            case 12:
                let a = "p\(n % 3)", b = n % 3
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: try db.execute("INSERT OR REPLACE INTO pairs (a, b, v) VALUES (?, ?, ?)", [a, b, n])
                case 1: try db.execute("UPDATE OR REPLACE pairs SET b = (b + 1) % 3, v = v + 1 WHERE a = ? AND b = ?", [a, b])
                default: try db.execute("DELETE FROM pairs WHERE a = ?", [a])
                }
            default:
                break
            }
        }
    }

    /// Random writes (inserts, updates, deletes, key changes, several rows per transaction, bulk
    /// inserts) on collections keyed by text and by INTEGER PRIMARY KEY and on raw tables keyed
    /// by rowid, INTEGER PRIMARY KEY, a composite key, and WITHOUT ROWID, under live subscribers.
    /// Over many ranges, the streamed history of every query (windows, filters, orders with ties
    /// and NULLs, offset, no order, raw SQL) gives exactly the reference's steps, and what the
    /// subscribers received.
    @Test(arguments: [11, 12, 13] as [UInt64])
    func streamedHistoryEqualsReQueryingARewoundCopy(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("equivalence.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let counters = try store.collection("counters", of: Counter.self)
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE plain (body, n INTEGER);
                CREATE INDEX plain_by_n ON plain (n);
                CREATE TABLE notes (id INTEGER PRIMARY KEY, body);
                CREATE TABLE kv (a TEXT, b INTEGER, v, PRIMARY KEY (a, b)) WITHOUT ROWID;
                CREATE TABLE pairs (a TEXT, b INTEGER, v INTEGER, PRIMARY KEY (a, b));
                """)
        }
        let todoQueries: [RecordQuery<Todo>] = [
            todos.filter(Column("done") == false).order(by: Column("rank")).limit(5),
            todos.order(by: Column("rank").descending, Column("title")).limit(8),
            todos.filter(Column("rank") < 10).order(by: Column("title")),
            todos.all,
            todos.filter(Column("done") == true),
            todos.order(by: Column("rank")).limit(4, offset: 3),
            todos.filter(Column("title").like("t1%")).order(by: Column("due")),
            todos.order(by: Column("due").descending).limit(0),
        ]
        let counterQueries: [RecordQuery<Counter>] = [
            counters.filter(Column("bucket") == 1).order(by: Column("score")).limit(3),
            counters.order(by: Column("label"), Column("score").descending),
            counters.all,
        ]
        let rawQueries = [
            ("plain", "SELECT rowid AS k, body, n FROM plain WHERE n > 0", "k"),
            ("notes", "SELECT id, body FROM notes ORDER BY body, id", "id"),
            ("kv", "SELECT a || ':' || b AS k, a, b, v FROM kv ORDER BY v, k", "k"),
            ("pairs", "SELECT a || '/' || b AS k, v FROM pairs ORDER BY v DESC, k LIMIT 5", "k"),
        ]
        let start = try store.currentVersion()
        let todoSubscribers = todoQueries.map { _ in ListViewSubscriber<Todo>() }
        let counterSubscribers = counterQueries.map { _ in ListViewSubscriber<Counter>() }
        let rawSubscribers = rawQueries.map { _ in ListViewSubscriber<Row>() }
        var subscriptions = try zip(todoQueries, todoSubscribers).map { $1.subscribe(to: try $0.live()) }
        subscriptions += try zip(counterQueries, counterSubscribers).map { $1.subscribe(to: try $0.live()) }
        subscriptions += zip(rawQueries, rawSubscribers).map { $1.subscribe(to: store.liveQuery(sql: $0.1, identity: $0.2)) }
        defer { subscriptions.forEach { $0.cancel() } }

        var rng = SeededGenerator(state: seed)
        var existing: [Todo] = []
        for _ in 0..<70 {
            try store.write { db in
                try Self.randomTransaction(db, &rng, todos: todos, counters: counters, existing: &existing)
            }
        }
        let end = try store.currentVersion()
        var ranges: [(Int64, Int64)] = [(start, end), (end, end), (start, start)]
        for _ in 0..<5 {
            let a = Int64.random(in: start...end, using: &rng), b = Int64.random(in: start...end, using: &rng)
            ranges.append((min(a, b), max(a, b)))
        }

        func check<Record: Equatable>(_ queries: [RecordQuery<Record>], _ subscribers: [ListViewSubscriber<Record>]) throws {
            for (number, (query, subscriber)) in zip(queries, subscribers).enumerated() {
                #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
                let fetch = try query.historyQuery().fetch
                for (from, to) in ranges {
                    let comment = "seed \(seed), \(Record.self) query \(number), \(from)…\(to)"
                    var streamed: [HistoryStep<Record>] = []
                    try store.history(of: query, from: from, to: to) { streamed.append($0) }
                    Self.expectSame(streamed, try Self.referenceHistory(store, table: query.collection.schema.table,
                                                                        from: from, to: to, fetch: fetch), comment)
                    for step in streamed {
                        #expect(step.snapshot == HistoryTests.expected(subscriber.events, at: step.version), "\(comment)")
                    }
                }
            }
        }
        try check(todoQueries, todoSubscribers)
        try check(counterQueries, counterSubscribers)
        for ((table, sql, identity), subscriber) in zip(rawQueries, rawSubscribers) {
            #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
            for (from, to) in ranges {
                let comment = "seed \(seed), \(table), \(from)…\(to)"
                var streamed: [HistoryStep<Row>] = []
                try store.history(table: table, sql: sql, identity: identity, from: from, to: to) { streamed.append($0) }
                let reference = try Self.referenceHistory(store, table: table, from: from, to: to) { db in
                    let statement = try db.makeStatement(sql)
                    return try SnapshotReader.rows(of: statement, identity: identity, sql: sql)
                }
                Self.expectSame(streamed, reference, comment)
                for step in streamed {
                    #expect(step.snapshot == HistoryTests.expected(subscriber.events, at: step.version), "\(comment)")
                }
            }
        }
    }

    // MARK: The handler

    struct Stop: Error {}

    @Test func aHistoryHandlerCannotCallTheStoreAndItsErrorEndsTheHistory() throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("handler.sqlite"))
        let todos = try store.collection("todos", of: Todo.self)
        let start = try store.currentVersion()
        for rank in 0..<5 { try todos.insert(Todo.make(rank)) }
        let end = try store.currentVersion()
        let ordered = todos.order(by: Column("rank"))
        // Inside the handler the read shows the rewound copy: every store call is refused, none
        // reads the copy as if it were the store.
        var refusals: [StoreError] = []
        try store.history(of: ordered, from: start, to: end) { step in
            let calls: [() throws -> Void] = [
                { _ = try todos.count() },
                { _ = try store.read { db in try db.fetchAll("SELECT * FROM todos") } },
                { try store.write { db in try db.execute("DELETE FROM todos") } },
                { _ = try store.snapshot(of: ordered, at: end) },
                { try store.noticeExternalWrites() },
            ]
            for call in calls {
                do { try call() } catch let error as StoreError { refusals.append(error) }
            }
        }
        #expect(refusals.count == 6 * 5, "\(refusals)")
        #expect(refusals.allSatisfy { $0.kind == .nesting })
        #expect(refusals.first?.message.contains("history") == true, "\(String(describing: refusals.first))")
        // A handler's error ends the history; the copy is gone, reads see the store again.
        var seen: [Int64] = []
        #expect(throws: Stop.self) {
            try store.history(of: ordered, from: start, to: end) { step in
                seen.append(step.version)
                if seen.count == 3 { throw Stop() }
            }
        }
        #expect(seen == [start, start + 1, start + 2])
        #expect(try todos.count() == 5)
        #expect(try store.read { db in try db.fetchValue("SELECT count(*) FROM temp.sqlite_schema", as: Int.self) } == 0)
        #expect(try ordered.fetchAll().map(\.rank) == Array(0..<5))
    }

    // MARK: The redo log

    /// Whatever an undo does to the copy — plain inserts and deletes, REPLACE (whose implicit
    /// deletes fire triggers only when recursive triggers are on), UPDATE OR REPLACE of a key,
    /// an upsert — redoing it brings the copy back exactly, rowids included: the redo log does
    /// not depend on how the change log stores before-images.
    @Test(arguments: ["plain", "keyed", "narrow"])
    func theRedoLogReversesWhateverAnUndoDoes(table: String) throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("redo.sqlite"))
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE plain (k TEXT, v);
                CREATE TABLE keyed (k TEXT PRIMARY KEY, v);
                CREATE TABLE narrow (k TEXT PRIMARY KEY, v) WITHOUT ROWID;
                """)
            for k in 0..<6 { try db.execute("INSERT INTO \(table) (k, v) VALUES (?, ?)", ["k\(k)", k]) }
        }
        let version = try store.currentVersion()
        let rowid = table == "narrow" ? "NULL" : "rowid"
        let contents = "SELECT \(rowid) AS r, k, v FROM temp.\(table) ORDER BY k, r"
        try store.read { db in
            var rewinder = try TableRewinder(db, table: table, back: version, to: version)
            defer { rewinder.close() }
            var redo = try RedoLog(db, shape: rewinder.shape)
            defer { redo.close() }
            let before = try db.fetchAll(contents)
            try redo.record(version + 1) {
                try db.execute("INSERT OR REPLACE INTO temp.\(table) (k, v) VALUES ('k1', 'replaced'), ('new', 1)")
                try db.execute("UPDATE OR REPLACE temp.\(table) SET k = 'k3' WHERE k = 'k2'")
                try db.execute("DELETE FROM temp.\(table) WHERE k = 'k4'")
                try db.execute("UPDATE temp.\(table) SET v = v || '!' WHERE k IN ('k5', 'new')")
                if table != "plain" {
                    try db.execute("INSERT INTO temp.\(table) (k, v) VALUES ('k0', 'upsert') ON CONFLICT (k) DO UPDATE SET v = excluded.v")
                }
            }
            let undone = try db.fetchAll(contents)
            #expect(undone != before)
            try redo.stopRecording()
            let changes = try redo.redo(version + 1, keyColumn: 0)
            #expect(try db.fetchAll(contents) == before, "\(table)")
            #expect(changes.keys?.contains(RowKey(.text("k4"))) == true)
            #expect(try db.fetchValue("PRAGMA recursive_triggers", as: Int.self) == 0)
        }
    }
}
