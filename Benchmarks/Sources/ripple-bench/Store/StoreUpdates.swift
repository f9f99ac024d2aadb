import BenchSQLite
import Foundation
import Ripple
import RippleTesting

/// U1 of `ripple-bench store`: small updates of rows that hold a large blob, where the change
/// log must stay small. Schema `docs(id INTEGER PRIMARY KEY, title TEXT NOT NULL, payload BLOB
/// NOT NULL)`; every impl runs the same SQL, `UPDATE docs SET title = ? WHERE id = ?`, once per
/// row, `batch` rows per transaction (ripple through `store.write` with raw SQL; c on the C API,
/// with no log).
///
/// Bytes are what the updates add to the files: the WAL's growth (automatic checkpoints off, so
/// every frame written stays in it) plus the database file's growth, measured between the last
/// set-up checkpoint and the last update, divided by the number of updates.
enum UpdateWorkload {
    /// How the title changes.
    enum Edit: String, CaseIterable {
        /// `Document 17` becomes `Document 17 (edited)`: the record grows, so SQLite writes the
        /// row again, its overflow pages (the blob) included — for every impl.
        case resize
        /// `Document 00017` becomes `Revised! 00017`: the record keeps its size, so SQLite
        /// overwrites only the pages whose bytes changed (the row's leaf page).
        case inPlace = "in-place"
    }

    static let createTable = "CREATE TABLE docs(id INTEGER PRIMARY KEY, title TEXT NOT NULL, payload BLOB NOT NULL)"
    static let insertSQL = "INSERT INTO docs(id, title, payload) VALUES (?, ?, ?)"
    static let updateSQL = "UPDATE docs SET title = ? WHERE id = ?"

    static func title(_ id: Int, _ edit: Edit, edited: Bool) -> String {
        switch edit {
        case .resize: edited ? "Document \(id) (edited)" : "Document \(id)"
        case .inPlace: (edited ? "Revised! " : "Document ") + String(repeating: "0", count: max(0, 5 - String(id).count)) + String(id)
        }
    }

    /// The blob of row `id`: `size` bytes, different for each row.
    static func payload(_ id: Int, size: Int) -> [UInt8] {
        var random = SeededGenerator(seed: UInt64(id) &+ 0x5531)
        var bytes = [UInt8](repeating: 0, count: size)
        for index in stride(from: 0, to: size, by: 8) {
            withUnsafeBytes(of: random.next()) { word in
                for offset in 0..<min(8, size - index) { bytes[index + offset] = word[offset] }
            }
        }
        return bytes
    }

    /// What one impl's run measured.
    struct Result {
        var seconds: Double
        var bytes: Int64
        /// Ripple: what the updates' entries hold in the change log (keys and before-images).
        var logBytes: Int64?
    }

    /// The size of `path` plus that of its WAL.
    static func fileBytes(_ path: String) -> Int64 {
        ["", "-wal"].reduce(0) { total, suffix in
            let size = (try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? NSNumber)??.int64Value
            return total + (size ?? 0)
        }
    }

    // MARK: The C floor

    static func runC(path: String, rows: Int, blobBytes: Int, edit: Edit, batch: Int) -> Result {
        let db = CFloor.open(path)
        defer { sqlite3_close(db) }
        CFloor.exec(db, createTable)
        CFloor.exec(db, "BEGIN IMMEDIATE")
        let insert = prepare(db, insertSQL)
        for id in 0..<rows {
            sqlite3_bind_int64(insert, 1, Int64(id))
            bindText(insert, 2, title(id, edit, edited: false))
            payload(id, size: blobBytes).withUnsafeBytes {
                _ = sqlite3_bind_blob64(insert, 3, $0.baseAddress, UInt64($0.count), CFloor.transient)
            }
            precondition(sqlite3_step(insert) == SQLITE_DONE, "C floor: insert failed")
            sqlite3_reset(insert)
        }
        sqlite3_finalize(insert)
        CFloor.exec(db, "COMMIT")
        CFloor.exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA wal_autocheckpoint = 0")
        let before = fileBytes(path)
        let update = prepare(db, updateSQL)
        let clock = ContinuousClock()
        let start = clock.now
        for first in stride(from: 0, to: rows, by: batch) {
            CFloor.exec(db, "BEGIN IMMEDIATE")
            for id in first..<min(first + batch, rows) {
                bindText(update, 1, title(id, edit, edited: true))
                sqlite3_bind_int64(update, 2, Int64(id))
                precondition(sqlite3_step(update) == SQLITE_DONE && sqlite3_changes(db) == 1, "C floor: update failed")
                sqlite3_reset(update)
            }
            CFloor.exec(db, "COMMIT")
        }
        let elapsed = start.duration(to: clock.now)
        sqlite3_finalize(update)
        return Result(seconds: elapsed.milliseconds / 1000, bytes: fileBytes(path) - before)
    }

