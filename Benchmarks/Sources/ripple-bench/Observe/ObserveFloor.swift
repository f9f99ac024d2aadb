import BenchSQLite
import Foundation

/// The observe benchmark's floor on SQLite's C API: commit the write on one connection, then
/// re-query the affected query on a second connection into records — no observation, no diff.
/// Also seeds every impl's file.
final class ObserveFloor: ObserveSubject {
    private let writer: OpaquePointer
    private let reader: OpaquePointer
    private let update: OpaquePointer
    private let selects: [OpaquePointer]
    private let mailbox: ObserveMailbox<ObserveTodo>

    init(path: String, queries: [ObserveQuery], mailbox: ObserveMailbox<ObserveTodo>) throws {
        self.mailbox = mailbox
        let reader = CFloor.open(path)
        writer = CFloor.open(path)
        self.reader = reader
        update = Self.prepare(writer, Self.updateSQL)
        selects = queries.map { ObserveFloor.prepare(reader, ObserveFloor.selectSQL($0)) }
        for index in selects.indices {
            mailbox.post(query: index, at: .now, snapshot: fetch(index), changes: -1, initial: true)
        }
    }

    func write(_ record: ObserveTodo, query: Int) throws -> ContinuousClock.Instant {
        try Self.commit(record, with: update, on: writer)
        let committed = ContinuousClock.now
        let snapshot = fetch(query)
        mailbox.post(query: query, at: .now, snapshot: snapshot, changes: -1, initial: false)
        return committed
    }

    func close() {
        sqlite3_finalize(update)
        selects.forEach { sqlite3_finalize($0) }
        sqlite3_close(reader)
        sqlite3_close(writer)
    }

    /// Runs select `index` on the reader into records.
    private func fetch(_ index: Int) -> [ObserveTodo] {
        Self.records(of: selects[index])
    }

    /// The update of one row by id (``commit(_:with:on:)`` binds it).
    static let updateSQL = "UPDATE todo SET title = ?, rank = ?, done = ? WHERE id = ?"

    /// The select of `query`.
    static func selectSQL(_ query: ObserveQuery) -> String {
        switch query {
        case .openWindow(let limit):
            "SELECT id, title, rank, done FROM todo WHERE done = 0 ORDER BY rank LIMIT \(limit)"
        case .rankRange(let low, let count):
            "SELECT id, title, rank, done FROM todo WHERE rank >= \(low) AND rank < \(low + count) ORDER BY rank"
        }
    }

    /// Writes `record` (by id) through `update` (``updateSQL``, prepared on `db`) in one transaction.
    static func commit(_ record: ObserveTodo, with update: OpaquePointer, on db: OpaquePointer) throws {
        CFloor.exec(db, "BEGIN IMMEDIATE")
        bind(update, 1, record.title)
        sqlite3_bind_int64(update, 2, Int64(record.rank))
        sqlite3_bind_int64(update, 3, record.done ? 1 : 0)
        bind(update, 4, record.id)
        guard sqlite3_step(update) == SQLITE_DONE, sqlite3_changes(db) == 1 else {
            sqlite3_reset(update)
            CFloor.exec(db, "ROLLBACK")
            throw ObserveFailure("C floor: update of \(record.id) failed")
        }
        sqlite3_reset(update)
        CFloor.exec(db, "COMMIT")
    }

    /// Runs a select of ``selectSQL(_:)`` into records.
    static func records(of statement: OpaquePointer) -> [ObserveTodo] {
        defer { sqlite3_reset(statement) }
        var todos: [ObserveTodo] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            todos.append(ObserveTodo(id: Self.text(statement, 0), title: Self.text(statement, 1),
                                     rank: Int(sqlite3_column_int64(statement, 2)),
                                     done: sqlite3_column_int64(statement, 3) != 0))
        }
        return todos
    }

    /// Creates the file at `path` with the schema and `rows` rows (``ObserveModel/rows(count:_:)``)
    /// in one transaction; the index is built after the rows.
    static func seed(path: String, rows: Int) {
        let db = CFloor.open(path)
        defer { sqlite3_close(db) }
        CFloor.exec(db, "BEGIN IMMEDIATE")
        CFloor.exec(db, "CREATE TABLE todo(id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, rank INTEGER NOT NULL, done INTEGER NOT NULL)")
        let insert = prepare(db, "INSERT INTO todo(id, title, rank, done) VALUES (?, ?, ?, ?)")
        ObserveModel.rows(count: rows) { todo in
            bind(insert, 1, todo.id)
            bind(insert, 2, todo.title)
            sqlite3_bind_int64(insert, 3, Int64(todo.rank))
            sqlite3_bind_int64(insert, 4, todo.done ? 1 : 0)
            precondition(sqlite3_step(insert) == SQLITE_DONE, "observe seed: insert failed")
            sqlite3_reset(insert)
        }
        sqlite3_finalize(insert)
        CFloor.exec(db, "CREATE INDEX todo_done_rank ON todo(done, rank)")
        CFloor.exec(db, "COMMIT")
        CFloor.exec(db, "PRAGMA wal_checkpoint(TRUNCATE)")
    }

    // MARK: C helpers

    static func prepare(_ db: OpaquePointer, _ sql: String) -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
              let statement else {
            fatalError("observe C floor: \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        return statement
    }

    private static func bind(_ statement: OpaquePointer, _ index: Int32, _ text: String) {
        var text = text
        _ = text.withUTF8 { bytes in
            sqlite3_bind_text(statement, index, UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self),
                              Int32(bytes.count), CFloor.transient)
        }
    }

    private static func text(_ statement: OpaquePointer, _ column: Int32) -> String {
        String(decoding: UnsafeBufferPointer(start: sqlite3_column_text(statement, column),
                                              count: Int(sqlite3_column_bytes(statement, column))), as: UTF8.self)
    }
}
