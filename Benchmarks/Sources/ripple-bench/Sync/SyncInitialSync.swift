import BenchSQLite
import Foundation
import Ripple
import RippleSync
import RippleSyncClient

/// S4: the initial sync of a 100,000-row table into a Swift client's local store, beside the
/// floor: `COPY … TO STDOUT` of the same rows (psql; its start and connection, timed apart with
/// `SELECT 1`, are subtracted) plus a bare insert of them into SQLite through the C API (one
/// transaction, one prepared statement, the client's column types).
///
/// `ripple`: from `subscribe` until the client tells that the frame is in its store, the node
/// already running (its own initial copy is not counted). Then, to say where the time goes, a
/// raw socket times the same subscription until its frame arrived (`part` "server_frame": the
/// node's query, encoding and sending), and the frame's decoding with the client's reader,
/// `ServerMessage(json:)` (`part` "client_decode"); the rest of `ripple` is the client receiving the frame and
/// writing its store.
struct SyncInitialSync {
    let rows: Int

    static let targetRatio = 3.0
    static let query = QueryDescription(table: "items", order: [OrderDescription(column: "id")])
    static let columns = "id, title, rank, done, notes"

    func run() async -> Int {
        var lines = SyncLines(.s4)
        let cluster: SyncCluster
        do {
            cluster = try await SyncCluster.start()
        } catch {
            lines.error("ripple", "cannot start PostgreSQL: \(describe(error))")
            return lines.failures
        }
        do {
            try await run(cluster: cluster, lines: &lines)
        } catch {
            lines.error("ripple", describe(error))
        }
        await cluster.stop()
        return lines.failures
    }

    private func run(cluster: SyncCluster, lines: inout SyncLines) async throws {
        Report.note("S4: seeding \(rows) rows")
        SyncProgress.phase = "S4: seeding and the node's copy"
        try await cluster.psql("""
            CREATE TABLE items(id int8 PRIMARY KEY, title text NOT NULL, rank int4 NOT NULL, done bool NOT NULL, notes text);
            INSERT INTO items
            SELECT n, 'Item ' || n || ': ' || (ARRAY['water the plants', 'call the plumber', 'buy oat milk'])[1 + n % 3],
                   (n * 7919) % 100003, n % 7 = 0, CASE WHEN n % 3 = 0 THEN NULL ELSE 'note ' || n END
            FROM generate_series(1, \(rows)) AS n;
            """)
        let expectedSum = try await cluster.psql("SELECT sum(rank) FROM items").trimmingCharacters(in: .whitespacesAndNewlines)
        let nodeStarted = ContinuousClock.now
        let node = try await SyncNode.start(cluster, tables: ["items"])
        Report.note("S4: the node copied \(rows) rows into its replica in \(JSONValue.number((ContinuousClock.now - nodeStarted).seconds).json) s")
        let ripple: Duration
        let frame: SyncSocket.Frame
        let server: Duration
        let decode: Duration
        do {
            Report.note("S4: ripple")
            SyncProgress.phase = "S4: ripple"
            ripple = try await syncClient(node: node, cluster: cluster, expectedSum: expectedSum)
            (frame, server, decode) = try await rawFrame(node: node)
            await node.stop()
        } catch {
            await node.stop()
            throw error
        }
        Report.note("S4: floor (COPY, then a bare SQLite insert)")
        SyncProgress.phase = "S4: floor"
        let (copy, insert) = try await floor(cluster: cluster)
        let floor = copy + insert

        lines.impl("ripple", [("rows", .int(rows)), ("seconds", .number(ripple.seconds)), ("bytes", .int(frame.bytes))])
        lines.impl("ripple", [("part", "server_frame"), ("seconds", .number(server.seconds)), ("bytes", .int(frame.bytes))])
        lines.impl("ripple", [("part", "client_decode"), ("seconds", .number(decode.seconds))])
        lines.impl("copy+sqlite", [("rows", .int(rows)), ("seconds", .number(floor.seconds)),
                                   ("copy_seconds", .number(copy.seconds)), ("insert_seconds", .number(insert.seconds))])
        let ratio = ripple.seconds / floor.seconds
        lines.ratio("ripple/copy+sqlite", [("seconds_ratio", .number(ratio))])
        lines.target("ripple/copy+sqlite seconds_ratio <= 3", ratio, met: ratio <= Self.targetRatio)
        if ratio > Self.targetRatio {
            let rest = ripple - server - decode
            Report.note("S4: of ripple's \(JSONValue.number(ripple.seconds).json) s, the frame took \(JSONValue.number(server.seconds).json) s "
                        + "to arrive (node), decoding it \(JSONValue.number(decode.seconds).json) s, and the rest "
                        + "(\(JSONValue.number(rest.seconds).json) s) the client receiving it and writing its store")
        }
    }

    /// The Swift client's initial sync: `subscribe` until its store holds the rows (checked).
    private func syncClient(node: SyncNode, cluster: SyncCluster, expectedSum: String) async throws -> Duration {
        let rows = rows
        return try await Self.timeInitialSync(node: node, store: try Store(path: cluster.path("client-s4.sqlite")), id: "items",
                                              query: Self.query) { store in
            let (count, sum) = try store.read { db in
                (try db.fetchValue("SELECT count(*) FROM items", as: Int.self) ?? 0,
                 try db.fetchValue("SELECT sum(rank) FROM items", as: Int.self) ?? 0)
            }
            guard count == rows, String(sum) == expectedSum else {
                throw SyncBenchError("the client's store holds \(count) rows (rank sum \(sum), Postgres \(expectedSum))")
            }
        }
    }

