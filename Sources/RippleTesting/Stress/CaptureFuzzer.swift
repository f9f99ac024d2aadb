import Foundation
import Ripple

/// The capture fuzzer: seeded random schemas of the kinds people put Ripple on — names in any
/// case, every form of key and rowid, `WITHOUT ROWID` written in any layout, generated columns,
/// triggers, foreign-key cascades, views written through `INSTEAD OF` triggers, FTS5, a table
/// (`STRICT` or not) whose columns declare any of SQLite's types and `ANY` — written with random
/// raw SQL (conflict clauses, upserts, key changes, ALTER TABLE, statements that SQLite stops
/// part-way and the write catches before it commits), checked after every commit: every live
/// query's list equals its query read afresh (those over the typed table routed row by row, with
/// filters on every column, generated ones included, against constants of every type, and
/// ordered by a generated column), the change log names exactly the rows that the statements
/// stopped part-way changed (by what SQLite kept of them), and the history of every ordinary
/// table's query at every retained version equals the state read then.
///
/// ```swift
/// let report = try CaptureFuzzer.run(seed: 7, operations: 300)
/// #expect(report.passed, "\(report.details)")
/// ```
///
/// A run is deterministic for its seed: a schema for each round of ``operationsPerSchema``
/// operations, in a fresh file. A discrepancy names the seed and the operation that showed it,
/// so that `ripple stress --capture --seed S --max-operations N` replays it and stops there.
public enum CaptureFuzzer {
    /// The files of a round: the store's, and the database it attaches.
    static let fileSuffixes = ["", "-wal", "-shm", "-aux.sqlite", "-aux.sqlite-journal"]

    /// Operations made on one schema before the next round starts a new file.
    public static let operationsPerSchema = 400

    /// What a run found.
    public struct Report: Sendable {
        public var seed: UInt64
        /// Write operations attempted (each a `store.write` of one to three statements).
        public var operations = 0
        /// Writes that committed and took a version.
        public var commits = 0
        /// Schemas (rounds) tried.
        public var schemas = 0
        /// Comparisons made (live lists and history steps with a fresh read).
        public var checks = 0
        /// Each discrepancy, described (at most 20 kept).
        public var discrepancies: [String] = []
        public var discrepancyCount = 0

        public var passed: Bool { discrepancyCount == 0 }

        /// One line, for the end of `ripple stress --capture`.
        public var summaryLine: String {
            "capture fuzz: seed=\(seed) schemas=\(schemas) operations=\(operations) commits=\(commits) checks=\(checks) "
                + "discrepancies=\(discrepancyCount)"
        }

        /// The discrepancies, one per line.
        public var details: String { discrepancies.joined(separator: "\n") }

        mutating func record(_ discrepancy: String) {
            discrepancyCount += 1
            if discrepancies.count < 20 { discrepancies.append(discrepancy) }
        }
    }

    /// Runs `operations` write operations (or until `seconds` pass, whichever comes first) from
    /// `seed`, in files under `directory` (a temporary directory when `nil`, removed afterwards).
    public static func run(seed: UInt64, operations: Int? = nil, seconds: Double? = nil,
                           directory: String? = nil, log: (@Sendable (String) -> Void)? = nil) throws -> Report {
        let files = FileManager.default
        let root = directory ?? files.temporaryDirectory.appendingPathComponent("ripple-capture-\(UUID().uuidString)").path
        try files.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { if directory == nil { try? files.removeItem(atPath: root) } }
        let deadline = seconds.map { Date().addingTimeInterval($0) }
        var report = Report(seed: seed)
        var round = 0
        while report.passed, operations.map({ report.operations < $0 }) ?? true, deadline.map({ Date() < $0 }) ?? true {
            let path = root + "/capture-\(round).sqlite"
            for suffix in CaptureFuzzer.fileSuffixes { try? files.removeItem(atPath: path + suffix) }
            let budget = min(operationsPerSchema, (operations ?? .max) - report.operations)
            var fuzz = try CaptureRound(path: path, seed: seed, round: round)
            report.schemas += 1
            try fuzz.run(operations: budget, deadline: deadline, firstOperation: report.operations, into: &report)
            log?("round \(round): \(report.summaryLine)")
            round += 1
            for suffix in CaptureFuzzer.fileSuffixes { try? files.removeItem(atPath: path + suffix) }
        }
        return report
    }
}

/// One table of a generated schema.
private struct FuzzTable {
    enum Key: CaseIterable {
        /// `id INTEGER PRIMARY KEY`: the rowid.
        case integerAlias
        /// `id INTEGER PRIMARY KEY DESC`: not the rowid.
        case integerDescending
        /// `id INT PRIMARY KEY`: not the rowid.
        case intKey
        /// `PRIMARY KEY (id DESC)` on an INTEGER column: the rowid.
        case constraintDescending
        case textKey
        /// `PRIMARY KEY (b, a)`.
        case composite
        /// No declared key: the rowid.
        case none
    }

    var name: String
    var key: Key
    var withoutRowid: Bool
    /// A `VIRTUAL` generated column comes before an INTEGER PRIMARY KEY: some SQLite builds'
    /// pre-update hook cannot read such a table's old rows whole, and history then refuses.
    var virtualBeforeRowidAlias = false
    /// Columns added by ALTER TABLE (text, with a default), by their current names.
    var added: [String] = []

    var keyColumns: [String] {
        switch key {
        case .composite: ["b", "a"]
        case .none: []
        default: ["id"]
        }
    }

