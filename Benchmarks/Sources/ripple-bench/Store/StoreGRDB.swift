import Foundation
import GRDB

extension BenchTodo: FetchableRecord, PersistableRecord {
    static var databaseTableName: String { "todos" }
}

/// The peer: GRDB.swift with `Codable` records on a `DatabasePool` (WAL).
enum GRDBPeer {
    private static func pool(_ path: String) throws -> DatabasePool {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        return try DatabasePool(path: path, configuration: configuration)
    }

    /// I1: inserts `todos` in one transaction.
    static func insert(_ todos: [BenchTodo], path: String) throws {
        let pool = try pool(path)
        try pool.write { db in
            try db.execute(sql: CFloor.createTable)
            for todo in todos { try todo.insert(db) }
        }
    }

    /// R1: fetches every todo ordered by rank.
    static func fetchAll(path: String) throws -> [BenchTodo] {
        try pool(path).read { db in try BenchTodo.order(Column("rank")).fetchAll(db) }
    }
}
