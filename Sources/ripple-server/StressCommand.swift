#if Sync
import ArgumentParser
import Foundation
import RippleSyncTesting
import RippleTesting
import UnixSignals

/// `ripple-server stress --seconds N --seed S`: the sync stress checker.
struct StressCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress",
        abstract: "Check Ripple Sync against PostgreSQL under random writes and faults (a throwaway cluster; needs postgresql-15).",
        discussion: """
            Clients with random subscriptions write their local stores online and offline, another \
            writer changes PostgreSQL directly (notes moving between users, memberships granted and \
            revoked, todos moving between projects), and devices disconnect, the node (a child process) is \
            stopped or killed and starts again, and PostgreSQL restarts. At each quiescent point every \
            client's rows must equal the queries on PostgreSQL, every mutation must have exactly one \
            result, no client may hold a row its rules exclude, and every frame of a client's todos must \
            hold exactly what its user could read at that frame's position. A failing run stops at its round and \
            is shrunk (fewer operations, fewer kinds of step), and the command that repeats the smaller \
            failure is printed. The last line is the summary; the exit status is 1 when something was found.
            """)

    @Option(help: "How long to write, in seconds (checks come on top).")
    var seconds: Double = 30

    @Option(help: "The seed of everything random.")
    var seed: UInt64 = 1

    @Option(help: "Operations between two quiescent points.")
    var round = 60

    @Option(help: "Stop after this many operations (instead of after --seconds).")
    var operations: Int?

    @Option(help: "Kinds of step to leave out, comma-separated: \(SyncStressStep.allCases.map(\.rawValue).joined(separator: ", ")).")
    var without: String?

    @Option(help: "Nodes on the cluster, each with its own slot and replica (clients move between them).")
    var nodes = 2

    @Option(help: "Sockets of a reconnect storm (opened at once against one node).")
    var storm = 5_000

    @Flag(help: "Do not restart PostgreSQL (as --without postgres-restarts).")
    var noPostgresRestarts = false

    @Flag(help: "Run the node in this process (it can then be stopped, never killed).")
    var inProcessNode = false

    @Flag(help: "Do not shrink a failing run.")
    var noShrink = false

    func run() async throws {
        guard case .available = ThrowawayPostgres.availability else {
            throw ValidationError("PostgreSQL 15 is not installed (Debian: apt-get install postgresql-15)")
        }
        var configuration = SyncStressConfiguration()
        configuration.seed = seed
        configuration.seconds = seconds
        configuration.operationsPerRound = round
        guard (1...8).contains(nodes) else { throw ValidationError("--nodes must be 1…8") }
        guard (1...15_000).contains(storm) else { throw ValidationError("--storm must be 1…15,000") }
        configuration.nodes = nodes
        configuration.stormSockets = storm
        configuration.maxOperations = operations
        if operations != nil { configuration.seconds = 24 * 3600 }
        for word in (without ?? "").split(separator: ",") {
            guard let step = SyncStressStep(rawValue: word.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("no kind of step '\(word)' (there are \(SyncStressStep.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            configuration.steps.remove(step)
        }
        if noPostgresRestarts { configuration.steps.remove(.postgresRestarts) }
        if !inProcessNode {
            guard let executable = Bundle.main.executablePath else { throw ValidationError("cannot find this executable to run the node") }
            configuration.nodeExecutable = executable
        }
        configuration.log = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        // Interrupted, the run's PostgreSQL is stopped before the process ends (128 + the signal).
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let interruption = Task.detached {
            for await signal in signals {
                FileHandle.standardError.write(Data("sync-stress: interrupted: stopping PostgreSQL\n".utf8))
                SyncStress.stopClusters()
                Foundation.exit(128 + signal.rawValue)
            }
        }
        defer { interruption.cancel() }
        let report = try await SyncStress.run(configuration)
        for finding in report.findings.prefix(20) { print("finding: \(finding)") }
        if !report.passed && !noShrink {
            let (smaller, smallerReport) = try await SyncStress.shrink(configuration, failed: report)
            for finding in smallerReport.findings.prefix(20) { print("finding (shrunk): \(finding)") }
            print("sync-stress: shrunk: ripple-server stress \(smaller.arguments)")
        }
        print(report.summaryLine)
        if !report.passed { throw ExitCode.failure }
    }
}
#endif