    /// The result column that identifies a row.
    var identity: String { key == .none ? "rowid" : "json_array(\(keyColumns.joined(separator: ", ")))" }
}

/// One query a live subscriber follows; `table` set when history can rebuild it, `routing` when
/// the store routes commits to it row by row (see ``RowRouting``).
private struct FuzzQuery {
    var sql: String
    var table: String?
    var arguments: [SQLValue] = []
    var identity = "r"
    var routing: RowRouting?
}

/// The table whose columns declare SQLite's types (see ``CaptureRound/makeTypedTable()``):
/// `typed(id, a, b)` and a generated column `g`.
private struct TypedTable {
    var strict: Bool
    /// Every declared type a table that is not `STRICT` can hold (SQLite's affinity rules tell
    /// each apart), and those a `STRICT` table allows.
    static let looseTypes = ["ANY", "", "INT", "INTEGER", "BIGINT", "TEXT", "VARCHAR(8)", "CLOB", "BLOB", "REAL", "DOUBLE",
                             "FLOATING POINT", "NUMERIC", "DECIMAL(5,2)", "BOOLEAN", "DATE", "STRING"]
    static let strictTypes = ["ANY", "INT", "INTEGER", "TEXT", "BLOB", "REAL"]
    /// Values written, as SQL literals: what each affinity converts, and what it keeps.
    static let literals = ["5", "'5'", "5.0", "'5.0'", "' 5'", "'05'", "'x'", "x'35'", "NULL", "2.5", "'2.5'", "-1", "'1e1'",
                           "10", "''"]
    /// Constants that filters compare with, bound as parameters.
    static let constants: [SQLValue] = [.integer(5), .text("5"), .real(5.0), .text("5.0"), .text(" 5"), .text("x"),
                                        .blob([0x35]), .real(2.5), .integer(10), .text("1e1"), .text(""), .integer(-1)]
}

/// One round: a schema in a fresh file, live subscribers to every query, random writes.
private struct CaptureRound {
    let store: Store
    let seed: UInt64
    var random: SeededGenerator
    var tables: [FuzzTable] = []
    var queries: [FuzzQuery] = []
    var fts: String?
    var view: (name: String, table: Int)?
    var kids: (name: String, parent: Int)?
    var typed: TypedTable?
    /// The table (a one-column key) that statements stopped part-way write (see
    /// ``failingStatement()``): rows under reserved keys, which no other statement touches, and
    /// the `trail` its triggers write.
    var guarded: Int?
    /// The reserved keys in the guarded table now, as SQL literals.
    var reservedKeys: [String] = []
    var reservedCount = 0
    /// Per query, the rows read after each commit since the last schema change, by version.
    var states: [[(version: Int64, rows: [Row])]] = []
    var lastSchemaChange: Int64 = 0
    let path: String
    /// The collections over other kinds of table (see ``TableKinds``), open once the schema is.
    var kinds: TableKinds?

    init(path: String, seed: UInt64, round: Int) throws {
        self.seed = seed
        self.path = path
        random = SeededGenerator(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(round) &* 0xC2B2_AE3D_27D4_EB4F ^ 0xCA97)
        store = try Store(path: path)
    }

    // MARK: Schema

    /// `name` with each ASCII letter in a random case.
    mutating func anyCase(_ name: String) -> String {
        String(name.map { Bool.random(using: &random) ? Character($0.uppercased()) : Character($0.lowercased()) })
    }