    private static func prepare(_ db: OpaquePointer, _ sql: String) -> OpaquePointer {
        var statement: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, "C floor: cannot prepare \(sql)")
        return statement!
    }

    private static func bindText(_ statement: OpaquePointer, _ index: Int32, _ text: String) {
        var text = text
        _ = text.withUTF8 {
            sqlite3_bind_text(statement, index, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self),
                              Int32($0.count), CFloor.transient)
        }
    }

    // MARK: Ripple

    static func runRipple(path: String, rows: Int, blobBytes: Int, edit: Edit, batch: Int) throws -> Result {
        let store = try Store(path: path)
        try store.write { db in
            try db.execute(createTable)
            for id in 0..<rows {
                try db.execute(insertSQL, [id, title(id, edit, edited: false), SQLValue.blob(payload(id, size: blobBytes))])
            }
        }
        try store.writeWithoutTransaction { db in
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute("PRAGMA wal_autocheckpoint = 0")
        }
        let before = fileBytes(path)
        let firstVersion = try store.currentVersion()
        let clock = ContinuousClock()
        let start = clock.now
        for first in stride(from: 0, to: rows, by: batch) {
            try store.write { db in
                for id in first..<min(first + batch, rows) {
                    try db.execute(updateSQL, [title(id, edit, edited: true), id])
                    precondition(db.changedRowCount == 1, "ripple: update failed")
                }
            }
        }
        let elapsed = start.duration(to: clock.now)
        // Before the store closes (closing checkpoints and removes the WAL).
        let bytes = fileBytes(path) - before
        // Whatever before-image columns this version of the log has.
        let logBytes = try store.read { db -> Int64? in
            let columns = try db.fetchAll("SELECT name FROM pragma_table_info('ripple_changes')").compactMap { row -> String? in
                if case .text(let name)? = row["name"] { return name } else { return nil }
            }
            let sizes = ["row_keys", "exact_keys", "old_rows", "before_images"].filter(columns.contains)
                .map { "ifnull(length(CAST(\($0) AS BLOB)), 0)" }
            return try db.fetchValue("SELECT sum(\(sizes.joined(separator: " + "))) FROM ripple_changes WHERE version > ?",
                                     [firstVersion], as: Int64.self)
        }
        return Result(seconds: elapsed.milliseconds / 1000, bytes: bytes, logBytes: logBytes)
    }
}

/// K1 of `ripple-bench store`: one write whose `String` id is large, beside one whose ordinary
/// value is as large, through a collection (ripple) and on the C API (c, no log). Each rep
/// inserts a record, then updates its small `note` (the collection's update writes every column).
enum BigKeyWorkload {
    struct Record: Codable, Sendable, Identifiable, Equatable {
        var id: String
        var note: String
        var value: String
    }

    /// What is large.
    enum Case: String, CaseIterable {
        case id = "large id"
        case value = "large value"
    }

    static let createTable = "CREATE TABLE big(id TEXT PRIMARY KEY NOT NULL, note TEXT NOT NULL, value TEXT NOT NULL)"

    static func record(_ rep: Int, _ kind: Case, bytes: Int) -> Record {
        // Different for each rep, so that the insert finds no row.
        var utf8 = [UInt8](repeating: UInt8(ascii: "k"), count: bytes - 8)
        utf8 += Array(String(format: "%08d", rep).utf8)
        let large = String(decoding: utf8, as: UTF8.self)
        return kind == .id ? Record(id: large, note: "n", value: "v") : Record(id: "id\(rep)", note: "n", value: large)
    }

    /// Times per rep: (insert, update), in milliseconds.
    static func runRipple(path: String, kind: Case, bytes: Int, reps: Int) throws -> (Timings, Timings) {
        let store = try Store(path: path)
        try store.write { db in try db.execute(createTable) }
        let big = try store.collection("big", of: Record.self)
        var inserts = Timings(samples: []), updates = Timings(samples: [])
        let clock = ContinuousClock()
        for rep in 0...reps {   // rep 0 warms up
            var record = record(rep, kind, bytes: bytes)
            var start = clock.now
            try big.insert(record)
            if rep > 0 { inserts.samples.append(start.duration(to: clock.now).milliseconds) }
            record.note = "edited"
            start = clock.now
            try big.update(record)
            if rep > 0 { updates.samples.append(start.duration(to: clock.now).milliseconds) }
        }
        return (inserts, updates)
    }

    static func runC(path: String, kind: Case, bytes: Int, reps: Int) -> (Timings, Timings) {
        let db = CFloor.open(path)
        defer { sqlite3_close(db) }
        CFloor.exec(db, createTable)
        var inserts = Timings(samples: []), updates = Timings(samples: [])
        let clock = ContinuousClock()
        func run(_ sql: String, _ values: [String]) {
            var statement: OpaquePointer?
            sqlite3_prepare_v2(db, sql, -1, &statement, nil)
            for (index, value) in values.enumerated() {
                var value = value
                _ = value.withUTF8 {
                    sqlite3_bind_text(statement, Int32(index + 1), UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self),
                                      Int32($0.count), CFloor.transient)
                }
            }
            precondition(sqlite3_step(statement) == SQLITE_DONE, "C floor: \(sql) failed")
            sqlite3_finalize(statement)
        }
        for rep in 0...reps {
            let record = record(rep, kind, bytes: bytes)
            var start = clock.now
            run("INSERT INTO big(id, note, value) VALUES (?, ?, ?)", [record.id, record.note, record.value])
            if rep > 0 { inserts.samples.append(start.duration(to: clock.now).milliseconds) }
            start = clock.now
            // As the collection's update: every column written.
            run("UPDATE big SET note = ?, value = ? WHERE id = ?", ["edited", record.value, record.id])
            if rep > 0 { updates.samples.append(start.duration(to: clock.now).milliseconds) }
        }
        return (inserts, updates)
    }
}
