import Foundation
import PostgresNIO
import RippleServer
import RippleSync

/// N1 and N2: one node (in this process) holding 15,000 WebSockets and 50,000 subscriptions,
/// from a load generator of three processes (``SyncScaleChild``), each connecting from its own
/// 127.0.0.x address; then the same clients against the fan-out floor (``FloorServer``).
///
/// * N1: connect + hello + subscribe + snapshot for every socket (`own`, one row each): the time
///   from the go to the last snapshot, and the node's memory per socket (its resident memory
///   before and after); then the other subscriptions (``ScalePlan``), 50,000 in all, and the
///   memory per subscription. One socket beyond the node's limit (`maxSockets` 15,000) must get
///   `retry_later`.
/// * N2: a psql-like autocommit `UPDATE hot SET n = n + 1 WHERE id = 1` (the row 10,000 sockets
///   hold through one shared query) until all 10,000 clients have its frame: the latency of each
///   client, p50/p99 over `rounds` commits; the same for the shared row of `mine` (10,000
///   per-user queries, each holding it); beside the floor — one precomputed frame written to
///   the same 10,000 sockets, from the instant the write starts.
/// * The node's CPU per commit that changes no subscription's rows (1,000 commits of rows no
///   query holds), without sockets and with the 50,000 subscriptions: the cost of a commit must
///   not follow the subscriptions it does not affect.
struct SyncScale {
    let sockets: Int
    let rounds: Int
    static let processes = 3
    static let unaffectedCommits = 1_000
    static let p50TargetMilliseconds = 50.0
    static let floorRatioTarget = 3.0

    struct Figures {
        var connectSeconds = 0.0
        var bytesPerSocket = 0.0
        var bytesPerSubscription = 0.0
        var sameLatencies = SyncLatencies()
        var mineLatencies = SyncLatencies()
    }

    func run(_ chosen: [SyncWorkload]) async -> Int {
        var n1 = SyncLines(.n1)
        var n2 = SyncLines(.n2)
        SyncServer.raiseDescriptorLimit()   // 15,000 sockets need it
        do {
            let ripple = try await runRipple(n1: &n1, n2: &n2, reportUnaffected: chosen.contains(.n2))
            let floor = try await runFloor()
            if chosen.contains(.n1) {
                n1.impl("ripple", [("sockets", .int(sockets)), ("seconds", .number(ripple.connectSeconds)),
                                   ("sockets_per_s", .number(Double(sockets) / ripple.connectSeconds)),
                                   ("kb_per_socket", .number(ripple.bytesPerSocket / 1024)),
                                   ("kb_per_subscription", .number(ripple.bytesPerSubscription / 1024))])
                n1.impl("floor", [("sockets", .int(sockets)), ("seconds", .number(floor.connectSeconds)),
                                  ("sockets_per_s", .number(Double(sockets) / floor.connectSeconds)),
                                  ("kb_per_socket", .number(floor.bytesPerSocket / 1024))])
                n1.ratio("ripple/floor", [("seconds_ratio", .number(ripple.connectSeconds / floor.connectSeconds))])
            }
            if chosen.contains(.n2) {
                let clients = ScalePlan.sameSockets.clamped(to: 0..<sockets).count
                let perUser = ScalePlan.mineSockets.clamped(to: 0..<sockets).count
                n2.impl("ripple", [("query", "shared"), ("clients", .int(clients))] + ms(ripple.sameLatencies))
                n2.impl("ripple", [("query", "per-user"), ("clients", .int(perUser))] + ms(ripple.mineLatencies))
                n2.impl("floor", [("query", "precomputed frame"), ("clients", .int(clients))] + ms(floor.sameLatencies))
                let p50 = ripple.sameLatencies.percentile(0.5) / 1000
                let ratio = ripple.sameLatencies.percentile(0.5) / floor.sameLatencies.percentile(0.5)
                n2.ratio("ripple/floor", [("p50_ratio", .number(ratio)),
                                          ("p99_ratio", .number(ripple.sameLatencies.percentile(0.99) / floor.sameLatencies.percentile(0.99)))])
                n2.target("ripple p50_ms <= \(Int(Self.p50TargetMilliseconds))", p50, met: p50 <= Self.p50TargetMilliseconds)
                n2.target("ripple p50 <= 3x floor", ratio, met: ratio <= Self.floorRatioTarget)
            }
        } catch {
            n1.error("ripple", describe(error))
        }
        return n1.failures + n2.failures
    }

