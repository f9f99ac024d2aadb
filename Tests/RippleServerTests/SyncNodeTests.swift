#if Sync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// A node under real writers and hostile or slow sockets: pgbench's tables while pgbench runs,
/// a socket that stops reading, more sockets than admitted, a dropped table, a huge change.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync node tests skipped"), .timeLimit(.minutes(15)))
struct SyncNodeTests {
    /// pgbench's tables synced while pgbench runs: every frame is one whole transaction (pgbench
    /// adds each transaction's delta to one teller and one branch, so at every frame the
    /// tellers' and the branches' balances have equal sums), positions strictly grow, and once
    /// pgbench stops each client's rows equal the queries on Postgres.
    @Test func pgbenchsTablesWhilePgbenchRuns() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.pgbench(["-i", "-s", "1", "-q"])
            let directory = try TemporaryDirectory()
            let rules = #"{"tables": {"pgbench_tellers": {"read": true}, "pgbench_branches": {"read": true}, "pgbench_accounts": {"read": true}}}"#
            try await TestNode.with(postgres, tables: ["pgbench_accounts", "pgbench_tellers", "pgbench_branches"],
                                    rules: rules, directory: directory) { node in
                try await withSocket(node.url) { balances in
                    _ = try await balances.hello(try node.token("u"))
                    try await balances.send(.subscribe(id: "tellers", query: QueryDescription(table: "pgbench_tellers", order: [OrderDescription(column: "tid")],
                                                                                              columns: ["tid", "tbalance"]), resume: nil))
                    try await balances.send(.subscribe(id: "branches", query: QueryDescription(table: "pgbench_branches", columns: ["bid", "bbalance"]),
                                                       resume: nil))
                    try await withSocket(node.url) { accounts in
                        _ = try await accounts.hello(try node.token("u"))
                        let top = QueryDescription(table: "pgbench_accounts", order: [OrderDescription(column: "abalance", descending: true)], limit: 20,
                                                   columns: ["aid", "abalance"])
                        let few = QueryDescription(table: "pgbench_accounts", filter: .compare(column: "aid", op: .less, value: .integer(200)),
                                                   order: [OrderDescription(column: "aid")], columns: ["aid", "abalance"])
                        try await accounts.send(.subscribe(id: "top", query: top, resume: nil))
                        try await accounts.send(.subscribe(id: "few", query: few, resume: nil))

                        let finished = Locked(false)
                        try await withThrowingTaskGroup(of: Void.self) { writers in
                            writers.addTask {
                                defer { finished.withLock { $0 = true } }
                                _ = try await postgres.pgbench(["-c", "4", "-j", "2", "-t", "150", "-n"])
                            }
                            var (tellers, branches, topRows, fewRows) = (ClientRows(), ClientRows(), ClientRows(), ClientRows())
                            var positions: [PGOutput.LSN] = []
                            var frames = 0
                            func sum(_ rows: ClientRows) -> Int64 {
                                rows.rows.reduce(0) { total, row in if case .integer(let value) = row[1] { total + value } else { total } }
                            }
                            let expectedTellers = "SELECT tid, tbalance FROM pgbench_tellers ORDER BY tid"
                            let expectedBranches = "SELECT bid, bbalance FROM pgbench_branches ORDER BY bid"
                            let expectedTop = "SELECT aid, abalance FROM pgbench_accounts ORDER BY abalance DESC, aid LIMIT 20"
                            let expectedFew = "SELECT aid, abalance FROM pgbench_accounts WHERE aid < 200 ORDER BY aid"
                            // Postgres's balances once pgbench ended, read once (psql is a process of its own, too
                            // costly for every frame); the loop checks them at every frame or heartbeat, so that
                            // the last frame, come before pgbench ended, is not waited after.
                            var final: (tellers: [String], branches: [String])?
                            var done = false
                            let deadline = ContinuousClock.now + .seconds(600)
                            while !done {
                                if final == nil, finished.withLock({ $0 }) {
                                    final = (try await postgres.rows(expectedTellers), try await postgres.rows(expectedBranches))
                                }
                                if let final, tellers.rows.map(psqlText) == final.tellers, branches.rows.map(psqlText) == final.branches {
                                    done = true
                                    break
                                }
                                guard ContinuousClock.now < deadline else {
                                    throw Wait.TimedOut(what: "the balances to converge to Postgres's", limit: .seconds(600))
                                }
                                guard let message = try await balances.next(within: 60) else { break }
                                if case .heartbeat = message { continue }
                                if case .changes(let lsn, _, let changesets) = message, !changesets.isEmpty { positions.append(try #require(PGOutput.LSN(lsn))) }
                                _ = try tellers.take(message, id: "tellers")
                                _ = try branches.take(message, id: "branches")
                                frames += 1
                                if !tellers.columns.isEmpty && !branches.columns.isEmpty {
                                    #expect(sum(tellers) == sum(branches), "a frame holds a whole transaction")
                                }
                            }
                            try await Wait.until("the writer (pgbench) to end") { finished.withLock { $0 } }
                            try await writers.waitForAll()
                            #expect(done, "the balances converge to Postgres's")
                            #expect(zip(positions, positions.dropFirst()).allSatisfy { $0 < $1 }, "one frame per transaction, in commit order")
                            #expect(frames > 100)
                            // pgbench ended: Postgres's accounts are final, read once.
                            let (finalTop, finalFew) = (try await postgres.rows(expectedTop), try await postgres.rows(expectedFew))
                            while topRows.rows.map(psqlText) != finalTop || fewRows.rows.map(psqlText) != finalFew {
                                let message = try #require(try await accounts.nextSkippingHeartbeats(within: 60))
                                _ = try topRows.take(message, id: "top")
                                _ = try fewRows.take(message, id: "few")
                            }
                        }
                    }
                }
            }
        }
    }