    mutating func makeSchema() throws -> [String] {
        var script: [String] = []
        let count = Int.random(in: 2...3, using: &random)
        for index in 0..<count {
            let key = FuzzTable.Key.allCases.randomElement(using: &random)!
            let canDropRowid = [.integerDescending, .intKey, .textKey, .composite].contains(key)
            var table = FuzzTable(name: anyCase("table\(index)"), key: key, withoutRowid: canDropRowid && Bool.random(using: &random))
            var columns: [String] = []
            switch key {
            case .integerAlias: columns.append("id \(anyCase("integer primary key"))")
            case .integerDescending: columns.append("id INTEGER PRIMARY KEY DESC")
            case .intKey: columns.append("id INT PRIMARY KEY")
            case .constraintDescending: columns.append("id INTEGER")
            case .textKey: columns.append("id TEXT PRIMARY KEY")
            case .composite: columns += ["a TEXT NOT NULL", "b INTEGER NOT NULL"]
            case .none: break
            }
            var others = ["v INTEGER", "w TEXT CHECK (w IS NOT 'res-bad')"]
            if Bool.random(using: &random) { others.append("g INTEGER AS (v * 2)") }
            if Bool.random(using: &random) { others.append("s TEXT AS (coalesce(w, '') || '!') STORED") }
            others.shuffle(using: &random)
            // Generated columns anywhere, before the key too.
            columns.insert(contentsOf: others, at: Int.random(in: 0...columns.count, using: &random))
            if !table.withoutRowid && key != .none && Bool.random(using: &random) {
                // A rowid table that mentions WITHOUT ROWID in its text.
                columns.append("note TEXT DEFAULT 'WITHOUT ROWID'")
            }
            if key == .constraintDescending { columns.append("PRIMARY KEY (id DESC)") }
            if key == .composite { columns.append("PRIMARY KEY (b, a)") }
            let layouts = [" WITHOUT ROWID", " without\n  rowid", " /* no rowid */ Without/**/RowID", "WITHOUT\tROWID"]
            let ending = table.withoutRowid ? layouts.randomElement(using: &random)! : ""
            if [.integerAlias, .constraintDescending].contains(key), let generated = columns.firstIndex(of: "g INTEGER AS (v * 2)"),
               let id = columns.firstIndex(where: { $0.hasPrefix("id ") }), generated < id {
                table.virtualBeforeRowidAlias = true
            }
            script.append("CREATE TABLE \(table.name)(\(columns.joined(separator: ", ")))\(ending)")
            tables.append(table)
        }
        fts = anyCase("notes")
        script.append("CREATE VIRTUAL TABLE \(fts!) USING fts5(body, tag)")
        // A trigger feeding the full-text table from the first table, and an audit trail.
        script.append("CREATE TRIGGER feed AFTER INSERT ON \(anyCase(tables[0].name)) BEGIN "
                      + "INSERT INTO \(anyCase(fts!))(body, tag) VALUES (coalesce(new.w, 'empty'), 'fed'); END")
        script.append("CREATE TABLE audit(n INTEGER PRIMARY KEY, what TEXT)")
        script.append("CREATE TRIGGER audited AFTER UPDATE OF v ON \(anyCase(tables[1].name)) BEGIN "
                      + "INSERT INTO audit(what) VALUES ('v ' || coalesce(new.v, 'null')); END")
        // A child table cascading from a table with a one-column key.
        if let parent = tables.firstIndex(where: { $0.keyColumns == ["id"] }) {
            let name = anyCase("kids")
            kids = (name, parent)
            script.append("CREATE TABLE \(name)(kid INTEGER PRIMARY KEY, parent REFERENCES \(tables[parent].name)(id) "
                          + "ON DELETE CASCADE ON UPDATE CASCADE, note TEXT)")
            let viewName = anyCase("shown")
            view = (viewName, parent)
            let table = tables[parent].name
            script.append("CREATE VIEW \(viewName) AS SELECT id, v, w FROM \(table)")
            script.append("CREATE TRIGGER shown_insert INSTEAD OF INSERT ON \(viewName) BEGIN "
                          + "INSERT OR REPLACE INTO \(table)(id, v, w) VALUES (new.id, new.v, new.w); END")
            script.append("CREATE TRIGGER shown_delete INSTEAD OF DELETE ON \(viewName) BEGIN "
                          + "DELETE FROM \(table) WHERE id = old.id; END")
        }
        script += makeGuardedTable()
        script.append(makeTypedTable())
        script += makeKindTables()
        return script
    }

    /// The trail, and triggers on a table with a one-column key that write it and raise
    /// (`ABORT`, `FAIL` or `IGNORE`) for reserved rows whose text ends in `!`, or that are deleted
    /// while holding `'res-keep'`.
    mutating func makeGuardedTable() -> [String] {
        var script = ["CREATE TABLE trail(n INTEGER PRIMARY KEY, what TEXT)"]
        let candidates = tables.indices.filter { tables[$0].keyColumns == ["id"] }
        guard !candidates.isEmpty else { return script }
        let index = candidates.randomElement(using: &random)!
        guarded = index
        let name = anyCase(tables[index].name)
        let kind = ["ABORT", "FAIL", "IGNORE"].randomElement(using: &random)!
        let raise = kind == "IGNORE" ? "RAISE(IGNORE)" : "RAISE(\(kind), 'refused')"
        let insertTiming = Bool.random(using: &random) ? "BEFORE" : "AFTER"
        let updateTiming = Bool.random(using: &random) ? "BEFORE" : "AFTER"
        script.append("CREATE TRIGGER trail_insert \(insertTiming) INSERT ON \(name) WHEN new.w LIKE 'res%' BEGIN "
                      + "INSERT INTO trail(what) VALUES (new.w); SELECT \(raise) WHERE new.w LIKE '%!'; END")
        script.append("CREATE TRIGGER trail_update \(updateTiming) UPDATE OF w ON \(name) WHEN new.w LIKE 'res%' BEGIN "
                      + "INSERT INTO trail(what) VALUES (new.w); SELECT \(raise) WHERE new.w LIKE '%!'; END")
        script.append("CREATE TRIGGER trail_delete BEFORE DELETE ON \(name) WHEN old.w = 'res-keep' BEGIN "
                      + "INSERT INTO trail(what) VALUES ('delete ' || old.id); SELECT \(raise); END")
        return script
    }

    /// A table whose columns declare random types (any of SQLite's in a table that is not
    /// `STRICT`, `ANY` included), with a generated column, `VIRTUAL` or `STORED`, anywhere.
    mutating func makeTypedTable() -> String {
        let strict = Int.random(in: 0..<4, using: &random) == 0
        typed = TypedTable(strict: strict)
        let types = strict ? TypedTable.strictTypes : TypedTable.looseTypes
        // `ANY` more often than the others: its affinity is the one that differs between STRICT and not.
        let type: (inout SeededGenerator) -> String = { random in
            Int.random(in: 0..<4, using: &random) == 0 ? "ANY" : types.randomElement(using: &random)!
        }
        let (a, b, g) = (type(&random), type(&random), type(&random))
        let expression = ["a", "b", "a || ''", "coalesce(a, b)"].randomElement(using: &random)!
        let generated = "g \(g) GENERATED ALWAYS AS (\(expression)) \(Bool.random(using: &random) ? "STORED" : "VIRTUAL")"
        var columns = ["a \(a)", "b \(b)"]
        columns.insert(generated, at: Int.random(in: 0...2, using: &random))
        return "CREATE TABLE typed(id INTEGER PRIMARY KEY, \(columns.joined(separator: ", ")))" + (strict ? " STRICT" : "")
    }

