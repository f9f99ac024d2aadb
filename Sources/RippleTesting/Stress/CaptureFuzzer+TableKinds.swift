import Foundation
import Ripple

/// A row of the capture fuzzer's `coded` and `solo`: keyed by `code`, a property not called `id`.
struct CodedRecord: Codable, Sendable, Identifiable, Equatable {
    var code: String
    var v: Int
    var w: String?
    var id: String { code }
}

/// A row of the capture fuzzer's views `picked` and `joined`.
struct ViewRecord: Codable, Sendable, Identifiable, Equatable {
    var code: String
    var v: Int?
    var w: String?
    var id: String { code }
}

/// The capture fuzzer's tables of other kinds, opened as collections beside its raw SQL:
/// `coded`, a rowid table keyed by a `UNIQUE NOT NULL` column; the views `picked` (filtered)
/// and `joined` (a join); a `TEMP` table `coded` and an attached database `aux` holding `coded`
/// and `solo` on the writer's connection, and `solo`, a collection whose name only `aux` had.
///
/// After each operation: every collection's live queries equal a fresh read; the TEMP and
/// attached tables changed only by statements that name them; the change log names
/// every changed row of `main`'s `coded` and `solo`, and none of the others'. At the end of a round: raw live queries over the
/// TEMP and attached tables ended refused (``StoreError/Kind/invalidQuery``, or SQLite's "no such
/// table" on a reader connection, which has neither), and the history of a view's collection is
/// refused with ``StoreError/Kind/history``.
final class TableKinds {
    let coded: RecordCollection<CodedRecord>
    let solo: RecordCollection<CodedRecord>
    let picked: RecordCollection<ViewRecord>
    let joined: RecordCollection<ViewRecord>
    /// Per live query over a collection: what it is, and the comparison with a fresh read.
    private var checks: [(description: String, compare: () throws -> String?, cancel: () -> Void)] = []
    /// Raw live queries that must end refused.
    private var refused: [(sql: String, subscriber: FuzzSubscriber<Row>)] = []
    /// The TEMP and attached tables, as last read on the writer's connection.
    private var others: [Row] = []

    /// Rows in the TEMP and attached tables have rowids of their own ranges, apart from `main`'s.
    init(store: Store, auxiliaryPath: String) throws {
        try store.writeWithoutTransaction { db in
            try db.execute("CREATE TEMP TABLE coded(code TEXT, v INTEGER, w TEXT)")
            try db.execute("INSERT INTO temp.coded(rowid, code, v, w) VALUES (5000001, 'c1', 1, 'temp'), "
                           + "(5000002, 'c2', 2, 'temp'), (5000003, 'c3', 4, NULL)")
            try db.execute("ATTACH DATABASE ? AS aux", [auxiliaryPath])
            try db.execute("CREATE TABLE aux.coded(code TEXT UNIQUE NOT NULL, v INTEGER NOT NULL, w TEXT)")
            try db.execute("INSERT INTO aux.coded(rowid, code, v, w) VALUES (6000001, 'c1', 3, 'aux'), (6000002, 'c4', 4, 'aux')")
            try db.execute("CREATE TABLE aux.solo(code TEXT PRIMARY KEY, v INTEGER NOT NULL, w TEXT)")
            try db.execute("INSERT INTO aux.solo(code, v, w) VALUES ('a1', 1, 'aux'), ('ac2', 6, 'aux')")
        }
        coded = try store.collection("coded", of: CodedRecord.self, primaryKey: "code")
        solo = try store.collection("solo", of: CodedRecord.self, primaryKey: "code")
        picked = try store.collection("picked", of: ViewRecord.self, primaryKey: "code")
        joined = try store.collection("joined", of: ViewRecord.self, primaryKey: "code")
        try follow(coded.filter(Column("v") >= 3).order(by: Column("v")), "coded v >= 3 by v")
        try follow(coded.filter(Column("v") < 5).order(by: Column("code")), "coded v < 5 by code")
        try follow(coded.filter(Column("w") == "apple"), "coded w == apple")
        try follow(solo.filter(Column("v") >= 2).order(by: Column("v")), "solo v >= 2 by v")
        try follow(solo.order(by: Column("code")), "solo by code")
        try follow(picked.filter(Column("v") >= 2).order(by: Column("v")), "picked v >= 2 by v")
        try follow(picked.order(by: Column("code")), "picked by code")
        try follow(joined.filter(Column("v") < 6).order(by: Column("code")), "joined v < 6 by code")
        for sql in ["SELECT rowid AS r, * FROM temp.coded", "SELECT rowid AS r, * FROM aux.coded", "SELECT * FROM aux.solo"] {
            refused.append((sql, FuzzSubscriber(store.liveQuery(sql: sql, identity: sql.hasPrefix("SELECT rowid") ? "r" : "code"))))
        }
        others = try readOthers(store)
    }

