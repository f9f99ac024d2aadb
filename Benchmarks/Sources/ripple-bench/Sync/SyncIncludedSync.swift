import BenchSQLite
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleSyncClient

/// R4: the initial sync of a membership-ruled subscription with an include into a Swift
/// client's local store — 10,000 todos (readable by the members of their project) each with its
/// assignee (a to-one include of `users`: 10,000 related rows) — beside the floor: `COPY … TO
/// STDOUT` of the same rows of both tables (psql; its start and connection, timed apart with
/// `SELECT 1`, are subtracted) plus a bare insert of them into SQLite through the C API (one
/// transaction, one prepared statement per table).
///
/// `ripple`: from `subscribe` until the client tells that the frame is in its store (both local
/// tables), the node already running.
struct SyncIncludedSync {
    static let rows = 10_000
    static let projects = 100
    static let targetRatio = 3.0

    static let schema = """
        CREATE TABLE users(id int8 PRIMARY KEY, name text NOT NULL, email text NOT NULL);
        CREATE TABLE projects(id int8 PRIMARY KEY, name text NOT NULL);
        CREATE TABLE members(id int8 PRIMARY KEY, project_id int8 NOT NULL REFERENCES projects, user_id text NOT NULL);
        CREATE TABLE todos(id int8 PRIMARY KEY, project_id int8 NOT NULL REFERENCES projects, assignee int8 REFERENCES users,
                           title text NOT NULL, rank int4 NOT NULL, done bool NOT NULL);
        INSERT INTO users SELECT n, 'User ' || n, 'user' || n || '@example.com' FROM generate_series(1, \(rows)) AS n;
        INSERT INTO projects SELECT n, 'Project ' || n FROM generate_series(1, \(projects)) AS n;
        INSERT INTO members SELECT n, n, 'bench' FROM generate_series(1, \(projects)) AS n;
        INSERT INTO todos SELECT n, 1 + n % \(projects), n, 'Todo ' || n || ': ' || (ARRAY['water the plants', 'call the plumber'])[1 + n % 2],
                                 (n * 7919) % 100003, n % 7 = 0
        FROM generate_series(1, \(rows)) AS n;
        """

    static let rules = """
        {"tables": {
          "users": {"read": true},
          "projects": {"read": {"column": "id", "op": "in", "query": {"table": "members", "columns": ["project_id"],
                                "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}},
          "members": {"read": {"column": "user_id", "op": "=", "value": {"user": true}}},
          "todos": {"read": {"column": "project_id", "op": "in", "query": {"table": "members", "columns": ["project_id"],
                             "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}}
        }}
        """

    static let query = QueryDescription(table: "todos", order: [OrderDescription(column: "id")],
                                        include: ["assignee": .row(of: "users", on: ["assignee": "id"])])

    func run() async -> Int {
        var lines = SyncLines(.r4)
        do {
            try await SyncCluster.with { cluster in
                SyncProgress.phase = "R4: seeding 10,000 todos and 10,000 users"
                try await cluster.psql(Self.schema)
                let ripple = try await SyncNode.with(cluster, tables: ["users", "projects", "members", "todos"], adjust: { configuration in
                    configuration.rules = try! SyncRules(json: Data(Self.rules.utf8))
                }) { node in
                    SyncProgress.phase = "R4: ripple"
                    return try await syncClient(node: node, cluster: cluster)
                }
                SyncProgress.phase = "R4: floor (COPY, then a bare SQLite insert)"
                let (copy, insert) = try await floor(cluster: cluster)
                let floor = copy + insert
                lines.impl("ripple", [("rows", .int(Self.rows)), ("related_rows", .int(Self.rows)), ("seconds", .number(ripple.seconds))])
                lines.impl("copy+sqlite", [("rows", .int(2 * Self.rows)), ("seconds", .number(floor.seconds)),
                                           ("copy_seconds", .number(copy.seconds)), ("insert_seconds", .number(insert.seconds))])
                let ratio = ripple.seconds / floor.seconds
                lines.ratio("ripple/copy+sqlite", [("seconds_ratio", .number(ratio))])
                lines.target("ripple/copy+sqlite seconds_ratio <= 3", ratio, met: ratio <= Self.targetRatio)
            }
        } catch {
            lines.error("ripple", describe(error))
        }
        return lines.failures
    }