    mutating func makeQueries() {
        for table in tables {
            let name = anyCase(table.name)
            queries.append(FuzzQuery(sql: "SELECT \(table.identity) AS r, * FROM \(name) ORDER BY r", table: table.name))
            queries.append(FuzzQuery(sql: "SELECT \(table.identity) AS r, * FROM \(name) WHERE v % 3 = 1 ORDER BY r",
                                     table: table.name))
        }
        if let fts {
            queries.append(FuzzQuery(sql: "SELECT rowid AS r, * FROM \(anyCase(fts)) ORDER BY r"))
            queries.append(FuzzQuery(sql: "SELECT rowid AS r, body FROM \(fts) WHERE \(fts) MATCH 'apple' ORDER BY r"))
        }
        queries.append(FuzzQuery(sql: "SELECT n AS r, what FROM audit ORDER BY r", table: "audit"))
        if let kids {
            queries.append(FuzzQuery(sql: "SELECT kid AS r, * FROM \(kids.name) ORDER BY r", table: kids.name))
        }
        if typed != nil {
            // Routed row by row: the store decides inside the commit which rows may match.
            for _ in 0..<4 {
                let column = ["a", "b", "g"].randomElement(using: &random)!
                let value = TypedTable.constants.randomElement(using: &random)!
                let (filter, condition, arguments): (Filter, String, [SQLValue])
                switch Int.random(in: 0..<5, using: &random) {
                case 0: (filter, condition, arguments) = (Column(column) < value, "\(column) < ?", [value])
                case 1: (filter, condition, arguments) = (Column(column) >= value, "\(column) >= ?", [value])
                case 2:
                    let other = TypedTable.constants.randomElement(using: &random)!
                    (filter, condition, arguments) = (Column(column).in([value, other]), "\(column) IN (?, ?)", [value, other])
                default: (filter, condition, arguments) = (Column(column) == value, "\(column) = ?", [value])
                }
                let byGenerated = Bool.random(using: &random)
                let select = "SELECT id, a, b, g FROM typed"
                let routing = RowRouting(table: "typed", keyColumn: "id", filterSQL: condition, filterArguments: arguments,
                                         filter: filter, orderColumns: byGenerated ? [3, 0] : [0], isWindowed: false,
                                         selectSQL: select)
                queries.append(FuzzQuery(sql: "\(select) WHERE \(condition) ORDER BY \(byGenerated ? "g, id" : "id")",
                                         arguments: arguments, identity: "id", routing: routing))
            }
        }
        if let view {
            queries.append(FuzzQuery(sql: "SELECT id AS r, v, w FROM \(view.name) ORDER BY r"))
            let parent = tables[view.table]
            queries.append(FuzzQuery(sql: "SELECT k.kid AS r, k.note, p.v FROM \(kids?.name ?? "kids") AS k "
                                     + "JOIN \(parent.name) AS p ON p.id = k.parent ORDER BY r"))
        }
        queries += kindQueries()
    }

    // MARK: Writes

    mutating func keyValues(_ table: FuzzTable) -> [String] {
        let number = Int.random(in: 1...12, using: &random)
        switch table.key {
        case .textKey: return ["'k\(number)'"]
        case .composite: return ["\(number % 4)", "'a\(number % 3)'"]
        case .none: return []
        default: return ["\(number)"]
        }
    }

    mutating func value() -> String {
        switch Int.random(in: 0..<6, using: &random) {
        case 0: "NULL"
        case 1: "'apple pie'"
        case 2: "'pear'"
        default: "\(Int.random(in: -3...20, using: &random))"
        }
    }

    mutating func text() -> String {
        ["'apple'", "'apple tart'", "'pear'", "''", "NULL", "'caf\u{E9}'", "'cafe\u{301}'"].randomElement(using: &random)!
    }

