#if Sync
import ArgumentParser
import Foundation
import Logging
import RippleServer
import ServiceLifecycle

/// `ripple-server`: a Ripple Sync node, its demo, and tools to try it from a terminal.
@main
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ripple-server",
        abstract: "Ripple Sync: PostgreSQL's commits as live changesets over WebSocket.",
        subcommands: [ServeCommand.self, DemoCommand.self, SubscribeCommand.self, TokenCommand.self, StressCommand.self,
                      SetupCommand.self, CheckCommand.self, RelaunchChildCommand.self],
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
                --postgres postgres://ripple_node:PASSWORD@db.internal/app --tables todos,tags \\
                --rules rules.json --host 0.0.0.0 --port 8080

            Every option can come from the environment instead: RIPPLE_ and the option's name in capitals, dashes as underscores (RIPPLE_POSTGRES, RIPPLE_TABLES, RIPPLE_LOG_FORMAT; a flag's variable is 1/true/yes or 0/false/no). A flag on the command line wins over its variable.

            Lists (--tables) are names separated by commas: todos,tags (spaces around a name are trimmed). The node listens on plain ws://; put a TLS proxy in front for wss://. Several nodes on one Postgres each need their own --slot and --replica.

            SIGINT or SIGTERM stops the node gracefully: sockets are told retry_later and closed, then the node stops and exits with status 0.
            """)

    @Option(help: "The database: postgres://user[:password]@host[:port]/database[?sslmode=require] (a role with REPLICATION, set up with ripple-server setup; a superuser makes what is missing itself).")
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

    @Option(help: "The publication of the synced tables (ripple-server setup and check --publication).")
    var publication = "ripple_sync"

    @Option(help: "Sockets admitted at once (the rest get retry_later).")
    var maxSockets = 10_000

    @Option(help: "What to log (to standard error): trace, debug, info, notice, warning, error or critical.")
    var logLevel = "warning"

    @Option(help: ArgumentHelp("How to log: text (one readable line per message) or json (one JSON object per line: time, level, label, message, metadata).",
                               valueName: "format"))
    var logFormat = LogFormat.text

    @Option(help: "Seconds between heartbeats to idle sockets (each tells a socket where the replica stands).")
    var heartbeat: Double = 5

    @OptionGroup(title: "JSON Web Tokens from your identity provider")
    var jwt: JWTOptions

    func run() async throws {
        let jwtConfiguration = try jwt.configuration()
        // With JSON Web Tokens configured, the node's own v1. tokens are taken only when a secret is given.
        let secret = jwtConfiguration != nil && secretFile == nil && ProcessInfo.processInfo.environment["RIPPLE_SYNC_SECRET"] == nil
            ? [] : try readSecret(secretFile)
        let rulesData = try Data(contentsOf: URL(fileURLWithPath: rules))
        let endpoint = try PostgresEndpoint(url: postgres)
        var configuration = SyncServerConfiguration(
            postgres: endpoint.clientConfiguration,
            tables: tables.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty },
            rules: try SyncRules(json: rulesData), secret: secret, replicaPath: replica)
        configuration.jwt = jwtConfiguration
        configuration.host = host
        configuration.port = port
        configuration.slot = slot
        configuration.publication = publication
        configuration.maxSockets = maxSockets
        guard heartbeat > 0 else { throw ValidationError("--heartbeat must be more than 0 seconds") }
        configuration.heartbeatInterval = .milliseconds(Int64((heartbeat * 1000).rounded(.up)))
        SyncServer.raiseDescriptorLimit()
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level is one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let logger = serverLogger(level: level, format: logFormat)
        // Postgres's own answer at once (a wrong password, a missing database), rather than the
        // connection pool's minute of retries.
        try await endpoint.reach(logger: logger)
        let server = try SyncServer(configuration: configuration, logger: logger)
        try await runNode(server, logger: logger) { port in
            say("""
                ripple-server: serving ws://\(host):\(port)/sync (health: http://\(host):\(port)/health, metrics: /metrics)
                ripple-server: the live list: http://\(host):\(port)/ (give it a token and a table, or in the address: \
                http://\(host):\(port)/#token=…&table=…)
                """)
        }
    }
}

/// Runs `node` (and `others`) in a `ServiceGroup` until SIGTERM or SIGINT shuts it down
/// gracefully, calling `listening` with its port once it listens.
///
/// - Throws: `ExitCode.failure` when the node stopped by itself (a part failed): the node has
///   logged why to `logger` ("the node stopped: …", an error, as text or JSON), and the
///   command's own "Error: …" would say it a second time. With a log level above `error`
///   (nothing logged), the node's `SyncServerError` itself, for the command to print.
func runNode(_ node: SyncServer, with others: [any Service] = [], logger: Logger,
             listening: @escaping @Sendable (Int) async throws -> Void) async throws {
    let group = ServiceGroup(configuration: .init(services: [node] + others, gracefulShutdownSignals: [.sigterm, .sigint],
                                                  logger: logger))
    do {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask { try await listening(try await node.port) }
            try await tasks.waitForAll()
        }
    } catch is SyncServerError where logger.logLevel <= .error {
        throw ExitCode.failure
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

/// Runs `body` until it ends or SIGTERM or SIGINT shuts its `ServiceGroup` down (then `body`
/// is cancelled, and this returns normally).
func untilSignalled(_ body: @escaping @Sendable () async throws -> Void) async throws {
    let service = ClosureService {
        do {
            try await cancelWhenGracefulShutdown(body)
        } catch where Task.isShuttingDownGracefully {}
    }
    let group = ServiceGroup(configuration: .init(
        services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: Logger(label: "ripple-server", factory: { _ in SwiftLogNoOpLogHandler() })))
    try await group.run()
}

/// How `ripple-server` logs (to standard error).
enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    case text, json
}

/// The node's log on standard error: warnings and errors, as text or JSON lines.
func serverLogger(level: Logger.Level = .warning, format: LogFormat = .text) -> Logger {
    var logger = Logger(label: "ripple-server") { label -> any LogHandler in
        switch format {
        case .text: StreamLogHandler.standardError(label: label)
        case .json: JSONLogHandler(label: label)
        }
    }
    logger.logLevel = level
    return logger
}
#endif
