#if Sync
import Foundation
import Ripple
import RippleServer
import RippleTesting
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A private PostgreSQL cluster for tests, benchmarks and demos: made with `initdb` in a
/// temporary directory, listening on a free port of 127.0.0.1 only, with `wal_level = logical`
/// (logical replication slots, as Ripple Sync reads Postgres), and removed by ``stop()``.
///
/// It has two roles: the superuser ``user`` (for writers and DDL: ``url``, ``psql(_:database:)``)
/// and ``nodeRole``, `LOGIN REPLICATION` and no more, which a node logs in as (``nodeURL``) once
/// ``setUpNode(tables:writes:publication:)`` gave it what it needs, as on a managed Postgres.
///
/// Never a shared system service: each cluster is its own. PostgreSQL refuses to run as root, so
/// when this process is root the cluster runs as the unprivileged user `nobody` (through
/// `runuser`), with its directories owned by that user.
///
/// Start one in a scope, which stops it when the body returns or throws:
///
/// ```swift
/// try await withThrowawayPostgres { postgres in
///     try await postgres.psql("CREATE TABLE todos(id int PRIMARY KEY, title text)")
///     print(postgres.url)   // postgres://ripple@127.0.0.1:PORT/postgres
/// }
/// ```
///
/// A cluster never outlives the process that made it: a watchdog process, started with the
/// cluster, stops it and removes its directory once this process ends — however it ends, a crash
/// or `exit` included — if ``stop()`` did not.
///
/// The binaries are Debian's `postgresql-15` (`/usr/lib/postgresql/15/bin`), or those of
/// `RIPPLE_POSTGRES_BIN`, or the directory `pg_config --bindir` names. ``availability`` says
/// whether they are there (tests that need them skip with that one line, unless `CI=true`).
public final class ThrowawayPostgres: Sendable {
    /// The superuser the cluster is made with (no password: trust on 127.0.0.1 only).
    public static let user = "ripple"
    /// The role a node logs in as: `LOGIN REPLICATION`, not a superuser (made with the cluster;
    /// ``setUpNode(tables:writes:publication:)`` gives it what a node of some tables needs).
    public static let nodeRole = "ripple_node"

    /// Where the cluster's binaries are, or why there are none.
    public enum Availability: Sendable, Equatable {
        case available(binaries: String)
        case missing(String)
    }

    /// The port it listens on (127.0.0.1).
    public var port: Int { chosenPort.withLock { $0 } }
    /// The port, chosen again when another program took the first before the server bound it.
    private let chosenPort: Locked<Int>
    /// The temporary directory holding its data, socket and log.
    public let directory: String
    /// The directory of `postgres`, `pg_ctl`, `psql`, `pgbench`.
    public let binaries: String
    /// The user the server runs as when this process is root (`nil`: this process's user).
    let runAs: String?
    /// Held while ``setUpNode(tables:writes:publication:)`` runs.
    private let setupLock = NSLock()
    /// The process that stops the cluster when this process ends (`nil` before initdb ran).
    private let watchdog: Locked<ExitWatchdog?> = Locked(nil)

    /// A connection URL for the `postgres` database, as the superuser (for writers and DDL).
    public var url: String { "postgres://\(Self.user)@127.0.0.1:\(port)/postgres" }
    /// A connection URL for the `postgres` database as ``nodeRole``, the node's role.
    public var nodeURL: String { "postgres://\(Self.nodeRole)@127.0.0.1:\(port)/postgres" }
    /// The data directory.
    public var dataDirectory: String { directory + "/data" }
    /// The server's log file.
    public var logFile: String { directory + "/postgres.log" }

    /// Whether PostgreSQL's binaries can be found here.
    public static var availability: Availability {
        if let found = findBinaries() { return .available(binaries: found) }
        return .missing("PostgreSQL 15 is not installed (Debian: apt-get install postgresql-15; or set RIPPLE_POSTGRES_BIN)")
    }

    /// Whether tests that need Postgres run: its binaries are here, or this is CI (`CI=true`),
    /// where a missing Postgres must fail the run rather than skip.
    public static var testsRun: Bool {
        if case .available = availability { return true }
        return ProcessInfo.processInfo.environment["CI"] == "true"
    }