    /// One random statement.
    mutating func statement() -> String {
        let index = Int.random(in: 0..<tables.count, using: &random)
        let table = tables[index]
        let name = anyCase(table.name)
        let keys = table.keyColumns
        let clause = ["", "OR IGNORE ", "OR REPLACE ", "OR ABORT ", "OR FAIL "].randomElement(using: &random)!
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<22:
            let columns = keys + ["v", "w"] + table.added
            let values = keyValues(table) + [value(), text()] + table.added.map { _ in text() }
            return "INSERT \(clause)INTO \(name)(\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))"
        case 22..<30 where !keys.isEmpty:
            let values = keyValues(table) + [value(), text()]
            return "INSERT INTO \(name)(\(keys.joined(separator: ", ")), v, w) VALUES (\(values.joined(separator: ", "))) "
                + "ON CONFLICT(\(keys.joined(separator: ", "))) DO UPDATE SET v = coalesce(v, 0) + excluded.v, w = excluded.w"
        case 30..<42:
            return "UPDATE \(clause)\(name) SET v = coalesce(v, 0) + 1, w = \(text()) WHERE v % 4 = \(Int.random(in: 0...3, using: &random))"
        case 42..<50 where !keys.isEmpty:
            // A key changed: the row moves, conflicts resolved by the clause (or failing).
            let key = keys.last!
            let shift = Int.random(in: 1...5, using: &random)
            let change = key == "a" ? "a || '\(shift)'" : "\(key) + \(shift)"
            return "UPDATE \(clause)\(name) SET \(key) = \(change) WHERE v % 3 = \(Int.random(in: 0...2, using: &random))"
        case 42..<50:
            return "UPDATE \(name) SET rowid = rowid + 100 WHERE v % 3 = \(Int.random(in: 0...2, using: &random))"
        case 50..<58:
            return "DELETE FROM \(name) WHERE v % 5 = \(Int.random(in: 0...4, using: &random))"
        case 58..<66:
            guard let fts else { return "SELECT 1" }
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return "INSERT INTO \(anyCase(fts))(body, tag) VALUES (\(text()), 'direct')"
            case 1: return "UPDATE \(fts) SET body = \(text()) WHERE rowid % 3 = \(Int.random(in: 0...2, using: &random))"
            default: return "DELETE FROM \(fts) WHERE rowid % 4 = \(Int.random(in: 0...3, using: &random))"
            }
        case 66..<74:
            guard let kids else { return "SELECT 1" }
            let parent = tables[kids.parent]
            if Bool.random(using: &random) {
                let key = keyValues(parent)[0]
                return "INSERT INTO \(kids.name)(parent, note) VALUES (\(key), \(text()))"
            }
            return "UPDATE \(kids.name) SET note = \(text()) WHERE kid % 2 = \(Int.random(in: 0...1, using: &random))"
        case 74..<82:
            guard let view else { return "SELECT 1" }
            if Bool.random(using: &random) {
                let key = keyValues(tables[view.table])[0]
                return "INSERT INTO \(view.name)(id, v, w) VALUES (\(key), \(value()), \(text()))"
            }
            return "DELETE FROM \(view.name) WHERE v % 3 = \(Int.random(in: 0...2, using: &random))"
        case 82..<85:
            // Rolls back the whole write when it conflicts.
            let columns = keys + ["v", "w"] + table.added
            let values = keyValues(table) + [value(), text()] + table.added.map { _ in text() }
            return "INSERT OR ROLLBACK INTO \(name)(\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))"
        case 85..<88:
            return alter(index)
        default:
            return "UPDATE \(name) SET w = \(text()) WHERE rowid IN (SELECT rowid FROM \(name) ORDER BY random() LIMIT 0)"
        }
    }

    /// A write to the typed table: values of every type, into columns of every affinity.
    mutating func typedStatement() -> String {
        let id = Int.random(in: 1...8, using: &random)
        let literal = { (random: inout SeededGenerator) in TypedTable.literals.randomElement(using: &random)! }
        switch Int.random(in: 0..<4, using: &random) {
        case 0, 1: return "INSERT OR REPLACE INTO typed(id, a, b) VALUES (\(id), \(literal(&random)), \(literal(&random)))"
        case 2: return "UPDATE typed SET \(Bool.random(using: &random) ? "a" : "b") = \(literal(&random)) WHERE id = \(id)"
        default: return "DELETE FROM typed WHERE id = \(id)"
        }
    }

    /// A statement over the guarded table's reserved rows that SQLite may stop part-way — a
    /// duplicate key, a CHECK, a trigger's RAISE on its last row — under a random conflict
    /// clause; the write catches its error and goes on.
    mutating func failingStatement() -> String? {
        guard let guarded else { return nil }
        let table = tables[guarded]
        let name = anyCase(table.name)
        let textKeys = table.key == .textKey
        func key(_ number: Int) -> String { textKeys ? "'res\(number)'" : "\(1_000_000 + number)" }
        reservedCount += 3
        let (first, second, third) = (reservedCount - 2, reservedCount - 1, reservedCount)
        let clause = ["", "OR ABORT ", "OR FAIL ", "OR IGNORE ", "OR REPLACE "].randomElement(using: &random)!
        let failure = ["'res-bad'", "'res-\(third)!'"].randomElement(using: &random)!
        let existing = reservedKeys.shuffled(using: &random)
        switch Int.random(in: 0..<4, using: &random) {
        case 1 where existing.count >= 2:
            let targets = existing.prefix(3)
            return "UPDATE \(clause)\(name) SET w = CASE id WHEN \(targets.last!) THEN \(failure) ELSE 'res-u\(first)' END "
                + "WHERE id IN (\(targets.joined(separator: ", ")))"
        case 2 where !existing.isEmpty:
            return "INSERT INTO \(name)(id, v, w) VALUES (\(existing[0]), NULL, 'res-u\(first)'), (\(key(second)), NULL, "
                + "'res-\(second)'), (\(key(third)), NULL, \(failure)) ON CONFLICT(id) DO UPDATE SET w = excluded.w"
        case 3 where !existing.isEmpty:
            return "DELETE FROM \(name) WHERE id IN (\(existing.prefix(3).joined(separator: ", ")))"
        default:
            let kept = Bool.random(using: &random) ? "'res-keep'" : "'res-\(second)'"
            let last = Bool.random(using: &random) ? "(\(key(first)), NULL, 'res-again')" : "(\(key(third)), NULL, \(failure))"
            return "INSERT \(clause)INTO \(name)(id, v, w) VALUES (\(key(first)), NULL, 'res-\(first)'), "
                + "(\(key(second)), NULL, \(kept)), \(last)"
        }
    }

    /// The rows statements stopped part-way can change — the guarded table's reserved rows and
    /// the trail — by `table key`, as the change log names them.
    func reservedRows(_ db: Database) throws -> [String: Row] {
        var rows: [String: Row] = [:]
        func text(_ value: SQLValue?) -> String {
            switch value {
            case .integer(let integer)?: "\(integer)"
            case .text(let text)?: text
            default: "\(value.map { "\($0)" } ?? "nil")"
            }
        }
        if let guarded {
            let table = tables[guarded]
            let condition = table.key == .textKey ? "id LIKE 'res%'" : "id >= 1000000"
            for row in try db.fetchAll("SELECT id AS reserved_key, * FROM \(table.name) WHERE \(condition)") {
                rows[table.name.lowercased() + " " + text(row["reserved_key"])] = row
            }
        }
        for row in try db.fetchAll("SELECT * FROM trail") { rows["trail " + text(row["n"])] = row }
        return rows
    }

    /// The reserved rows the change log of the versions after `version` names, as
    /// ``reservedRows(_:)`` names them.
    func loggedReservedRows(after version: Int64) throws -> Set<String> {
        guard let guarded else { return [] }
        let table = tables[guarded]
        var named: Set<String> = []
        for entry in try store.changes(after: version) {
            let name = entry.table.lowercased()
            for key in entry.rowKeys {
                if name == "trail" {
                    named.insert("trail " + key)
                } else if name == table.name.lowercased(),
                          table.key == .textKey ? key.hasPrefix("res") : (Int64(key) ?? 0) >= 1_000_000 {
                    named.insert(name + " " + key)
                }
            }
        }
        return named
    }

    /// An ALTER TABLE: a column added with a default, renamed, or dropped.
    mutating func alter(_ index: Int) -> String {
        let name = tables[index].name
        if let column = tables[index].added.last, Bool.random(using: &random) {
            if Bool.random(using: &random) {
                tables[index].added.removeLast()
                return "ALTER TABLE \(name) DROP COLUMN \(column)"
            }
            let renamed = "r\(Int.random(in: 0...999_999, using: &random))"
            tables[index].added[tables[index].added.count - 1] = renamed
            return "ALTER TABLE \(name) RENAME COLUMN \(column) TO \(renamed)"
        }
        let column = "c\(Int.random(in: 0...999_999, using: &random))"
        tables[index].added.append(column)
        return "ALTER TABLE \(name) ADD COLUMN \(column) TEXT DEFAULT 'default \(column)'"
    }

    // MARK: Running

    mutating func run(operations: Int, deadline: Date?, firstOperation: Int, into report: inout CaptureFuzzer.Report) throws {
        let script = try makeSchema()
        try store.write { db in try db.executeScript(script.joined(separator: ";\n")) }
        kinds = try TableKinds(store: store, auxiliaryPath: path + "-aux.sqlite")
        defer { kinds?.cancel() }
        makeQueries()
        let subscribers = queries.map { query in
            FuzzSubscriber(query.routing.map { store.liveQuery(sql: query.sql, arguments: query.arguments, identity: query.identity,
                                                               routing: $0) }
                           ?? store.liveQuery(sql: query.sql, identity: query.identity))
        }
        defer { subscribers.forEach { $0.cancel() } }
        lastSchemaChange = try store.currentVersion()
        states = try queries.map { [(lastSchemaChange, try fresh($0.sql, $0.arguments))] }
        let context = "seed \(seed), schema:\n  " + script.joined(separator: ";\n  ")
        for operation in 0..<operations {
            if let deadline, Date() >= deadline { break }
            report.operations += 1
            let number = firstOperation + operation + 1
            let before = try store.currentVersion()
            let tablesBefore = tables
            var statements: [String] = []
            var watched: Set<Int> = []
            var collectionWrites: [Int: (Database) throws -> Void] = [:]
            var touchesOthers = false
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let draw = Int.random(in: 0..<100, using: &random)
                if draw >= 70, let step = kindStep() {
                    if let write = step.write { collectionWrites[statements.count] = write }
                    touchesOthers = touchesOthers || step.touchesOthers
                    statements.append(step.description)
                } else if draw < 12, let failing = failingStatement() {
                    watched.insert(statements.count)
                    statements.append(failing)
                } else if draw < 24 && typed != nil {
                    statements.append(typedStatement())
                } else {
                    statements.append(statement())
                }
            }
            // What the watched statements changed of the reserved rows, read around each.
            var changedReserved: Set<String> = []
            var watchable = true
            let kindsBefore = try kinds?.mainRows(store)
            let committed: Bool
            do {
                try store.write { db in
                    for (index, sql) in statements.enumerated() {
                        let rows = watched.contains(index) ? try? reservedRows(db) : nil
                        if watched.contains(index) && rows == nil { watchable = false }
                        do {
                            if let write = collectionWrites[index] { try write(db) } else { try db.execute(sql) }
                        } catch {
                            // SQLite undid the statement, or kept its rows up to the failure (FAIL);
                            // OR ROLLBACK ends the whole write.
                        }
                        guard let rows else { continue }
                        guard db.isInTransaction, let after = try? reservedRows(db) else {
                            watchable = false
                            continue
                        }
                        for key in Set(rows.keys).union(after.keys) where rows[key] != after[key] { changedReserved.insert(key) }
                    }
                }
                committed = true
            } catch {
                committed = false
                tables = tablesBefore   // the write's ALTERs did not happen
            }
            let version = try store.currentVersion()
            if !committed && version != before {
                report.record("operation \(number): a write that failed took version \(version) (\(context))")
            }
            if version != before { report.commits += 1 }
            if committed && watchable && guarded != nil {
                let named = try loggedReservedRows(after: before)
                if named != changedReserved {
                    report.record("operation \(number) (\(statements.joined(separator: "; "))): the change log names reserved rows "
                                  + "\(named.sorted()) where the statements changed \(changedReserved.sorted()) (\(context))")
                    return
                }
            }
            if let guarded {
                let table = tables[guarded]
                let condition = table.key == .textKey ? "id LIKE 'res%'" : "id >= 1000000"
                reservedKeys = try store.read { db in
                    try db.fetchAll("SELECT id FROM \(table.name) WHERE \(condition) ORDER BY id").compactMap { row in
                        switch row["id"] {
                        case .text(let text)?: "'\(text)'"
                        case .integer(let integer)?: "\(integer)"
                        default: nil
                        }
                    }
                }
            }
            if let kinds, let kindsBefore {
                let operation = "operation \(number) (\(statements.joined(separator: "; ")))"
                if let problem = try kinds.check(store, before: kindsBefore, after: before, committed: committed,
                                                 touchesOthers: touchesOthers, report: &report) {
                    report.record("\(operation): \(problem) (\(context))")
                    return
                }
            }
            if statements.contains(where: { $0.hasPrefix("ALTER") }) && version != before { lastSchemaChange = version }
            for (index, query) in queries.enumerated() {
                let rows = try fresh(query.sql, query.arguments)
                report.checks += 1
                let shown = subscribers[index].items
                if let error = subscribers[index].error {
                    report.record("operation \(number): the live query \(query.sql) ended: \(error) (\(context))")
                    return
                }
                if shown != rows {
                    report.record("operation \(number) (\(statements.joined(separator: "; "))): the live query \(query.sql) "
                                  + "shows \(shown.prefix(6)) where a fresh read has \(rows.prefix(6)) (\(context))")
                    return
                }
                if let problem = subscribers[index].problem {
                    report.record("operation \(number): the live query \(query.sql): \(problem) (\(context))")
                    return
                }
                states[index].removeAll { $0.version < lastSchemaChange }
                if version != before { states[index].append((version, rows)) }
            }
            if operation % 40 == 39 || operation == operations - 1 { checkHistory(at: number, context: context, into: &report) }
            if !report.passed { return }
        }
        if let problem = kinds?.checkRefusals(store, report: &report) { report.record("end of round: \(problem) (\(context))") }
    }

    /// The history of every query over one ordinary table, from the oldest state kept: each
    /// state read after a commit equals the history's snapshot at its version.
    mutating func checkHistory(at number: Int, context: String, into report: inout CaptureFuzzer.Report) {
        for (index, query) in queries.enumerated() {
            guard let table = query.table, let first = states[index].first, let last = states[index].last,
                  first.version >= lastSchemaChange else { continue }
            do {
                let steps = try store.history(table: anyCase(table), sql: query.sql, identity: "r", from: first.version,
                                              to: last.version)
                for state in states[index] {
                    report.checks += 1
                    let snapshot = steps.last { $0.version <= state.version }?.snapshot ?? []
                    if snapshot != state.rows {
                        report.record("operation \(number): the history of \(query.sql) at version \(state.version) shows "
                                      + "\(snapshot.prefix(6)) where the read then had \(state.rows.prefix(6)) (\(context))")
                        return
                    }
                }
            } catch let error as StoreError where error.kind == .history
                        && tables.contains(where: { $0.name == table && $0.virtualBeforeRowidAlias }) {
                // Refused, with a reason: this SQLite cannot read the table's old rows whole.
                report.checks += 1
            } catch {
                report.record("operation \(number): the history of \(query.sql) from \(first.version) failed: \(error) (\(context))")
                return
            }
            // Keep the history checks bounded: the last states only.
            if states[index].count > 60 { states[index].removeFirst(states[index].count - 60) }
        }
    }

    func fresh(_ sql: String, _ arguments: [SQLValue] = []) throws -> [Row] {
        try store.read { db in try db.fetchAll(sql, arguments) }
    }
}

