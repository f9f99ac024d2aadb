import BenchSQLite
import Foundation

/// The store benchmark's record: the same schema for every impl.
struct BenchTodo: Codable, Sendable, Identifiable, Equatable {
    var id: String
    var title: String
    var rank: Int
    var done: Bool
}

/// The physical floor: the same work written straight on SQLite's C API.
enum CFloor {
    /// SQLite copies the bound bytes (`SQLITE_TRANSIENT`).
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// A connection to `path` as every floor uses it: WAL, `synchronous = NORMAL`, 5 s busy timeout.
    static func open(_ path: String) -> OpaquePointer {
        var db: OpaquePointer?
        precondition(sqlite3_open(path, &db) == SQLITE_OK, "cannot open \(path)")
        sqlite3_busy_timeout(db, 5_000)
        exec(db!, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
        return db!
    }

    /// Runs `sql`; a failure ends the benchmark.
    static func exec(_ db: OpaquePointer, _ sql: String) {
        var message: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &message) != SQLITE_OK {
            fatalError("C floor: \(sql): \(message.map { String(cString: $0) } ?? "?")")
        }
    }

    static let createTable = "CREATE TABLE todos(id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, rank INTEGER NOT NULL, done INTEGER NOT NULL)"

    /// I1: inserts `todos` in one transaction with one prepared statement.
    static func insert(_ todos: [BenchTodo], path: String) {
        let db = open(path)
        defer { sqlite3_close(db) }
        exec(db, createTable)
        exec(db, "BEGIN IMMEDIATE")
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, "INSERT INTO todos(id, title, rank, done) VALUES (?, ?, ?, ?)", -1, &statement, nil)
        for todo in todos {
            var id = todo.id
            var title = todo.title
            _ = id.withUTF8 { sqlite3_bind_text(statement, 1, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), Int32($0.count), transient) }
            _ = title.withUTF8 { sqlite3_bind_text(statement, 2, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), Int32($0.count), transient) }
            sqlite3_bind_int64(statement, 3, Int64(todo.rank))
            sqlite3_bind_int64(statement, 4, todo.done ? 1 : 0)
            precondition(sqlite3_step(statement) == SQLITE_DONE, "C floor insert failed")
            sqlite3_reset(statement)
        }
        sqlite3_finalize(statement)
        exec(db, "COMMIT")
    }

    /// R1: fetches every todo ordered by rank into structs.
    static func fetchAll(path: String) -> [BenchTodo] {
        let db = open(path)
        defer { sqlite3_close(db) }
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, "SELECT id, title, rank, done FROM todos ORDER BY rank", -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        var todos: [BenchTodo] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            func text(_ column: Int32) -> String {
                String(decoding: UnsafeBufferPointer(start: sqlite3_column_text(statement, column),
                                                      count: Int(sqlite3_column_bytes(statement, column))), as: UTF8.self)
            }
            todos.append(BenchTodo(id: text(0), title: text(1), rank: Int(sqlite3_column_int64(statement, 2)),
                                   done: sqlite3_column_int64(statement, 3) != 0))
        }
        return todos
    }
}