    private func ms(_ latencies: SyncLatencies) -> [JSONField] {
        [("samples", .int(latencies.samples.count)), ("p1_ms", .number(latencies.percentile(0.01) / 1000)), ("p50_ms", .number(latencies.percentile(0.5) / 1000)),
         ("p99_ms", .number(latencies.percentile(0.99) / 1000)), ("max_ms", .number((latencies.samples.max() ?? .nan) / 1000))]
    }

    // MARK: Ripple

    static let rules = """
        {"tables": {"items": {"read": true}, "hot": {"read": true},
                    "mine": {"read": {"or": [{"column": "owner", "op": "=", "value": {"user": true}},
                                             {"column": "shared", "op": "=", "value": true}]}}}}
        """

    private func runRipple(n1: inout SyncLines, n2: inout SyncLines, reportUnaffected: Bool) async throws -> Figures {
        SyncProgress.phase = "N1: setting up"
        return try await SyncCluster.with { cluster in
            try await cluster.psql("""
                CREATE TABLE items(id bigint PRIMARY KEY, grp int NOT NULL, v int NOT NULL DEFAULT 0);
                INSERT INTO items SELECT n, n % \(ScalePlan.groups), 0 FROM generate_series(0, \(sockets - 1)) AS n;
                INSERT INTO items SELECT n, -1, 0 FROM generate_series(1000000, 1000999) AS n;
                CREATE TABLE hot(id bigint PRIMARY KEY, n int NOT NULL);
                INSERT INTO hot SELECT n, 0 FROM generate_series(1, 100) AS n;
                CREATE TABLE mine(id bigint PRIMARY KEY, owner text NOT NULL, shared bool NOT NULL, n int NOT NULL);
                INSERT INTO mine VALUES (1, 'nobody', true, 0);
                INSERT INTO mine SELECT 1000 + n, 'u' || n, false, 0 FROM generate_series(0, \(sockets - 1)) AS n;
                """)
            return try await SyncNode.with(cluster, tables: ["items", "hot", "mine"], name: "scale", adjust: { configuration in
                configuration.rules = (try? SyncRules(json: Data(Self.rules.utf8))) ?? configuration.rules
                configuration.maxSockets = sockets + 1   // and the marker's
                // Heartbeats are a cost per socket and interval, not per commit: none falls inside
                // a measurement (one round for 15,000 sockets made the unaffected commits' CPU
                // twice what it is, or not, by chance).
                configuration.heartbeatInterval = .seconds(3600)
            }) { node in
                var figures = Figures()
                return try await using(try await cluster.connect(id: 1), close: { try? await $0.close() }) { writer in
                    // A socket of this process, told of a marker row: an instant after which the node has
                    // applied every earlier commit.
                    return try await using(try await SyncSocket(url: node.url), close: { await $0.close() }) { marker in
                        try await marker.hello(try node.token("marker"))
                        try await marker.send(#"{"type":"subscribe","id":"marker","query":{"table":"hot","filter":{"column":"id","op":"=","value":2}}}"#)
                        _ = try await marker.nextChanges()
                        func unaffectedCPU() async throws -> Double {
                            for n in 0..<200 {   // warm-up, untimed
                                try await writer.execute("UPDATE items SET v = v + 1 WHERE id = \(1_000_000 + n % 1_000)")
                            }
                            let before = processCPUSeconds()
                            for n in 0..<Self.unaffectedCommits {
                                try await writer.execute("UPDATE items SET v = v + 1 WHERE id = \(1_000_000 + n % 1_000)")
                            }
                            try await writer.execute("UPDATE hot SET n = n + 1 WHERE id = 2")
                            _ = try await marker.nextChanges(within: 120)
                            return (processCPUSeconds() - before) / Double(Self.unaffectedCommits)
                        }
                        SyncProgress.phase = "N2: commits without subscribers"
                        let idleCPU = try await unaffectedCPU()
                        let baseline = residentBytes()

                        SyncProgress.phase = "N1: \(sockets) sockets connecting"
                        return try await using(try await ScaleLoad.start(port: node.port, sockets: sockets, processes: Self.processes),
                                               close: { await $0.close() }) { load in
                            let go = MonotonicClock.now()
                            let connected = try await load.command("connect", answer: "connected", within: 600)
                            figures.connectSeconds = Double(connected.instant - go) / 1e9
                            if connected.failures > 0 { n1.error("ripple", "\(connected.failures) sockets failed: \(connected.firstFailure)") }
                            let afterSockets = residentBytes()
                            figures.bytesPerSocket = Double(afterSockets - baseline) / Double(sockets)

                            // One socket beyond the limit: retry_later, and it is closed.
                            let extra = try await SyncSocket(url: node.url)
                            let refusal = try await extra.next(within: 30)
                            if !(refusal.text.contains(#""code":"retry_later""#)) { n1.error("ripple", "a socket beyond the limit got \(refusal.text)") }
                            await extra.close()

                            SyncProgress.phase = "N1: subscribing"
                            let subscribed = try await load.command("more", answer: "subscribed", within: 600)
                            if subscribed.failures > 0 { n1.error("ripple", "\(subscribed.failures) subscriptions failed: \(subscribed.firstFailure)") }
                            let afterSubscriptions = residentBytes()
                            let subscriptions = sockets + (0..<sockets).map { ScalePlan.moreIDs($0).count }.reduce(0, +)
                            figures.bytesPerSubscription = Double(afterSubscriptions - afterSockets) / Double(subscriptions - sockets)
                            let metrics = await node.server.metricsText()
                            Report.note("N1: the node: " + metrics.split(separator: "\n")
                                .filter { $0.hasPrefix("ripple_sockets ") || $0.hasPrefix("ripple_subscriptions ") || $0.hasPrefix("ripple_live_queries ") }
                                .joined(separator: ", "))

                            SyncProgress.phase = "N2: commits beside 50,000 subscriptions"
                            let busyCPU = try await unaffectedCPU()
                            if reportUnaffected {
                                n2.impl("ripple-unaffected-commit", [("subscriptions", .int(0)), ("cpu_us_per_commit", .number(idleCPU * 1e6))])
                                n2.impl("ripple-unaffected-commit", [("subscriptions", .int(subscriptions)), ("cpu_us_per_commit", .number(busyCPU * 1e6))])
                                n2.ratio("unaffected commit \(subscriptions)/0 subscriptions", [("cpu_ratio", .number(busyCPU / idleCPU))])
                            }

                            SyncProgress.phase = "N2: the shared row"
                            _ = try await load.command("watch", answer: "watching", within: 30)
                            var starts: [String: [UInt64]] = [:]
                            for id in ["same", "mine"] {
                                let table = id == "same" ? "hot" : "mine"
                                for round in 0..<rounds {
                                    starts[id, default: []].append(MonotonicClock.now())
                                    try await writer.execute("UPDATE \(unescaped: table) SET n = n + 1 WHERE id = 1")
                                    try await load.awaitRound(id: id, round: round + 1, within: 120)
                                }
                            }
                            let hits = try await load.report()
                            figures.sameLatencies = load.latencies(hits["same"] ?? [:], starts: starts["same"] ?? [], holders: ScalePlan.sameSockets)
                            figures.mineLatencies = load.latencies(hits["mine"] ?? [:], starts: starts["mine"] ?? [], holders: ScalePlan.mineSockets)
                            return figures
                        }
                    }
                }
            }
        }
    }

    // MARK: The floor

    private func runFloor() async throws -> Figures {
        SyncProgress.phase = "N1: the floor"
        var figures = Figures()
        func snapshot(_ id: String, _ row: String, columns: String, types: String) -> String {
            #"{"type":"changes","lsn":"0/1000000","snapshots":{""# + id + #"":{"basis":"7000000000000000000-1.000000000000000000000000","columns":"#
                + columns + #","types":"# + types + #","key":[0],"rows":["# + row + "]}}}"
        }
        let floor = FloorServer(
            welcome: #"{"type":"welcome","protocol":1,"user":"u0","lsn":"0/1000000","heartbeat_ms":5000,"max_subscriptions":100,"max_message_bytes":262144}"#,
            snapshots: ["own": snapshot("own", "[1,1,0]", columns: #"["id","grp","v"]"#, types: #"["int8","int4","int4"]"#),
                        "grp": snapshot("grp", "[1,1,0],[101,1,0]", columns: #"["id","grp","v"]"#, types: #"["int8","int4","int4"]"#),
                        "same": snapshot("same", "[1,0]", columns: #"["id","n"]"#, types: #"["int8","int4"]"#),
                        "mine": snapshot("mine", #"[1,"nobody",true,0],[1000,"u0",false,0]"#, columns: #"["id","owner","shared","n"]"#,
                                         types: #"["int8","text","bool","int4"]"#)],
            threads: ProcessInfo.processInfo.activeProcessorCount)
        let baseline = residentBytes()
        return try await using(try await floor.start(), close: { _ in await floor.stop() }) { port in
            return try await using(try await ScaleLoad.start(port: port, sockets: sockets, processes: Self.processes),
                                   close: { await $0.close() }) { load in
                let go = MonotonicClock.now()
                let connected = try await load.command("connect", answer: "connected", within: 600)
                figures.connectSeconds = Double(connected.instant - go) / 1e9
                figures.bytesPerSocket = Double(residentBytes() - baseline) / Double(sockets)
                _ = try await load.command("more", answer: "subscribed", within: 600)
                _ = try await load.command("watch", answer: "watching", within: 30)
                SyncProgress.phase = "N2: the floor"
                var starts: [UInt64] = []
                for round in 0..<rounds {
                    starts.append(MonotonicClock.now())
                    floor.broadcast(#"{"type":"changes","lsn":"0/1000100","changesets":{"same":{"updates":[[0,0,{"1":"# + String(round + 1) + "}]]}}}",
                                    to: "same")
                    try await load.awaitRound(id: "same", round: round + 1, within: 120)
                }
                let hits = try await load.report()
                figures.sameLatencies = load.latencies(hits["same"] ?? [:], starts: starts, holders: ScalePlan.sameSockets)
                return figures
            }
        }
    }
}

/// The load generator's processes (``SyncScaleChild``), each with its share of the sockets.
final class ScaleLoad: Sendable {
    struct Child: Sendable {
        let process: Process
        let input: FileHandle
        let lines: SyncMailbox<String>
        let sockets: Range<Int>
    }

    struct Answer {
        var instant: UInt64
        var failures: Int
        var firstFailure: String
    }

    let children: [Child]

    private init(children: [Child]) { self.children = children }

    /// Starts `processes` children sharing `sockets` sockets to 127.0.0.1:`port`, child `i`
    /// connecting from 127.0.0.`2 + i`.
    static func start(port: Int, sockets: Int, processes: Int) async throws -> ScaleLoad {
        var children: [Child] = []
        let share = (sockets + processes - 1) / processes
        for index in 0..<processes {
            let range = (index * share)..<min(sockets, (index + 1) * share)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
            process.arguments = ["sync-load", "--port", String(port), "--source", "127.0.0.\(2 + index)",
                                 "--first", String(range.lowerBound), "--count", String(range.count)]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            let lines = SyncMailbox<String>()
            let reader = output.fileHandleForReading
            let thread = Thread {
                // Lines can be long (a report's instants): each byte is looked at once.
                var pending: [UInt8] = []
                while true {
                    let data = reader.availableData
                    if data.isEmpty { break }
                    var start = 0
                    var scan = pending.count
                    pending.append(contentsOf: data)
                    while let newline = pending[scan...].firstIndex(of: UInt8(ascii: "\n")) {
                        lines.put(String(decoding: pending[start..<newline], as: UTF8.self))
                        start = newline + 1
                        scan = start
                    }
                    pending.removeFirst(start)
                }
                lines.finish()
            }
            thread.start()
            children.append(Child(process: process, input: input.fileHandleForWriting, lines: lines, sockets: range))
        }
        let load = ScaleLoad(children: children)
        for child in children {
            guard try await load.line(from: child, within: 60).hasPrefix("started") else { throw SyncBenchError("a load process did not start") }
        }
        return load
    }

    private func line(from child: Child, within seconds: Double) async throws -> String {
        while true {
            guard let line = try await child.lines.take(within: seconds) else {
                throw SyncBenchError("a load process ended (exit \(child.process.isRunning ? "-" : String(child.process.terminationStatus)))")
            }
            if line.hasPrefix("error") { Report.note("N1/N2 load: \(line)") } else { return line }
        }
    }

    /// Sends `command` to every child and waits for each one's line starting with `answer`:
    /// the latest instant, and the failures, summed.
    func command(_ command: String, answer: String, within seconds: Double) async throws -> Answer {
        for child in children { child.input.write(Data((command + "\n").utf8)) }
        var result = Answer(instant: 0, failures: 0, firstFailure: "")
        for child in children {
            let line = try await line(from: child, within: seconds)
            guard line.hasPrefix(answer) else { throw SyncBenchError("a load process answered \(command) with \(line)") }
            let fields = line.split(separator: " ", maxSplits: 3).map(String.init)
            if fields.count >= 3 {
                result.instant = max(result.instant, UInt64(fields[1]) ?? 0)
                result.failures += Int(fields[2]) ?? 0
                if fields.count == 4, fields[3] != "-", result.firstFailure.isEmpty { result.firstFailure = fields[3] }
            }
        }
        return result
    }

    /// Waits until every child has heard round `round` of `id` on each of its sockets holding it.
    func awaitRound(id: String, round: Int, within seconds: Double) async throws {
        for child in children {
            let holders = child.sockets.filter { ScalePlan.moreIDs($0).contains(id) }.count
            guard holders > 0 else { continue }
            while true {
                let line = try await line(from: child, within: seconds)
                if line == "got \(id) \(holders * round)" { break }
                if !line.hasPrefix("got ") { throw SyncBenchError("a load process said \(line) in round \(round) of \(id)") }
            }
        }
    }

    /// Every child's instants per watched id.
    func report() async throws -> [String: [Int: [UInt64]]] {
        for child in children { child.input.write(Data("report\n".utf8)) }
        var hits: [String: [Int: [UInt64]]] = [:]
        for (index, child) in children.enumerated() {
            while true {
                let line = try await line(from: child, within: 60)
                if line == "reported" { break }
                let fields = line.split(separator: " ", maxSplits: 2).map(String.init)
                guard fields.count == 3, fields[0] == "hits" else { continue }
                hits[fields[1], default: [:]][index] = fields[2].split(separator: ",").compactMap { UInt64($0) }
            }
        }
        return hits
    }

    /// The latencies of rounds started at `starts`: each child's instants come a round at a time
    /// (one per socket holding the id), in order.
    func latencies(_ hits: [Int: [UInt64]], starts: [UInt64], holders: Range<Int>) -> SyncLatencies {
        var latencies = SyncLatencies()
        for (index, child) in children.enumerated() {
            let perRound = child.sockets.filter { holders.contains($0) }.count
            guard perRound > 0, let instants = hits[index] else { continue }
            for (offset, instant) in instants.enumerated() {
                let round = offset / perRound
                guard round < starts.count, instant >= starts[round] else { continue }
                latencies.samples.append(Double(instant - starts[round]) / 1000)
            }
        }
        return latencies
    }

    func close() async {
        for child in children {
            child.input.write(Data("close\n".utf8))
            try? child.input.close()
        }
        for child in children {
            _ = try? await child.lines.take(within: 30)
            if child.process.isRunning { child.process.terminate() }
        }
    }
}

/// This process's resident memory, in bytes (``PeakMemory/residentNow()``).
func residentBytes() -> Int { (PeakMemory.residentNow() ?? 0) * 1024 }

/// The CPU this process used so far (user and system), in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}
