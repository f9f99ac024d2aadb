import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// The change log keeps before-values of what changed, so that it stays small — and time travel
/// stays exact, to the byte: an update logs the old values of the columns it changed, a delete
/// the whole row, in a binary form that keeps text that is not UTF-8 and blobs as they are.
@Suite struct ChangeLogSizeTests {
    let directory: TemporaryDirectory
    let path: String
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path("size.sqlite")
        store = try Store(path: path)
    }

    /// The bytes of the store's files once the WAL is checkpointed into the database.
    func fileBytes() throws -> Int64 {
        try store.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        return ["", "-wal"].reduce(0) { total, suffix in
            let attributes = try? FileManager.default.attributesOfItem(atPath: path + suffix)
            return total + ((attributes?[.size] as? NSNumber)?.int64Value ?? 0)
        }
    }

    /// What the change log holds for the entries of `version` (keys, text and exact, and
    /// before-images, whichever form they take).
    func logBytes(at version: Int64, operation: String? = nil) throws -> Int64 {
        try store.read { db in
            let columns = try db.fetchAll("SELECT name FROM pragma_table_info('ripple_changes')").compactMap { row -> String? in
                if case .text(let name)? = row["name"] { name } else { nil }
            }
            let sizes = ["row_keys", "exact_keys", "old_rows", "before_images"].filter(columns.contains)
                .map { "ifnull(length(CAST(\($0) AS BLOB)), 0)" }
            return try db.fetchValue("SELECT sum(\(sizes.joined(separator: " + "))) FROM ripple_changes "
                                     + "WHERE version = ? AND operation = ifnull(?, operation)",
                                     [version, operation.map(SQLValue.text) ?? .null], as: Int64.self) ?? 0
        }
    }

    /// Every column of a row exactly: its value, its type, and its bytes in hex (text that is not
    /// UTF-8 differs from its repaired `String` only there).
    static func exactly(_ columns: [String]) -> String {
        columns.map { "\($0), typeof(\($0)) AS \($0)_type, hex(\($0)) AS \($0)_hex" }.joined(separator: ", ")
    }

    // MARK: Size

    /// A 2 MB blob in a row whose title changes 20 times: the log keeps the old titles, not the
    /// blob (before: the whole row as JSON, the blob in hex, for every update: 80 MB). History
    /// over those versions is what a live subscriber received.
    @Test func updatingASmallColumnOfARowWithALargeBlobLogsOnlyTheOldValueOfThatColumn() throws {
        let blobSize = 2 << 20
        var random = SeededGenerator(seed: 12)
        let blob = (0..<blobSize).map { _ in UInt8.random(in: 0...255, using: &random) }
        try store.write { db in
            try db.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, title TEXT NOT NULL, payload BLOB NOT NULL)")
            try db.execute("INSERT INTO docs VALUES (1, 'title 00', ?), (2, 'small', x'00')", [SQLValue.blob(blob)])
        }
        let sql = "SELECT id, title, payload FROM docs ORDER BY id"
        let subscriber = ListViewSubscriber<Row>()
        let subscription = subscriber.subscribe(to: store.liveQuery(sql: sql, identity: "id"))
        defer { subscription.cancel() }
        let start = try store.currentVersion()
        let before = try fileBytes()
        for update in 1...20 {
            try store.write { db in
                try db.execute("UPDATE docs SET title = ? WHERE id = 1", [String(format: "title %02d", update)])
            }
        }
        let growth = try fileBytes() - before
        #expect(growth < Int64(blobSize), "the files grew by \(growth) bytes for 20 updates of a title")
        for version in start + 1...start + 20 {
            let bytes = try logBytes(at: version)
            #expect(bytes < 100, "version \(version) logged \(bytes) bytes")
        }

        let current = try store.currentVersion()
        #expect(subscriber.failures.isEmpty, "\(subscriber.failures)")
        let steps = try store.history(table: "docs", sql: sql, identity: "id", from: start, to: current)
        #expect(steps.count == 21)
        for step in steps {
            #expect(step.snapshot == HistoryTests.expected(subscriber.events, at: step.version), "version \(step.version)")
        }
        #expect(steps.first?.snapshot.first?["payload"] == .blob(blob))
        #expect(steps.first?.snapshot.first?["title"] == .text("title 00"))
    }

    /// A delete still logs the whole row; updates of other columns log only those columns.
    @Test func deletesLogTheWholeRowAndUpdatesOnlyTheirColumns() throws {
        let blob = [UInt8](repeating: 7, count: 100_000)
        try store.write { db in
            try db.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, title TEXT, payload BLOB)")
            try db.execute("INSERT INTO docs VALUES (1, 'a', ?)", [SQLValue.blob(blob)])
        }
        try store.write { db in try db.execute("UPDATE docs SET title = 'b', payload = ? WHERE id = 1", [SQLValue.blob(blob)]) }
        #expect(try logBytes(at: try store.currentVersion()) < 100, "an unchanged blob written again is not logged")
        try store.write { db in try db.execute("UPDATE docs SET payload = x'01' WHERE id = 1") }
        #expect(try logBytes(at: try store.currentVersion()) > 100_000, "a changed blob is logged, as bytes")
        #expect(try logBytes(at: try store.currentVersion()) < 100_100)
        try store.write { db in try db.execute("DELETE FROM docs") }
        #expect(try logBytes(at: try store.currentVersion()) < 100, "the row held a one-byte blob")
        let steps = try store.history(table: "docs", sql: "SELECT id, title, payload FROM docs", identity: "id",
                                      from: 1, to: try store.currentVersion())
        #expect(steps.map { $0.snapshot.map { $0["title"] } } == [[.text("a")], [.text("b")], [.text("b")], []])
        #expect(steps.map { $0.snapshot.map { $0["payload"] } } == [[.blob(blob)], [.blob(blob)], [.blob([1])], []])
    }

    /// The before-images of `version`'s `operation` entry on `table`, decoded: per key, `nil`
    /// or (whole row?, rowid, values by column position).
    func images(at version: Int64, table: String, operation: String) throws -> [(isRow: Bool, rowid: SQLValue, columns: [Int: SQLValue])?] {
        let list = try store.read { db in
            try db.fetchValue("SELECT before_images FROM ripple_changes WHERE version = ? AND table_name = ? AND operation = ?",
                              [version, table, operation], as: [UInt8].self)
        }
        let bytes = try #require(list)
        return try bytes.withUnsafeBufferPointer { buffer in
            try #require(BeforeImage.list(buffer)).map { range in
                guard let range else { return nil }
                let view = try #require(BeforeImage.View(buffer, range))
                func value(_ range: Range<Int>) -> SQLValue {
                    var offset = range.lowerBound
                    switch RowKey.value(in: buffer, at: &offset) {
                    case .integer(let value)?: return .integer(value)
                    case .real(let value)?: return .real(value)
                    case .text(let text)?: return .text(String(decoding: text, as: UTF8.self))
                    case .blob(let blob)?: return .blob(Array(blob))
                    case .null?, nil: return .null
                    }
                }
                return (view.isRow, value(view.rowid),
                        Dictionary(uniqueKeysWithValues: view.columns.map { ($0.position, value($0.value)) }))
            }
        }
    }

    /// The format itself: several updates of one key in one transaction log one image with each
    /// changed column as it was before the transaction; an update then a delete, the whole row
    /// from before; a key inserted first, none; a key change, the whole row under the old key.
    @Test func eachKeyLogsOneImageOfItsColumnsFromBeforeTheTransaction() throws {
        try store.write { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a, b, c)")
            try db.execute("INSERT INTO t VALUES (1, 'a1', 'b1', 'c1'), (2, 'a2', 'b2', 'c2'), (3, 'a3', 'b3', 'c3')")
        }
        try store.write { db in
            try db.execute("UPDATE t SET a = 'x' WHERE id = 1")
            try db.execute("UPDATE t SET b = 'x', a = 'y' WHERE id = 1")
            try db.execute("UPDATE t SET c = 'x' WHERE id = 2")
            try db.execute("INSERT INTO t VALUES (4, 'a4', 'b4', 'c4')")
            try db.execute("UPDATE t SET a = 'x' WHERE id = 4")
            try db.execute("DELETE FROM t WHERE id = 2")
            try db.execute("UPDATE t SET a = 'x' WHERE id = 3")
            try db.execute("UPDATE t SET id = 30 WHERE id = 3")
        }
        let version = try store.currentVersion()
        let updates = try images(at: version, table: "t", operation: "update")
        #expect(updates.count == 5)   // 1, 1, 2, 4, 3
        #expect(updates[0]?.isRow == false && updates[0]?.rowid == .null)
        #expect(updates[0]?.columns == [1: .text("a1"), 2: .text("b1")])
        #expect(updates[1] == nil && updates[3] == nil, "the first change of 1 has the image; 4 was inserted")
        #expect(updates[2]?.isRow == true && updates[2]?.rowid == .integer(2))
        #expect(updates[2]?.columns == [0: .integer(2), 1: .text("a2"), 2: .text("b2"), 3: .text("c2")])
        #expect(updates[4]?.isRow == true && updates[4]?.rowid == .integer(3), "3 was updated, then its key changed")
        #expect(updates[4]?.columns == [0: .integer(3), 1: .text("a3"), 2: .text("b3"), 3: .text("c3")])
        let deletes = try images(at: version, table: "t", operation: "delete")
        #expect(deletes.count == 2 && deletes.allSatisfy { $0 == nil }, "2 and 3: their images are with their updates")
        #expect(try store.read { db in
            try db.fetchValue("SELECT count(*) FROM ripple_changes WHERE version = ? AND old_rows IS NOT NULL", [version], as: Int.self)
        } == 0, "entries of the new format have no JSON before-images")
    }

    // MARK: Exactness

    /// The subtle cases of logging only what changed, on tables keyed by the rowid, by a text
    /// column, and by a composite key without rowid: every version's contents, as recorded right
    /// after its commit, come back exactly from history.
    @Test func subtleUpdatesTravelBackExactly() throws {
        let tables: [(name: String, sql: String)] = [
            ("plain", "SELECT rowid AS k, \(Self.exactly(["a", "b", "c"])) FROM plain ORDER BY k"),
            ("named", "SELECT id AS k, rowid AS r, \(Self.exactly(["a", "b", "c"])) FROM named ORDER BY k"),
            ("pairs", "SELECT k1 || '/' || k2 AS k, \(Self.exactly(["a", "b"])) FROM pairs ORDER BY k"),
            ("uniq", "SELECT id AS k, \(Self.exactly(["u", "v"])) FROM uniq ORDER BY k"),
        ]
        var recorded: [Int64: [String: [Row]]] = [:]
        func write(_ body: (Database) throws -> Void) throws {
            try store.write(body)
            let version = try store.currentVersion()
            try store.read { db in
                for table in tables { recorded[version, default: [:]][table.name] = try db.fetchAll(table.sql) }
            }
        }
        struct Abandon: Error {}

        // Tables created and filled in one transaction (the first version history starts from).
        try write { db in
            try db.executeScript("""
                CREATE TABLE plain(a, b, c);
                CREATE TABLE named(id TEXT PRIMARY KEY, a, b, c);
                CREATE TABLE pairs(k1 TEXT, k2 INTEGER, a, b, PRIMARY KEY (k1, k2)) WITHOUT ROWID;
                CREATE TABLE uniq(id INTEGER PRIMARY KEY, u UNIQUE, v);
                """)
            for index in 1...4 {
                try db.execute("INSERT INTO plain(a, b, c) VALUES (?, ?, ?)", ["a\(index)", index, 1.5])
                try db.execute("INSERT INTO named(id, a, b, c) VALUES (?, ?, ?, x'00ff')", ["k\(index)", "a\(index)", index])
                try db.execute("INSERT INTO pairs VALUES ('p', ?, ?, ?)", [index, "a\(index)", index])
            }
            try db.execute("UPDATE plain SET b = 99 WHERE rowid = 1")   // a change to a table created in this transaction
            try db.execute("INSERT INTO uniq VALUES (1, 'x', 1), (2, 'y', 2)")
        }
        let start = try store.currentVersion()
        // Several updates of one key touching different columns.
        try write { db in
            for table in ["plain WHERE rowid = 1", "named WHERE id = 'k1'"] {
                try db.execute("UPDATE \(table.replacingOccurrences(of: " WHERE", with: " SET a = 'a-2' WHERE"))")
                try db.execute("UPDATE \(table.replacingOccurrences(of: " WHERE", with: " SET b = -0.0 WHERE"))")
                try db.execute("UPDATE \(table.replacingOccurrences(of: " WHERE", with: " SET a = 'a-3', c = NULL WHERE"))")
            }
            try db.execute("UPDATE pairs SET a = 'a-2' WHERE k2 = 1")
            try db.execute("UPDATE pairs SET b = x'' WHERE k2 = 1")
            try db.execute("UPDATE pairs SET a = 9223372036854775807 WHERE k2 = 1")
        }
        // An insert, then an update of the inserted row; an update that changes nothing.
        try write { db in
            try db.execute("INSERT INTO plain(a, b, c) VALUES ('new', 0, 0)")
            try db.execute("UPDATE plain SET b = 1 WHERE a = 'new'")
            try db.execute("INSERT INTO named(id, a) VALUES ('k5', 'new')")
            try db.execute("UPDATE named SET b = 1 WHERE id = 'k5'")
            try db.execute("UPDATE pairs SET a = a WHERE k2 = 2")
        }
        // An update, then a delete of the same row.
        try write { db in
            try db.execute("UPDATE plain SET a = 'doomed' WHERE rowid = 2")
            try db.execute("DELETE FROM plain WHERE rowid = 2")
            try db.execute("UPDATE named SET c = 'doomed' WHERE id = 'k2'")
            try db.execute("DELETE FROM named WHERE id = 'k2'")
            try db.execute("UPDATE pairs SET b = 'doomed' WHERE k2 = 2")
            try db.execute("DELETE FROM pairs WHERE k2 = 2")
        }
        // Updates that change the key or the rowid, after and before updates of other columns.
        try write { db in
            try db.execute("UPDATE plain SET b = 'moved' WHERE rowid = 1")
            try db.execute("UPDATE plain SET rowid = 10 WHERE rowid = 1")
            try db.execute("UPDATE plain SET a = 'after the move' WHERE rowid = 10")
            try db.execute("UPDATE named SET a = 'renamed' WHERE id = 'k1'")
            try db.execute("UPDATE named SET id = 'k9' WHERE id = 'k1'")
            try db.execute("UPDATE named SET rowid = 50, b = 'rowid moved' WHERE id = 'k3'")
            try db.execute("UPDATE named SET c = 'after the rowid' WHERE id = 'k3'")
            try db.execute("UPDATE pairs SET b = 'rekeyed' WHERE k2 = 3")
            try db.execute("UPDATE pairs SET k2 = 30 WHERE k2 = 3")
        }
        // Savepoints rolled back: what they did is not logged, before or after what is kept.
        try write { db in
            do {
                try db.transaction {
                    try db.execute("UPDATE plain SET a = 'rolled back' WHERE rowid = 3")
                    throw Abandon()
                }
            } catch is Abandon {}
            try db.execute("UPDATE plain SET b = 'kept' WHERE rowid = 3")
            do {
                try db.transaction {
                    try db.execute("UPDATE plain SET c = 'rolled back', b = 'rolled back' WHERE rowid = 3")
                    try db.execute("DELETE FROM named WHERE id = 'k4'")
                    throw Abandon()
                }
            } catch is Abandon {}
            try db.execute("UPDATE plain SET c = 'kept' WHERE rowid = 3")
            try db.execute("UPDATE named SET a = 'kept' WHERE id = 'k4'")
        }
        // A swap of unique values through a third value; a replace; an upsert.
        try write { db in
            try db.execute("UPDATE uniq SET u = 'tmp' WHERE id = 1")
            try db.execute("UPDATE uniq SET u = 'x' WHERE id = 2")
            try db.execute("UPDATE uniq SET u = 'y' WHERE id = 1")
            try db.execute("INSERT OR REPLACE INTO pairs VALUES ('p', 4, 'replaced', 0)")
            try db.execute("INSERT INTO named(id, a) VALUES ('k4', 'upserted') ON CONFLICT(id) DO UPDATE SET b = 'upserted'")
        }
        // More than 256 rows in one transaction: inserted (the bulk path), then updated, then deleted.
        try write { db in
            for index in 0..<300 { try db.execute("INSERT INTO pairs VALUES ('bulk', ?, ?, ?)", [index, index, "v"]) }
        }
        try write { db in
            try db.execute("UPDATE pairs SET b = 'w' WHERE k1 = 'bulk' AND k2 % 2 = 0")
            try db.execute("UPDATE pairs SET a = -a WHERE k1 = 'bulk' AND k2 % 3 <> 0")   // 100 rows a second time
        }
        try write { db in try db.execute("DELETE FROM pairs WHERE k1 = 'bulk' AND k2 % 5 <> 0") }

        let current = try store.currentVersion()
        #expect(recorded.count == Int(current - start + 1))
        for version in start...current {
            for table in tables {
                let steps = try store.history(table: table.name, sql: table.sql, identity: "k", from: version, to: version)
                #expect(steps.first?.snapshot == recorded[version]?[table.name], "\(table.name) at version \(version)")
            }
        }
    }

    /// Random transactions of raw SQL — updates of random columns (several per key), inserts,
    /// deletes, key and rowid changes, replaces, savepoints rolled back — on tables keyed three
    /// ways, with awkward values: every version's contents come back exactly from history.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomTransactionsTravelBackExactly(seed: UInt64) throws {
        let tables: [(name: String, key: String, sql: String)] = [
            ("r", "rowid", "SELECT rowid AS k, \(Self.exactly(["a", "b", "c"])) FROM r ORDER BY k"),
            ("t", "id", "SELECT id AS k, rowid AS rid, \(Self.exactly(["a", "b", "c"])) FROM t ORDER BY k"),
            ("w", "k1", "SELECT k1 || '/' || k2 AS k, \(Self.exactly(["a", "b", "c"])) FROM w ORDER BY k"),
        ]
        try store.write { db in
            try db.executeScript("""
                CREATE TABLE r(a, b, c);
                CREATE TABLE t(id TEXT PRIMARY KEY, a, b, c);
                CREATE TABLE w(k1 TEXT, k2 INTEGER, a, b, c, PRIMARY KEY (k1, k2)) WITHOUT ROWID;
                """)
            for index in 0..<4 {
                try db.execute("INSERT INTO r(rowid, a, b, c) VALUES (?, 'a', 'b', 'c')", [index + 1])
                try db.execute("INSERT INTO t VALUES (?, 'a', 'b', 'c')", ["k\(index)"])
                try db.execute("INSERT INTO w VALUES (?, 0, 'a', 'b', 'c')", ["k\(index)"])
            }
        }
        var random = SeededGenerator(seed: seed)
        func value() -> SQLValue {
            switch Int.random(in: 0..<7, using: &random) {
            case 0: .null
            case 1: .integer(Int64.random(in: -3...3, using: &random))
            case 2: .real([0.5, -0.0, 0.0, 1e300].randomElement(using: &random)!)
            case 3: .text(["", "x", "é", "a\u{0}b"].randomElement(using: &random)!)
            case 4: .blob((0..<Int.random(in: 0..<3, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
            default: .integer(Int64.random(in: 0..<2, using: &random))
            }
        }
        func key(_ table: String) -> SQLValue {
            let index = Int.random(in: 0..<5, using: &random)
            return table == "r" ? .integer(Int64(index + 1)) : .text("k\(index)")
        }
        func condition(_ table: String) -> String { table == "w" ? "k1 = ? AND k2 = 0" : "\(tables.first { $0.name == table }!.key) = ?" }
        func operation(_ db: Database) throws {
            let table = ["r", "t", "w"].randomElement(using: &random)!
            let column = ["a", "b", "c"].randomElement(using: &random)!
            switch Int.random(in: 0..<11, using: &random) {
            case 0...3:
                try db.execute("UPDATE \(table) SET \(column) = ? WHERE \(condition(table))", [value(), key(table)])
            case 4:
                try db.execute("UPDATE \(table) SET a = ?, c = ? WHERE \(condition(table))", [value(), value(), key(table)])
            case 5, 10:
                let columns = table == "r" ? "rowid, a, b, c" : table == "t" ? "id, a, b, c" : "k1, k2, a, b, c"
                let keys: [SQLValue] = table == "w" ? [key(table), .integer(0)] : [key(table)]
                let marks = Array(repeating: "?", count: keys.count + 3).joined(separator: ", ")
                try db.execute("INSERT OR REPLACE INTO \(table)(\(columns)) VALUES (\(marks))", keys + [value(), value(), value()])
            case 6:
                try db.execute("DELETE FROM \(table) WHERE \(condition(table))", [key(table)])
            case 7:
                // A key change (a rowid for r and t), onto a free key or none.
                let set = switch table {
                case "r": "rowid = ?"
                case "t": Bool.random(using: &random) ? "id = ?" : "rowid = 100 + length(?)"
                default: "k1 = ?"
                }
                try db.execute("UPDATE OR IGNORE \(table) SET \(set), b = ? WHERE \(condition(table))", [key(table), value(), key(table)])
            default:
                try db.execute("UPDATE \(table) SET \(column) = \(column) WHERE \(condition(table))", [key(table)])
            }
        }
        var recorded: [Int64: [String: [Row]]] = [:]
        func record() throws {
            let version = try store.currentVersion()
            try store.read { db in
                for table in tables { recorded[version, default: [:]][table.name] = try db.fetchAll(table.sql) }
            }
        }
        try record()
        let start = try store.currentVersion()
        struct Abandon: Error {}
        for _ in 0..<60 {
            try store.write { db in
                for _ in 0..<Int.random(in: 1...8, using: &random) {
                    if Int.random(in: 0..<6, using: &random) == 0 {
                        do {
                            try db.transaction {
                                for _ in 0..<Int.random(in: 1...3, using: &random) { try operation(db) }
                                if Bool.random(using: &random) { throw Abandon() }
                            }
                        } catch is Abandon {}
                    } else {
                        try operation(db)
                    }
                }
            }
            try record()
        }
        let current = try store.currentVersion()
        for version in start...current where recorded[version] != nil {
            for table in tables {
                let steps = try store.history(table: table.name, sql: table.sql, identity: "k", from: version, to: version)
                #expect(steps.first?.snapshot == recorded[version]?[table.name], "seed \(seed): \(table.name) at version \(version)")
            }
        }
    }

    /// A database that stores text as UTF-16 (big-endian here, the other byte order than the
    /// machine's): unchanged text is recognized as such, changed text logged, and both travel back.
    @Test func aUTF16DatabaseLogsOnlyChangedTextAndTravelsBack() throws {
        let path = directory.path("utf16.sqlite")
        try SQLiteShell.run("PRAGMA encoding = 'UTF-16be'; CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b TEXT)", on: path)
        let store = try Store(path: path)
        #expect(try store.read { db in try db.fetchValue("PRAGMA encoding", as: String.self) } == "UTF-16be")
        let long = String(repeating: "é😀", count: 1_000)
        try store.write { db in try db.execute("INSERT INTO t VALUES (1, ?, ?), (2, 'x', 'y')", [long, "a\u{0}b"]) }
        let start = try store.currentVersion()
        try store.write { db in try db.execute("UPDATE t SET a = ?, b = 'changed' WHERE id = 1", [long]) }
        let imageBytes = try store.read { db in
            try db.fetchValue("SELECT length(before_images) FROM ripple_changes WHERE version = ?", [start + 1], as: Int.self)
        }
        #expect((imageBytes ?? .max) < 100, "the long text was written again unchanged: not logged")
        try store.write { db in try db.execute("DELETE FROM t WHERE id = 1") }
        let sql = "SELECT id, a, b FROM t ORDER BY id"
        let steps = try store.history(table: "t", sql: sql, identity: "id", from: start, to: start + 2)
        #expect(steps.map { $0.snapshot.map { [$0["a"], $0["b"]] } } == [
            [[.text(long), .text("a\u{0}b")], [.text("x"), .text("y")]],
            [[.text(long), .text("changed")], [.text("x"), .text("y")]],
            [[.text("x"), .text("y")]],
        ])
    }

    /// Text that is not UTF-8 (a blob cast to text) comes back from the past with its bytes,
    /// whether an update or a delete logged it, in a value column or in the key.
    @Test func timeTravelKeepsTheBytesOfTextThatIsNotUTF8() throws {
        try store.write { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            try db.execute("CREATE TABLE k(id TEXT PRIMARY KEY, v)")
        }
        try store.write { db in
            try db.execute("INSERT INTO t VALUES (1, 'x'), (2, CAST(x'FE' AS TEXT))")
            try db.execute("INSERT INTO k VALUES (CAST(x'61FF62' AS TEXT), CAST(x'C0' AS TEXT))")
        }
        try store.write { db in try db.execute("UPDATE t SET v = CAST(x'61FF62' AS TEXT) WHERE id = 1") }
        let cast = try store.currentVersion()
        try store.write { db in
            try db.execute("UPDATE t SET v = 'y' WHERE id = 1")
            try db.execute("DELETE FROM t WHERE id = 2")
            try db.execute("UPDATE k SET v = 'z'")
        }
        try store.write { db in try db.execute("DELETE FROM k") }
        let sql = "SELECT id, hex(v) AS hv FROM t ORDER BY id"
        let steps = try store.history(table: "t", sql: sql, identity: "id", from: cast - 1, to: try store.currentVersion())
        #expect(steps.map { $0.snapshot.map { $0["hv"] } } == [
            [.text("78"), .text("FE")], [.text("61FF62"), .text("FE")], [.text("79")],
        ])
        #expect(try store.history(table: "t", sql: sql, identity: "id", from: cast, to: cast).first?.snapshot.first?["hv"]
                == .text("61FF62"))
        let keys = try store.history(table: "k", sql: "SELECT hex(id) AS hid, hex(v) AS hv FROM k", identity: "hid",
                                     from: cast, to: try store.currentVersion())
        #expect(keys.map { $0.snapshot.map { [$0["hid"], $0["hv"]] } } == [
            [[.text("61FF62"), .text("C0")]], [[.text("61FF62"), .text("7A")]], [],
        ])
    }

    /// An entry of the old JSON format holds text repaired to U+FFFD where the stored bytes were
    /// not UTF-8: it cannot tell the value exactly, so history refuses rather than answer wrongly.
    @Test func anOldJSONBeforeImageThatMayHaveLostBytesIsRefused() throws {
        try store.write { db in
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            try db.execute("INSERT INTO t VALUES (1, 'x')")
        }
        try store.write { db in try db.execute("UPDATE t SET v = 'y' WHERE id = 1") }
        let version = try store.currentVersion()
        // What the old code logged for `UPDATE t SET v = 'y'` had v been CAST(x'61FF62' AS TEXT).
        try store.write { db in
            try db.execute("UPDATE ripple_changes SET old_rows = ?, before_images = NULL WHERE version = ?",
                           ["[[1,1,\"a\u{FFFD}b\"]]", version])
        }
        let error = #expect(throws: StoreError.self) {
            try store.history(table: "t", sql: "SELECT id, v FROM t", identity: "id", from: version - 1, to: version)
        }
        #expect(error?.kind == .history)
        // Text that the old format keeps exactly still travels back.
        try store.write { db in
            try db.execute("UPDATE ripple_changes SET old_rows = ? WHERE version = ?", ["[[1,1,\"a\\u0000é\"]]", version])
        }
        let steps = try store.history(table: "t", sql: "SELECT id, hex(v) AS hv FROM t", identity: "id", from: version - 1, to: version)
        #expect(steps.map { $0.snapshot.map { $0["hv"] } } == [[.text("6100C3A9")], [.text("79")]])
    }

    // MARK: Large keys

    /// A 10 MB `String` id: the log writes it as the key's text and its exact form, right, and an
    /// update of another column does not log it a third time in a before-image.
    @Test func aHugeKeyIsLoggedExactlyAndNotCopiedIntoBeforeImages() throws {
        struct Big: Codable, Sendable, Identifiable, Equatable {
            var id: String
            var note: String
        }
        let big = try store.collection("big", of: Big.self)
        let key = String(decoding: (0..<10_000_000).map { UInt8(ascii: "a") + UInt8($0 % 26) }, as: UTF8.self)
        let size = Int64(key.utf8.count)
        let start = try store.currentVersion()
        try big.insert(Big(id: key, note: "first"))
        try big.update(Big(id: key, note: "second"))
        try big.delete(id: key)
        let log = try store.changes(after: start)
        #expect(log.map(\.operation) == [.insert, .update, .delete])
        #expect(log.allSatisfy { $0.rowKeys.count == 1 && $0.rowKeys[0].utf8.elementsEqual(key.utf8) })
        let exact = try store.read { db in
            try db.fetchAll("SELECT exact_keys FROM ripple_changes WHERE version > ? ORDER BY version", [start]).map { row in
                guard case .blob(let list)? = row["exact_keys"] else { return nil as [RowKey]? }
                return RowKey.list(list)
            }
        }
        #expect(exact == Array(repeating: [RowKey(.text(key))], count: 3))
        // The key's text and its exact form, and the old note: no more.
        #expect(try logBytes(at: start + 2) < 2 * size + 100)
        #expect(try logBytes(at: start + 1) < 2 * size + 100)
        let steps = try store.history(of: big.all, from: start, to: start + 3)
        #expect(steps.map { $0.snapshot.map(\.note) } == [[], ["first"], ["second"], []])
        #expect(steps[1].snapshot.first?.id.utf8.elementsEqual(key.utf8) == true)
    }

    /// A collection's inserts announce each key to the capture, which keeps short ones and reads
    /// long ones from the row (one copy instead of two): batches mixing both, inserted and
    /// upserted, log every key right.
    @Test func batchesMixingShortAndLongKeysAreLoggedRight() throws {
        struct Named: Codable, Sendable, Identifiable, Equatable {
            var id: String
            var n: Int
        }
        let named = try store.collection("named", of: Named.self)
        let long = String(repeating: "é", count: ChangeCapture.expectedKeyLimit)   // 2 bytes each: past the limit
        let records = [Named(id: "a", n: 1), Named(id: long, n: 2), Named(id: "b", n: 3), Named(id: long + "x", n: 4)]
        let start = try store.currentVersion()
        try named.insert(contentsOf: records)
        try named.upsert(contentsOf: records.map { Named(id: $0.id, n: -$0.n) } + [Named(id: "c" + long, n: 5)])
        let ids = records.map(\.id)
        let log = try store.changes(after: start)
        #expect(log.map { "\($0.version - start) \($0.operation)" } == ["1 insert", "2 insert", "2 update"])
        #expect(log.map(\.rowKeys) == [ids, ["c" + long], ids])
        let exact = try store.read { db in
            try db.fetchAll("SELECT exact_keys FROM ripple_changes WHERE version > ? ORDER BY version, operation", [start])
                .map { row -> [RowKey]? in
                    guard case .blob(let list)? = row["exact_keys"] else { return nil }
                    return RowKey.list(list)
                }
        }
        #expect(exact == [ids, ["c" + long], ids].map { $0.map { RowKey(.text($0)) } })
        let steps = try store.history(of: named.order(by: Column("n")), from: start, to: start + 2)
        #expect(steps.map { $0.snapshot.map(\.n) } == [[], [1, 2, 3, 4], [-4, -3, -2, -1, 5]])
    }
}
