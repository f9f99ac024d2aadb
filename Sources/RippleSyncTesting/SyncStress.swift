#if Sync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PostgresNIO
import Ripple
import RippleDiffTesting
import RippleServer
import RippleSync
import RippleSyncClient
import RippleTesting

/// How a sync stress run (``SyncStress/run(_:)``) goes.
public struct SyncStressConfiguration: Sendable {
    /// The seed of everything random: the clients' subscriptions and writes, the other writers,
    /// the faults.
    public var seed: UInt64 = 1
    /// How long the run writes (checks at quiescent points come on top).
    public var seconds: Double = 30
    /// Operations between two quiescent points, where every check runs.
    public var operationsPerRound = 60
    /// How long a quiescent point waits for every client to show the queries' results on Postgres.
    public var settleTimeout: Double = 60
    /// Stop after this many operations (then check once more); `nil`: only ``seconds`` limits
    /// the run.
    public var maxOperations: Int?
    /// The kinds of step the run takes (all of them by default); shrinking leaves them out one
    /// by one.
    public var steps = Set(SyncStressStep.allCases)
    /// The `ripple-server` executable, to run the node as a child process (`serve`) that faults
    /// can kill (SIGKILL) as well as stop (SIGTERM); `nil`: the node runs in this process, where
    /// it can only be stopped (cancelled), never killed.
    public var nodeExecutable: String?
    /// Nodes on the cluster, each with its own slot and replica; every device is given all
    /// their addresses (in its own order) and moves to the next one on each reconnect.
    public var nodes = 2
    /// Sockets of a reconnect storm: opened at once against one node, each saying hello and
    /// subscribing, then closed.
    public var stormSockets = 5_000
    /// Where to report progress (`nil`: nowhere).
    public var log: (@Sendable (String) -> Void)?
    /// Runs on the cluster before each quiescent point's checks: the checker's own tests break
    /// something there, to see the checks find it.
    package var beforeChecks: (@Sendable (ThrowawayPostgres) async throws -> Void)?
    /// A read rule of todos (JSON) the node is given in place of the membership rule: the
    /// checker's own tests give a wrong one, to see the checks find the rows it lets out.
    package var todosReadRule: String?

    /// The defaults: seed 1, 30 seconds, 60 operations a round, every kind of step, the node in
    /// this process.
    public init() {}

    /// The `ripple-server stress` arguments that repeat this run.
    public var arguments: String {
        var words = ["--seed \(seed)"]
        if let maxOperations { words.append("--operations \(maxOperations)") } else { words.append("--seconds \(Int(seconds.rounded(.up)))") }
        words.append("--round \(operationsPerRound)")
        if nodes != 2 { words.append("--nodes \(nodes)") }
        if stormSockets != 5_000 { words.append("--storm \(stormSockets)") }
        let without = SyncStressStep.allCases.filter { !steps.contains($0) }
        if !without.isEmpty { words.append("--without \(without.map(\.rawValue).joined(separator: ","))") }
        return words.joined(separator: " ")
    }
}

/// A kind of random step of a sync stress run.
public enum SyncStressStep: String, CaseIterable, Sendable {
    /// A device writes its local store (online or offline).
    case localWrites = "local-writes"
    /// Another Postgres client writes the synced tables (`psql`): notes moving between users,
    /// memberships granted and revoked, todos changing project, edited, inserted and deleted.
    case plainWrites = "plain-writes"
    /// A device goes offline, or comes back.
    case disconnects
    /// A node stops (its sockets told to come back later) and starts again on its replica.
    case nodeRestarts = "node-restarts"
    /// A node is killed (SIGKILL: mid-push, mid-apply) and starts again on its replica. Only
    /// with nodes in child processes; otherwise a restart.
    case nodeKills = "node-kills"
    /// A node is killed and a new node takes its place with an empty replica (a fresh copy).
    case nodeReplacements = "node-replacements"
    /// ``SyncStressConfiguration/stormSockets`` sockets connect to a node at once, subscribe,
    /// and go (the node must not fall over, and must let go of them).
    case reconnectStorms = "reconnect-storms"
    /// PostgreSQL restarts (`pg_ctl restart -m immediate`: a crash and recovery).
    case postgresRestarts = "postgres-restarts"
    /// A device's app is relaunched: its client and store let go, a new client over the same
    /// file declares its subscriptions again and resumes them from what the file kept.
    case relaunches
    /// The identity provider rotates its signing key: a new key in its JWKS, new tokens
    /// signed with it (the nodes fetch the JWKS again for the key they lack), the oldest of
    /// three keys retired. Open sockets keep going; each renews its token in-band.
    case keyRotations = "key-rotations"
}

/// What a sync stress run found.
public struct SyncStressReport: Sendable {
    /// The run's seed.
    public var seed: UInt64
    /// Random steps taken (local writes, other writers' commits, faults).
    public var operations = 0
    /// Quiescent points checked.
    public var rounds = 0
    /// Mutations the clients made, as of the last quiescent point.
    public var mutations = 0
    /// A client's rows for a subscription differ from the query on Postgres at a quiescent point.
    public var discrepancies = 0
    /// A mutation the client made with no result on the server once everything settled.
    public var lost = 0
    /// A mutation with more than one result, or a counter past what the client made.
    public var duplicated = 0
    /// A row a client holds that its user's read rule excludes, or a row a frame carried that
    /// the rule excluded at that frame's position.
    public var leaked = 0
    /// Local writes that failed (before a device had its first result: no table yet).
    public var localWriteErrors = 0
    /// Frames of the devices' remote queries of todos checked against Postgres's history.
    public var framesChecked = 0
    /// Subscriptions the relaunched devices declared again, and how many of them the node
    /// resumed with a changeset rather than a snapshot.
    public var relaunchedSubscriptions = 0
    public var resumedByChangeset = 0
    /// How many steps of each kind the run took (by ``SyncStressStep`` raw value).
    public var steps: [String: Int] = [:]
    /// What went wrong, first things first.
    public var findings: [String] = []
    /// The operations taken when the first finding was checked (the run stops at that round).
    public var failedAt: Int?

    /// Whether nothing was found.
    public var passed: Bool { discrepancies == 0 && lost == 0 && duplicated == 0 && leaked == 0 }

    /// One line: `sync-stress: seed=… ops=… rounds=… mutations=… discrepancies=0 lost=0 duplicated=0 leaked=0`.
    public var summaryLine: String {
        "sync-stress: seed=\(seed) ops=\(operations) rounds=\(rounds) mutations=\(mutations) "
            + "discrepancies=\(discrepancies) lost=\(lost) duplicated=\(duplicated) leaked=\(leaked)"
    }
}

/// A model-checked run of Ripple Sync against a real PostgreSQL, a real node and real sockets:
/// clients with random subscriptions write their local stores (online and offline), another
/// writer changes Postgres directly (rows moving between users' rules, memberships granted and
/// revoked, todos changing project), and faults come (disconnects, node restarts, Postgres
/// restarts). The tables are notes, read and written by their owner, and the team's
/// (``TeamFixture``): todos read and written by their owner or their project's members. At each
/// quiescent point: every client's rows for each subscription equal the query on Postgres (with
/// the user's read rules), every mutation a client made has exactly one result and its counter
/// on the server matches, no client holds a row its rules exclude, and every frame of each
/// client's remote query of todos held exactly what its user could read at that frame's
/// position — Postgres's history of memberships and todos, read from a logical slot of the
/// run's own (``TeamHistory``).
public enum SyncStress {
    static let users = ["u0", "u1", "u2"]
    static let rules = rules(todosRead: nil)

