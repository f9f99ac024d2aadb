import Foundation
import Ripple
import RippleTesting

/// Workload O5: 10,000 live queries on one store, each on one owner's rows: what routing each
/// commit to the queries it concerns (Ripple's filter index) costs the subscriptions and the
/// writes. Ripple only: GRDB and the C floor have no index of their observers' filters.
///
/// The table is ``Item`` (100,000 rows, `owner = id % 10,000`, so 10 rows per owner, with an
/// index on `owner`); query `k` is `owner == k ORDER BY id`, delivered on one private serial
/// queue (as in O1–O3). Each write moves one row to another owner (`update(record)`), and waits
/// for both concerned queries' events: the old owner's without the row, the new owner's with it.
///
/// Beside it, the same writes on the same shape of store with no live query, back to back; the
/// same writes back to back with the 10,000 queries (the events are not waited for: once the
/// writes are done, every query's last event must show them); and, to show what the number of
/// queries costs a write, writes moving rows between owners 0 and 1
/// with those two queries subscribed alone, then among all 10,000 (each write waiting for both
/// events). The subscribed run comes first: the resident memory it reports is not blurred by
/// what an earlier run freed.
struct ObserveSubscribers {
    /// Timed writes, after ``ObserveBenchmark/warmUpWrites`` untimed ones.
    var writes: Int
    var realtimeWriter: Bool
    var directory: URL

    static let rows = 100_000
    static let owners = 10_000

