import Foundation
import PostgresNIO
import RippleServer

/// N3: what a second node costs. Each node has its own slot, and Postgres decodes its WAL once
/// per slot: the Postgres CPU per 1,000 commits (every process of the cluster, from /proc) with
/// no node, one node and two nodes following the same table, and each node's CPU per commit
/// (this process's CPU, the nodes running in it, less the writer's own with no node); each the
/// median of 5 runs of `commits` commits.
struct SyncNodesCost {
    let commits: Int
    static let runs = 5

    struct Sample {
        var postgresSeconds: Double
        var processSeconds: Double
    }

    func run() async -> Int {
        var lines = SyncLines(.n3)
        do {
            try await SyncCluster.with { cluster in
                try await cluster.psql("""
                    CREATE TABLE counters(id bigint PRIMARY KEY, n bigint NOT NULL, note text NOT NULL);
                    INSERT INTO counters SELECT n, 0, 'counter ' || n FROM generate_series(1, 1000) AS n;
                    """)
                try await using(try await cluster.connect(id: 1), close: { try? await $0.close() }) { writer in
                    var markers: [SyncSocket] = []
                    var nodes: [SyncNode] = []
                    func closeAll() async {
                        for marker in markers { await marker.close() }
                        for node in nodes { await node.stop() }
                    }
                    var samples: [Sample] = []
                    do {
                        for count in 0...2 {
                            SyncProgress.phase = "N3: \(count) node(s)"
                            while nodes.count < count {
                                // (Each kept as soon as it runs: closeAll() stops it if a later step throws.)
                                let node = try await SyncNode.start(cluster, tables: ["counters"], name: "n3_\(nodes.count)")
                                nodes.append(node)
                                let marker = try await SyncSocket(url: node.url)
                                markers.append(marker)
                                try await marker.hello(try node.token())
                                try await marker.send(#"{"type":"subscribe","id":"m","query":{"table":"counters","filter":{"column":"id","op":"=","value":0}}}"#)
                                _ = try await marker.nextChanges(within: 60)
                            }
                            // The median of a few runs: how much a peek decodes again depends on when the
                            // node last confirmed, which varies from run to run.
                            var runs: [Sample] = []
                            for _ in 0..<Self.runs {
                                let postgresBefore = try postgresCPUSeconds(cluster)
                                let processBefore = processCPUSeconds()
                                for n in 0..<commits {
                                    try await writer.execute("UPDATE counters SET n = n + 1 WHERE id = \(1 + n % 1000)")
                                }
                                // Every node has applied every commit once the marker row's change reaches it.
                                try await writer.execute("INSERT INTO counters VALUES (0, 0, 'marker') ON CONFLICT (id) DO UPDATE SET n = counters.n + 1")
                                for marker in markers { _ = try await marker.nextChanges(within: 120) }
                                runs.append(Sample(postgresSeconds: try postgresCPUSeconds(cluster) - postgresBefore,
                                                   processSeconds: processCPUSeconds() - processBefore))
                            }
                            samples.append(Sample(postgresSeconds: runs.map(\.postgresSeconds).sorted()[runs.count / 2],
                                                  processSeconds: runs.map(\.processSeconds).sorted()[runs.count / 2]))
                        }
                    } catch {
                        await closeAll()
                        throw error
                    }
                    await closeAll()
                    let perThousand = 1000 / Double(commits)
                    for (count, sample) in samples.enumerated() {
                        var fields: [JSONField] = [("nodes", .int(count)), ("commits", .int(commits)),
                                                   ("postgres_cpu_ms_per_1000_commits", .number(sample.postgresSeconds * perThousand * 1000))]
                        if count > 0 {
                            let decoding = (sample.postgresSeconds - samples[0].postgresSeconds) / Double(count)
                            let node = (sample.processSeconds - samples[0].processSeconds) / Double(count * commits)
                            fields += [("decoding_cpu_ms_per_1000_commits_per_slot", .number(decoding * perThousand * 1000)),
                                       ("node_cpu_us_per_commit", .number(node * 1e6))]
                        }
                        lines.impl("ripple", fields)
                    }
                    if samples.count == 3 {
                        let one = samples[1].postgresSeconds - samples[0].postgresSeconds
                        let two = samples[2].postgresSeconds - samples[0].postgresSeconds
                        lines.ratio("postgres decoding 2 nodes/1 node", [("cpu_ratio", .number(two / one))])
                    }
                }
            }
        } catch {
            lines.error("ripple", describe(error))
        }
        return lines.failures
    }

    /// The CPU (user and system) every process of the cluster used so far: the postmaster and
    /// its children, from /proc.
    private func postgresCPUSeconds(_ cluster: SyncCluster) throws -> Double {
        let pidFile = try String(contentsOfFile: cluster.postgres.dataDirectory + "/postmaster.pid", encoding: .utf8)
        guard let postmaster = Int(pidFile.split(separator: "\n").first ?? "") else { throw SyncBenchError("no postmaster pid") }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var total = 0.0
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // After "pid (comm) ": state, ppid, … utime is field 14, stime 15 (1-based, comm as one).
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 13, let parent = Int(fields[1]), pid == postmaster || parent == postmaster,
                  let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            total += (user + system) / ticks
        }
        return total
    }
}
