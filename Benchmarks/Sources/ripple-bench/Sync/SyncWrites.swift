import Foundation
import PostgresNIO
import Ripple
import RippleServer
import RippleSync
import RippleSyncClient
import RippleTesting

/// W1–W3: the write path, through the Swift client and a node in this process, on one cluster.
///
/// * W1: a local write → the app's live query over the local store has it (`.immediate`), with
///   the client syncing the table vs the same write to the same table with no client (the
///   outbox's capture and numbering are the difference).
/// * W2: a local write on one client → in Postgres → a second client's local live query has it,
///   p50/p99, vs the floor: an INSERT whose trigger NOTIFYs, until LISTEN on another connection
///   hears it.
/// * W3: 10,000 mutations written offline (one local transaction each), then the client
///   connects: time until every one is applied and settled, and the pushes it took; beside the
///   same 10,000 updates sent to Postgres on one connection in transactions of 100.
struct SyncWrites {
    let samples: Int
    let offline: Int

    static let rules = #"{"tables": {"items": {"read": true, "write": true}}}"#
    static let query = QueryDescription(table: "items", order: [OrderDescription(column: "id")])
    static let rows = 1_000

    func run(_ chosen: [SyncWorkload]) async -> Int {
        var failures = 0
        do {
            SyncProgress.phase = "W: starting PostgreSQL"
            try await SyncCluster.with { cluster in
                try await cluster.psql("""
                    CREATE TABLE items(id int8 PRIMARY KEY, title text NOT NULL, n int8 NOT NULL);
                    INSERT INTO items SELECT i, 'item ' || i, 0 FROM generate_series(1, \(Self.rows)) AS i;
                    CREATE TABLE floor_items(id int8 PRIMARY KEY, n int8 NOT NULL);
                    CREATE FUNCTION floor_notify() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN PERFORM pg_notify('ripple_w2', NEW.id::text); RETURN NEW; END $$;
                    CREATE TRIGGER floor_items_notify AFTER INSERT ON floor_items FOR EACH ROW EXECUTE FUNCTION floor_notify();
                    """)
                SyncProgress.phase = "W: starting the node"
                try await SyncNode.with(cluster, tables: ["items"], name: "writes", adjust: { configuration in
                    configuration.rules = try! SyncRules(json: Data(Self.rules.utf8))
                }) { node in
                    if chosen.contains(.w1) { failures += await w1(node: node, cluster: cluster) }
                    if chosen.contains(.w2) { failures += await w2(node: node, cluster: cluster) }
                    if chosen.contains(.w3) { failures += await w3(node: node, cluster: cluster) }
                }
            }
        } catch {
            var lines = SyncLines(.w1)
            lines.error("setup", describe(error))
            return 1
        }
        return failures
    }

    // MARK: Devices

    /// A store with a client subscribed to every item, synced once.
    private struct Device {
        let store: Store
        let client: SyncClient
        let events: SyncMailbox<SyncClientEvent>
        let listener: Task<Void, Never>

        static func start(_ node: SyncNode, cluster: SyncCluster, name: String) async throws -> Device {
            let store = try Store(path: cluster.path("\(name).sqlite"))
            let token = try node.token(name)
            let client = SyncClient(url: node.url, store: store) { token }
            let events = SyncMailbox<SyncClientEvent>()
            let listener = Task { for await event in client.events { events.put(event) } }
            let device = Device(store: store, client: client, events: events, listener: listener)
            try await client.start()
            try await client.subscribe("items", SyncWrites.query)
            try await device.until { try store.read { db in
                try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = 'items'", as: Int.self) == 1
                    && db.fetchValue("SELECT count(*) FROM items", as: Int.self) == SyncWrites.rows
            } }
            return device
        }

        /// Waits (on the client's events, 60 s at most) until `condition` holds.
        func until(_ condition: () async throws -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while try await !condition() {
                guard ContinuousClock.now < deadline else { throw SyncBenchError("the client did not get there within 60 s") }
                switch try await events.take(within: 1) {
                case .serverError(let code, let message, _)?: throw SyncBenchError("the client heard \(code.rawValue): \(message)")
                case .localFailure(let message)?: throw SyncBenchError("the client failed: \(message)")
                case .rejected(let result)?: throw SyncBenchError("mutation \(result.id) was rejected: \(result.message ?? "")")
                default: continue
                }
            }
        }

        func stop() async {
            try? await withDeadline(10, "stopping a client") { await client.stop() }
            listener.cancel()
        }
    }

    /// An `.immediate` live query over `store`'s items: each event's instant and its row ids' n.
    private static func watch(_ store: Store) -> (Subscription, SyncMailbox<(at: ContinuousClock.Instant, rows: [Row])>) {
        let seen = SyncMailbox<(at: ContinuousClock.Instant, rows: [Row])>()
        let live = store.liveQuery(sql: "SELECT id, n FROM items WHERE id <= 100 ORDER BY id", identity: "id")
        let subscription = live.subscribe(on: .immediate) { event in seen.put((.now, event.snapshot)) }
        return (subscription, seen)
    }