    /// Subscribes to `query`, to be compared with a fresh read after each operation.
    private func follow<Record: Codable & Sendable & Identifiable & Equatable>(_ query: RecordQuery<Record>,
                                                                           _ description: String) throws {
        let subscriber = FuzzSubscriber(try query.live())
        checks.append((description, {
            if let error = subscriber.error { return "ended: \(error)" }
            let rows = try query.fetchAll()
            let shown = subscriber.items
            if shown != rows { return "shows \(shown.prefix(6)) where a fresh read has \(rows.prefix(6))" }
            return subscriber.problem
        }, subscriber.cancel))
    }

    func cancel() {
        checks.forEach { $0.cancel() }
        refused.forEach { $0.subscriber.cancel() }
    }

    /// The TEMP and attached tables, read on the writer's connection (the only one that has them).
    private func readOthers(_ store: Store) throws -> [Row] {
        try store.write { db in
            try db.fetchAll("SELECT 'temp' AS db, rowid AS r, * FROM temp.coded UNION ALL SELECT 'aux', rowid, * FROM aux.coded "
                            + "UNION ALL SELECT 'aux solo', rowid, * FROM aux.solo ORDER BY 1, 2")
        }
    }

    /// `main`'s rows of `coded` (by rowid, as the change log names them) and `solo` (by key).
    func mainRows(_ store: Store) throws -> [String: Row] {
        try store.read { db in
            var rows: [String: Row] = [:]
            for row in try db.fetchAll("SELECT rowid AS k, * FROM main.coded") { rows["coded \(Self.text(row["k"]))"] = row }
            for row in try db.fetchAll("SELECT code AS k, * FROM main.solo") { rows["solo \(Self.text(row["k"]))"] = row }
            return rows
        }
    }

    /// A key as the change log writes it.
    private static func text(_ value: SQLValue?) -> String {
        switch value {
        case .integer(let integer)?: "\(integer)"
        case .text(let text)?: text
        default: "\(value.map { "\($0)" } ?? "nil")"
        }
    }

    /// The checks after an operation that started at `version` with `main`'s rows `before`; a
    /// description of the first discrepancy, if any.
    func check(_ store: Store, before: [String: Row], after version: Int64, committed: Bool, touchesOthers: Bool,
               report: inout CaptureFuzzer.Report) throws -> String? {
        let now = try readOthers(store)
        report.checks += 1
        if !touchesOthers && now != others {
            return "the TEMP and attached tables changed, from \(others) to \(now), by statements that do not name them"
        }
        others = now
        let entries = try store.changes(after: version)
        if committed && !entries.contains(where: { $0.table == "*" }) {
            report.checks += 1
            var logged: Set<String> = []
            for entry in entries where ["coded", "solo"].contains(entry.table.lowercased()) {
                for key in entry.rowKeys { logged.insert(entry.table.lowercased() + " " + key) }
            }
            let after = try mainRows(store)
            let changed = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }
            // The log may name rows a write made and undid before it committed, but never a row of
            // the TEMP table (rowids from 5,000,000), of `aux.coded` (from 6,000,000) or `aux.solo`
            // (keys starting with `a`).
            let foreign = logged.filter { key in
                key.hasPrefix("coded ") ? (Int64(key.dropFirst(6)) ?? 0) >= 5_000_000 : key.hasPrefix("solo a")
            }
            if !foreign.isEmpty { return "the change log names rows of the TEMP or attached tables: \(foreign.sorted())" }
            if !changed.isSubset(of: logged) {
                return "the change log misses main's changed rows \(changed.subtracting(logged).sorted())"
            }
        }
        for check in checks {
            report.checks += 1
            if let problem = try check.compare() { return "the live query \(check.description) \(problem)" }
        }
        return nil
    }

    /// At the end of a round: the raw live queries over the TEMP and attached tables ended refused
    /// (waited for up to 10 seconds), and a view's history is refused with ``StoreError/Kind/history``.
    func checkRefusals(_ store: Store, report: inout CaptureFuzzer.Report) -> String? {
        for (sql, subscriber) in refused {
            report.checks += 1
            let deadline = Date().addingTimeInterval(10)
            while subscriber.error == nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            guard let error = subscriber.error else { return "the live query \(sql) did not end within 10 seconds" }
            // Read on a reader connection, which has neither the writer's TEMP table nor its
            // attachment: SQLite finds no such table there; one that did would be refused.
            let noSuchTable = error is DatabaseError && "\(error)".contains("no such table")
            guard (error as? StoreError)?.kind == .invalidQuery || noSuchTable else {
                return "the live query \(sql) ended with \(error), not an invalidQuery error"
            }
        }
        report.checks += 1
        do {
            let version = try store.currentVersion()
            _ = try store.history(of: picked.order(by: Column("code")), from: version, to: version)
            return "the history of the view picked was not refused"
        } catch let error as StoreError where error.kind == .history {
            return nil
        } catch {
            return "the history of the view picked failed with \(error), not a history error"
        }
    }
}