    /// The Swift client's initial sync: `subscribe` until its store holds the todos and their
    /// assignees (checked).
    private func syncClient(node: SyncNode, cluster: SyncCluster) async throws -> Duration {
        try await SyncInitialSync.timeInitialSync(node: node, store: try Store(path: cluster.path("client-r4.sqlite")), id: "todos",
                                                  query: Self.query) { store in
            let (todos, users) = try store.read { db in
                (try db.fetchValue("SELECT count(*) FROM todos", as: Int.self) ?? 0,
                 try db.fetchValue("SELECT count(*) FROM users WHERE id IN (SELECT assignee FROM todos)", as: Int.self) ?? 0)
            }
            guard todos == Self.rows, users == Self.rows else {
                throw SyncBenchError("the client's store holds \(todos) todos and \(users) of their assignees, not \(Self.rows) of each")
            }
        }
    }

    /// The floor: COPY of both tables' rows through psql (less psql's own start and connection),
    /// then the rows parsed and inserted into a fresh SQLite file.
    private func floor(cluster: SyncCluster) async throws -> (copy: Duration, insert: Duration) {
        var overhead = Duration.seconds(1_000)
        for _ in 0..<3 {
            let start = ContinuousClock.now
            try await cluster.psql("SELECT 1")
            overhead = min(overhead, .now - start)
        }
        var texts: [String] = []
        var copy = Duration.zero
        for sql in ["COPY (SELECT id, project_id, assignee, title, rank, done FROM todos ORDER BY id) TO STDOUT",
                    "COPY (SELECT id, name, email FROM users WHERE id IN (SELECT assignee FROM todos) ORDER BY id) TO STDOUT"] {
            let start = ContinuousClock.now
            texts.append(try await cluster.psql(sql))
            copy += max(.zero, ContinuousClock.now - start - overhead)
        }
        let path = cluster.path("floor-r4.sqlite")
        let copied = texts
        let (insert, count) = try await offload { () -> (Duration, Int) in
            let start = ContinuousClock.now
            let db = CFloor.open(path)
            defer { sqlite3_close(db) }
            CFloor.exec(db, "CREATE TABLE todos(id INTEGER PRIMARY KEY, project_id INTEGER, assignee INTEGER, title TEXT, rank INTEGER, done INTEGER)")
            CFloor.exec(db, "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, email TEXT)")
            CFloor.exec(db, "BEGIN IMMEDIATE")
            var count = 0
            // Integers bound as integers (the todos' first three columns and rank, the users' id),
            // `t`/`f` as 1/0, the rest as text.
            count += Self.insert(copied[0], into: db, "INSERT INTO todos VALUES (?, ?, ?, ?, ?, ?)", integers: [0, 1, 2, 4], booleans: [5])
            count += Self.insert(copied[1], into: db, "INSERT INTO users VALUES (?, ?, ?)", integers: [0], booleans: [])
            CFloor.exec(db, "COMMIT")
            return (ContinuousClock.now - start, count)
        }
        guard count == 2 * Self.rows else { throw SyncBenchError("the floor inserted \(count) rows of \(2 * Self.rows)") }
        return (copy, insert)
    }

    /// COPY's text lines inserted with one prepared statement; returns how many. (The fields
    /// here hold no tab, newline or backslash.)
    private static func insert(_ text: String, into db: OpaquePointer, _ sql: String, integers: Set<Int>, booleans: Set<Int>) -> Int {
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        var count = 0
        for line in text.utf8.split(separator: UInt8(ascii: "\n")) {
            for (index, field) in line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false).enumerated() {
                let position = Int32(index + 1)
                if field.elementsEqual("\\N".utf8) {
                    sqlite3_bind_null(statement, position)
                } else if integers.contains(index) {
                    sqlite3_bind_int64(statement, position, Int64(Substring(field)) ?? 0)
                } else if booleans.contains(index) {
                    sqlite3_bind_int64(statement, position, field.first == UInt8(ascii: "t") ? 1 : 0)
                } else {
                    var value = String(Substring(field))
                    _ = value.withUTF8 { bytes in
                        sqlite3_bind_text(statement, position, UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self),
                                          Int32(bytes.count), CFloor.transient)
                    }
                }
            }
            precondition(sqlite3_step(statement) == SQLITE_DONE, "the floor's insert failed: \(String(cString: sqlite3_errmsg(db)))")
            sqlite3_reset(statement)
            count += 1
        }
        return count
    }
}
