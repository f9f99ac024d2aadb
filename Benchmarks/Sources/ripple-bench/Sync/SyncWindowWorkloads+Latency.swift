import Foundation
import PostgresNIO
import Ripple
import RippleSync
import RippleServer
import RippleSyncClient
import RippleTesting

/// S2's figures by impl, and the lines they make.
struct SyncLatencyResults {
    /// Commit → arrival, by impl (`ripple`, `ripple-client`, `peek-floor`, `poll-peek`, `notify`).
    var latencies: [String: SyncLatencies] = [:]
    /// How long the writer's statement took until Postgres acknowledged it, by impl.
    var commits: [String: SyncLatencies] = [:]
    var errors: [(impl: String, message: String)] = []

    static let order = ["ripple", "ripple-client", "peek-floor", "poll-peek", "notify"]
    static let targetP50 = 10_000.0
    static let targetP99 = 50_000.0
    static let targetFloorRatio = 3.0

    /// Prints the lines, ratios and targets; returns how many checks failed.
    func emit() -> Int {
        var lines = SyncLines(.s2)
        for (impl, message) in errors { lines.error(impl, message) }
        for impl in Self.order {
            guard let latency = latencies[impl] else { continue }
            lines.impl(impl, latency.fields + [("commit_p50_us", .number(commits[impl]?.percentile(0.5) ?? .nan))])
        }
        guard let ripple = latencies["ripple"] else { return lines.failures }
        for peer in ["peek-floor", "poll-peek", "notify"] {
            guard let other = latencies[peer] else { continue }
            lines.ratio("ripple/\(peer)", [("p50_ratio", .number(ripple.percentile(0.5) / other.percentile(0.5))),
                                           ("p99_ratio", .number(ripple.percentile(0.99) / other.percentile(0.99)))])
        }
        let (p50, p99) = (ripple.percentile(0.5), ripple.percentile(0.99))
        lines.target("ripple p50_us <= 10000", p50, met: p50 <= Self.targetP50)
        lines.target("ripple p99_us <= 50000", p99, met: p99 <= Self.targetP99)
        if let floor = latencies["peek-floor"] {
            let ratio = p50 / floor.percentile(0.5)
            lines.target("ripple/peek-floor p50_ratio <= 3", ratio, met: ratio <= Self.targetFloorRatio)
            if ratio > Self.targetFloorRatio, let poll = latencies["poll-peek"]?.percentile(0.5) {
                func us(_ value: Double) -> String { JSONValue.number(value).json + " µs" }
                Report.note("S2: of ripple's p50 \(us(p50)), the node's way to the changes alone (poll-peek: a poll every \(SyncServerConfiguration.defaultPollInterval), \(SyncServerConfiguration.defaultActivePollInterval) while commits come, "
                            + "peek, advance, peek) takes \(us(poll)) where a bare peek loop takes "
                            + "\(us(floor.percentile(0.5))); the other \(us(p50 - poll)) go to applying the commit to the replica, "
                            + "re-evaluating the subscription and sending its frame")
            }
        }
        return lines.failures
    }
}

extension SyncWindowWorkloads {
    /// Untimed commits before the timed ones (connections, statement caches, first allocations).
    static let warmUpCommits = 10