    /// A Swift client's initial sync of `query` into `store`: from `subscribe` (once connected)
    /// until the client tells that the frame is in its store; `check` then looks at the store.
    static func timeInitialSync(node: SyncNode, store: Store, id: String, query: QueryDescription,
                                check: (Store) throws -> Void) async throws -> Duration {
        let token = try node.token()
        let client = SyncClient(url: node.url, store: store) { token }
        let events = SyncMailbox<(event: SyncClientEvent, at: ContinuousClock.Instant)>()
        let listener = Task {
            for await event in client.events { events.put((event, .now)) }
        }
        defer { listener.cancel() }
        do {
            try await client.start()
            // Connected first, so that the time is the subscription's alone.
            while true {
                guard let (event, _) = try await events.take(within: 30) else { throw SyncBenchError("the client's events ended") }
                if case .connected = event { break }
                if case .disconnected(let reason) = event { throw SyncBenchError("the client did not connect: \(reason)") }
            }
            let start = ContinuousClock.now
            try await client.subscribe(id, query)
            var done: ContinuousClock.Instant?
            while done == nil {
                guard let (event, at) = try await events.take(within: 300) else { throw SyncBenchError("the client's events ended") }
                switch event {
                case .applied(_, let subscriptions) where subscriptions.contains(id): done = at
                case .serverError(let code, let message, _): throw SyncBenchError("the client heard \(code.rawValue): \(message)")
                case .localFailure(let message): throw SyncBenchError("the client failed: \(message)")
                case .disconnected(let reason): throw SyncBenchError("the client was disconnected: \(reason)")
                default: continue
                }
            }
            try check(store)
            try? await withDeadline(10, "stopping the Swift client") { await client.stop() }
            return done! - start
        } catch {
            try? await withDeadline(10, "stopping the Swift client") { await client.stop() }
            throw error
        }
    }

    /// The same subscription on a raw socket: the time until its frame arrived, and the time
    /// the client's reader (`ServerMessage(json:)`) takes to decode it.
    private func rawFrame(node: SyncNode) async throws -> (SyncSocket.Frame, Duration, Duration) {
        // The client's socket is gone and with it the shared live query: this one starts afresh.
        try await Task.sleep(for: .milliseconds(300))
        let socket = try await SyncSocket(url: node.url)
        do {
            try await socket.hello(try node.token())
            let start = ContinuousClock.now
            try await socket.send(.subscribe(id: "items", query: Self.query, resume: nil))
            let frame = try await socket.nextChanges(within: 300)
            await socket.close()
            let decoding = ContinuousClock.now
            guard case .changes(_, let snapshots, _) = try frame.message(), snapshots["items"]?.rows.count == rows else {
                throw SyncBenchError("the frame does not hold the \(rows) rows")
            }
            return (frame, frame.at - start, ContinuousClock.now - decoding)
        } catch {
            await socket.close()
            throw error
        }
    }

    /// The floor: COPY of the rows through psql (less psql's own start and connection), then
    /// the rows parsed and inserted into a fresh SQLite file.
    private func floor(cluster: SyncCluster) async throws -> (copy: Duration, insert: Duration) {
        var start = ContinuousClock.now
        var overhead = Duration.seconds(1_000)
        for _ in 0..<3 {
            start = .now
            try await cluster.psql("SELECT 1")
            overhead = min(overhead, .now - start)
        }
        start = .now
        let text = try await cluster.psql("COPY (SELECT \(Self.columns) FROM items ORDER BY id) TO STDOUT")
        let copy = max(.zero, ContinuousClock.now - start - overhead)
        let path = cluster.path("floor-s4.sqlite")
        let rows = rows
        let (insert, count) = try await offload { () -> (Duration, Int) in
            let start = ContinuousClock.now
            let count = Self.insert(copyText: text, into: path)
            return (ContinuousClock.now - start, count)
        }
        guard count == rows else { throw SyncBenchError("the floor inserted \(count) rows of \(rows)") }
        return (copy, insert)
    }

    /// Parses COPY's text format (tab-separated, `\N` for NULL, backslash escapes) and inserts
    /// the rows in one transaction with one prepared statement; returns how many.
    private static func insert(copyText: String, into path: String) -> Int {
        let db = CFloor.open(path)
        defer { sqlite3_close(db) }
        CFloor.exec(db, "CREATE TABLE items(id INTEGER, title TEXT, rank INTEGER, done INTEGER, notes TEXT, PRIMARY KEY (id))")
        CFloor.exec(db, "BEGIN IMMEDIATE")
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, "INSERT INTO items(id, title, rank, done, notes) VALUES (?, ?, ?, ?, ?)", -1, &statement, nil)
        var count = 0
        for line in copyText.utf8.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false)
            guard fields.count == 5 else { continue }
            for (index, field) in fields.enumerated() {
                let position = Int32(index + 1)
                if field.elementsEqual("\\N".utf8) { sqlite3_bind_null(statement, position); continue }
                switch index {
                case 0, 2: sqlite3_bind_int64(statement, position, Int64(Substring(field)) ?? 0)
                case 3: sqlite3_bind_int64(statement, position, field.first == UInt8(ascii: "t") ? 1 : 0)
                default:
                    var value = unescape(field)
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
        sqlite3_finalize(statement)
        CFloor.exec(db, "COMMIT")
        return count
    }

    /// A COPY text field with its backslash escapes undone.
    private static func unescape(_ field: Substring.UTF8View) -> String {
        guard field.contains(UInt8(ascii: "\\")) else { return String(Substring(field)) }
        var out: [UInt8] = []
        var escaped = false
        for byte in field {
            if escaped {
                switch byte {
                case UInt8(ascii: "t"): out.append(9)
                case UInt8(ascii: "n"): out.append(10)
                case UInt8(ascii: "r"): out.append(13)
                default: out.append(byte)
                }
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