    /// O5's record: `owner` is what every live query filters on.
    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var owner: Int
        var title: String
    }

    /// Subscribing the 10,000 queries: how long, and the resident memory they hold.
    struct Subscribing {
        /// From the first `subscribe` call to the last one returning.
        var calls: Duration
        /// From the first `subscribe` call to every initial event delivered.
        var initialEvents: Duration
        /// Resident memory after the initial events minus before the first call, in kB.
        var residentKilobytes: Int?
    }

    /// Runs the workload with the subscribers, then without; prints its lines, ratio and
    /// targets. Returns how many checks failed.
    func run() throws -> Int {
        Report.note("O5: ripple only: grdb and c have no index of their observers' filters to measure")
        let fields: [JSONField] = [("bench", "observe"), ("workload", "O5"), ("impl", "ripple")]
        var failures = 0
        var results: [Int: ObserveResult] = [:]
        var subscribed: Subscribing?
        for setup in [Setup.subscribed, .bare] {
            let subscribers = setup.subscribers
            do {
                let (result, subscribing) = try run(setup)
                for problem in result.problems { Report.emit(fields + [("error", .string(problem))]) }
                failures += result.problems.count
                if let subscribing {
                    subscribed = subscribing
                    let perSubscription = subscribing.residentKilobytes.map { Double($0 * 1024) / Double(subscribers) }
                    Report.emit(fields + [
                        ("rows", .int(Self.rows)), ("queries", .int(subscribers)),
                        ("subscribe_10k_s", .number(subscribing.initialEvents.milliseconds / 1000)),
                        ("subscribe_calls_s", .number(subscribing.calls.milliseconds / 1000)),
                        ("rss_delta_kb", subscribing.residentKilobytes.map { .int($0) } ?? .number(.nan)),
                        ("rss_per_subscription_bytes", .number(perSubscription ?? .nan)),
                    ])
                }
                var line = fields + [
                    ("rows", .int(Self.rows)), ("queries", .int(subscribers)), ("writes", .int(result.writeDurations.count)),
                    ("writes_per_s", .number(result.writesPerSecond)),
                    ("write_p50_us", .number(result.percentile(0.5, of: result.writeDurations))),
                ]
                if subscribers > 0 {
                    line += [("events", .int(result.latencies.count)),
                             ("p50_us", .number(result.percentile(0.5))), ("p99_us", .number(result.percentile(0.99))),
                             ("values", .int(result.values)), ("early", .int(result.early)),
                             ("writer", .string(result.writer)), ("waits", "2 events")]
                }
                Report.emit(line)
                results[subscribers] = result
            } catch {
                Report.emit(fields + [("queries", .int(subscribers)), ("error", .string("\(error)"))])
                failures += 1
            }
        }
        // The same writes back to back with the 10,000 queries, as the writes without any run:
        // what the queries cost the writer, without the wait for their events in each write.
        var backToBack: ObserveResult?
        do {
            let (result, _) = try run(.backToBack)
            for problem in result.problems { Report.emit(fields + [("error", .string(problem))]) }
            failures += result.problems.count
            Report.emit(fields + [
                ("rows", .int(Self.rows)), ("queries", .int(Self.owners)), ("waits", "no"),
                ("writes", .int(result.writeDurations.count)), ("writes_per_s", .number(result.writesPerSecond)),
                ("write_p50_us", .number(result.percentile(0.5, of: result.writeDurations))),
            ])
            backToBack = result
        } catch {
            Report.emit(fields + [("queries", .int(Self.owners)), ("waits", "no"), ("error", .string("\(error)"))])
            failures += 1
        }
        // Whether a write's cost depends on how many queries exist: the same writes, moving rows
        // between owners 0 and 1, with those two queries subscribed alone and among 10,000.
        var fewAndMany: [ObserveResult] = []
        for setup in [Setup.twoAlone, .twoAmongAll] {
            do {
                let (result, _) = try run(setup)
                for problem in result.problems { Report.emit(fields + [("error", .string(problem))]) }
                failures += result.problems.count
                Report.emit(fields + [
                    ("rows", .int(Self.rows)), ("queries", .int(setup.subscribers)), ("write_owners", .int(setup.writeOwners)),
                    ("writes", .int(result.writeDurations.count)), ("writes_per_s", .number(result.writesPerSecond)),
                    ("write_p50_us", .number(result.percentile(0.5, of: result.writeDurations))),
                    ("p50_us", .number(result.percentile(0.5))), ("p99_us", .number(result.percentile(0.99))),
                ])
                fewAndMany.append(result)
            } catch {
                Report.emit(fields + [("queries", .int(setup.subscribers)), ("error", .string("\(error)"))])
                failures += 1
            }
        }
        if fewAndMany.count == 2 {
            let ratio = fewAndMany[1].writesPerSecond / fewAndMany[0].writesPerSecond
            Report.emit([("bench", "observe"), ("workload", "O5"), ("ratio", "ripple-10k-subscribers/ripple-2-subscribers"),
                         ("writes_per_s_ratio", .number(ratio))])
            Report.emit([("bench", "observe"), ("workload", "O5"), ("target", "10k/2 subscribers writes_per_s ratio >= 0.9"),
                         ("value", .number(ratio)), ("met", .string(ratio >= 0.9 ? "yes" : "no"))])
        }
        emitRatioAndTargets(results, backToBack: backToBack, subscribing: subscribed)
        return failures
    }

    /// `--breakdown --workload O5`: where the writes' time goes with 10,000 subscribers, one
    /// setup at a time — the number of subscribers (2, 100, 10,000, the writes moving rows among
    /// the subscribed owners only, or among owners 0 and 1 only with 10,000 subscribed: the same
    /// two queries re-read after every write, never behind), the delivery (queue, or
    /// `.immediate`: the re-reads and handlers run inside the write call), and whether each
    /// write waits for its two events.
    func breakdown(only names: [String] = []) throws {
        let queue = Delivery.queue(DispatchQueue(label: "ripple-bench.observe.o5.breakdown"))
        let setups: [(String, Setup)] = [
            ("bare", .bare),
            ("bare_2_owners", Setup(subscribers: 0, writeOwners: 2, delivery: .immediate, waits: false)),
            ("queue_2_wait", Setup(subscribers: 2, writeOwners: 2, delivery: queue, waits: true)),
            ("queue_100_wait", Setup(subscribers: 100, writeOwners: 100, delivery: queue, waits: true)),
            ("queue_10k_wait_2_owners", Setup(subscribers: Self.owners, writeOwners: 2, delivery: queue, waits: true)),
            ("queue_10k_wait", .subscribed),
            ("queue_2_nowait", Setup(subscribers: 2, writeOwners: 2, delivery: queue, waits: false)),
            ("queue_10k_nowait", Setup(subscribers: Self.owners, writeOwners: Self.owners, delivery: queue, waits: false)),
            ("immediate_2", Setup(subscribers: 2, writeOwners: 2, delivery: .immediate, waits: true)),
            ("immediate_10k_2_owners", Setup(subscribers: Self.owners, writeOwners: 2, delivery: .immediate, waits: true)),
            ("immediate_10k", Setup(subscribers: Self.owners, writeOwners: Self.owners, delivery: .immediate, waits: true)),
        ]
        for (name, setup) in setups where names.isEmpty || names.contains(name) {
            let (result, _) = try run(setup)
            for problem in result.problems { Report.emit([("workload", "O5"), ("breakdown", .string(name)), ("error", .string(problem))]) }
            var line: [JSONField] = [("bench", "observe"), ("workload", "O5"), ("impl", "ripple"), ("breakdown", .string(name)),
                                     ("queries", .int(setup.subscribers)), ("write_owners", .int(setup.writeOwners)),
                                     ("writes", .int(result.writeDurations.count)),
                                     ("writes_per_s", .number(result.writesPerSecond)),
                                     ("write_p50_us", .number(result.percentile(0.5, of: result.writeDurations))),
                                     ("write_p99_us", .number(result.percentile(0.99, of: result.writeDurations)))]
            if setup.waits && !setup.delivery.isImmediateDelivery {
                line += [("p50_us", .number(result.percentile(0.5))), ("p99_us", .number(result.percentile(0.99)))]
            }
            Report.emit(line)
        }
        if names.isEmpty || names.contains("log_scan") { try logScan() }
    }

    /// `log_scan`: an idle live query told of a commit first reads the change log since the
    /// version it last read — every commit to its table since, whether it was told of them or
    /// not. This times that read (Ripple's own query on its `ripple_changes` table, copied here:
    /// update it if that changes) over `entries` commits, after the workload's writes with no
    /// subscriber.
    private func logScan() throws {
        _ = try run(.bare) { store in
            let newest = try store.read { db in
                try db.fetchAll("SELECT max(version) FROM ripple_changes").first?.values.first
            }
            guard case .integer(let version)? = newest else {
                throw ObserveFailure("log_scan: no version in ripple_changes")
            }
            let sql = "SELECT table_name, operation, exact_keys FROM ripple_changes WHERE version > ? AND version <= ? "
                + "AND table_name IN ('items', '*')"
            for entries in [1, 10, 100, writes] {
                var samples: [Double] = []
                let clock = ContinuousClock()
                for _ in 0..<51 {
                    let start = clock.now
                    let rows = try store.read { db in try db.fetchAll(sql, [version - Int64(entries), version]) }
                    samples.append(start.duration(to: clock.now).microseconds)
                    blackHole(rows)
                }
                var result = ObserveResult()
                result.latencies = samples
                Report.emit([("bench", "observe"), ("workload", "O5"), ("impl", "ripple"), ("breakdown", "log_scan"),
                             ("entries", .int(entries)), ("p50_us", .number(result.percentile(0.5)))])
            }
        }
    }

    /// The ratio of writes/s with and without subscribers, and the targets.
    private func emitRatioAndTargets(_ results: [Int: ObserveResult], backToBack: ObserveResult?, subscribing: Subscribing?) {
        func target(_ text: String, _ value: Double, _ met: Bool) {
            Report.emit([("bench", "observe"), ("workload", "O5"), ("target", .string(text)),
                         ("value", .number(value)), ("met", .string(met ? "yes" : "no"))])
        }
        // The writes/s target compares the same writes with and without subscribers: run
        // back to back, as the writes without any are. End to end (each write waiting for its two
        // events, which adds three thread wake-ups and two reads) is the stricter check.
        let runs = [(results[Self.owners], "ripple-10k-subscribers", "end to end, each write waiting for its two events"),
                    (backToBack, "ripple-10k-subscribers-back-to-back", "writes back to back, as without subscribers")]
        for case let (subscribed?, name, manner) in runs {
            guard let bare = results[0] else { break }
            let ratio = subscribed.writesPerSecond / bare.writesPerSecond
            let writeRatio = subscribed.percentile(0.5, of: subscribed.writeDurations)
                / bare.percentile(0.5, of: bare.writeDurations)
            Report.emit([("bench", "observe"), ("workload", "O5"), ("ratio", .string(name + "/ripple-no-subscribers")),
                         ("writes_per_s_ratio", .number(ratio)), ("write_p50_ratio", .number(writeRatio))])
            target("writes_per_s ratio >= 0.5 (\(manner))", ratio, ratio >= 0.5)
        }
        if let subscribed = results[Self.owners] {
            let p50 = subscribed.percentile(0.5)
            target("event p50_us <= 2000", p50, p50 <= 2000)
        }
        if let seconds = subscribing.map({ $0.initialEvents.milliseconds / 1000 }) {
            target("subscribe_10k_s <= 1", seconds, seconds <= 1)
        }
    }

    /// How one run subscribes and writes.
    struct Setup {
        /// Subscribes the queries of owners `0..<subscribers`.
        var subscribers: Int
        /// Writes move rows among owners `0..<writeOwners` (rows start at `id % owners`).
        var writeOwners: Int
        var delivery: Delivery
        /// Whether each write waits for its two events (else the writes run back to back).
        var waits: Bool

        /// The workload: 10,000 subscribers, each write waiting for its two events.
        static let subscribed = Setup(subscribers: ObserveSubscribers.owners, writeOwners: ObserveSubscribers.owners,
                                      delivery: .queue(DispatchQueue(label: "ripple-bench.observe.o5")), waits: true)
        /// Two queries alone (owners 0 and 1), each write moving a row between them and waiting.
        static let twoAlone = Setup(subscribers: 2, writeOwners: 2,
                                    delivery: .queue(DispatchQueue(label: "ripple-bench.observe.o5.two")), waits: true)
        /// The same two queries and writes among 10,000 subscribed queries.
        static let twoAmongAll = Setup(subscribers: ObserveSubscribers.owners, writeOwners: 2,
                                       delivery: .queue(DispatchQueue(label: "ripple-bench.observe.o5.all")), waits: true)
        /// The workload's writes back to back, as without live queries (each list checked once
        /// they are done).
        static let backToBack = Setup(subscribers: ObserveSubscribers.owners, writeOwners: ObserveSubscribers.owners,
                                      delivery: .queue(DispatchQueue(label: "ripple-bench.observe.o5.back-to-back")),
                                      waits: false)
        /// Its baseline: the same writes with no live query.
        static let bare = Setup(subscribers: 0, writeOwners: ObserveSubscribers.owners, delivery: .immediate, waits: false)
    }

    /// Seeds a store, subscribes `setup`'s queries, then makes its writes; then calls `after`
    /// with the store.
    func run(_ setup: Setup, after: (Store) throws -> Void = { _ in }) throws -> (ObserveResult, Subscribing?) {
        let subscribers = setup.subscribers
        let path = directory.appendingPathComponent("O5-\(UUID().uuidString).sqlite").path
        defer {
            for file in [path, path + "-wal", path + "-shm"] { try? FileManager.default.removeItem(atPath: file) }
        }
        Report.note("O5: seeding \(Self.rows) rows; \(subscribers) subscribers, \(writes) writes")
        let store = try Store(path: path)
        let items = try store.collection("items", of: Item.self)
        try items.insert(contentsOf: (0..<Self.rows).map { Item(id: $0, owner: $0 % Self.owners, title: "Item \($0)") })
        try store.write { db in try db.execute("CREATE INDEX items_owner ON items(owner)") }

        let mailbox = ObserveMailbox<Item>(queries: subscribers)
        var subscriptions: [Subscription] = []
        defer { subscriptions.forEach { $0.cancel() } }
        var subscribing: Subscribing?
        if subscribers > 0 {
            let resident = PeakMemory.residentNow()
            let clock = ContinuousClock()
            let start = clock.now
            subscriptions.reserveCapacity(subscribers)
            for owner in 0..<subscribers {
                let live = try items.filter(Column("owner") == owner).order(by: Column("id")).live()
                subscriptions.append(live.subscribe(on: setup.delivery, onError: { error in
                    mailbox.fail("ripple: query of owner \(owner) failed: \(error)")
                }) { event in
                    mailbox.post(query: owner, at: .now, event: event)
                })
            }
            let called = clock.now
            guard mailbox.waitForInitialEvents(timeout: ObserveBenchmark.timeout) else {
                throw ObserveFailure("no initial event from every query within \(Int(ObserveBenchmark.timeout)) s")
            }
            let delivered = clock.now
            let residentAfter = PeakMemory.residentNow()
            subscribing = Subscribing(calls: start.duration(to: called), initialEvents: start.duration(to: delivered),
                                      residentKilobytes: resident.flatMap { before in residentAfter.map { $0 - before } })
        }
        var result = try write(items, owners: setup.writeOwners, mailbox: setup.waits ? mailbox : nil)
        if subscribers > 0 && !setup.waits {
            // Not waited for, the events still come: each list ends as its query reads now.
            for owner in 0..<subscribers {
                let expected = try items.filter(Column("owner") == owner).order(by: Column("id")).fetchAll()
                guard mailbox.waitForLatest(query: owner, timeout: ObserveBenchmark.timeout, { $0 == expected }) else {
                    result.problems.append("the last event of the query of owner \(owner) does not show the writes")
                    break
                }
            }
            result.problems += mailbox.errors
        }
        try after(store)
        return (result, subscribing)
    }

    /// The warm-up and timed writes: each moves a random row of owners `0..<ownerCount` to a
    /// random other one of them (the same writes with and without subscribers: the same seed),
    /// and waits for its two events when there is a `mailbox`.
    private func write(_ items: RecordCollection<Item>, owners ownerCount: Int,
                       mailbox: ObserveMailbox<Item>?) throws -> ObserveResult {
        var owners = (0..<Self.rows).map { $0 % Self.owners }
        let movable = (0..<Self.rows).filter { owners[$0] < ownerCount }
        var random = SeededGenerator(seed: Workloads.seed ^ 0x05)
        var result = ObserveResult()
        let writer = ObserveWriterPriority(realtime: realtimeWriter)
        let clock = ContinuousClock()
        var start = clock.now
        let warmUp = ObserveBenchmark.warmUpWrites
        for index in -warmUp..<writes {
            if index == 0 {
                mailbox?.resetValues()
                start = clock.now
            }
            let id = movable[Int.random(in: 0..<movable.count, using: &random)]
            let old = owners[id]
            let new = (old + Int.random(in: 1..<ownerCount, using: &random)) % ownerCount
            let record = Item(id: id, owner: new, title: "Item \(id), write \(index + warmUp)")
            let leaves: ObserveMailbox<Item>.Check = { snapshot in !snapshot.contains { $0.id == id } }
            let arrives: ObserveMailbox<Item>.Check = { snapshot in snapshot.contains { $0 == record } }
            mailbox?.expect([(old, leaves), (new, arrives)])
            let called = clock.now
            let committed = try writer.run {
                try items.update(record)
                return clock.now
            }
            owners[id] = new
            if let mailbox {
                guard let deliveries = mailbox.waitForAllExpected(timeout: ObserveBenchmark.timeout) else {
                    result.problems.append("write \(index) (row \(id), owner \(old) → \(new)): not both events within "
                                           + "\(Int(ObserveBenchmark.timeout)) s")
                    break
                }
                if deliveries.contains(where: { $0.changes == 0 }) {
                    result.problems.append("write \(index): a matching event has an empty changeset")
                }
                if index >= 0 {
                    for delivery in deliveries {
                        let latency = committed.duration(to: delivery.time)
                        if latency < .zero { result.early += 1 }
                        result.latencies.append(max(latency, .zero).microseconds)
                    }
                }
            }
            if index >= 0 { result.writeDurations.append(called.duration(to: committed).microseconds) }
        }
        let elapsed = start.duration(to: clock.now)
        result.writesPerSecond = Double(result.writeDurations.count) / (elapsed.milliseconds / 1000)
        if let mailbox {
            result.values = mailbox.values
            result.problems += mailbox.errors
        }
        result.writer = writer.description
        return result
    }
}

private extension Delivery {
    /// Whether handlers run inside the write call (Ripple's own test is internal).
    var isImmediateDelivery: Bool {
        if case .immediate = self { return true }
        return false
    }
}
