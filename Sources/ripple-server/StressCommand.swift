import ArgumentParser
import Foundation
import RippleSyncTesting
import RippleTesting

/// `ripple-server stress --seconds N --seed S`: the sync stress checker.
struct StressCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress",
        abstract: "Check Ripple Sync against PostgreSQL under random writes and faults (a throwaway cluster; needs postgresql-15).",
        discussion: """
            Clients with random subscriptions write their local stores online and offline, another \
            writer changes PostgreSQL directly, and devices disconnect, the node restarts and PostgreSQL \
            restarts. At each quiescent point every client's rows must equal the queries on PostgreSQL, \
            every mutation must have exactly one result, and no client may hold a row its rule excludes. \
            The last line is the summary; the exit status is 1 when something was found.
            """)

    @Option(help: "How long to write, in seconds (checks come on top).")
    var seconds: Double = 30

    @Option(help: "The seed of everything random.")
    var seed: UInt64 = 1

    @Option(help: "Operations between two quiescent points.")
    var round = 60

    @Flag(help: "Do not restart PostgreSQL.")
    var noPostgresRestarts = false

    func run() async throws {
        guard case .available = ThrowawayPostgres.availability else {
            throw ValidationError("PostgreSQL 15 is not installed (Debian: apt-get install postgresql-15)")
        }
        var configuration = SyncStressConfiguration()
        configuration.seed = seed
        configuration.seconds = seconds
        configuration.operationsPerRound = round
        configuration.postgresRestarts = !noPostgresRestarts
        configuration.log = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        // Interrupted, the run's PostgreSQL is stopped before the process ends.
        let signals = [SIGINT, SIGTERM].map { (number: Int32) -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                FileHandle.standardError.write(Data("sync-stress: interrupted: stopping PostgreSQL\n".utf8))
                SyncStress.stopClusters()
                Foundation.exit(128 + number)
            }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        let report = try await SyncStress.run(configuration)
        for finding in report.findings.prefix(20) { print("finding: \(finding)") }
        print(report.summaryLine)
        if !report.passed { throw ExitCode.failure }
    }
}
