import Foundation
import PostgresNIO
import RippleServer
import RippleSync

/// S3: how many Postgres commits per second the node turns into frames when each commit changes
/// the one row of one subscription, with 100 subscriptions and with 10,000.
///
/// Each case has its own cluster and node: a table `counters(id, value)` of 10,000 rows, 100
/// sockets holding 1 or 100 subscriptions each, subscription `k` a distinct query (`id = k`).
/// pgbench (4 clients, 2 threads) then makes `commits` commits as fast as Postgres takes them,
/// each `UPDATE counters SET value = value + 1` of a random subscribed row; every commit is one
/// frame to one socket. The node's rate is the frames delivered over the time from pgbench's
/// start to the last frame, or to the deadline (`drained` "no") when the node has not delivered
/// them all by then.
///
/// When pgbench outruns the node (`bound` "node": the last frame came well after pgbench ended),
/// the node works through a backlog at its full speed, and that speed is the highest commit rate
/// it keeps up with (offered less, its lag stays bounded; offered more, it grows). When the node
/// keeps up with pgbench (`bound` "postgres"), the rate is pgbench's and the node's is higher.
struct SyncFanout {
    let commits: Int

    static let sockets = 100
    static let tableRows = 10_000
    static let cases = [100, 10_000]
    static let targetRatio = 0.8
    /// The lag beyond which the node, not Postgres, set the pace.
    static let nodeBoundLag = Duration.milliseconds(250)
    /// How long a case waits for its frames (the run stays within its time).
    static let deadline = Duration.seconds(30)

    struct CaseResult {
        var subscriptions: Int
        var commits: Int
        var nodeRate: Double
        var postgresRate: Double
        var seconds: Double
        var delivered: Int
        var lagEnd: Duration
        var subscribeSeconds: Double
    }

    func run() async -> Int {
        var lines = SyncLines(.s3)
        var results: [Int: CaseResult] = [:]
        for subscriptions in Self.cases {
            Report.note("S3: \(subscriptions) subscriptions on \(Self.sockets) sockets, \(commits) commits")
            SyncProgress.phase = "S3: \(subscriptions) subscriptions: setting up"
            do {
                let result = try await runCase(subscriptions: subscriptions)
                results[subscriptions] = result
                lines.impl("ripple", [("subscriptions", .int(subscriptions)), ("sockets", .int(Self.sockets)),
                                      ("commits", .int(result.commits)), ("delivered", .int(result.delivered)),
                                      ("writes_per_s", .number(result.nodeRate)), ("seconds", .number(result.seconds)),
                                      ("drained", .string(result.delivered == result.commits ? "yes" : "no")),
                                      ("lag_end_ms", .number(result.lagEnd.seconds * 1000)),
                                      ("bound", .string(result.lagEnd > Self.nodeBoundLag ? "node" : "postgres")),
                                      ("subscribe_seconds", .number(result.subscribeSeconds))])
                lines.impl("pgbench", [("subscriptions", .int(subscriptions)), ("commits", .int(result.commits)),
                                       ("writes_per_s", .number(result.postgresRate))])
            } catch {
                lines.error("ripple", "\(subscriptions) subscriptions: \(describe(error))")
            }
        }
        if let few = results[Self.cases[0]], let many = results[Self.cases[1]] {
            let ratio = many.nodeRate / few.nodeRate
            lines.ratio("ripple \(Self.cases[1])/\(Self.cases[0])", [("writes_per_s_ratio", .number(ratio))])
            lines.target("ripple writes_per_s \(Self.cases[1])/\(Self.cases[0]) >= 0.8", ratio, met: ratio >= Self.targetRatio)
            if ratio < Self.targetRatio {
                func ms(_ rate: Double) -> String { JSONValue.number(1000 / rate).json + " ms" }
                Report.note("S3: a commit that changes one subscription's row costs the node \(ms(few.nodeRate)) with "
                            + "\(Self.cases[0]) subscriptions over its table and \(ms(many.nodeRate)) with \(Self.cases[1]): "
                            + "the cost follows the subscriptions over the table, not those the commit changes")
            }
        }
        return lines.failures
    }

    private func runCase(subscriptions: Int) async throws -> CaseResult {
        let cluster = try await SyncCluster.start()
        do {
            let result = try await runCase(subscriptions: subscriptions, cluster: cluster)
            await cluster.stop()
            return result
        } catch {
            await cluster.stop()
            throw error
        }
    }

    private func runCase(subscriptions: Int, cluster: SyncCluster) async throws -> CaseResult {
        try await cluster.psql("""
            CREATE TABLE counters(id int8 PRIMARY KEY, value int8 NOT NULL);
            INSERT INTO counters SELECT n, 0 FROM generate_series(1, \(Self.tableRows)) AS n;
            """)
        let node = try await SyncNode.start(cluster, tables: ["counters"])
        let tally = SyncFanoutTally()
        var sockets: [SyncSocket] = []
        do {
            for _ in 0..<Self.sockets { sockets.append(try await SyncSocket(url: node.url, observer: tally.observe)) }
            let token = try node.token()
            for socket in sockets { try await socket.send(.hello(protocol: SyncProtocol.version, token: token)) }
            try await tally.wait(within: 30, "welcomes") { $0.welcomes >= Self.sockets }
            let subscribed = ContinuousClock.now
            let perSocket = subscriptions / Self.sockets
            for (index, socket) in sockets.enumerated() {
                for offset in 0..<perSocket {
                    let key = index * perSocket + offset + 1
                    try await socket.send(.subscribe(id: "c\(key)", query: QueryDescription(
                        table: "counters", filter: .compare(column: "id", op: .equal, value: .integer(Int64(key)))), resume: nil))
                }
            }
            try await tally.wait(within: 300, "snapshots") { $0.snapshots >= subscriptions }
            let subscribeSeconds = (ContinuousClock.now - subscribed).seconds

            let result = try await drive(subscriptions: subscriptions, cluster: cluster, tally: tally)
            await Self.stop(node, sockets)
            return CaseResult(subscriptions: subscriptions, commits: result.commits, nodeRate: result.nodeRate,
                              postgresRate: result.postgresRate, seconds: result.seconds, delivered: result.delivered,
                              lagEnd: result.lagEnd, subscribeSeconds: subscribeSeconds)
        } catch {
            await Self.stop(node, sockets)
            throw error
        }
    }