    /// S2's ripple impls: a raw socket holding the window (the frame arrives), then the Swift
    /// client holding it in its local store (the frame is applied). Each alone on the node.
    func measureRipple(node: SyncNode, cluster: SyncCluster, into results: inout SyncLatencyResults) async {
        Report.note("S2: ripple, \(samples) commits (socket), then \(samples) (Swift client)")
        // Each peek decodes the WAL from the slot's restart point (Postgres moves it at its
        // standby snapshots, every 15 s): after a burst of commits, the node re-reads the burst.
        if let slots = try? await cluster.psql("""
            SELECT string_agg(slot_name || ': ' || pg_wal_lsn_diff(confirmed_flush_lsn, restart_lsn)::bigint || ' bytes', ', ')
            FROM pg_replication_slots
            """) {
            Report.note("S2: WAL between each slot's restart point and its confirmed position: \(slots.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        SyncProgress.phase = "S2: ripple (socket)"
        let writer: PostgresConnection
        do {
            writer = try await cluster.connect(id: 21)
        } catch {
            results.errors.append(("ripple", describe(error)))
            return
        }
        do {
            let (socket, first) = try await Self.subscribeWindow(node)
            let ids = try Self.windowIDs(first)
            do {
                let (latency, commit) = try await timeCommits(writer: writer, ids: ids, tag: "socket") {
                    try await socket.nextChanges(within: 10).at
                }
                (results.latencies["ripple"], results.commits["ripple"]) = (latency, commit)
            } catch {
                results.errors.append(("ripple", describe(error)))
            }
            await socket.close()
            try await measureClient(node: node, cluster: cluster, writer: writer, ids: ids, into: &results)
        } catch {
            results.errors.append(("ripple", describe(error)))
        }
        try? await writer.close()
    }

    private func measureClient(node: SyncNode, cluster: SyncCluster, writer: PostgresConnection, ids: [Int64],
                               into results: inout SyncLatencyResults) async throws {
        SyncProgress.phase = "S2: ripple-client"
        let store = try Store(path: cluster.path("client-s2.sqlite"))
        let token = try node.token()
        let client = SyncClient(url: node.url, store: store) { token }
        let events = SyncMailbox<(event: SyncClientEvent, at: ContinuousClock.Instant)>()
        let listener = Task {
            for await event in client.events { events.put((event, .now)) }
        }
        /// The next instant the client applied a frame changing the window.
        func applied() async throws -> ContinuousClock.Instant {
            while let (event, at) = try await events.take(within: 10) {
                switch event {
                case .applied(_, let subscriptions) where subscriptions.contains("todos"): return at
                case .serverError(let code, let message, _): throw SyncBenchError("the client heard \(code.rawValue): \(message)")
                case .localFailure(let message): throw SyncBenchError("the client failed: \(message)")
                case .disconnected(let reason): throw SyncBenchError("the client was disconnected: \(reason)")
                default: continue
                }
            }
            throw SyncBenchError("the client's events ended")
        }
        do {
            try await client.start()
            try await client.subscribe("todos", Self.window)
            _ = try await applied()
            let (latency, commit) = try await timeCommits(writer: writer, ids: ids, tag: "client", arrival: applied)
            (results.latencies["ripple-client"], results.commits["ripple-client"]) = (latency, commit)
        } catch {
            results.errors.append(("ripple-client", describe(error)))
        }
        try? await withDeadline(10, "stopping the Swift client") { await client.stop() }
        listener.cancel()
    }

    /// S2's floors, with the node stopped: a bare peek loop on a slot of its own, the node's way
    /// to the changes without applying them, and NOTIFY.
    func measureFloors(cluster: SyncCluster, into results: inout SyncLatencyResults) async {
        Report.note("S2: peek-floor, poll-peek and notify, \(samples) commits each")
        let writer: PostgresConnection
        do {
            writer = try await cluster.connect(id: 22)
        } catch {
            results.errors.append(("peek-floor", describe(error)))
            return
        }
        do {
            let (latency, commit) = try await peekFloor(cluster: cluster, writer: writer, ids: (1...Int64(Self.rows)).map { $0 })
            (results.latencies["peek-floor"], results.commits["peek-floor"]) = (latency, commit)
        } catch {
            results.errors.append(("peek-floor", describe(error)))
        }
        do {
            let (latency, commit) = try await pollPeek(cluster: cluster, writer: writer, ids: (1...Int64(Self.rows)).map { $0 })
            (results.latencies["poll-peek"], results.commits["poll-peek"]) = (latency, commit)
        } catch {
            results.errors.append(("poll-peek", describe(error)))
        }
        do {
            let (latency, commit) = try await notifyFloor(cluster: cluster, writer: writer)
            (results.latencies["notify"], results.commits["notify"]) = (latency, commit)
        } catch {
            results.errors.append(("notify", describe(error)))
        }
        try? await writer.close()
    }

    /// The floor of the design: a loop that peeks the slot back to back (the same call and
    /// options as the node's feed, data included) and advances it past what it saw; a commit has
    /// arrived when a peek returns it.
    private func peekFloor(cluster: SyncCluster, writer: PostgresConnection,
                           ids: [Int64]) async throws -> (SyncLatencies, SyncLatencies) {
        SyncProgress.phase = "S2: peek-floor"
        let peeker = try await cluster.connect(id: 23)
        try await peeker.execute("SELECT 1 FROM pg_create_logical_replication_slot('ripple_bench_peek', 'pgoutput')")
        let arrivals = SyncMailbox<ContinuousClock.Instant>()
        let running = SyncLocked(true)
        let loop = Task {
            defer { arrivals.finish() }
            while running.withLock({ $0 }) {
                var last: String?
                let rows = try await peeker.query("""
                    SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('ripple_bench_peek', NULL, 10000,
                        'proto_version', '1', 'publication_names', 'ripple_sync', 'messages', 'true')
                    """, logger: quietLogger)
                for try await (lsn, _) in rows.decode((String, ByteBuffer).self) { last = lsn }
                guard let last else { continue }
                arrivals.put(.now)
                try await peeker.execute("SELECT 1 FROM pg_replication_slot_advance('ripple_bench_peek', \(last)::pg_lsn)")
            }
        }
        let result: Result<(SyncLatencies, SyncLatencies), any Error>
        do {
            result = .success(try await timeCommits(writer: writer, ids: ids, tag: "peek") {
                guard let at = try await arrivals.take(within: 10) else { throw SyncBenchError("the peek loop ended") }
                return at
            })
        } catch {
            result = .failure(error)
        }
        running.withLock { $0 = false }
        if case .failure(let error) = try await withDeadline(10, "the peek loop's end", { await loop.result }) {
            Report.note("S2: the peek loop failed: \(describe(error))")
        }
        try? await peeker.execute("SELECT pg_drop_replication_slot('ripple_bench_peek')")
        try? await peeker.close()
        return try result.get()
    }

    /// The node's own way to the changes, without applying them (where S2's time goes): its
    /// feed's loop — `pg_current_wal_flush_lsn()` on the node's default schedule (every
    /// `pollInterval`, every `activePollInterval` for a while after the WAL moved) until it
    /// moves, then a peek (the session's text forms set once), an
    /// advance past what it returned, and a peek again until empty.
    private func pollPeek(cluster: SyncCluster, writer: PostgresConnection,
                          ids: [Int64]) async throws -> (SyncLatencies, SyncLatencies) {
        SyncProgress.phase = "S2: poll-peek"
        let reader = try await cluster.connect(id: 25)
        try await reader.execute("SELECT 1 FROM pg_create_logical_replication_slot('ripple_bench_poll', 'pgoutput')")
        let arrivals = SyncMailbox<ContinuousClock.Instant>()
        let running = SyncLocked(true)
        // The session's text forms, once (as the node's feed sets them once per connection).
        try await reader.execute("""
            SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO, MDY', false),
                   set_config('bytea_output', 'hex', false), set_config('extra_float_digits', '1', false)
            """)
        let loop = Task {
            defer { arrivals.finish() }
            var seen = ""
            var movedAt = ContinuousClock.now - ReplicaFeed.activeWindow
            while running.withLock({ $0 }) {
                var flushed = ""
                for try await text in try await reader.query("SELECT pg_current_wal_flush_lsn()::text", logger: quietLogger)
                    .decode(String.self) { flushed = text }
                guard flushed != seen else {
                    // The node's schedule: more often for a while after the WAL moved.
                    let active = ContinuousClock.now - movedAt < ReplicaFeed.activeWindow
                    try await Task.sleep(for: active ? SyncServerConfiguration.defaultActivePollInterval
                                                     : SyncServerConfiguration.defaultPollInterval)
                    continue
                }
                movedAt = .now
                while true {
                    var last: String?
                    let rows = try await reader.query("""
                        SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('ripple_bench_poll', NULL, 10000,
                            'proto_version', '1', 'publication_names', 'ripple_sync', 'messages', 'true')
                        """, logger: quietLogger)
                    for try await (lsn, _) in rows.decode((String, ByteBuffer).self) { last = lsn }
                    guard let last else { break }
                    arrivals.put(.now)
                    try await reader.execute("SELECT 1 FROM pg_replication_slot_advance('ripple_bench_poll', \(last)::pg_lsn)")
                }
                seen = flushed
            }
        }
        let result: Result<(SyncLatencies, SyncLatencies), any Error>
        do {
            result = .success(try await timeCommits(writer: writer, ids: ids, tag: "poll") {
                guard let at = try await arrivals.take(within: 10) else { throw SyncBenchError("the poll loop ended") }
                return at
            })
        } catch {
            result = .failure(error)
        }
        running.withLock { $0 = false }
        if case .failure(let error) = try await withDeadline(10, "the poll loop's end", { await loop.result }) {
            Report.note("S2: the poll loop failed: \(describe(error))")
        }
        try? await reader.execute("SELECT pg_drop_replication_slot('ripple_bench_poll')")
        try? await reader.close()
        return try result.get()
    }

    /// A NOTIFY round trip: NOTIFY on the writer's connection until LISTEN on another hears it.
    private func notifyFloor(cluster: SyncCluster, writer: PostgresConnection) async throws -> (SyncLatencies, SyncLatencies) {
        SyncProgress.phase = "S2: notify"
        let listener = try await cluster.connect(id: 24)
        let arrivals = SyncMailbox<ContinuousClock.Instant>()
        let listening = SyncMailbox<Bool>()
        let loop = Task {
            defer {
                listening.finish()
                arrivals.finish()
            }
            try await listener.listen(on: "ripple_bench") { notifications in
                listening.put(true)
                for try await _ in notifications { arrivals.put(.now) }
            }
        }
        guard try await listening.take(within: 10) == true else { throw SyncBenchError("LISTEN failed: \(await loop.result)") }
        let result: Result<(SyncLatencies, SyncLatencies), any Error>
        do {
            result = .success(try await timeCommits(writer: writer, statement: { _ in "NOTIFY ripple_bench" }) {
                guard let at = try await arrivals.take(within: 10) else { throw SyncBenchError("LISTEN ended") }
                return at
            })
        } catch {
            result = .failure(error)
        }
        loop.cancel()
        try? await listener.close()
        _ = try? await withDeadline(10, "LISTEN's end") { await loop.result }
        return try result.get()
    }

    /// Times `samples` commits (after the warm-up): each UPDATEs the title of the next of `ids`,
    /// from sending it until `arrival` returns the instant it arrived. Each commit waits 2–12 ms
    /// after the previous one arrived, so that it never shares a poll or a peek with another.
    private func timeCommits(writer: PostgresConnection, ids: [Int64], tag: String,
                             arrival: () async throws -> ContinuousClock.Instant) async throws -> (SyncLatencies, SyncLatencies) {
        try await timeCommits(writer: writer, statement: { index in
            let id = ids[(index + Self.warmUpCommits) * 37 % ids.count]
            return "UPDATE todos SET title = \("Todo \(id): \(tag) sample \(index)") WHERE id = \(id)"
        }, arrival: arrival)
    }

    func timeCommits(writer: PostgresConnection, statement: (Int) -> PostgresQuery,
                             arrival: () async throws -> ContinuousClock.Instant) async throws -> (SyncLatencies, SyncLatencies) {
        var random = SeededGenerator(seed: 0x5C2)
        var latencies = SyncLatencies()
        var commits = SyncLatencies()
        for index in -Self.warmUpCommits..<samples {
            try await Task.sleep(for: .microseconds(2_000 + Int(random.next() % 10_000)))
            let start = ContinuousClock.now
            try await writer.execute(statement(index))
            let acknowledged = ContinuousClock.now
            let arrived = try await arrival()
            guard index >= 0 else { continue }
            latencies.add(arrived - start)
            commits.add(acknowledged - start)
        }
        return (latencies, commits)
    }

    /// The ids of the window's rows, in its order, from its snapshot frame.
    static func windowIDs(_ frame: SyncSocket.Frame) throws -> [Int64] {
        guard case .changes(_, let snapshots, _) = try frame.message(), let snapshot = snapshots.values.first,
              let key = snapshot.key.first else { throw SyncBenchError("the first frame holds no snapshot") }
        return try snapshot.rows.map { row in
            guard case .integer(let id) = row[key] else { throw SyncBenchError("the key \(row[key]) is not an integer") }
            return id
        }
    }
}