    /// Makes and starts a cluster. `settings` are added to `postgresql.conf` (name → value).
    ///
    /// - Throws: ``ThrowawayPostgresError`` saying what failed (no binaries, `initdb` or the
    ///   start failing, with the log's last lines).
    public init(settings: [String: String] = [:]) throws {
        guard case .available(let binaries) = Self.availability else {
            throw ThrowawayPostgresError("cannot start PostgreSQL: " + {
                if case .missing(let reason) = Self.availability { return reason }
                return ""
            }())
        }
        self.binaries = binaries
        let files = FileManager.default
        directory = files.temporaryDirectory.appendingPathComponent("ripple-postgres-\(UUID().uuidString)").path
        runAs = getuid() == 0 ? "nobody" : nil
        try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chosenPort = Locked(try Self.freePort())
        do {
            if let runAs {
                guard let account = getpwnam(runAs) else { throw ThrowawayPostgresError("no user \(runAs) to run PostgreSQL as") }
                guard chown(directory, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                    throw ThrowawayPostgresError("cannot give \(directory) to \(runAs): errno \(errno)")
                }
            }
            try runAsServer(binaries + "/initdb", ["-D", dataDirectory, "-U", Self.user, "--auth=trust", "--encoding=UTF8",
                                                   "--locale=C", "--no-sync"])
            // Before the server starts: from its first moment, the cluster ends with this process.
            let stopCommand = serverCommand(binaries + "/pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
            let started = try ExitWatchdog(removing: directory, after: stopCommand)
            watchdog.withLock { $0 = started }
            var configuration: [String: String] = [
                "listen_addresses": "'127.0.0.1'", "port": "\(port)", "unix_socket_directories": "'\(directory)'",
                "wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20",
                "max_slot_wal_keep_size": "'1GB'", "fsync": "off", "full_page_writes": "off",
                "synchronous_commit": "on", "max_connections": "200", "shared_buffers": "'64MB'",
            ]
            for (name, value) in settings { configuration[name] = value }
            let lines = configuration.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: "\n")
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: dataDirectory + "/postgresql.conf"))
            handle.seekToEndOfFile()
            handle.write(Data(("\n# ThrowawayPostgres\n" + lines + "\n").utf8))
            try handle.close()
            // The port was free when chosen, and initdb took a while: on a busy machine another
            // program (a client's ephemeral port, another cluster) can take it first. Then a
            // fresh one is tried (a later `port` line of postgresql.conf wins).
            for attempt in 1... {
                do {
                    try start()
                    break
                } catch where attempt < 5 && lastLogLines().contains("Address already in use") {
                    let port = try Self.freePort()
                    chosenPort.withLock { $0 = port }
                    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: dataDirectory + "/postgresql.conf"))
                    handle.seekToEndOfFile()
                    handle.write(Data("port = \(port)\n".utf8))
                    try handle.close()
                }
            }
            try psql("CREATE ROLE \(Self.nodeRole) LOGIN REPLICATION")
        } catch {
            if FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid") {
                _ = try? runAsServer(binaries + "/pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
            }
            try? files.removeItem(atPath: directory)
            watchdog.withLock { $0 }?.dismiss()
            throw error
        }
    }

    deinit {
        // A cluster left running by a caller that forgot stop(): end it, leave nothing behind.
        if FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid") {
            _ = try? runAsServer(binaries + "/pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
        }
        try? FileManager.default.removeItem(atPath: directory)
        watchdog.withLock { $0 }?.dismiss()
    }

    /// Starts the server (after ``init(settings:)`` it runs; after ``kill()-19v84``, this starts it again).
    public func start() throws {
        do {
            try runAsServer(binaries + "/pg_ctl", ["-D", dataDirectory, "-l", logFile, "-w", "-t", "60", "start"])
        } catch {
            throw ThrowawayPostgresError("PostgreSQL did not start: \(error)\n" + lastLogLines())
        }
    }

    /// Stops the server at once, as a crash would (`pg_ctl stop -m immediate`): it recovers from
    /// its WAL at the next ``start()-3osgg``.
    public func kill() throws {
        try runAsServer(binaries + "/pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
    }

    /// Restarts the server; `immediate`: without a clean shutdown (recovery at start).
    public func restart(immediate: Bool = false) throws {
        try runAsServer(binaries + "/pg_ctl", ["-D", dataDirectory, "-m", immediate ? "immediate" : "fast", "-w", "-t", "60",
                                               "-l", logFile, "restart"])
    }

    /// Stops the server and removes its directory (and ends its watchdog).
    public func stop() throws {
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            watchdog.withLock { $0 }?.dismiss()
        }
        try runAsServer(binaries + "/pg_ctl", ["-D", dataDirectory, "-m", "fast", "-w", "stop"])
    }

    /// Lets the watchdog act as if this process had ended (for the test that proves it stops the
    /// cluster): the watchdog stops the server and removes the directory; returns once it did.
    package func endAsIfThisProcessEnded() {
        watchdog.withLock { $0 }?.dismiss()
    }

    /// Runs `sql` with `psql` (as another client would: its own connection, its own
    /// transaction per statement unless the SQL says otherwise) and returns what it printed:
    /// unaligned rows, `|` between columns, no headers.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        try Self.run(binaries + "/psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", "\(port)",
                                          "-U", Self.user, "-d", database, "-c", sql])
    }

    /// Applies, as the superuser, what an administrator sets up for a node of `tables` that
    /// runs as ``nodeRole`` (``PostgresSetup``: the publication, the node's own tables, the grants,
    /// the event triggers); `writes` are the tables clients write. Idempotent.
    public func setUpNode(tables: [String], writes: [String] = [], publication: String = "ripple_sync") throws {
        let setup = PostgresSetup(role: Self.nodeRole, tables: tables, writes: writes, publication: publication)
        try setup.validate()
        // One at a time: nodes of one cluster started at once would make the same tables and
        // function at once, which Postgres refuses (a duplicate type, a tuple updated concurrently).
        try setupLock.withLock { _ = try psql(setup.script) }
    }

    /// `setUpNode(tables:writes:publication:)`, without holding a cooperative thread.
    public func setUpNode(tables: [String], writes: [String] = [], publication: String = "ripple_sync") async throws {
        try await onOwnThread("postgres") { try self.setUpNode(tables: tables, writes: writes, publication: publication) }
    }

    /// Drops the event triggers the node's setup makes (the node then sees schema changes from
    /// pgoutput's relation messages and its catalog check only, as on a managed Postgres).
    public func dropEventTriggers() async throws {
        try await psql("""
            DROP EVENT TRIGGER IF EXISTS ripple_sync_ddl_end; DROP EVENT TRIGGER IF EXISTS ripple_sync_drop;
            DROP EVENT TRIGGER IF EXISTS ripple_sync_rewrite
            """)
    }

    /// Runs `pgbench` against the cluster with `arguments` (host, port and user are given).
    @discardableResult
    public func pgbench(_ arguments: [String], database: String = "postgres") throws -> String {
        try Self.run(binaries + "/pgbench", ["-h", "127.0.0.1", "-p", "\(port)", "-U", Self.user] + arguments + [database])
    }

    // MARK: From asynchronous code

    // Each of these runs a program and waits for it; from a task, that wait would hold one of
    // Swift's cooperative threads (as many as cores), and a parallel test suite that holds them
    // all starves every task of the process — a sync node's feed included — for as long as
    // initdb or pg_ctl run. The `async` forms wait on a thread of their own instead.

    /// Makes and starts a cluster (``init(settings:)``) without holding a cooperative thread.
    public static func started(settings: [String: String] = [:]) async throws -> ThrowawayPostgres {
        try await onOwnThread("postgres initdb") { try ThrowawayPostgres(settings: settings) }
    }

    /// `start()`, without holding a cooperative thread.
    public func start() async throws { try await onOwnThread("postgres") { try self.start() } }
    /// `kill()`, without holding a cooperative thread.
    public func kill() async throws { try await onOwnThread("postgres") { try self.kill() } }
    /// `restart(immediate:)`, without holding a cooperative thread.
    public func restart(immediate: Bool = false) async throws { try await onOwnThread("postgres") { try self.restart(immediate: immediate) } }
    /// `psql(_:database:)`, without holding a cooperative thread.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") async throws -> String {
        try await onOwnThread("postgres") { try self.psql(sql, database: database) }
    }
    /// `pgbench(_:database:)`, without holding a cooperative thread.
    @discardableResult
    public func pgbench(_ arguments: [String], database: String = "postgres") async throws -> String {
        try await onOwnThread("postgres") { try self.pgbench(arguments, database: database) }
    }

    /// The log's last lines (for an error message).
    public func lastLogLines(_ count: Int = 20) -> String {
        guard let log = try? String(contentsOfFile: logFile, encoding: .utf8) else { return "(no log)" }
        return log.split(separator: "\n").suffix(count).joined(separator: "\n")
    }

    // MARK: Processes

    /// Runs a server binary as the server's user. Its output goes to a file, not a pipe: the
    /// server it starts outlives it and would hold a pipe open.
    @discardableResult
    private func runAsServer(_ executable: String, _ arguments: [String]) throws -> String {
        let command = serverCommand(executable, arguments)
        return try Self.run(command[0], Array(command.dropFirst()), outputFile: directory + "/command.out")
    }

    /// The command line that runs a server binary as the server's user.
    private func serverCommand(_ executable: String, _ arguments: [String]) -> [String] {
        if let runAs { return ["/usr/sbin/runuser", "-u", runAs, "--", executable] + arguments }
        return [executable] + arguments
    }

    /// Runs a program to its end, its output (standard output and error) written to `path`;
    /// returns it, or throws an error with it.
    ///
    /// Spawned with no descriptor but those three (through bash, which closes the others):
    /// Foundation's `Process` learns that a child ended when a descriptor it leaves open in the
    /// child closes, and a server the child starts would keep it open for its whole life.
    private static func run(_ executable: String, _ arguments: [String], outputFile path: String) throws -> String {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // bash closes every other descriptor it inherited, then becomes the program.
        let closer = "for fd in $(ls /proc/$$/fd 2>/dev/null); do [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\"; done; exec \"$@\""
        let argv = (["/bin/bash", "-c", closer, "bash", executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, environ)
        guard spawned == 0 else { throw ThrowawayPostgresError("cannot run \(executable): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        // Exited normally with status 0 (the wait status's low 7 bits are the signal, if any).
        guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else {
            throw ThrowawayPostgresError("\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ")) "
                                         + "failed (wait status \(status)): \(text)")
        }
        return text
    }

    /// Runs a program to its end; its standard output, or an error with its standard error.
    /// One still running after five minutes (a query that waits on a lock forever) is ended and
    /// the run throws.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try ProcessLaunch.run(process)
        // Read both pipes to their end before waiting (a full pipe would block the child).
        final class Box: @unchecked Sendable {   // written before `done` is signalled, read after
            var data = Data()
        }
        let errorData = Box()
        let done = DispatchSemaphore(value: 0)
        let errorHandle = errors.fileHandleForReading
        // (On a thread of its own: a blocked read must not hold one of the shared workers.)
        Thread {
            errorData.data = errorHandle.readToEndRetryingInterrupts()
            done.signal()
        }.start()
        let name = "\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ").prefix(200))"
        let outputData = try Wait.exit(of: process, name, within: .seconds(300)) {
            output.fileHandleForReading.readToEndRetryingInterrupts()
        }
        try Wait.for(done, "the standard error of \(name)")
        let text = String(decoding: outputData, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errorData.data, as: UTF8.self)
            throw ThrowawayPostgresError("\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ")) "
                                         + "exited with status \(process.terminationStatus): \(message)\(text)")
        }
        return text
    }

    private static func findBinaries() -> String? {
        let files = FileManager.default
        func hasServer(_ directory: String) -> Bool {
            ["initdb", "pg_ctl", "postgres", "psql"].allSatisfy { files.isExecutableFile(atPath: directory + "/" + $0) }
        }
        if let chosen = ProcessInfo.processInfo.environment["RIPPLE_POSTGRES_BIN"] { return hasServer(chosen) ? chosen : nil }
        if hasServer("/usr/lib/postgresql/15/bin") { return "/usr/lib/postgresql/15/bin" }
        if let versions = try? files.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
                let directory = "/usr/lib/postgresql/\(version)/bin"
                if hasServer(directory) { return directory }
            }
        }
        for path in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let config = String(path) + "/pg_config"
            if files.isExecutableFile(atPath: config),
               let directory = try? run(config, ["--bindir"]).trimmingCharacters(in: .whitespacesAndNewlines),
               hasServer(directory) {
                return directory
            }
        }
        return nil
    }

    /// A port of 127.0.0.1 that nothing listens on now (the kernel's choice).
    private static func freePort() throws -> Int {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw ThrowawayPostgresError("cannot open a socket: errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else { throw ThrowawayPostgresError("cannot find a free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Starts a throwaway cluster (``ThrowawayPostgres/started(settings:)``), runs `body` with it,
/// and stops it and removes its directory before returning — when `body` returns and when it
/// throws. `body`'s error is the one thrown; a cluster that fails to stop after `body` threw is
/// said on standard error, and after `body` returned its error is thrown.
///
/// ```swift
/// try await withThrowawayPostgres { postgres in
///     try await postgres.psql("CREATE TABLE todos(id int8 PRIMARY KEY, title text NOT NULL)")
///     …
/// }
/// ```
public func withThrowawayPostgres<Result>(settings: [String: String] = [:], isolation: isolated (any Actor)? = #isolation,
                                          _ body: (ThrowawayPostgres) async throws -> Result) async throws -> Result {
    let postgres = try await ThrowawayPostgres.started(settings: settings)
    let outcome: Swift.Result<Result, any Error>
    do { outcome = .success(try await body(postgres)) } catch { outcome = .failure(error) }
    // On a thread of its own (pg_ctl waits for the server to stop), and whether or not this
    // task was cancelled: the cluster is stopped before the scope ends.
    let stopped = await withCheckedContinuation { (continuation: CheckedContinuation<(any Error)?, Never>) in
        Thread {
            do {
                try postgres.stop()
                continuation.resume(returning: nil)
            } catch {
                continuation.resume(returning: error)
            }
        }.start()
    }
    switch (outcome, stopped) {
    case (.success(let value), nil):
        return value
    case (.success, let stopError?):
        throw stopError
    case (.failure(let error), let stopError):
        if let stopError {
            FileHandle.standardError.write(Data("withThrowawayPostgres: the cluster did not stop cleanly: \(stopError)\n".utf8))
        }
        throw error
    }
}

/// A throwaway cluster that could not be made, started or used, and why.
public struct ThrowawayPostgresError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