    /// Stops the node (it may still be working through a backlog), then closes the sockets.
    private static func stop(_ node: SyncNode, _ sockets: [SyncSocket]) async {
        SyncProgress.phase = "S3: stopping the node and closing the sockets"
        await node.stop()
        await withTaskGroup(of: Void.self) { group in
            for socket in sockets { group.addTask { await socket.close() } }
        }
    }

    private struct Drive {
        var commits: Int
        var delivered: Int
        var nodeRate: Double
        var postgresRate: Double
        var seconds: Double
        var lagEnd: Duration
    }

    /// Runs pgbench and waits for every frame, or for the deadline.
    private func drive(subscriptions: Int, cluster: SyncCluster, tally: SyncFanoutTally) async throws -> Drive {
        let script = cluster.path("s3.sql")
        try "\\set k random(1, \(subscriptions))\nUPDATE counters SET value = value + 1 WHERE id = :k;\n"
            .write(toFile: script, atomically: true, encoding: .utf8)
        let clients = 4
        let arguments = ["-n", "-c", "\(clients)", "-j", "2", "-t", "\(commits / clients)", "-f", script]
        SyncProgress.phase = "S3: \(subscriptions) subscriptions: pgbench and frames"
        tally.startCounting()
        let postgres = cluster.postgres
        let started = ContinuousClock.now
        let output = try await offload { try postgres.pgbench(arguments) }
        let ended = ContinuousClock.now
        guard let processed = Self.number(after: "number of transactions actually processed: ", in: output),
              let tps = Self.number(after: "tps = ", in: output) else {
            throw SyncBenchError("pgbench printed no count: \(output)")
        }
        let count = Int(processed)
        let deadline = started + Self.deadline
        var counts = tally.counts
        while counts.changes < count, ContinuousClock.now < deadline, counts.errors.isEmpty {
            try await Task.sleep(for: .milliseconds(5))
            counts = tally.counts
        }
        if !counts.errors.isEmpty { throw SyncBenchError("the server sent errors: \(counts.errors.prefix(3))") }
        if counts.changes > count { throw SyncBenchError("\(counts.changes) frames for \(count) commits") }
        let drained = counts.changes == count
        let last = drained ? counts.lastArrival ?? ended : ContinuousClock.now
        let seconds = (last - started).seconds
        if !drained { Report.note("S3: \(subscriptions) subscriptions: \(counts.changes) of \(count) frames within \(Self.deadline)") }
        return Drive(commits: count, delivered: counts.changes, nodeRate: Double(counts.changes) / seconds, postgresRate: tps,
                     seconds: seconds, lagEnd: last > ended ? last - ended : .zero)
    }

    /// The number printed after `label` in pgbench's output (`10000/10000` reads as 10000).
    static func number(after label: String, in output: String) -> Double? {
        guard let range = output.range(of: label) else { return nil }
        let digits = output[range.upperBound...].prefix { $0.isNumber || $0 == "." }
        return Double(digits)
    }
}

/// What S3's sockets received, counted on their tasks as frames arrive.
final class SyncFanoutTally: @unchecked Sendable {   // `stored` is guarded by `lock`
    struct Counts {
        var welcomes = 0
        /// Subscriptions whose snapshot arrived.
        var snapshots = 0
        /// Changeset frames since ``startCounting()``.
        var changes = 0
        var counting = false
        var lastArrival: ContinuousClock.Instant?
        var errors: [String] = []
    }

    private let lock = NSLock()
    private var stored = Counts()

    var counts: Counts { lock.withLock { stored } }

    func startCounting() { lock.withLock { stored.counting = true } }

    /// Counts one frame (called by every socket's task).
    func observe(_ text: String, _ at: ContinuousClock.Instant) {
        if text.hasPrefix(#"{"type":"changes""#) {
            let snapshots = text.contains(#","snapshots":"#) ? text.components(separatedBy: #"{"basis":"#).count - 1 : 0
            let isChangeset = text.contains(#","changesets":"#)
            lock.withLock {
                stored.snapshots += snapshots
                if stored.counting && isChangeset {
                    stored.changes += 1
                    stored.lastArrival = max(stored.lastArrival ?? at, at)
                }
            }
        } else if text.hasPrefix(#"{"type":"welcome""#) {
            lock.withLock { stored.welcomes += 1 }
        } else if text.hasPrefix(#"{"type":"error""#) {
            lock.withLock { stored.errors.append(text) }
        }
    }

    /// Waits (polling every 5 ms) until `condition` holds.
    ///
    /// - Throws: ``SyncBenchError`` naming `what` after `seconds`, or when the server sent an error.
    func wait(within seconds: Double, _ what: String, until condition: (Counts) -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while true {
            let counts = counts
            if condition(counts) { return }
            if let error = counts.errors.first { throw SyncBenchError("the server sent \(error)") }
            if ContinuousClock.now >= deadline { throw SyncBenchError("not all \(what) came within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
