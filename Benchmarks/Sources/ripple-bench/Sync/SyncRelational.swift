import Foundation
import PostgresNIO
import Ripple
import RippleServer
import RippleSync

/// R1 and R2: subscriptions under a membership rule (todos readable by the members of their
/// project), on one cluster and one node in this process.
///
/// * R1: Postgres commit → socket latency, p50/p99, of an autocommit UPDATE of a row in a
///   1,000-row window of `todos` under the membership rule (`membership`), beside the same
///   measurement for the same rows in `owned_todos`, a single table whose rule compares a column
///   with the user (`single-table`, S2's kind of subscription) — same node, same run, same method
///   as S2. Target: membership p50 ≤ 1.5× single-table's.
/// * R2: the node's CPU per commit that grants one user a membership (an INSERT into
///   `members`), with 100 users each holding a membership-ruled subscription on `todos`, then
///   10,000: the granted user's subscription must receive the project's rows each time; the
///   other users' subscriptions must cost nothing. Target: CPU ratio 10,000/100 ≤ 1.5. The
///   subscriptions are held in the node's hub (no sockets): the users a grant does not concern
///   have no socket work to do either way, and 10,000 sockets would add their client's CPU to
///   this process's.
struct SyncRelational {
    /// R1's timed commits.
    let samples: Int

    static let users = 10_000
    static let smallUsers = 100
    /// R2's timed grants per case.
    static let grants = 100
    static let latencyRatioTarget = 1.5
    static let cpuRatioTarget = 1.5

    /// 20 projects of 100 todos for R1 (the bench user is a member of 10 of them, and owns the
    /// same 1,000 rows in `owned_todos`); then one project per user with 3 todos, and each user
    /// a member of their own project, for R2.
    static let schema = """
        CREATE TABLE projects(id int8 PRIMARY KEY, name text NOT NULL);
        CREATE TABLE members(id int8 PRIMARY KEY, project_id int8 NOT NULL REFERENCES projects, user_id text NOT NULL,
                             UNIQUE (project_id, user_id));
        CREATE TABLE todos(id int8 PRIMARY KEY, project_id int8 NOT NULL REFERENCES projects, title text NOT NULL,
                           rank int4 NOT NULL, done bool NOT NULL);
        CREATE TABLE owned_todos(id int8 PRIMARY KEY, owner text NOT NULL, title text NOT NULL, rank int4 NOT NULL, done bool NOT NULL);
        INSERT INTO projects SELECT n, 'Project ' || n FROM generate_series(1, 20) AS n;
        INSERT INTO members SELECT n, n, 'bench' FROM generate_series(1, 10) AS n;
        INSERT INTO todos SELECT n, 1 + (n - 1) / 100, 'Todo ' || n, (n * 7919) % 2000, n % 7 = 0 FROM generate_series(1, 2000) AS n;
        INSERT INTO owned_todos SELECT n, CASE WHEN n <= 1000 THEN 'bench' ELSE 'other' END, 'Todo ' || n, (n * 7919) % 2000, n % 7 = 0
        FROM generate_series(1, 2000) AS n;
        INSERT INTO projects SELECT 100 + n, 'Team ' || n FROM generate_series(1, \(users)) AS n;
        INSERT INTO members SELECT 100 + n, 100 + n, 'u' || n FROM generate_series(1, \(users)) AS n;
        INSERT INTO todos SELECT 10000 + n, 100 + (n - 1) / 3 + 1, 'Team todo ' || n, n % 1000, false FROM generate_series(1, \(users * 3)) AS n;
        """

    static let rules = """
        {"tables": {
          "projects": {"read": true},
          "members": {"read": {"column": "user_id", "op": "=", "value": {"user": true}}},
          "todos": {"read": {"column": "project_id", "op": "in",
                             "query": {"table": "members", "columns": ["project_id"],
                                       "filter": {"column": "user_id", "op": "=", "value": {"user": true}}}}},
          "owned_todos": {"read": {"column": "owner", "op": "=", "value": {"user": true}}}
        }}
        """