    /// The rules, with `todosRead` in place of the todos' read rule (`nil`: the membership rule).
    static func rules(todosRead: String?) -> String {
        #"""
        {"tables": {"notes": {"read": {"column": "owner", "op": "=", "value": {"user": true}},
                              "write": {"column": "owner", "op": "=", "value": {"user": true}}},
        """# + TeamFixture.ruleEntries(todosRead: todosRead ?? TeamFixture.todosRule) + "}}"
    }

    /// The synced tables: the notes, and the team's (``TeamFixture``: projects, their members,
    /// todos readable and writable by their owner or their project's members).
    static let tables = ["notes"] + TeamFixture.tables

    /// A todo the user may read, as SQL (the membership rule).
    static let readableTodo = "(owner = $user OR project_id IN (SELECT project_id FROM members WHERE user_id = $user))"

    /// The queries clients subscribe to (each ANDed with the user's rule by the node), with the
    /// SQL that gives their result on Postgres for a user (`$user`).
    static let queries: [(QueryDescription, String)] = [
        (QueryDescription(table: "notes", order: [OrderDescription(column: "id")]),
         "SELECT id, owner, rank, done, body FROM notes WHERE owner = $user ORDER BY id"),
        (QueryDescription(table: "notes", filter: .compare(column: "done", op: .equal, value: .bool(false)),
                          order: [OrderDescription(column: "rank"), OrderDescription(column: "id")], limit: 5),
         "SELECT id, owner, rank, done, body FROM notes WHERE owner = $user AND NOT done ORDER BY rank, id LIMIT 5"),
        (QueryDescription(table: "notes", filter: .compare(column: "rank", op: .less, value: .integer(5)),
                          order: [OrderDescription(column: "id")]),
         "SELECT id, owner, rank, done, body FROM notes WHERE owner = $user AND rank < 5 ORDER BY id"),
        (TeamFixture.allTodos,
         "SELECT \(TeamFixture.todoColumns) FROM todos WHERE \(readableTodo) ORDER BY id"),
        (QueryDescription(table: "todos", filter: .compare(column: "done", op: .equal, value: .bool(false)),
                          order: [OrderDescription(column: "rank"), OrderDescription(column: "id")], limit: 5),
         "SELECT \(TeamFixture.todoColumns) FROM todos WHERE \(readableTodo) AND NOT done ORDER BY rank, id LIMIT 5"),
        // A client's sub-query: the todos of the project named p1, which reaches only projects the
        // user may read (the node ANDs projects' read rule into it).
        (QueryDescription(table: "todos", filter: .inQuery(column: "project_id", query: SubqueryDescription(
                             table: "projects", column: "id", filter: .compare(column: "name", op: .equal, value: .text("p1")))),
                          order: [OrderDescription(column: "id")]),
         "SELECT \(TeamFixture.todoColumns) FROM todos WHERE \(readableTodo) AND project_id IN "
            + "(SELECT id FROM projects WHERE name = 'p1' AND id IN (SELECT project_id FROM members WHERE user_id = $user)) ORDER BY id"),
        // `exists` over a related table (which brings members' read rule with it): the todos of
        // the projects u0 is a member of, and, with `not`, those of the others.
        (QueryDescription(table: "todos", filter: .exists(u0IsAMember), order: [OrderDescription(column: "id")]),
         "SELECT \(TeamFixture.todoColumns) FROM todos WHERE \(readableTodo) AND EXISTS \(u0IsAMemberSQL) ORDER BY id"),
        (QueryDescription(table: "todos", filter: .not(.exists(u0IsAMember)),
                          order: [OrderDescription(column: "rank"), OrderDescription(column: "id")], limit: 5),
         "SELECT \(TeamFixture.todoColumns) FROM todos WHERE \(readableTodo) AND NOT EXISTS \(u0IsAMemberSQL) ORDER BY rank, id LIMIT 5"),
    ]

    /// The subscription with includes every device holds: the projects the user may read, each
    /// with its todos by rank (a sectioned list) and its owner (a to-one include).
    static let tree = QueryDescription(
        table: "projects", order: [OrderDescription(column: "id")],
        include: ["todos": .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")]),
                  "owner": .row(of: "users", on: ["owner": "id"])])

    /// ``tree``'s parts on Postgres for a user (`$user`): the projects, every list of todos (by
    /// project, then rank and id), the owners.
    static let treeProjectsSQL = "SELECT id, name, owner FROM projects WHERE id IN (SELECT project_id FROM members WHERE user_id = $user) ORDER BY id"
    static let treeTodosSQL = "SELECT \(TeamFixture.todoColumns) FROM todos WHERE \(readableTodo) "
        + "AND project_id IN (SELECT project_id FROM members WHERE user_id = $user) ORDER BY project_id, rank, id"
    static let treeOwnersSQL = "SELECT id, name FROM users WHERE id IN (SELECT owner FROM projects "
        + "WHERE id IN (SELECT project_id FROM members WHERE user_id = $user)) ORDER BY id"

    /// A todo's project has u0 among its members (a membership the subscriber may read).
    static let u0IsAMember = ExistsDescription(table: "members", on: ["project_id": "project_id"],
                                               filter: .compare(column: "user_id", op: .equal, value: .text("u0")))
    /// ``u0IsAMember`` as Postgres reads it, members' read rule included.
    static let u0IsAMemberSQL = "(SELECT 1 FROM members m WHERE m.project_id = todos.project_id AND m.user_id = 'u0' "
        + "AND m.project_id IN (SELECT project_id FROM members WHERE user_id = $user))"

    /// The queries of notes (the others are of todos).
    static let noteQueries = 0..<3

    /// Whether a node's resident memory after each storm (`history`, bytes) grows. A node that
    /// lets go of its sockets comes back to about the same memory, which varies by a factor of
    /// 2 or more from storm to storm (the allocator's arenas, which sockets closed first): a
    /// leak shows as the least of the last three storms above the most of the first three by
    /// half and 64 MiB more.
    package static func memoryGrows(_ history: [Int]) -> Bool {
        guard history.count >= 6 else { return false }
        return history.suffix(3).min()! > history.prefix(3).max()! * 3 / 2 + (64 << 20)
    }

    /// The clusters and node processes of the runs going on, for ``stopClusters()``.
    static let running = Locked<(clusters: [ObjectIdentifier: ThrowawayPostgres], nodes: Set<Int32>)>(([:], []))

    /// Kills the node processes and stops the PostgreSQL clusters of the runs going on, from any
    /// thread: a command interrupted (Ctrl-C, a timeout's SIGTERM) leaves nothing behind.
    public static func stopClusters() {
        let (clusters, nodes) = running.withLock { running in
            defer { running = ([:], []) }
            return (Array(running.clusters.values), running.nodes)
        }
        for node in nodes { Glibc.kill(node, SIGKILL) }
        for cluster in clusters { try? cluster.stop() }
    }

    /// Looks for a smaller run that still fails, starting from `failed` (a run of
    /// `configuration`): only the operations up to its failing round, then half as many, then
    /// each kind of step left out, then shorter rounds. Each candidate runs once, at most
    /// `budget` of them; timing varies between runs, so the answer is a smaller failing run,
    /// not the smallest.
    ///
    /// - Returns: the smallest failing configuration found and its report.
    public static func shrink(_ configuration: SyncStressConfiguration, failed: SyncStressReport,
                              budget: Int = 12) async throws -> (SyncStressConfiguration, SyncStressReport) {
        var best = configuration
        best.seconds = 24 * 3600
        best.maxOperations = failed.failedAt ?? failed.operations
        var bestReport = failed
        var left = budget
        func attempt(_ candidate: SyncStressConfiguration) async throws -> Bool {
            guard left > 0 else { return false }
            left -= 1
            configuration.log?("sync-stress: shrinking: trying \(candidate.arguments)")
            let report = try await run(candidate)
            guard !report.passed else { return false }
            (best, bestReport) = (candidate, report)
            best.maxOperations = report.failedAt ?? report.operations
            configuration.log?("sync-stress: shrinking: still fails: \(best.arguments)")
            return true
        }
        while let operations = best.maxOperations, operations > 1 {
            var candidate = best
            candidate.maxOperations = operations / 2
            candidate.operationsPerRound = min(candidate.operationsPerRound, operations / 2)
            guard try await attempt(candidate) else { break }
        }
        for step in SyncStressStep.allCases where best.steps.contains(step) && best.steps.count > 1 {
            var candidate = best
            candidate.steps.remove(step)
            _ = try await attempt(candidate)
        }
        while best.operationsPerRound > 1 {
            var candidate = best
            candidate.operationsPerRound = best.operationsPerRound / 2
            guard try await attempt(candidate) else { break }
        }
        return (best, bestReport)
    }

    /// Runs the stress; findings are in the report, never thrown.
    ///
    /// - Throws: when the run cannot be set up (no PostgreSQL, a node that does not start).
    public static func run(_ configuration: SyncStressConfiguration) async throws -> SyncStressReport {
        configuration.log?("sync-stress: \(configuration.arguments)")
        // The devices' identity provider: its JWKS served over HTTP for the whole run.
        return try await TestJWKSServer.with([]) { jwks in
            let run = try await SyncStressRun.start(configuration, identity: StressIdentityProvider(jwks: jwks))
            do {
                let report = try await run.run()
                await run.stop()
                return report
            } catch {
                await run.stop()
                throw error
            }
        }
    }
}

/// The identity provider of a stress run's devices: ES256 keys published as a JWKS, short-lived
/// tokens signed with the newest (so that clients renew them in-band all run long), keys
/// rotated by ``SyncStressStep/keyRotations``.
final class StressIdentityProvider: Sendable {
    let jwks: TestJWKSServer
    /// The published keys, newest last (at most three), and how many were made.
    private let keys = Locked<(published: [TestSigningKey], made: Int)>(([], 0))
    /// How long a token lives: renewed in-band at three quarters of it.
    static let tokenLifetime = 20

    init(jwks: TestJWKSServer) {
        self.jwks = jwks
        rotate()
    }

    /// A new key, published and signing from now on; the oldest of three retired.
    func rotate() {
        let published = keys.withLock { keys -> [TestSigningKey] in
            keys.made += 1
            keys.published.append(.es256(kid: "stress-\(keys.made)"))
            if keys.published.count > 3 { keys.published.removeFirst() }
            return keys.published
        }
        jwks.serve(published, cacheControl: "max-age=60")
    }

    /// A token for `user`, signed with the newest key.
    func token(for user: String) throws -> String {
        let key = keys.withLock { $0.published.last! }
        return try key.token(["sub": user, "exp": Int(Date().timeIntervalSince1970) + Self.tokenLifetime])
    }
}

/// One client device in the run.
final class StressDevice: @unchecked Sendable {   // used by the run's one driving task only
    let user: String
    let path: String
    let urls: [String]
    let token: @Sendable () async throws -> String
    /// The app's store and client (new ones after each ``relaunch()``).
    private(set) var store: Store
    private(set) var client: SyncClient
    /// Subscription id → index in ``SyncStress/queries``.
    var subscriptions: [String: Int] = [:]
    var online = true
    var nextID: Int64

    /// Writes the client's events to `<path>.events` (what it heard: for a failed run's files).
    private var eventLog: Task<Void, Never>
    private let handler: FileLogHandler
    /// What the run's report counts of relaunches (declared again; resumed by changeset).
    private(set) var relaunchedSubscriptions = 0
    private(set) var resumedByChangeset = 0
    /// Every frame of the device's remote query of all the todos its user may read (position,
    /// rows as psql writes them), not yet checked against ``TeamHistory``.
    let frames = Locked<[(lsn: String, rows: [[String]])]>([])
    /// Records ``frames`` (started by ``followTodos()``).
    var follower: Task<Void, Never>?

    init(user: String, index: Int, path: String, urls: [String], token: @escaping @Sendable () async throws -> String) throws {
        self.user = user
        self.path = path
        self.urls = urls
        self.token = token
        store = try Store(path: path)
        client = SyncClient(urls: urls, store: store, token: token)
        nextID = Int64(index + 1) * 1_000_000
        handler = try FileLogHandler(label: "device \(index)", path: path + ".events")
        eventLog = Self.logEvents(of: client, to: handler)
    }

    private static func logEvents(of client: SyncClient, to handler: FileLogHandler) -> Task<Void, Never> {
        Task { [events = client.events] in
            for await event in events {
                handler.log(event: LogEvent(level: .info, message: "\(event)", metadata: nil, source: "", file: "", function: "", line: 0))
            }
        }
    }

    /// The device's subscriptions, declared on its client (the remote query of todos apart).
    func declareSubscriptions() async throws {
        for (id, query) in subscriptions.sorted(by: { $0.key < $1.key }) {
            try await client.subscribe(id, SyncStress.queries[query].0)
        }
        try await client.subscribe("tree", SyncStress.tree)
    }

    /// The app is killed and opened again: the client stops, it and the store are let go, and a
    /// new client over the same file declares the same subscriptions (resumed from what the
    /// file kept: its rows, positions and pending mutations) and starts; the app is online.
    func relaunch() async throws {
        await client.stop()
        follower?.cancel()
        follower = nil
        eventLog.cancel()
        handler.log(event: LogEvent(level: .info, message: "relaunch", metadata: nil, source: "", file: "", function: "", line: 0))
        store = try Store(path: path)
        client = SyncClient(urls: urls, store: store, token: token)
        eventLog = Self.logEvents(of: client, to: handler)
        await client.setBackoff(min: .milliseconds(20), max: .milliseconds(300))
        try await declareSubscriptions()
        try await client.start()
        online = true
        relaunchedSubscriptions += subscriptions.count + 1
        resumesToCount = true
        await followTodos()
    }

    /// Whether the last relaunch's resumes are still to be counted.
    private var resumesToCount = false

    /// Counts the last relaunch's subscriptions that the node resumed by changeset — those
    /// that got no snapshot since (at a quiescent point, when each has heard from the node).
    func countResumes() async {
        guard resumesToCount else { return }
        resumesToCount = false
        let traffic = await client.traffic()
        resumedByChangeset += (Array(subscriptions.keys) + ["tree"]).filter { traffic.snapshots[$0] == nil }.count
    }

    deinit {
        eventLog.cancel()
        follower?.cancel()
    }

    /// Subscribes to a remote query of every todo the user may read and records each of its
    /// events (one per frame that changes it) in ``frames``.
    func followTodos() async {
        let remote = await client.remoteQuery(TeamFixture.allTodos)
        follower = Task { [frames] in
            do {
                for try await event in remote {
                    frames.withLock { $0.append((event.lsn, event.rows.map { $0.map(\.psqlText) })) }
                }
            } catch {
                frames.withLock { $0.append(("refused: \(error)", [])) }
            }
        }
    }

    /// The rows of the local `table` (`notes` or `todos`), as Postgres's text output writes them.
    func localRows(_ table: String = "notes") throws -> [[String]] {
        let (columns, boolean) = switch table {
        case "notes": ("id, owner, rank, done, body", 3)
        case "projects": ("id, name, owner", -1)
        case "users": ("id, name", -1)
        default: (TeamFixture.todoColumns, 4)
        }
        return try store.read { db in
            guard try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = ?", [table], as: Int.self) == 1 else { return [] }
            return try db.fetchAll("SELECT \(columns) FROM \(table) ORDER BY id").map { row in
                row.values.enumerated().map { index, value in SyncStressRun.text(value, isBool: index == boolean) }
            }
        }
    }
}

/// A run's moving parts: the cluster, the node (restartable), the devices, the other writer.
final class SyncStressRun: @unchecked Sendable {   // used by one driving task
    let configuration: SyncStressConfiguration
    let postgres: ThrowawayPostgres
    let directory: TemporaryDirectory
    var random: SeededGenerator
    /// The nodes (`nil`: down for the moment).
    var nodes: [StressNode?]
    /// The nodes' ports: below Linux's ephemeral range (32768 on), so that no client socket
    /// reconnecting while a node is down can take one (a socket can connect to itself on a
    /// port of that range) and keep the node from listening again.
    var ports: [Int]
    var urls: [String]
    /// A node's resident memory after each reconnect storm against it (bytes; child nodes only).
    var stormMemory: [Int: [Int]] = [:]
    var devices: [StressDevice] = []
    /// The devices' identity provider (the nodes verify its JWTs through its JWKS URL).
    let identity: StressIdentityProvider
    var report: SyncStressReport
    let secret = Array("ripple sync stress: a token secret of 32 bytes or more".utf8)
    var nextPlainID: Int64 = 1
    /// The next id of a todo another writer inserts.
    var nextPlainTodo: Int64 = 1
    /// Postgres's account of the team's tables at every position: what each frame is checked
    /// against (``checkFrames()``); `nil` until the run starts.
    var history: TeamHistory?
    /// What the run is doing, since when (for the watchdog of ``run()``).
    let progress = Locked<(String, ContinuousClock.Instant)>(("starting", .now))

    private func doing(_ what: String) { progress.withLock { $0 = (what, .now) } }

    init(configuration: SyncStressConfiguration, postgres: ThrowawayPostgres, directory: TemporaryDirectory,
         identity: StressIdentityProvider) {
        self.configuration = configuration
        self.identity = identity
        self.postgres = postgres
        self.directory = directory
        random = SeededGenerator(seed: configuration.seed)
        report = SyncStressReport(seed: configuration.seed)
        let count = max(configuration.nodes, 1)
        nodes = Array(repeating: nil, count: count)
        ports = Array(repeating: 0, count: count)
        urls = Array(repeating: "", count: count)
    }

    static func start(_ configuration: SyncStressConfiguration, identity: StressIdentityProvider) async throws -> SyncStressRun {
        let postgres = try await ThrowawayPostgres.started()
        SyncStress.running.withLock { $0.clusters[ObjectIdentifier(postgres)] = postgres }
        let run = SyncStressRun(configuration: configuration, postgres: postgres, directory: try TemporaryDirectory(), identity: identity)
        do {
            try Data(SyncStress.rules(todosRead: configuration.todosReadRule).utf8).write(to: URL(fileURLWithPath: run.directory.path("rules.json")))
            try Data(run.secret).write(to: URL(fileURLWithPath: run.directory.path("secret")))
            try await postgres.psql("""
                CREATE TABLE notes(id int8 PRIMARY KEY, owner text NOT NULL, rank int4 NOT NULL, done bool NOT NULL DEFAULT false, body text);
                INSERT INTO notes SELECT i, 'u' || (i % 3), i % 10, i % 4 = 0, 'note ' || i FROM generate_series(1, 30) AS i;
                """ + TeamFixture.schema)
            // The nodes run as a role that is not a superuser, set up as an administrator would.
            let rules = try SyncRules(json: Data(SyncStress.rules(todosRead: configuration.todosReadRule).utf8))
            try await postgres.setUpNode(tables: SyncStress.tables, writes: SyncStress.tables.filter { rules.tables[$0]?.write != nil })
            // The history reads the team's tables from their first row on.
            run.history = try await TeamHistory.start(postgres)
            try await postgres.psql("""
                INSERT INTO users SELECT 'u' || i, 'user ' || i FROM generate_series(0, 2) AS i;
                INSERT INTO projects SELECT i, 'p' || i, 'u' || (i % 3) FROM generate_series(1, 4) AS i;
                INSERT INTO members(project_id, user_id) SELECT i, 'u' || (i % 3) FROM generate_series(1, 4) AS i;
                INSERT INTO members(project_id, user_id) VALUES (1, 'u0'), (3, 'u2'), (2, 'u1') ON CONFLICT DO NOTHING;
                INSERT INTO todos SELECT i, 1 + i % 4, 'u' || (i % 3), 'todo ' || i, i % 5 = 0, i % 10 FROM generate_series(1, 24) AS i;
                """)
            run.nextPlainID = 31
            run.nextPlainTodo = 25
            for index in run.nodes.indices { try await run.startNode(index) }
            // Two devices of u0, one each of u1 and u2.
            for (index, user) in ["u0", "u0", "u1", "u2"].enumerated() {
                // Each device knows every node, starting with its own pick.
                let first = Int(run.random.next() % UInt64(run.urls.count))
                let urls = Array(run.urls[first...] + run.urls[..<first])
                let device = try StressDevice(user: user, index: index, path: run.directory.path("device\(index).sqlite"),
                                              urls: urls, token: { [identity = run.identity] in try identity.token(for: user) })
                await device.client.setBackoff(min: .milliseconds(20), max: .milliseconds(300))
                try await device.client.start()
                // One or two queries of notes, one or two of todos.
                var chosen = Set<Int>()
                let notes = SyncStress.noteQueries, todos = SyncStress.noteQueries.upperBound..<SyncStress.queries.count
                while chosen.count < 1 + Int(run.random.next() % 2) { chosen.insert(notes.lowerBound + Int(run.random.next() % UInt64(notes.count))) }
                let count = chosen.count
                while chosen.count < count + 1 + Int(run.random.next() % 2) { chosen.insert(todos.lowerBound + Int(run.random.next() % UInt64(todos.count))) }
                for query in chosen.sorted() { device.subscriptions["q\(query)"] = query }
                try await device.declareSubscriptions()
                await device.followTodos()
                run.devices.append(device)
            }
            return run
        } catch {
            await run.stop()
            throw error
        }
    }

    /// Copies what a failed run leaves (the node's log and replica, the devices' stores,
    /// Postgres's log) to a directory that outlives the run, and names it in the findings.
    private func keepEvidence() async {
        let kept = FileManager.default.temporaryDirectory
            .appendingPathComponent("ripple-sync-stress-seed\(configuration.seed)-\(UUID().uuidString.prefix(8))")
        // The node's own account, if it answers: its feed's health and its counters.
        for (index, port) in ports.enumerated() {
            for page in ["health", "metrics"] {
                guard nodes[index] != nil, let address = URL(string: "http://127.0.0.1:\(port)/\(page)") else { continue }
                var request = URLRequest(url: address)
                request.timeoutInterval = 5
                let text = (try? await URLSession.shared.data(for: request)).map { String(decoding: $0.0, as: UTF8.self) } ?? "(no answer)"
                try? Data(text.utf8).write(to: URL(fileURLWithPath: directory.path("node\(index)-\(page).txt")))
            }
        }
        do {
            try FileManager.default.copyItem(at: directory.url, to: kept)
            try? FileManager.default.copyItem(atPath: postgres.logFile, toPath: kept.appendingPathComponent("postgres.log").path)
            report.findings.append("the run's files (nodeN.log, postgres.log, the stores) are kept in \(kept.path)")
        } catch {
            report.findings.append("the run's files could not be kept: \(error)")
        }
    }

    /// Starts node `index` on its port, trying again (a node killed a moment ago may still
    /// hold its slot; before the clients know the port, another port) until it listens.
    func startNode(_ index: Int) async throws {
        var failures = 0
        while true {
            if ports[index] == 0 {
                var port = 0
                repeat { port = Int.random(in: 20_000..<32_000) } while ports.contains(port)
                ports[index] = port
            }
            do {
                nodes[index] = try await launchNode(index)
                urls[index] = "ws://127.0.0.1:\(ports[index])/sync"
                return
            } catch {
                failures += 1
                configuration.log?("sync-stress: node \(index) did not start on port \(ports[index]) (\(error)); trying again")
                guard failures < 20 else { throw error }
                if urls[index].isEmpty { ports[index] = 0 }
                try await Task.sleep(for: .milliseconds(50 * failures))
            }
        }
    }

    /// How many times each node was replaced (its replica file's generation).
    private var generations: [Int: Int] = [:]

    /// Node `index`'s replica file (its own, as its slot is; a replacement starts a new file).
    private func replicaPath(_ index: Int) -> String {
        directory.path("node\(index)" + (generations[index].map { "-\($0)" } ?? "") + ".sqlite")
    }

    private func launchNode(_ index: Int) async throws -> StressNode {
        let port = ports[index]
        if let executable = configuration.nodeExecutable {
            return .child(try await StressNodeProcess.start(executable, arguments: [
                "serve", "--postgres", postgres.nodeURL, "--tables", SyncStress.tables.joined(separator: ","), "--rules", directory.path("rules.json"),
                "--secret-file", directory.path("secret"), "--port", String(port), "--replica", replicaPath(index),
                "--slot", "ripple_stress_\(index)", "--heartbeat", "0.2", "--jwks-url", identity.jwks.url.absoluteString,
                "--log-level", ProcessInfo.processInfo.environment["RIPPLE_STRESS_NODE_LOG"] ?? "info",
            ], log: directory.path("node\(index).log")))
        }
        var configuration = SyncServerConfiguration(
            postgres: try SyncServerConfiguration.postgres(url: postgres.nodeURL), tables: SyncStress.tables,
            rules: try SyncRules(json: Data(SyncStress.rules(todosRead: self.configuration.todosReadRule).utf8)), secret: secret, replicaPath: replicaPath(index))
        configuration.port = port
        configuration.slot = "ripple_stress_\(index)"
        configuration.heartbeatInterval = .milliseconds(200)
        configuration.jwt = JWTConfiguration(keys: [.jwksURL(identity.jwks.url)])
        let handler = try FileLogHandler(label: "ripple-server \(index)", path: directory.path("node\(index).log"))
        let server = try SyncServer(configuration: configuration, logger: Logger(label: "ripple-server") { _ in handler })
        let task = Task { try await server.run() }
        do {
            _ = try await server.port
        } catch {
            _ = await task.result
            throw error
        }
        return .inProcess(server, task)
    }

    /// Stops the node (`kill`: SIGKILL, when it is a process). A node that does not stop
    /// within 30 s is a finding (then killed).
    func stopNode(_ index: Int, kill: Bool = false) async {
        guard let node = nodes[index] else { return }
        nodes[index] = nil
        switch node {
        case .inProcess(_, let task):
            task.cancel()
            _ = await task.result
        case .child(let process):
            if !kill, !(await process.stop(within: .seconds(30))) {
                report.discrepancies += 1
                report.findings.append("round \(report.rounds + 1): node \(index) did not stop within 30 s of SIGTERM")
                // What it waits for: its log says which parts still run; its threads, where.
                if let backtraces = await process.threadBacktraces() {
                    try? Data(backtraces.utf8).write(to: URL(fileURLWithPath: directory.path("node\(index)-threads.txt")))
                }
            }
            await process.kill()
        }
    }

    func stop() async {
        for device in devices { await device.client.stop() }
        for index in nodes.indices { await stopNode(index) }
        if SyncStress.running.withLock({ $0.clusters.removeValue(forKey: ObjectIdentifier(postgres)) }) != nil { try? postgres.stop() }
    }

    // MARK: The run

    /// Rounds of random steps, each ending at a quiescent point, until the time or the
    /// operations run out or a round finds something.
    func run() async throws -> SyncStressReport {
        // A step that never returns is a finding the run cannot write down: say what hangs.
        let watchdog = Task { [progress, log = configuration.log] in
            var warned: String?
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(5))
                let (what, since) = progress.withLock { $0 }
                if ContinuousClock.now - since > .seconds(90), warned != what {
                    log?("sync-stress: stuck for 90 s in \(what)")
                    warned = what
                }
            }
        }
        defer { watchdog.cancel() }
        let deadline = Date().addingTimeInterval(configuration.seconds)
        let limit = configuration.maxOperations ?? .max
        while Date() < deadline, report.operations < limit {
            let known = report.findings.count
            let end = min(report.operations + max(configuration.operationsPerRound, 1), limit)
            while report.operations < end {
                try await operation()
                report.operations += 1
            }
            try await quiescentPoint()
            report.rounds += 1
            for device in devices { await device.countResumes() }
            report.relaunchedSubscriptions = devices.reduce(0) { $0 + $1.relaunchedSubscriptions }
            report.resumedByChangeset = devices.reduce(0) { $0 + $1.resumedByChangeset }
            configuration.log?("sync-stress: round \(report.rounds): \(report.summaryLine)")
            configuration.log?("sync-stress: round \(report.rounds): \(report.resumedByChangeset) of \(report.relaunchedSubscriptions) subscriptions of relaunched apps resumed by changeset; \(report.steps[SyncStressStep.keyRotations.rawValue] ?? 0) key rotations")
            configuration.log?("sync-stress: round \(report.rounds): \(report.framesChecked) frames of todos checked against Postgres's history so far")
            for finding in report.findings[known...] { configuration.log?("sync-stress: finding: \(finding)") }
            if !report.passed {
                report.failedAt = report.operations
                await keepEvidence()
                break
            }
        }
        return report
    }

    private func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }

    /// One random step (a kind of step left out of the run does nothing).
    private func operation() async throws {
        let roll = pick(100)
        let step: SyncStressStep = switch roll {
        case 0..<51: .localWrites
        case 51..<75: .plainWrites
        case 75..<85: .disconnects
        case 85..<89: .relaunches
        case 89..<90: .keyRotations
        case 90..<93: .nodeRestarts
        case 93..<95: .nodeKills
        case 95..<96: .nodeReplacements
        case 96..<97: .reconnectStorms
        default: .postgresRestarts
        }
        guard configuration.steps.contains(step) else { return }
        report.steps[step.rawValue, default: 0] += 1
        doing("operation \(report.operations + 1): \(step.rawValue)")
        switch step {
        case .localWrites:
            try await localWrite(devices[pick(devices.count)])
        case .plainWrites:
            try await plainWrite()
        case .disconnects:
            let device = devices[pick(devices.count)]
            doing("operation \(report.operations + 1): device \(devices.firstIndex { $0 === device }!) goes \(device.online ? "offline" : "online")")
            if device.online { await device.client.stop() } else { try await device.client.start() }
            device.online.toggle()
        case .nodeRestarts, .nodeKills:
            let index = pick(nodes.count)
            doing("operation \(report.operations + 1): node \(index) \(step == .nodeKills ? "killed" : "restarted")")
            await stopNode(index, kill: step == .nodeKills)
            try await startNode(index)
        case .nodeReplacements:
            let index = pick(nodes.count)
            doing("operation \(report.operations + 1): node \(index) replaced by a node with an empty replica")
            await stopNode(index, kill: true)
            // The new node's replica is a new, empty file: its slot (the old node's) does not
            // belong to it, so it makes a fresh slot and copy. (The old file stays: an
            // in-process node's store may not have let go of it yet.)
            generations[index, default: 0] += 1
            try await startNode(index)
        case .reconnectStorms:
            let index = pick(nodes.count)
            doing("operation \(report.operations + 1): a storm of \(configuration.stormSockets) sockets on node \(index)")
            try await storm(index)
        case .postgresRestarts:
            try await postgres.restart(immediate: true)
        case .relaunches:
            let index = pick(devices.count)
            doing("operation \(report.operations + 1): device \(index)'s app relaunches")
            try await devices[index].relaunch()
        case .keyRotations:
            doing("operation \(report.operations + 1): the identity provider rotates its key")
            identity.rotate()
        }
    }

    /// A device writes its local store: a new note, or a change to a note it holds (sometimes
    /// one its user may not write: moving it to another user).
    private func localWrite(_ device: StressDevice) async throws {
        if pick(2) == 0 { return try localTodoWrite(device) }
        let held = try device.localRows().compactMap { Int64($0[0]) }
        let rank = Int64(pick(10))
        do {
            let choice = held.isEmpty ? 0 : pick(5)
            try device.store.write { db in
                switch choice {
                case 0, 1:
                    device.nextID += 1
                    try db.execute("INSERT INTO notes(id, owner, rank, done, body) VALUES (?, ?, ?, 0, ?)",
                                   [device.nextID, device.user, rank, "by \(device.user)"])
                case 2:
                    try db.execute("UPDATE notes SET rank = ?, body = ? WHERE id = ?", [rank, "edit \(report.operations)", held[pick(held.count)]])
                case 3:
                    let id = held[pick(held.count)]
                    if pick(6) == 0 {
                        try db.execute("UPDATE notes SET owner = ? WHERE id = ?", [SyncStress.users[pick(3)], id])
                    } else {
                        try db.execute("UPDATE notes SET done = NOT done WHERE id = ?", [id])
                    }
                default:
                    try db.execute("DELETE FROM notes WHERE id = ?", [held[pick(held.count)]])
                }
            }
        } catch {
            // (Before its first result the local table does not exist: nothing to write yet.)
            report.localWriteErrors += 1
        }
    }

    /// Another Postgres client changes the table: rows move between users, ranks change, rows
    /// come and go.
    private func plainWrite() async throws {
        if pick(2) == 0 { return try await plainTeamWrite() }
        let id = Int64(1 + pick(Int(nextPlainID)))
        let sql: String
        switch pick(4) {
        case 0:
            sql = "UPDATE notes SET owner = 'u\(pick(3))' WHERE id = \(id)"
        case 1:
            sql = "UPDATE notes SET rank = \(pick(10)), done = \(pick(2) == 0) WHERE id = \(id)"
        case 2:
            nextPlainID += 1
            sql = "INSERT INTO notes VALUES (\(nextPlainID), 'u\(pick(3))', \(pick(10)), false, 'plain') ON CONFLICT DO NOTHING"
        default:
            sql = "DELETE FROM notes WHERE id = \(id)"
        }
        do {
            try await postgres.psql(sql)
        } catch {
            // Postgres restarting: the write is not made (the model is Postgres itself).
        }
    }

    /// A device writes its local todos under the membership rule: a new todo (its own, or
    /// sometimes another user's in a random project: refused unless it is a member), a todo it
    /// holds edited, moved to another project (refused when it neither owns the todo nor is a
    /// member there), given to another user, or deleted.
    private func localTodoWrite(_ device: StressDevice) throws {
        let held = try device.localRows("todos").compactMap { Int64($0[0]) }
        let rank = Int64(pick(10))
        let project = Int64(1 + pick(4))
        do {
            let choice = held.isEmpty ? 0 : pick(6)
            try device.store.write { db in
                switch choice {
                case 0:
                    device.nextID += 1
                    let owner = pick(4) == 0 ? SyncStress.users[pick(3)] : device.user
                    try db.execute("INSERT INTO todos(id, project_id, owner, title, done, rank) VALUES (?, ?, ?, ?, 0, ?)",
                                   [device.nextID, project, owner, "by \(device.user)", rank])
                case 1, 2:
                    try db.execute("UPDATE todos SET rank = ?, title = ?, done = NOT done WHERE id = ?",
                                   [rank, "edit \(report.operations)", held[pick(held.count)]])
                case 3:
                    try db.execute("UPDATE todos SET project_id = ? WHERE id = ?", [project, held[pick(held.count)]])
                case 4:
                    try db.execute("UPDATE todos SET owner = ? WHERE id = ?", [SyncStress.users[pick(3)], held[pick(held.count)]])
                default:
                    try db.execute("DELETE FROM todos WHERE id = ?", [held[pick(held.count)]])
                }
            }
        } catch {
            // (Before its first result the local table does not exist: nothing to write yet.)
            report.localWriteErrors += 1
        }
    }

    /// Another Postgres client changes the team: memberships granted and revoked, todos
    /// changing project, edited, inserted and deleted, or several of these in one transaction.
    private func plainTeamWrite() async throws {
        let todo = 1 + pick(Int(nextPlainTodo))
        let (project, user, rank) = (1 + pick(4), "u\(pick(3))", pick(10))
        let grant = "INSERT INTO members(project_id, user_id) VALUES (\(project), '\(user)') ON CONFLICT DO NOTHING"
        let revoke = "DELETE FROM members WHERE project_id = \(project) AND user_id = '\(user)'"
        let sql: String
        switch pick(8) {
        case 0, 1: sql = grant
        case 2, 3: sql = revoke
        case 4:
            // A todo moves to another project (another list of the tree), or a project's owner
            // (the tree's to-one reference) changes.
            sql = pick(3) == 0 ? "UPDATE projects SET owner = '\(user)', name = 'p\(report.operations)' WHERE id = \(project)"
                : "UPDATE todos SET project_id = \(project), rank = \(rank) WHERE id = \(todo)"
        case 5: sql = "UPDATE todos SET done = NOT done, rank = \(rank), title = 'plain \(report.operations)' WHERE id = \(todo)"
        case 6:
            nextPlainTodo += 1
            sql = pick(3) == 0 ? "DELETE FROM todos WHERE id = \(todo)"
                : "INSERT INTO todos VALUES (\(nextPlainTodo), \(project), '\(user)', 'plain', false, \(rank)) ON CONFLICT DO NOTHING"
        default:
            // A revoke, a move and a grant elsewhere, in one transaction: one frame each.
            sql = "BEGIN; \(revoke); UPDATE todos SET project_id = \(project) WHERE id = \(todo); "
                + "INSERT INTO members(project_id, user_id) VALUES (\(1 + project % 4), '\(user)') ON CONFLICT DO NOTHING; COMMIT;"
        }
        do {
            try await postgres.psql(sql)
        } catch {
            // Postgres restarting: the write is not made (the model is Postgres itself).
        }
    }

    // MARK: Checks

    /// Every device online, every outbox empty, every subscription equal to its query on
    /// Postgres; then the accounting of mutations and the rules.
    private func quiescentPoint() async throws {
        doing("round \(report.rounds + 1)'s quiescent point")
        for (index, node) in nodes.enumerated() {
            guard case .child(let process) = node, let ended = process.ended else { continue }
            // Nothing stopped it: the node died by itself.
            report.discrepancies += 1
            report.findings.append("round \(report.rounds + 1): node \(index) died by itself (\(ended)); see its log")
            nodes[index] = nil
            try await startNode(index)
        }

        for device in devices where !device.online {
            try await device.client.start()
            device.online = true
        }
        let deadline = Date().addingTimeInterval(configuration.settleTimeout)
        for device in devices {
            var last = ""
            while true {
                let pending = try await device.client.pendingMutations()
                let difference = pending == 0 ? try await firstDifference(device) : "\(pending) mutations pending"
                guard let difference else { break }
                last = difference
                if Date() > deadline {
                    report.discrepancies += 1
                    report.findings.append("round \(report.rounds + 1): \(device.user) (device \(devices.firstIndex { $0 === device }!)): \(last) "
                                           + "(\(await device.client.connectionState()))")
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        // Every node lets go of the sockets it no longer holds (a storm's among them): each
        // holds at most one per device once the devices settled (given 30 s to close the rest).
        for (index, port) in ports.enumerated() where nodes[index] != nil {
            let limit = Date().addingTimeInterval(30)
            var held = await socketsHeld(port: port)
            while let count = held, count > devices.count, Date() < limit {
                try await Task.sleep(for: .milliseconds(100))
                held = await socketsHeld(port: port)
            }
            if let held, held > devices.count {
                report.discrepancies += 1
                report.findings.append("round \(report.rounds + 1): node \(index) holds \(held) sockets for \(devices.count) devices")
            }
        }
        try await configuration.beforeChecks?(postgres)
        try await checkMutations()
        try await checkRules()
        try await checkFrames()
    }

    /// A reconnect storm on node `index`: ``SyncStressConfiguration/stormSockets`` sockets open
    /// at once, each says hello and subscribes to a user's notes, and all go once each has an
    /// answer (a result, or `retry_later`). The node must survive it (checked at the quiescent
    /// point) and its memory must not grow storm after storm.
    private func storm(_ index: Int) async throws {
        let url = urls[index]
        let tokens = try SyncStress.users.map { user in
            try SyncToken.sign(user: user, expires: Date().addingTimeInterval(3600), secret: secret)
        }
        let count = configuration.stormSockets
        let answered = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for socket in 0..<count {
                group.addTask {
                    if await StormSocket.visit(url: url, token: tokens[socket % tokens.count]) { answered.withLock { $0 += 1 } }
                }
            }
        }
        guard case .child(let process) = nodes[index], let resident = process.residentBytes else {
            configuration.log?("sync-stress: storm on node \(index): \(answered.withLock { $0 }) of \(count) sockets answered")
            return
        }
        stormMemory[index, default: []].append(resident)
        configuration.log?("sync-stress: storm on node \(index): \(answered.withLock { $0 }) of \(count) sockets answered; "
                           + "the node's memory after its storms: \(stormMemory[index]!.map { "\($0 >> 20)" }.joined(separator: ", ")) MiB")
        if let history = stormMemory[index], SyncStress.memoryGrows(history) {
            report.discrepancies += 1
            report.findings.append("round \(report.rounds + 1): node \(index)'s memory grows storm after storm: "
                                   + history.map { "\($0 >> 20) MiB" }.joined(separator: ", "))
        }
    }

    /// How many sockets the node on `port` holds, from its `/metrics` (`nil`: no answer).
    private func socketsHeld(port: Int) async -> Int? {
        guard let address = URL(string: "http://127.0.0.1:\(port)/metrics") else { return nil }
        var request = URLRequest(url: address)
        request.timeoutInterval = 10
        guard let (data, _) = try? await URLSession.shared.data(for: request) else { return nil }
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("ripple_sockets ") }
        return line.flatMap { Double($0.split(separator: " ")[1]) }.map { Int($0) }   // (a gauge: "3.0")
    }

    /// How the device's rows differ from Postgres (`nil`: they do not).
    private func firstDifference(_ device: StressDevice) async throws -> String? {
        var union: [String: Set<[String]>] = ["notes": [], "todos": []]
        for (id, query) in device.subscriptions.sorted(by: { $0.key < $1.key }) {
            let sql = SyncStress.queries[query].1.replacingOccurrences(of: "$user", with: "'\(device.user)'")
            let expected = try await rows(sql)
            union[SyncStress.queries[query].0.table, default: []].formUnion(expected)
            let shown = await device.client.rows(of: id)?.map { row in row.map(\.psqlText) } ?? []
            if shown != expected {
                return "subscription \(id) shows \(shown.map { $0.joined(separator: "|") }) where Postgres has \(expected.map { $0.joined(separator: "|") })"
            }
        }
        // The tree: its projects, each project's todos, its owners; its todos are local todos too.
        func bind(_ sql: String) -> String { sql.replacingOccurrences(of: "$user", with: "'\(device.user)'") }
        let projects = try await rows(bind(SyncStress.treeProjectsSQL))
        let shownProjects = await device.client.rows(of: "tree")?.map { row in row.map(\.psqlText) } ?? []
        if shownProjects != projects {
            return "the tree shows projects \(shownProjects.map { $0.joined(separator: "|") }) where Postgres has \(projects.map { $0.joined(separator: "|") })"
        }
        let todos = try await rows(bind(SyncStress.treeTodosSQL))
        var lists: [String: [[String]]] = [:]
        for todo in todos { lists[todo[1], default: []].append(todo) }
        let expectedLists = projects.map { lists[$0[0]] ?? [] }
        let included = await device.client.includedRows(of: "tree", include: "todos")
        let shownLists = (included?.sections ?? []).map { $0.map { row in row.map(\.psqlText) } }
        if shownLists != expectedLists {
            return "the tree shows todos \(shownLists) where Postgres has \(expectedLists)"
        }
        union["todos", default: []].formUnion(todos)
        let owners = Set(try await rows(bind(SyncStress.treeOwnersSQL)))
        let shownOwners = Set(await device.client.includedRows(of: "tree", include: "owner")?.rows.map { row in row.map(\.psqlText) } ?? [])
        if shownOwners != owners {
            return "the tree shows owners \(shownOwners.sorted { $0.lexicographicallyPrecedes($1) }) where Postgres has \(owners.sorted { $0.lexicographicallyPrecedes($1) })"
        }
        union["projects"] = Set(projects)
        union["users"] = owners
        for (table, union) in union.sorted(by: { $0.key < $1.key }) {
            let local = Set(try device.localRows(table))
            if local != union {
                return "the local \(table) holds \(local.subtracting(union).count) rows no subscription has and misses \(union.subtracting(local).count)"
            }
        }
        return nil
    }

    /// Every mutation a device made has exactly one result, and the server's counter is the
    /// device's.
    private func checkMutations() async throws {
        var made = 0
        for (index, device) in devices.enumerated() {
            let (clientID, last) = try device.store.read { db -> (String?, Int64) in
                (try db.fetchValue("SELECT value FROM ripple_sync_state WHERE name = 'client_id'", as: String.self),
                 try db.fetchValue("SELECT value FROM ripple_sync_state WHERE name = 'last_assigned'", as: Int64.self) ?? 0)
            }
            made += Int(last)
            guard let clientID else {
                if last > 0 { report.lost += Int(last); report.findings.append("device \(index) has \(last) mutations and no client id") }
                continue
            }
            let counts = try await rows("""
                SELECT (SELECT last_mutation_id FROM ripple_sync_clients WHERE client_id = '\(clientID)'),
                       count(*), count(DISTINCT mutation_id), coalesce(min(mutation_id), 0), coalesce(max(mutation_id), 0),
                       count(*) FILTER (WHERE status = 'rejected' AND (code = 'unavailable' OR code IN ('40001', '40P01')
                                        OR left(code, 2) IN ('08', '53') OR left(code, 3) = '57P'))
                FROM ripple_sync_results WHERE client_id = '\(clientID)'
                """).first ?? []
            guard counts.count == 6, let counter = Int64(counts[0]), let results = Int64(counts[1]), let distinct = Int64(counts[2]),
                  let lowest = Int64(counts[3]), let highest = Int64(counts[4]), let passing = Int64(counts[5]) else {
                report.findings.append("device \(index): the server has no counter for client \(clientID)")
                report.lost += Int(last)
                continue
            }
            // A mutation rejected for a failure that passes (Postgres restarting, the node
            // stopping) is a write lost: such failures must be tried again, never stored.
            if passing > 0 {
                report.lost += Int(passing)
                report.findings.append("device \(index): \(passing) mutations rejected for a failure that passes")
            }
            // Every mutation 1…last has its one result, and the counter stands at the last.
            if counter < last || distinct < last {
                report.lost += Int(last - min(counter, distinct))
                report.findings.append("device \(index): made \(last) mutations, the server's counter is \(counter), "
                                       + "\(distinct) of them have results (\(lowest)…\(highest))")
            }
            if counter > last || results != distinct || highest > last || (results > 0 && lowest != 1) {
                report.duplicated += 1
                report.findings.append("device \(index): counter \(counter) for \(last) mutations, \(results) results (\(distinct) distinct, \(lowest)…\(highest))")
            }
        }
        report.mutations = made
    }

    /// No device holds a row its user's read rule excludes: a note of another user, a todo
    /// neither owned by the user nor in a project they are a member of (on Postgres now).
    private func checkRules() async throws {
        for (index, device) in devices.enumerated() {
            for row in try device.localRows() where row[1] != device.user {
                report.leaked += 1
                report.findings.append("device \(index) of \(device.user) holds note \(row[0]) of \(row[1])")
            }
            let readable = Set(try await rows("SELECT id FROM todos WHERE "
                                              + SyncStress.readableTodo.replacingOccurrences(of: "$user", with: "'\(device.user)'")).map { $0[0] })
            for row in try device.localRows("todos") where !readable.contains(row[0]) {
                report.leaked += 1
                report.findings.append("device \(index) of \(device.user) holds todo \(row[0]) (\(row.joined(separator: "|"))), which the rule excludes")
            }
            let projects = Set(try await rows("SELECT project_id FROM members WHERE user_id = '\(device.user)'").map { $0[0] })
            for row in try device.localRows("projects") where !projects.contains(row[0]) {
                report.leaked += 1
                report.findings.append("device \(index) of \(device.user) holds project \(row[0]), of which they are not a member")
            }
        }
    }

    /// Every frame each device's remote query of todos received since the last check held
    /// exactly what its user could read at the frame's position, by Postgres's history
    /// (``TeamHistory``): a row the user could not read there is a leak, a row missing or
    /// stale (a transaction not whole) a discrepancy.
    private func checkFrames() async throws {
        guard let history else { return }
        try await history.catchUp()
        for (index, device) in devices.enumerated() {
            let frames = device.frames.withLock { frames in
                defer { frames = [] }
                return frames
            }
            report.framesChecked += frames.count
            for frame in frames {
                guard let state = history.state(at: frame.lsn) else {
                    report.discrepancies += 1
                    report.findings.append("round \(report.rounds + 1): device \(index)'s remote query of todos: \(frame.lsn)")
                    continue
                }
                let expected = state.readableTodos(of: device.user, columns: ["id", "project_id", "owner", "title", "done", "rank"])
                guard frame.rows != expected else { continue }
                let readable = Set(expected.map { $0[0] })
                let strangers = frame.rows.filter { !readable.contains($0[0]) }
                if !strangers.isEmpty {
                    report.leaked += strangers.count
                    report.findings.append("round \(report.rounds + 1): device \(index) of \(device.user) got a frame at \(frame.lsn) carrying todos "
                                           + "it could not read there: \(strangers.map { $0.joined(separator: "|") })")
                } else {
                    report.discrepancies += 1
                    report.findings.append("round \(report.rounds + 1): device \(index) of \(device.user) got a frame at \(frame.lsn) showing "
                                           + "\(frame.rows.map { $0.joined(separator: "|") }) where Postgres had \(expected.map { $0.joined(separator: "|") })")
                }
            }
        }
    }

    private func rows(_ sql: String) async throws -> [[String]] {
        let text = try await postgres.psql(sql)
        return text.split(separator: "\n", omittingEmptySubsequences: true).map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
        }
    }

    /// A local value as psql's unaligned output writes it (`isBool`: a `bool` column, kept as 1 or 0).
    static func text(_ value: SQLValue, isBool: Bool) -> String {
        switch value {
        case .null: ""
        case .integer(let integer): isBool ? (integer != 0 ? "t" : "f") : String(integer)
        case .real(let real): String(real)
        case .text(let text): text
        case .blob(let bytes): String(decoding: bytes, as: UTF8.self)
        }
    }
}

extension WireValue {
    /// The value as psql's unaligned output writes it (`t`/`f` for booleans, nothing for NULL):
    /// to compare a client's rows with what `psql` prints.
    public var psqlText: String {
        switch self {
        case .null: ""
        case .bool(let bool): bool ? "t" : "f"
        case .integer(let integer): String(integer)
        case .real(let real): String(real)
        case .text(let text): text
        }
    }
}
#endif