/// A live subscriber that keeps the list its changesets build and notes anything wrong.
final class FuzzSubscriber<Element: Equatable & Sendable>: @unchecked Sendable {   // every field is guarded by `lock`
    private let lock = NSLock()
    private var model = BatchUpdateListModel<Element>(items: [])
    private var lastVersion: Int64?
    private var _problem: String?
    private var _error: (any Error)?
    private var subscription: Subscription?

    init(_ query: LiveQuery<Element>) {
        subscription = query.subscribe(on: .immediate, onError: { [weak self] error in
            self?.lock.withLock { self?._error = error }
        }) { [weak self] event in self?.receive(event) }
    }

    private func receive(_ event: LiveQueryEvent<Element>) {
        lock.withLock {
            if let lastVersion, event.version <= lastVersion { _problem = "version \(event.version) after \(lastVersion)" }
            lastVersion = event.version
            do {
                // Applied as a list view applies it: valid batch updates giving the snapshot.
                try model.apply(event.changeset, dataSource: event.snapshot)
                try model.expect(event.snapshot)
            } catch {
                _problem = "v\(event.version): the changeset does not apply: \(error)"
                model = BatchUpdateListModel(items: event.snapshot)
            }
        }
    }

    var items: [Element] { lock.withLock { model.items } }
    var problem: String? { lock.withLock { _problem } }
    var error: (any Error)? { lock.withLock { _error } }
    func cancel() { subscription?.cancel() }
}