    static func window(_ table: String) -> QueryDescription {
        QueryDescription(table: table, order: [OrderDescription(column: "rank")], limit: 1_000)
    }

    func run(_ chosen: [SyncWorkload]) async -> Int {
        var r1 = SyncLines(.r1)
        var r2 = SyncLines(.r2)
        do {
            try await SyncCluster.with { cluster in
                SyncProgress.phase = "R: loading the relational schema"
                try await cluster.psql(Self.schema)
                try await SyncNode.with(cluster, tables: ["projects", "members", "todos", "owned_todos"], adjust: { configuration in
                    configuration.rules = try! SyncRules(json: Data(Self.rules.utf8))
                }) { node in
                    if chosen.contains(.r1) { await latency(node: node, cluster: cluster, lines: &r1) }
                    if chosen.contains(.r2) { await grants(node: node, cluster: cluster, lines: &r2) }
                }
            }
        } catch {
            r1.error("ripple", "setting up the relational workloads: \(describe(error))")
        }
        return r1.failures + r2.failures
    }

    // MARK: R1

    private func latency(node: SyncNode, cluster: SyncCluster, lines: inout SyncLines) async {
        var figures: [String: SyncLatencies] = [:]
        for (impl, table) in [("single-table", "owned_todos"), ("membership", "todos")] {
            SyncProgress.phase = "R1: \(impl), \(samples) commits"
            Report.note("R1: \(impl) (\(table)), \(samples) commits")
            do {
                let latencies = try await using(try await cluster.connect(id: 31), close: { try? await $0.close() }) { writer in
                    try await using(try await SyncSocket(url: node.url), close: { await $0.close() }) { socket in
                        try await socket.hello(try node.token())
                        try await socket.send(.subscribe(id: table, query: Self.window(table), resume: nil))
                        let ids = try SyncWindowWorkloads.windowIDs(try await socket.nextChanges())
                        guard ids.count == 1_000 else { throw SyncBenchError("the \(table) window holds \(ids.count) rows, not 1000") }
                        let (latency, _) = try await SyncWindowWorkloads(samples: samples).timeCommits(writer: writer, statement: { index in
                            let id = ids[(index + SyncWindowWorkloads.warmUpCommits) * 37 % ids.count]
                            return "UPDATE \(unescaped: table) SET title = \("Todo \(id): sample \(index)") WHERE id = \(id)"
                        }, arrival: { try await socket.nextChanges(within: 10).at })
                        return latency
                    }
                }
                figures[impl] = latencies
                lines.impl(impl, latencies.fields)
            } catch {
                lines.error(impl, describe(error))
            }
        }
        guard let single = figures["single-table"], let membership = figures["membership"] else { return }
        let ratio = membership.percentile(0.5) / single.percentile(0.5)
        lines.ratio("membership/single-table", [("p50_ratio", .number(ratio)),
                                                ("p99_ratio", .number(membership.percentile(0.99) / single.percentile(0.99)))])
        lines.target("membership/single-table p50_ratio <= 1.5", ratio, met: ratio <= Self.latencyRatioTarget)
    }

    // MARK: R2

