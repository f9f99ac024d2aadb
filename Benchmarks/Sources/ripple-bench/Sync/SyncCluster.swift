import Foundation
import Logging
import PostgresNIO
import RippleServer
import RippleSyncTesting
import RippleTesting

/// A throwaway PostgreSQL cluster for one group of sync workloads, with a temporary directory
/// for the node's replica, the client stores and scripts; ``stop()`` removes both.
final class SyncCluster: Sendable {
    let postgres: ThrowawayPostgres
    /// A directory of the run's own files (removed by ``stop()``).
    let directory: String

    private init(postgres: ThrowawayPostgres, directory: String) {
        (self.postgres, self.directory) = (postgres, directory)
    }

    /// The clusters running now, for ``stopAll()``.
    private static let running = SyncLocked<[ObjectIdentifier: SyncCluster]>([:])

    /// Starts a cluster, runs `body` with it, and stops it and removes its files before
    /// returning — after `body` returned and after it threw. With ``start()`` and ``stop()``,
    /// the one place the benchmarks start and stop a cluster.
    static func with<T>(_ body: (SyncCluster) async throws -> T) async throws -> T {
        try await using(try await start(), close: { await $0.stop() }, body)
    }

    /// Starts a cluster (initdb and start run off the concurrency pool: they block). Its caller
    /// stops it on every path: ``with(_:)`` does.
    static func start() async throws -> SyncCluster {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-bench-sync-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        do {
            let postgres = try await offload { try ThrowawayPostgres() }
            let cluster = SyncCluster(postgres: postgres, directory: directory)
            running.withLock { $0[ObjectIdentifier(cluster)] = cluster }
            return cluster
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// Stops every cluster still running and removes its files, from any thread (a run that
    /// did not finish in time, or was interrupted, leaves nothing behind).
    static func stopAll() {
        let clusters = running.withLock { running in
            defer { running = [:] }
            return Array(running.values)
        }
        for cluster in clusters {
            try? cluster.postgres.stop()
            try? FileManager.default.removeItem(atPath: cluster.directory)
        }
    }

    /// A path for a file in the run's directory.
    func path(_ name: String) -> String { directory + "/" + name }

    /// Runs `sql` with `psql`, as any other Postgres client would.
    @discardableResult
    func psql(_ sql: String) async throws -> String {
        let postgres = postgres
        return try await offload { try postgres.psql(sql) }
    }

    /// A connection of its own (no pool), for a writer or a floor's loop.
    func connect(id: Int) async throws -> PostgresConnection {
        let configuration = PostgresConnection.Configuration(host: "127.0.0.1", port: postgres.port, username: ThrowawayPostgres.user,
                                                             password: nil, database: "postgres", tls: .disable)
        return try await PostgresConnection.connect(configuration: configuration, id: id, logger: quietLogger)
    }

    /// Stops the cluster and removes its files.
    func stop() async {
        guard Self.running.withLock({ $0.removeValue(forKey: ObjectIdentifier(self)) }) != nil else { return }
        let postgres = postgres
        do {
            try await offload { try postgres.stop() }
        } catch {
            Report.note("sync: stopping PostgreSQL failed: \(describe(error))")
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A Ripple Sync node serving a cluster on a free port of 127.0.0.1, run in this process.
final class SyncNode: Sendable {
    let server: SyncServer
    let task: Task<Void, any Error>
    let port: Int

    static let secret = Array("ripple-bench sync: a token secret of at least 32 bytes".utf8)

    var url: String { "ws://127.0.0.1:\(port)/sync" }

    private init(server: SyncServer, task: Task<Void, any Error>, port: Int) {
        (self.server, self.task, self.port) = (server, task, port)
    }

    /// Starts a node (as ``start(_:tables:name:adjust:)``), runs `body` with it, and stops it
    /// before returning — after `body` returned and after it threw. With `start` and ``stop()``,
    /// the one place the benchmarks start and stop a node.
    static func with<T>(_ cluster: SyncCluster, tables: [String], name: String = "node",
                        adjust: (inout SyncServerConfiguration) -> Void = { _ in },
                        _ body: (SyncNode) async throws -> T) async throws -> T {
        try await using(try await start(cluster, tables: tables, name: name, adjust: adjust), close: { await $0.stop() }, body)
    }

    /// Starts a node following `tables` of `cluster` (everyone reads every row), with its
    /// replica in the cluster's directory; returns once it listens (its initial copy done).
    /// Its caller stops it on every path: ``with(_:tables:name:adjust:_:)`` does.
    static func start(_ cluster: SyncCluster, tables: [String], name: String = "node",
                      adjust: (inout SyncServerConfiguration) -> Void = { _ in }) async throws -> SyncNode {
        let rules = "{\"tables\": {" + tables.map { "\"\($0)\": {\"read\": true}" }.joined(separator: ", ") + "}}"
        var configuration = SyncServerConfiguration(
            postgres: try SyncServerConfiguration.postgres(url: cluster.postgres.url), tables: tables,
            rules: try SyncRules(json: Data(rules.utf8)), secret: secret, replicaPath: cluster.path("\(name).sqlite"))
        configuration.port = 0
        configuration.slot = "ripple_\(name)"
        adjust(&configuration)
        let server = try SyncServer(configuration: configuration)
        let task = Task { try await server.run() }
        do {
            return SyncNode(server: server, task: task, port: try await server.port)
        } catch {
            task.cancel()
            _ = await task.result
            throw error
        }
    }

    /// A token for `user`, valid for an hour.
    func token(_ user: String = "bench") throws -> String {
        try SyncToken.sign(user: user, expires: Date().addingTimeInterval(3600), secret: Self.secret)
    }

    /// Stops the node (given up on after 10 s: the run goes on, the node's cluster is stopped).
    func stop() async {
        let task = task
        task.cancel()
        do {
            try await withDeadline(10, "the node's stop") { _ = await task.result }
        } catch {
            Report.note("sync: \(describe(error))")
        }
    }
}

/// Runs `body` with `resource`, then `close`s it — after `body` returned and after it threw —
/// and returns what `body` returned, or throws what it threw.
func using<Resource, T>(_ resource: Resource, close: (Resource) async -> Void,
                        _ body: (Resource) async throws -> T) async throws -> T {
    let result: T
    do {
        result = try await body(resource)
    } catch {
        await close(resource)
        throw error
    }
    await close(resource)
    return result
}

/// A logger that drops everything (the benchmark reports on stdout and stderr itself).
let quietLogger = Logger(label: "ripple-bench", factory: { _ in SwiftLogNoOpLogHandler() })

/// Runs blocking work (a child process, a loop over SQLite's C API) on a thread outside Swift's
/// concurrency pool, which has one thread per core: blocking one of them would slow the node
/// the benchmark times.
func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

/// Runs `operation`, giving up on it after `seconds`: it is cancelled and left to end on its own
/// (an operation that ignores cancellation must not hold the run).
///
/// - Throws: what `operation` throws, or ``SyncBenchError`` naming `what` after `seconds`.
func withDeadline<T: Sendable>(_ seconds: Double, _ what: String,
                               _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    let once = SyncLocked(false)
    let claim: @Sendable () -> Bool = { once.withLock { claimed in defer { claimed = true }; return !claimed } }
    let work = SyncLocked<Task<Void, Never>?>(nil)
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let alarm = Task {
            try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            guard claim() else { return }
            work.withLock { $0 }?.cancel()
            continuation.resume(throwing: SyncBenchError("\(what) did not finish within \(seconds) s"))
        }
        let task = Task {
            let result: Result<T, any Error>
            do { result = .success(try await operation()) } catch { result = .failure(error) }
            alarm.cancel()
            if claim() { continuation.resume(with: result) }
        }
        work.withLock { $0 = task }
    }
}

/// A value guarded by a lock.
final class SyncLocked<Value>: @unchecked Sendable {   // `value` is guarded by `lock`
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }
}

/// An error in words; Postgres's own errors with their SQLSTATE and message (PostgresNIO
/// describes them generically unless asked to reflect them).
func describe(_ error: any Error) -> String {
    error is PSQLError ? String(reflecting: error) : "\(error)"
}

/// An error of the sync benchmark: what did not happen, in words.
struct SyncBenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