// MARK: Other kinds of table

extension CaptureRound {
    /// The tables and views of ``TableKinds``: `coded`, a rowid table keyed by a `UNIQUE NOT NULL`
    /// column; `picked`, a filtered view of the first table; `joined`, a view joining `coded` with
    /// the second table. Names in random case; the collections name them in lower case.
    mutating func makeKindTables() -> [String] {
        func identity(_ table: FuzzTable, as alias: String) -> String {
            table.key == .none ? "\(alias).rowid"
                : "json_array(\(table.keyColumns.map { "\(alias).\($0)" }.joined(separator: ", ")))"
        }
        return [
            "CREATE TABLE \(anyCase("coded"))(code TEXT UNIQUE NOT NULL, v INTEGER NOT NULL, w TEXT)",
            "CREATE VIEW \(anyCase("picked")) AS SELECT CAST(\(identity(tables[0], as: "t")) AS TEXT) AS code, "
                + "CAST(t.v AS INTEGER) AS v, CAST(t.w AS TEXT) AS w FROM \(tables[0].name) AS t WHERE t.v % 2 = 0",
            "CREATE VIEW \(anyCase("joined")) AS SELECT c.code || '/' || \(identity(tables[1], as: "t")) AS code, c.v AS v, "
                + "CAST(t.w AS TEXT) AS w FROM \(anyCase("coded")) AS c JOIN \(tables[1].name) AS t ON t.v = c.v",
        ]
    }