    private func grants(node: SyncNode, cluster: SyncCluster, lines: inout SyncLines) async {
        var tables: [String: SyncedTableSchema] = [:]
        for table in ["projects", "members", "todos"] { tables[table] = await node.server.schema(of: table) }
        guard let hub = node.server.subscriptionHub, let schema = tables["todos"] else {
            lines.error("ripple", "the node has no hub or no todos table")
            return
        }
        var cpu: [Int: Double] = [:]
        var nextMember: Int64 = 1_000_000
        for users in [Self.smallUsers, Self.users] {
            SyncProgress.phase = "R2: \(users) subscribed users"
            do {
                let (perCommit, wall) = try await measureGrants(users: users, hub: hub, schema: schema, tables: tables, cluster: cluster,
                                                                nextMember: &nextMember)
                cpu[users] = perCommit
                lines.impl("ripple", [("subscribed_users", .int(users)), ("grants", .int(Self.grants)),
                                      ("cpu_us_per_grant", .number(perCommit * 1e6)), ("wall_ms_per_grant", .number(wall * 1e3))])
            } catch {
                lines.error("ripple", "\(users) users: \(describe(error))")
                return
            }
        }
        guard let small = cpu[Self.smallUsers], let large = cpu[Self.users] else { return }
        let ratio = large / small
        lines.ratio("\(Self.users)/\(Self.smallUsers) users", [("cpu_ratio", .number(ratio))])
        lines.target("cpu per grant, \(Self.users)/\(Self.smallUsers) users <= 1.5", ratio, met: ratio <= Self.cpuRatioTarget)
    }

    /// Subscribes `users` users (u1…) to `todos` under the membership rule in the node's hub,
    /// then grants u1 membership of other users' projects, one commit at a time, each waited for
    /// until u1's subscription holds the project's rows. Returns the process's CPU seconds and the
    /// wall seconds per grant.
    private func measureGrants(users: Int, hub: SubscriptionHub, schema: SyncedTableSchema, tables: [String: SyncedTableSchema],
                               cluster: SyncCluster, nextMember: inout Int64) async throws -> (cpu: Double, wall: Double) {
        let query = QueryDescription(table: "todos", order: [OrderDescription(column: "rank")])
        // The number of rows u1's subscription holds, after each of its events (-1: it ended).
        let granted = SyncMailbox<Int>()
        let held = SyncLocked(0)
        var tokens: [SubscriptionToken] = []
        defer { tokens.forEach { $0.cancel() } }
        let started = ContinuousClock.now
        for user in 1...users {
            let isGranted = user == 1
            let token = try hub.subscribe(query, user: "u\(user)", schema: schema, tables: tables) { event in
                guard isGranted else { return }
                let count = held.withLock { count -> Int in
                    switch event.kind {
                    case .snapshot(let snapshot): count = snapshot.rows.count
                    case .changes(let changes): count += changes.inserts.count - changes.deletes.count
                    case .ended, .refused: count = -1
                    }
                    return count
                }
                granted.put(count)
            }
            tokens.append(token)
        }
        guard let first = try await granted.take(within: 60), first == 3 else {
            throw SyncBenchError("u1's first result is not its project's 3 rows")
        }
        Report.note("R2: \(users) subscriptions made in \(JSONValue.number((ContinuousClock.now - started).seconds).json) s")
        return try await using(try await cluster.connect(id: 32), close: { try? await $0.close() }) { writer in
            var member = nextMember
            // u1 joins the projects of users 2…: each grant brings 3 rows.
            func grant(_ index: Int) async throws {
                member += 1
                let project = 100 + 2 + index % (Self.smallUsers - 1)
                try await writer.execute("INSERT INTO members VALUES (\(member), \(project), 'u1')")
                guard let rows = try await granted.take(within: 30), rows == 6 else {
                    throw SyncBenchError("grant \(index) did not bring its project's 3 rows to u1")
                }
                try await writer.execute("DELETE FROM members WHERE id = \(member)")
                guard let rows = try await granted.take(within: 30), rows == 3 else {
                    throw SyncBenchError("revoke \(index) did not remove its project's 3 rows from u1")
                }
            }
            for index in 0..<10 { try await grant(index) }   // warm-up, untimed
            let (cpuBefore, wallBefore) = (processCPUSeconds(), ContinuousClock.now)
            for index in 0..<Self.grants { try await grant(index) }
            let (cpu, wall) = (processCPUSeconds() - cpuBefore, (ContinuousClock.now - wallBefore).seconds)
            nextMember = member
            // Each round is a grant and its revoke: two commits of the same cost.
            return (cpu / Double(2 * Self.grants), wall / Double(2 * Self.grants))
        }
    }
}