    /// A socket that stops reading is dropped once its unread frames pass the bound, and a
    /// reading socket on the same subscription misses nothing meanwhile.
    @Test func aSocketThatDoesNotReadIsDroppedAndOthersAreNot() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE notes(id int8 PRIMARY KEY, body text NOT NULL)")
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["notes"], rules: #"{"tables": {"notes": {"read": true}}}"#,
                                    directory: directory, adjust: { configuration in
                                        configuration.maxQueuedBytes = 1024 * 1024
                                        // The stalled socket's hello must not time out on a busy machine: only its
                                        // unread frames may end it here.
                                        configuration.helloTimeout = .seconds(600)
                                    }) { node in
                let query = QueryDescription(table: "notes", order: [OrderDescription(column: "id")])
                let stalled = try await RawWebSocket.connect(port: node.port)
                defer { stalled.close() }
                try stalled.send(#"{"type":"hello","protocol":1,"token":"\#(try node.token("u"))"}"#)
                try stalled.send(String(decoding: try JSONEncoder().encode(ClientMessage.subscribe(id: "all", query: query, resume: nil)), as: UTF8.self))
                try await withSocket(node.url) { reader in
                    _ = try await reader.hello(try node.token("u"))
                    try await reader.send(.subscribe(id: "all", query: query, resume: nil))
                    var rows = ClientRows()
                    try await rows.readFirstResult(from: reader, id: "all")
                    try await Wait.until("both sockets to hold their subscription (ripple_subscriptions 2)") {
                        await node.server.metricsText().split(separator: "\n").contains("ripple_subscriptions 2.0")
                    }
                    // 40 transactions of 300 kB each: far more than the stalled socket's buffers and bound.
                    for n in 1...40 {
                        try await postgres.psql("INSERT INTO notes VALUES (\(n), repeat('x', 300000))")
                        while rows.rows.count < n { _ = try rows.take(try #require(try await reader.nextSkippingHeartbeats()), id: "all") }
                    }
                    #expect(rows.rows.count == 40, "the reading socket has every row")
                    // The stalled socket's session may take its frames (and pass the bound) after the
                    // reading socket read its own, on a busy machine.
                    try await Wait.until("the node to drop the stalled socket (ripple_dropped_sockets_total 1)") {
                        await node.server.metricsText().split(separator: "\n").contains("ripple_dropped_sockets_total 1")
                    }
                    // The dropped socket is let go without its client reading anything more: its last
                    // frame waits a second at most.
                    try await Wait.until("the node to let the dropped socket go (ripple_sockets 1)") {
                        await node.server.metricsText().split(separator: "\n").contains("ripple_sockets 1.0")
                    }
                }
            }
        }
    }

    /// Sockets beyond the limit are told to retry later; a dropped table ends its subscriptions
    /// naming it; a change larger than the result travels as the result; /metrics counts.
    @Test func limitsEndingsAndSnapshotsInsteadOfHugeChanges() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE notes(id int8 PRIMARY KEY, body text NOT NULL);
                CREATE TABLE scratch(id int8 PRIMARY KEY);
                INSERT INTO notes SELECT n, repeat('n', 200) FROM generate_series(1, 50) AS n;
                """)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["notes", "scratch"],
                                    rules: #"{"tables": {"notes": {"read": true}, "scratch": {"read": true}}}"#,
                                    directory: directory, adjust: { $0.maxSockets = 2 }) { node in
                try await withSocket(node.url) { first in
                    _ = try await first.hello(try node.token("u"))
                    try await withSocket(node.url) { second in
                        _ = try await second.hello(try node.token("u"))
                        try await withSocket(node.url) { third in
                            let refusal = try await third.next()
                            guard case .error(.retryLater, let message, _)? = refusal else { Issue.record("no retry_later: \(String(describing: refusal))"); return }
                            #expect(message.contains("2"))
                            #expect(try await third.nextText() == nil, "the refused socket closes")

                            try await first.send(.subscribe(id: "notes", query: QueryDescription(table: "notes", order: [OrderDescription(column: "id")]),
                                                            resume: nil))
                            try await first.send(.subscribe(id: "scratch", query: QueryDescription(table: "scratch"), resume: nil))
                            var notes = ClientRows()
                            var sawScratch = false
                            while notes.columns.isEmpty || !sawScratch {
                                let message = try #require(try await first.nextSkippingHeartbeats())
                                _ = try notes.take(message, id: "notes")
                                if case .changes(_, let snapshots, _) = message, snapshots["scratch"] != nil { sawScratch = true }
                            }
                            // Every row replaced by another: the changeset would be larger than the result.
                            try await postgres.psql("BEGIN; DELETE FROM notes; INSERT INTO notes SELECT n, repeat('m', 200) FROM generate_series(101, 150) AS n; COMMIT;")
                            let replaced = try #require(try await first.nextSkippingHeartbeats())
                            guard case .changes(_, let snapshots, let changesets) = replaced else { Issue.record("\(replaced)"); return }
                            #expect(snapshots["notes"] != nil && changesets["notes"] == nil, "a snapshot instead of a larger changeset")
                            _ = try notes.take(replaced, id: "notes")
                            #expect(notes.rows.map(psqlText) == (try await postgres.rows("SELECT id, body FROM notes ORDER BY id")))
                            // A dropped table ends its subscription, saying which table.
                            try await postgres.psql("DROP TABLE scratch")
                            var ended = false
                            while !ended, let message = try await first.nextSkippingHeartbeats() {
                                if case .error(.subscriptionEnded, let text, let id) = message, id == "scratch" {
                                    ended = true
                                    #expect(text.contains("scratch"))
                                }
                            }
                            #expect(ended)
                            let metrics = await node.server.metricsText()
                            #expect(metrics.contains("ripple_sockets 2"), "\(metrics)")
                            // The same over HTTP, and /health.
                            let (health, healthResponse) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(node.port)/health")!)
                            #expect((healthResponse as? HTTPURLResponse)?.statusCode == 200 && String(decoding: health, as: UTF8.self) == "ok\n")
                            let (served, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(node.port)/metrics")!)
                            #expect(String(decoding: served, as: UTF8.self).contains("ripple_refused_sockets_total 1"))
                            #expect(metrics.contains("ripple_refused_sockets_total 1"))
                            #expect(metrics.contains("ripple_subscriptions 1"))
                        }
                    }
                }
            }
        }
    }
}

extension SyncNodeTests {
    /// A node that cannot listen (its port taken) ends with an error, and whoever waits for
    /// its port hears that error, however late they ask: nobody waits forever for a port that
    /// will never come.
    @Test func aNodeThatCannotListenFailsWhoeverWaitsForItsPort() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            let directory = try TemporaryDirectory()
            let rules = #"{"tables": {"items": {"read": true}}}"#
            try await TestNode.with(postgres, tables: ["items"], rules: rules, directory: directory) { first in
                var configuration = SyncServerConfiguration(
                    postgres: try SyncServerConfiguration.postgres(url: postgres.url), tables: ["items"],
                    rules: try SyncRules(json: Data(rules.utf8)), secret: first.secret, replicaPath: directory.path("second.sqlite"))
                configuration.port = first.port
                configuration.slot = "ripple_second"
                let second = try SyncServer(configuration: configuration)
                await #expect(throws: (any Error).self) { try await second.run() }
                await #expect(throws: (any Error).self) { try await second.port }
            }
        }
    }

    /// A socket that opens while the node stops (accepted just before its listener closed) is
    /// told to come back later and closed, instead of staying open and keeping the node from
    /// ever stopping.
    @Test func aSocketThatOpensWhileTheNodeStopsIsToldToComeBackLater() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: #"{"tables": {"items": {"read": true}}}"#, directory: directory) { node in
                node.server.beginStopping()
                // (The answer waits for the client's hello, or a second: a frame written at once can
                // come in the same read as the upgrade's answer, and the WebSocket client these tests
                // use then lost it, and heard nothing more, about one time in twenty.)
                try await withSocket(node.url) { socket in
                    guard case .error(let code, _, _) = try await socket.next(within: 30) else {
                        Issue.record("the socket was not told to come back later")
                        return
                    }
                    #expect(code == .retryLater)
                    #expect(try await socket.next(within: 30) == nil, "the socket was not closed")
                }
            }
        }
    }

    /// A socket the node refuses (beyond its limit) is answered once its client spoke: a frame
    /// written at once can come in the same read as the upgrade's answer, where WebSocket clients
    /// are known to lose it (the one these tests use did, and then heard nothing more).
    @Test func aRefusedSocketIsAnsweredOnceItsClientSpoke() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: #"{"tables": {"items": {"read": true}}}"#,
                                    directory: directory, adjust: { $0.maxSockets = 1 }) { node in
                try await withSocket(node.url) { admitted in
                    _ = try await admitted.hello(try node.token("u"))
                    let refused = try await RawWebSocket.connect(port: node.port)
                    defer { refused.close() }
                    #expect(try await !refused.hearsSomething(within: 300), "the node wrote before the client spoke")
                    try refused.send(#"{"type":"hello","protocol":1,"token":"\#(try node.token("u"))"}"#)
                    #expect(try await refused.read(within: 5_000).contains(#""code":"retry_later""#))
                }
            }
        }
    }

    /// A node down long enough for its slot to pass `max_slot_wal_keep_size` finds the slot
    /// lost: it makes a fresh slot and copy (never resumes with rows missing), and a client
    /// resuming from before the copy gets a snapshot equal to Postgres.
    @Test func aLostSlotMeansAFreshCopyAndASnapshot() async throws {
        try await withThrowawayPostgres(settings: ["max_slot_wal_keep_size": "'1MB'"]) { postgres in
            try await postgres.psql("""
                CREATE TABLE notes(id int8 PRIMARY KEY, body text NOT NULL);
                CREATE TABLE filler(id int8, body text);
                INSERT INTO notes SELECT n, 'note ' || n FROM generate_series(1, 10) AS n;
                """)
            let directory = try TemporaryDirectory()
            let rules = #"{"tables": {"notes": {"read": true}}}"#
            let query = QueryDescription(table: "notes", order: [OrderDescription(column: "id")])
            var rows = ClientRows()
            try await TestNode.with(postgres, tables: ["notes"], rules: rules, directory: directory) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("u"))
                    try await socket.send(.subscribe(id: "notes", query: query, resume: nil))
                    try await rows.readFirstResult(from: socket, id: "notes")
                }
            }
            // While the node is down: writes, and WAL enough for its slot to be given up.
            for round in 1...4 {
                try await postgres.psql("""
                    UPDATE notes SET body = body || '.' WHERE id = \(round); INSERT INTO notes VALUES (\(100 + round), 'while down');
                    INSERT INTO filler SELECT n, repeat('x', 500) FROM generate_series(1, 5000) AS n;
                    """)
                try await postgres.psql("SELECT pg_switch_wal()")
            }
            try await postgres.psql("CHECKPOINT")
            try await postgres.psql("CHECKPOINT")
            #expect(try await postgres.psql("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'ripple_node'")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "lost", "the slot was given up (the test's premise)")
            try await TestNode.with(postgres, tables: ["notes"], rules: rules, directory: directory) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("u"))
                    try await socket.send(.subscribe(id: "notes", query: query, resume: ResumePoint(basis: rows.basis, lsn: rows.lsn)))
                    let message = try #require(try await socket.nextSkippingHeartbeats())
                    guard case .changes(_, let snapshots, _) = message else { Issue.record("\(message)"); return }
                    #expect(snapshots["notes"] != nil, "a resume from before the copy is a snapshot")
                    _ = try rows.take(message, id: "notes")
                    #expect(rows.rows.map(psqlText) == (try await postgres.rows("SELECT id, body FROM notes ORDER BY id")))
                }
            }
        }
    }
}

extension SyncNodeTests {
    /// Postgres restarted without a clean shutdown under a running node: the node retries, and
    /// the writes made before and after reach the socket, each once.
    @Test func aPostgresRestartUnderARunningNodeLosesNothing() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE notes(id int8 PRIMARY KEY, body text NOT NULL); INSERT INTO notes VALUES (1, 'one')")
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["notes"], rules: #"{"tables": {"notes": {"read": true}}}"#,
                                    directory: directory) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("u"))
                    try await socket.send(.subscribe(id: "notes", query: QueryDescription(table: "notes", order: [OrderDescription(column: "id")]),
                                                     resume: nil))
                    var rows = ClientRows()
                    let expected = "SELECT id, body FROM notes ORDER BY id"
                    try await rows.readFirstResult(from: socket, id: "notes")
                    try await postgres.psql("INSERT INTO notes VALUES (2, 'two')")
                    try await postgres.restart(immediate: true)
                    try await postgres.psql("INSERT INTO notes VALUES (3, 'three'); UPDATE notes SET body = 'uno' WHERE id = 1")
                    // (In the whole suite run in parallel, the node once stayed silent here for a minute:
                    // the tests ran initdb, pg_ctl and psql on Swift's cooperative threads and starved the
                    // node's tasks. They now wait for those programs on threads of their own.)
                    do {
                        while rows.rows.map(psqlText) != (try await postgres.rows(expected)) {
                            _ = try rows.take(try #require(try await socket.nextSkippingHeartbeats(within: 60)), id: "notes")
                        }
                    } catch {
                        let figures = await node.server.metricsText()
                        Issue.record("\(error); the node's figures: \(figures)")
                    }
                    #expect(rows.rows.count == 3)
                }
            }
        }
    }
}

/// A WebSocket client on a bare TCP socket that sends (masked text frames) but never reads:
/// what a stalled client looks like to the server.
///
/// Its reads block, so they run on threads of their own: a test that blocked one of Swift's
/// cooperative threads (as many as cores) waiting for the node, which needs those threads to
/// answer, could stall every test of the process (it did: the upgrade's answer never came).
final class RawWebSocket: @unchecked Sendable {   // `descriptor` is set once
    private let descriptor: Int32

    /// Connects to the node at `port` and upgrades to a WebSocket.
    static func connect(port: Int) async throws -> RawWebSocket {
        try await onOwnThread("raw websocket") { try RawWebSocket(port: port) }
    }

    private init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SyncClientTestError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        // A small receive buffer, so that the server's frames back up quickly.
        var size: Int32 = 4096
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            _ = Glibc.close(descriptor)
            throw SyncClientTestError("connect: errno \(errno)")
        }
        let request = "GET /sync HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        try write(Array(request.utf8))
        // Read the upgrade's answer only (up to its blank line); nothing after it is ever read.
        var answer: [UInt8] = []
        var byte: UInt8 = 0
        while !answer.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard readable(within: 30_000), recv(descriptor, &byte, 1, 0) == 1 else {
                _ = Glibc.close(descriptor)
                throw SyncClientTestError("the upgrade was not answered within 30 s")
            }
            answer.append(byte)
        }
        guard String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 101") else {
            throw SyncClientTestError("no upgrade: \(String(decoding: answer, as: UTF8.self))")
        }
    }

    /// Sends `text` as one masked text frame.
    func send(_ text: String) throws {
        let payload = Array(text.utf8)
        var frame: [UInt8] = [0x81]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        try write(frame)
    }

    private func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw SyncClientTestError("send: errno \(errno)") }
            sent += written
        }
    }

    /// Whether bytes arrive within `milliseconds` (nothing is read).
    func hearsSomething(within milliseconds: Int32) async throws -> Bool {
        try await onOwnThread("raw websocket") { self.readable(within: milliseconds) }
    }

    /// What arrives within `milliseconds` (frame headers and all), as text.
    func read(within milliseconds: Int32) async throws -> String {
        try await onOwnThread("raw websocket") { self.received(within: milliseconds) }
    }

    private func readable(within milliseconds: Int32) -> Bool {
        var descriptors = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&descriptors, 1, milliseconds) > 0
    }

    private func received(within milliseconds: Int32) -> String {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + .milliseconds(Int64(milliseconds))
        var chunk = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            let left = Int32(max(1, (deadline - ContinuousClock.now).components.seconds * 1000
                                 + (deadline - ContinuousClock.now).components.attoseconds / 1_000_000_000_000_000))
            guard readable(within: left) else { break }
            let count = recv(descriptor, &chunk, chunk.count, 0)
            guard count > 0 else { break }
            received += chunk[..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    func close() { _ = Glibc.close(descriptor) }
}

extension SyncNodeTests {
    /// The feed's watchdog starts a feed again when it makes no progress for `feedStallLimit`;
    /// a long catch-up that applies commit after commit is progress. (It measured progress by
    /// finished catch-ups only: a writer that kept the feed catching up for longer than the
    /// limit had its feed torn down and started again, over and over.)
    @Test func aLongCatchUpIsProgressNotAStall() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.pgbench(["-i", "-s", "1", "-q"])
            let directory = try TemporaryDirectory()
            let rules = #"{"tables": {"pgbench_tellers": {"read": true}, "pgbench_branches": {"read": true}}}"#
            try await TestNode.with(postgres, tables: ["pgbench_tellers", "pgbench_branches"], rules: rules,
                                    directory: directory, adjust: { configuration in
                // Well above what one peek and its transactions take, even on a machine as loaded
                // as the test suite with two CPU hogs beside it makes it (10 s was passed there once),
                // and below the whole catch-up (a peek re-decodes from the slot's restart point, which
                // Postgres moves every 15 s: the peeks grow slower as the backlog is drained).
                configuration.feedStallLimit = .seconds(20)
                // About a transaction per peek: the feed drains a backlog slower than pgbench makes
                // it, and then catches up for seconds on end, well past the limit.
                configuration.feedBatchSize = 4
            }) { node in
                try await node.untilReady()
                // pgbench keeps the feed catching up for seconds, well past the limit. (A count of
                // transactions, not `-T`: pgbench times `-T` with SIGALRM, which a child of this test
                // process may have blocked, and would then never stop.)
                _ = try await postgres.pgbench(["-c", "4", "-j", "2", "-t", "1500", "-n"])
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("u"))
                    try await socket.send(.subscribe(id: "tellers", query: QueryDescription(table: "pgbench_tellers", order: [OrderDescription(column: "tid")],
                                                                                            columns: ["tid", "tbalance"]), resume: nil))
                    var tellers = ClientRows()
                    try await tellers.readFirstResult(from: socket, id: "tellers")
                    // pgbench ended: Postgres's tellers are final, read once (not a psql process per frame).
                    let expected = try await postgres.rows("SELECT tid, tbalance FROM pgbench_tellers ORDER BY tid")
                    while tellers.rows.map(psqlText) != expected {
                        _ = try tellers.take(try #require(try await socket.nextSkippingHeartbeats(within: 60)), id: "tellers")
                    }
                    let restarts = await node.server.metricsText().split(separator: "\n")
                        .first { $0.hasPrefix("ripple_feed_restarts_total ") }.flatMap { Int($0.split(separator: " ")[1]) }
                    #expect(restarts == 0, "the feed was started again \(restarts.map(String.init) ?? "?") times while it applied commits")
                }
            }
        }
    }
}
#endif