    /// Raw live queries over the kinds' tables and views, some naming `main`; the one over `coded`
    /// has its history checked (with a TEMP table of that name on the writer's connection).
    mutating func kindQueries() -> [FuzzQuery] {
        [FuzzQuery(sql: "SELECT rowid AS r, code, v, w FROM \(anyCase("coded")) ORDER BY r", table: "coded"),
         FuzzQuery(sql: "SELECT code AS r, v, w FROM main.\(anyCase("coded")) WHERE v % 3 = 1 ORDER BY r"),
         FuzzQuery(sql: "SELECT code AS r, v, w FROM main.\(anyCase("picked")) ORDER BY r"),
         FuzzQuery(sql: "SELECT code AS r, v, w FROM \(anyCase("joined")) WHERE v >= 2 ORDER BY r"),
         FuzzQuery(sql: "SELECT code AS r, v, w FROM main.solo ORDER BY r"),
         // History rewinds a copy in `temp` that the SQL must read: it names no schema.
         FuzzQuery(sql: "SELECT code AS r, v, w FROM solo WHERE v >= 1 ORDER BY r", table: "solo")]
    }

    /// One step over the kinds' tables: raw SQL on `main.coded` (keys changed, rows deleted and
    /// inserted again under their key, rowids moved under the same key), a collection write to
    /// `coded` or `solo`, or — deliberately — a statement on a TEMP or attached table of the same
    /// name (`coded` without a schema is the TEMP table).
    mutating func kindStep() -> (description: String, write: ((Database) throws -> Void)?, touchesOthers: Bool)? {
        guard let kinds else { return nil }
        let (coded, solo) = (kinds.coded, kinds.solo)
        let code = "c\(Int.random(in: 1...9, using: &random))"
        let v = Int.random(in: 0...8, using: &random)
        let w = ["apple", "pear", "", nil, "caf\u{E9}", "cafe\u{301}"].randomElement(using: &random)!
        let record = CodedRecord(code: code, v: v, w: w)
        let k = Int.random(in: 0...2, using: &random)
        let name = anyCase("coded")
        let clause = ["", "OR IGNORE ", "OR REPLACE ", "OR FAIL "].randomElement(using: &random)!
        let literal = w.map { "'\($0)'" } ?? "NULL"
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<12:
            return ("INSERT \(clause)INTO main.\(name)(code, v, w) VALUES ('\(code)', \(v), \(literal))", nil, false)
        case 12..<20:
            return ("UPDATE \(clause)main.\(name) SET code = code || 'x' WHERE v % 3 = \(k) AND length(code) < 5", nil, false)
        case 20..<26:
            let other = "c\(Int.random(in: 1...9, using: &random))"
            return ("UPDATE \(clause)main.\(name) SET code = '\(code)' WHERE code = '\(other)'", nil, false)
        case 26..<34:
            return ("UPDATE main.\(name) SET v = (v + \(k + 1)) % 9, w = \(literal) WHERE v % 3 = \(k)", nil, false)
        case 34..<40:
            return ("DELETE FROM main.\(name) WHERE v % 4 = \(k)", nil, false)
        case 40..<44:
            return ("UPDATE main.\(name) SET rowid = rowid + 20 WHERE v % 3 = \(k)", nil, false)
        case 44..<52:
            return ("coded.insert(\(record))", { db in try coded.insert(record, in: db) }, false)
        case 52..<60:
            return ("coded.upsert(\(record))", { db in try coded.upsert(record, in: db) }, false)
        case 60..<64:
            return ("coded.update(\(record))", { db in try coded.update(record, in: db) }, false)
        case 64..<69:
            return ("coded.delete(id: \(code))", { db in _ = try coded.delete(id: code, in: db) }, false)
        case 69..<72:
            return ("coded.filter(v == \(v)).deleteAll()", { db in _ = try coded.filter(Column("v") == v).deleteAll(in: db) }, false)
        case 72..<76:
            return ("solo.upsert(\(record))", { db in try solo.upsert(record, in: db) }, false)
        case 76..<80:
            return ("solo.delete(id: \(code))", { db in _ = try solo.delete(id: code, in: db) }, false)
        case 80..<84:
            return ("UPDATE \(name) SET v = v + 1 WHERE v % 2 = \(k % 2)", nil, true)
        case 84..<88:
            return ("INSERT INTO temp.\(name)(code, v, w) VALUES ('t\(v)', \(v), 'temp')", nil, true)
        case 88..<92:
            return ("UPDATE aux.\(name) SET v = v + 1, code = code || 'a' WHERE v % 3 = \(k)", nil, true)
        case 92..<96:
            return ("DELETE FROM aux.solo WHERE v % 3 = \(k)", nil, true)
        default:
            return ("INSERT OR IGNORE INTO aux.solo(code, v, w) VALUES ('a\(code)', \(v), 'aux')", nil, true)
        }
    }
}