    // MARK: W1

    private func w1(node: SyncNode, cluster: SyncCluster) async -> Int {
        var lines = SyncLines(.w1)
        Report.note("W1: a local write until the local live query has it, \(samples) writes with and without sync")
        var results: [String: SyncLatencies] = [:]
        do {
            SyncProgress.phase = "W1: sync off"
            let plain = try Store(path: cluster.path("w1-plain.sqlite"))
            try plain.write { db in
                try db.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, title TEXT, n INTEGER)")
                for id in 1...Self.rows { try db.execute("INSERT INTO items VALUES (?, ?, 0)", [id, "item \(id)"]) }
            }
            results["sync-off"] = try await timeLocalWrites(plain)
            SyncProgress.phase = "W1: sync on"
            let device = try await Device.start(node, cluster: cluster, name: "w1")
            results["ripple"] = try await timeLocalWrites(device.store)
            try await device.until { try await device.client.pendingMutations() == 0 }
            await device.stop()
        } catch {
            lines.error("ripple", describe(error))
            return lines.failures
        }
        for name in ["ripple", "sync-off"] { if let latencies = results[name] { lines.impl(name, latencies.fields) } }
        if let ours = results["ripple"], let floor = results["sync-off"] {
            let ratio = ours.percentile(0.5) / floor.percentile(0.5)
            lines.ratio("ripple/sync-off", [("p50_ratio", .number(ratio)), ("p99_ratio", .number(ours.percentile(0.99) / floor.percentile(0.99)))])
            lines.target("ripple/sync-off p50_ratio <= 1.2", ratio, met: ratio <= 1.2)
        }
        return lines.failures
    }

    /// Times `samples` writes of one row each (after a warm-up) until the store's live query
    /// delivers it.
    private func timeLocalWrites(_ store: Store) async throws -> SyncLatencies {
        let (subscription, seen) = Self.watch(store)
        defer { subscription.cancel() }
        _ = try await seen.take(within: 10)
        var latencies = SyncLatencies()
        for index in -20..<samples {
            let id = Int64(index + 20) % 100 + 1
            let start = ContinuousClock.now
            try store.write { db in try db.execute("UPDATE items SET n = ? WHERE id = ?", [Int64(index + 1_000_000), id]) }
            guard let (at, _) = try await seen.take(within: 10) else { throw SyncBenchError("the live query ended") }
            if index >= 0 { latencies.add(at - start) }
            // Spaced as a person's edits are: the client's push, the node and Postgres (on the
            // same two cores here) are done with one write before the next is timed.
            try await Task.sleep(for: .milliseconds(20))
        }
        return latencies
    }

    // MARK: W2

    private func w2(node: SyncNode, cluster: SyncCluster) async -> Int {
        var lines = SyncLines(.w2)
        Report.note("W2: a local write until a second client's live query has it, \(samples) writes; the floor: INSERT → NOTIFY → LISTEN")
        var results: [String: SyncLatencies] = [:]
        do {
            SyncProgress.phase = "W2: two clients"
            let writer = try await Device.start(node, cluster: cluster, name: "w2-writer")
            let reader = try await Device.start(node, cluster: cluster, name: "w2-reader")
            let (subscription, seen) = Self.watch(reader.store)
            _ = try await seen.take(within: 10)
            var latencies = SyncLatencies()
            var random = SeededGenerator(seed: 0x3A2)
            for index in -10..<samples {
                let id = Int64(index + 10) % 100 + 1
                let marker = Int64(2_000_000 + index)
                try await Task.sleep(for: .microseconds(2_000 + Int(random.next() % 10_000)))
                let start = ContinuousClock.now
                try writer.store.write { db in try db.execute("UPDATE items SET n = ? WHERE id = ?", [marker, id]) }
                var arrived: ContinuousClock.Instant?
                while arrived == nil {
                    guard let (at, rows) = try await seen.take(within: 10) else { throw SyncBenchError("the reader's live query ended") }
                    if rows.contains(where: { $0["id"] == .integer(id) && $0["n"] == .integer(marker) }) { arrived = at }
                }
                if index >= 0 { latencies.add(arrived! - start) }
            }
            subscription.cancel()
            results["ripple"] = latencies
            try await writer.until { try await writer.client.pendingMutations() == 0 }
            await writer.stop()
            await reader.stop()
            SyncProgress.phase = "W2: floor"
            results["insert-notify"] = try await notifyFloor(cluster)
        } catch {
            lines.error("ripple", describe(error))
            return lines.failures
        }
        for name in ["ripple", "insert-notify"] { if let latencies = results[name] { lines.impl(name, latencies.fields) } }
        if let ours = results["ripple"], let floor = results["insert-notify"] {
            lines.ratio("ripple/insert-notify", [("p50_ratio", .number(ours.percentile(0.5) / floor.percentile(0.5))),
                                                 ("p99_ratio", .number(ours.percentile(0.99) / floor.percentile(0.99)))])
            lines.target("ripple p50_us <= 20000", ours.percentile(0.5), met: ours.percentile(0.5) <= 20_000)
        }
        return lines.failures
    }

    /// An INSERT whose trigger NOTIFYs, from sending it until LISTEN on another connection hears it.
    private func notifyFloor(_ cluster: SyncCluster) async throws -> SyncLatencies {
        let writer = try await cluster.connect(id: 31)
        let listener = try await cluster.connect(id: 32)
        let arrivals = SyncMailbox<ContinuousClock.Instant>()
        let listening = SyncMailbox<Bool>()
        let loop = Task {
            defer { listening.finish(); arrivals.finish() }
            try await listener.listen(on: "ripple_w2") { notifications in
                listening.put(true)
                for try await _ in notifications { arrivals.put(.now) }
            }
        }
        defer { loop.cancel() }
        guard try await listening.take(within: 10) == true else { throw SyncBenchError("LISTEN failed") }
        var latencies = SyncLatencies()
        var random = SeededGenerator(seed: 0x3A3)
        for index in -10..<samples {
            try await Task.sleep(for: .microseconds(2_000 + Int(random.next() % 10_000)))
            let start = ContinuousClock.now
            try await writer.query("INSERT INTO floor_items VALUES (\(Int64(index + 10)), 1)", logger: quietLogger)
            guard let at = try await arrivals.take(within: 10) else { throw SyncBenchError("LISTEN ended") }
            if index >= 0 { latencies.add(at - start) }
        }
        try? await writer.close()
        try? await listener.close()
        return latencies
    }

    // MARK: W3

    private func w3(node: SyncNode, cluster: SyncCluster) async -> Int {
        var lines = SyncLines(.w3)
        Report.note("W3: \(offline) mutations written offline, then the client connects")
        do {
            SyncProgress.phase = "W3: offline writes"
            let device = try await Device.start(node, cluster: cluster, name: "w3")
            await device.client.stop()
            // (W1 and W2 wrote these rows before: the count starts where they left it.)
            let before = try await cluster.psql("SELECT sum(n) FROM items").trimmingCharacters(in: .whitespacesAndNewlines)
            for index in 0..<offline {
                try device.store.write { db in
                    try db.execute("UPDATE items SET n = n + 1 WHERE id = ?", [Int64(index % Self.rows) + 1])
                }
            }
            guard try await device.client.pendingMutations() == offline else {
                throw SyncBenchError("the outbox holds \(try await device.client.pendingMutations()) mutations, not \(offline)")
            }
            SyncProgress.phase = "W3: catching up"
            let start = ContinuousClock.now
            try await device.client.start()
            try await device.until { try await device.client.pendingMutations() == 0 }
            let seconds = (ContinuousClock.now - start).seconds
            // Every mutation took effect once: each item's n counts its updates.
            let total = try await cluster.psql("SELECT sum(n) FROM items").trimmingCharacters(in: .whitespacesAndNewlines)
            let expectedTotal = "\((Int64(before) ?? 0) + Int64(offline))"
            if total != expectedTotal { lines.error("ripple", "Postgres's items add up to \(total), not \(expectedTotal)") }
            await device.stop()
            lines.impl("ripple", [("mutations", .int(offline)), ("seconds", .number(seconds)),
                                  ("pushes", .int((offline + SyncClient.pushSize - 1) / SyncClient.pushSize))])

            SyncProgress.phase = "W3: floor"
            let connection = try await cluster.connect(id: 33)
            let floorStart = ContinuousClock.now
            var index = 0
            while index < offline {
                try await connection.query("BEGIN", logger: quietLogger)
                for _ in 0..<min(100, offline - index) {
                    try await connection.query("UPDATE items SET n = n + 1 WHERE id = \(Int64(index % Self.rows) + 1)", logger: quietLogger)
                    index += 1
                }
                try await connection.query("COMMIT", logger: quietLogger)
            }
            let floorSeconds = (ContinuousClock.now - floorStart).seconds
            try? await connection.close()
            lines.impl("postgres-batches", [("mutations", .int(offline)), ("seconds", .number(floorSeconds))])
            lines.ratio("ripple/postgres-batches", [("seconds_ratio", .number(seconds / floorSeconds))])
            lines.target("ripple seconds <= 3", seconds, met: seconds <= 3)
        } catch {
            lines.error("ripple", describe(error))
        }
        return lines.failures
    }
}
