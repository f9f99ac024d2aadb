import ArgumentParser
import Foundation
import Logging
import RippleServer

/// `ripple-server`: a Ripple Sync node, its demo, and tools to try it from a terminal.
@main
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ripple-server",
        abstract: "Ripple Sync: PostgreSQL's commits as live changesets over WebSocket.",
        subcommands: [ServeCommand.self, DemoCommand.self, SubscribeCommand.self, TokenCommand.self, StressCommand.self],
        defaultSubcommand: ServeCommand.self
    )
}

/// `ripple-server [serve] --postgres URL --tables a,b --rules FILE --port N`.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a node: follow PostgreSQL into a replica and serve /sync, /health and /metrics.",
        discussion: """
            Example:
              RIPPLE_SYNC_SECRET=$(cat secret) ripple-server serve \\
                --postgres postgres://postgres@db.internal/app --tables todos,tags \\
                --rules rules.json --host 0.0.0.0 --port 8080

            Lists (--tables) are names separated by commas: todos,tags (spaces around a name
            are trimmed). The node listens on plain ws://; put a TLS proxy in front for wss://.
            Several nodes on one Postgres each need their own --slot and --replica.
            SIGINT or SIGTERM stops the node: sockets are told retry_later and closed.
            """)

    @Option(help: "The database: postgres://user[:password]@host[:port]/database (a superuser: the node makes a publication, a replication slot and event triggers).")
    var postgres: String

    @Option(help: ArgumentHelp("The synced tables of the public schema, comma-separated: todos,tags (each needs a primary key).",
                               valueName: "names"))
    var tables: String

    @Option(help: ArgumentHelp("The rules file (JSON): who may read and write what.", valueName: "file"))
    var rules: String

    @Option(help: ArgumentHelp("A file holding the token secret (at least 32 bytes); default: the RIPPLE_SYNC_SECRET variable.",
                               valueName: "file"))
    var secretFile: String?

    @Option(help: ArgumentHelp("The address to listen on: 127.0.0.1 (this machine only), 0.0.0.0 (every IPv4 interface).",
                               valueName: "address"))
    var host = "127.0.0.1"

    @Option(help: ArgumentHelp("The port to listen on (0: any free port, printed at start).", valueName: "port"))
    var port = 8080

    @Option(help: "This node's replica file (SQLite).")
    var replica = "ripple-replica.sqlite"

    @Option(help: "This node's replication slot (one per node).")
    var slot = "ripple_node"

    @Option(help: "Sockets admitted at once (the rest get retry_later).")
    var maxSockets = 10_000

    @Option(help: "What to log (to standard error): trace, debug, info, notice, warning, error or critical.")
    var logLevel = "warning"

    @Option(help: "Seconds between heartbeats to idle sockets (each tells a socket where the replica stands).")
    var heartbeat: Double = 5

    func run() async throws {
        let secret = try readSecret(secretFile)
        let rulesData = try Data(contentsOf: URL(fileURLWithPath: rules))
        var configuration = SyncServerConfiguration(
            postgres: try SyncServerConfiguration.postgres(url: postgres),
            tables: tables.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty },
            rules: try SyncRules(json: rulesData), secret: secret, replicaPath: replica)
        configuration.host = host
        configuration.port = port
        configuration.slot = slot
        configuration.maxSockets = maxSockets
        guard heartbeat > 0 else { throw ValidationError("--heartbeat must be more than 0 seconds") }
        configuration.heartbeatInterval = .milliseconds(Int64((heartbeat * 1000).rounded(.up)))
        SyncServer.raiseDescriptorLimit()
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level is one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let server = try SyncServer(configuration: configuration, logger: serverLogger(level: level))
        try await runUntilInterrupted {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await server.run() }
                group.addTask {
                    let port = try await server.port
                    say("ripple-server: serving ws://\(host):\(port)/sync (health: http://\(host):\(port)/health, "
                          + "metrics: /metrics)")
                }
                try await group.waitForAll()
            }
        }
    }
}

/// Reads the token secret from `file`, or from `RIPPLE_SYNC_SECRET`.
func readSecret(_ file: String?) throws -> [UInt8] {
    let text: String
    if let file {
        text = try String(contentsOfFile: file, encoding: .utf8)
    } else if let value = ProcessInfo.processInfo.environment["RIPPLE_SYNC_SECRET"] {
        text = value
    } else {
        throw ValidationError("give the token secret with --secret-file FILE or the RIPPLE_SYNC_SECRET variable")
    }
    let secret = Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    guard secret.count >= 32 else { throw ValidationError("the token secret must be at least 32 bytes") }
    return secret
}

/// Runs `body` until it ends or the process is interrupted (SIGINT, SIGTERM): then cancels it
/// and waits for it to clean up.
func runUntilInterrupted(_ body: @escaping @Sendable () async throws -> Void) async throws {
    let task = Task { try await body() }
    let sources = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number)
        source.setEventHandler { task.cancel() }
        source.resume()
        return source
    }
    defer { sources.forEach { $0.cancel() } }
    do {
        try await task.value
    } catch where task.isCancelled {
        // Interrupted: a normal end, whatever the cancelled work threw on its way out.
    }
}

/// The node's log: warnings and errors on standard error.
func serverLogger(level: Logger.Level = .warning) -> Logger {
    var logger = Logger(label: "ripple-server") { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = level
    return logger
}
