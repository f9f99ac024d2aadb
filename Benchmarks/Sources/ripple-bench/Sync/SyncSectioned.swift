import Foundation
import PostgresNIO
import Ripple
import RippleServer
import RippleSync

/// R3: a todo moved between two of 100 projects × 50 todos, on one cluster and one node in
/// this process.
///
/// * `sectioned`: a subscription to the projects with their todos as a to-many include (a
///   sectioned list ordered by rank): each commit moves one todo to another project (an
///   autocommit `UPDATE todos SET project_id = …, rank = …`), which reaches the socket as one
///   cross-section move. Its frames' bytes (target ≤ 200) and commit → socket latency, p50/p99.
/// * `flat`: the same 5,000 todos as one flat subscription ordered by project and rank (S2's kind
///   of subscription), the same moves: a move within one list. Latency beside it, same node,
///   same run, same method as S2 and R1. Target: sectioned p50 ≤ 1.5× flat's.
/// * `sectioned-limit-10`: the sectioned subscription with at most 10 todos per project, which
///   the node reads with one window function over every project (run again whole on each move),
///   not one live query per project: its latency says what that choice costs.
struct SyncSectioned {
    let samples: Int

    static let projects = 100
    static let todosPerProject = 50
    static let bytesTarget = 200.0
    static let latencyRatioTarget = 1.5

    static let schema = """
        CREATE TABLE projects(id int8 PRIMARY KEY, name text NOT NULL);
        CREATE TABLE todos(id int8 PRIMARY KEY, project_id int8 NOT NULL REFERENCES projects, title text NOT NULL,
                           rank int4 NOT NULL, done bool NOT NULL);
        INSERT INTO projects SELECT n, 'Project ' || n FROM generate_series(1, \(projects)) AS n;
        INSERT INTO todos SELECT n, 1 + (n - 1) / \(todosPerProject), 'Todo ' || n, (n * 7919) % 1000, n % 7 = 0
        FROM generate_series(1, \(projects * todosPerProject)) AS n;
        """

    static let rules = #"{"tables": {"projects": {"read": true}, "todos": {"read": true}}}"#

    static let sectioned = QueryDescription(
        table: "projects", order: [OrderDescription(column: "id")],
        include: ["todos": .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")])])

    /// The same with at most 10 todos per project: the include is read with a window function
    /// (`ROW_NUMBER() OVER (PARTITION BY project_id …)`), which runs again whole on each move.
    static let limited = QueryDescription(
        table: "projects", order: [OrderDescription(column: "id")],
        include: ["todos": .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")], limit: 10)])

    static let flat = QueryDescription(table: "todos", order: [OrderDescription(column: "project_id"), OrderDescription(column: "rank")])

    func run() async -> Int {
        var lines = SyncLines(.r3)
        do {
            try await SyncCluster.with { cluster in
                SyncProgress.phase = "R3: loading 100 projects × 50 todos"
                try await cluster.psql(Self.schema)
                try await SyncNode.with(cluster, tables: ["projects", "todos"], adjust: { configuration in
                    configuration.rules = try! SyncRules(json: Data(Self.rules.utf8))
                }) { node in
                    await measure(node: node, cluster: cluster, lines: &lines)
                }
            }
        } catch {
            lines.error("ripple", "setting up R3: \(describe(error))")
        }
        return lines.failures
    }

    private func measure(node: SyncNode, cluster: SyncCluster, lines: inout SyncLines) async {
        var figures: [String: SyncLatencies] = [:]
        var bytes: [Int] = []
        for (round, (impl, query)) in [("flat", Self.flat), ("sectioned", Self.sectioned), ("sectioned-limit-10", Self.limited)].enumerated() {
            SyncProgress.phase = "R3: \(impl), \(samples) moves"
            Report.note("R3: \(impl), \(samples) moves")
            do {
                let latencies = try await using(try await cluster.connect(id: 41), close: { try? await $0.close() }) { writer in
                    try await using(try await SyncSocket(url: node.url), close: { await $0.close() }) { socket in
                        try await socket.hello(try node.token())
                        try await socket.send(.subscribe(id: impl, query: query, resume: nil))
                        _ = try await socket.nextChanges()
                        var frameBytes: [Int] = []
                        var notOneMove = 0
                        let (latency, _) = try await SyncWindowWorkloads(samples: samples).timeCommits(writer: writer, statement: { index in
                            // Todo k moves to another project, ranked among its todos; the
                            // todos cycle, so every project gains and loses.
                            // Each round moves other todos to other places: a move that
                            // changes nothing would send nothing.
                            let step = index + SyncWindowWorkloads.warmUpCommits + round * 1_000
                            let todo = 1 + (step * 37) % (Self.projects * Self.todosPerProject)
                            let project = 1 + (step * 13 + 7) % Self.projects
                            // First in its new project: also in its first ten.
                            return "UPDATE todos SET project_id = \(project), rank = \(-1 - step) WHERE id = \(todo)"
                        }, arrival: {
                            let frame = try await socket.nextChanges(within: 10)
                            frameBytes.append(frame.bytes)
                            if impl != "flat", case .changes(_, _, let changesets) = try frame.message() {
                                // With ten per project, a todo that was not among its project's first
                                // ten arrives as an insert (and the tenth leaves); otherwise one move.
                                if case .sectioned(let todos)? = changesets[impl]?.included?["todos"],
                                   todos.moves.count == 1 && todos.inserts.isEmpty && todos.deletes.isEmpty
                                    || impl != "sectioned" && todos.moves.count + todos.inserts.count >= 1 {
                                } else {
                                    notOneMove += 1
                                }
                            }
                            return frame.at
                        })
                        if impl == "sectioned" {
                            bytes = Array(frameBytes.suffix(samples))
                            if notOneMove > 0 { throw SyncBenchError("\(notOneMove) frames were not one cross-section move") }
                        }
                        return latency
                    }
                }
                figures[impl] = latencies
                lines.impl(impl, latencies.fields)
            } catch {
                lines.error(impl, describe(error))
            }
        }
        if !bytes.isEmpty {
            let sorted = bytes.sorted()
            let median = Double(sorted[sorted.count / 2])
            lines.impl("sectioned-bytes", [("frames", .int(bytes.count)), ("p50_bytes", .number(median)),
                                           ("max_bytes", .int(sorted.last ?? 0))])
            lines.target("sectioned move frame p50_bytes <= 200", median, met: median <= Self.bytesTarget)
        }
        guard let flat = figures["flat"], let sectioned = figures["sectioned"] else { return }
        let ratio = sectioned.percentile(0.5) / flat.percentile(0.5)
        lines.ratio("sectioned/flat", [("p50_ratio", .number(ratio)), ("p99_ratio", .number(sectioned.percentile(0.99) / flat.percentile(0.99)))])
        lines.target("sectioned/flat p50_ratio <= 1.5", ratio, met: ratio <= Self.latencyRatioTarget)
        if let limited = figures["sectioned-limit-10"] {
            lines.ratio("sectioned-limit-10/flat", [("p50_ratio", .number(limited.percentile(0.5) / flat.percentile(0.5)))])
        }
    }
}
