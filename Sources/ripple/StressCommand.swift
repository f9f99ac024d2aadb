import ArgumentParser
import Foundation
import RippleTesting

/// `ripple stress [--seconds S] [--seed N] [--processes P] [--threads T] [--single-threaded]
/// [--max-subscribers M] [--verbose]`: a model-based differential check of live queries.
///
/// `ripple stress --capture [--seconds S] [--seed N] [--max-operations N]` runs the capture
/// fuzzer instead (see `CaptureFuzzer`): random schemas written with random raw SQL, every live
/// query and history compared with fresh reads after each commit. Its last line reads
/// `capture fuzz: seed=S schemas=N operations=N commits=N checks=N discrepancies=D`.
///
/// Writers (threads, and with `--processes` other processes on the same file) write seeded random
/// data through Ripple's public API while subscriptions come and go; every delivered event is
/// checked against an independent in-memory model (see `StressTest` in RippleTesting).
///
/// The last line reads
/// `stress: seed=S ops=N events=E discrepancies=D write_errors=W busy_retried=B peak_subscribers=P`; the exit status
/// is non-zero when D or W is not 0, after an account of the first wrong event on stderr.
struct StressCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress",
        abstract: "Check live queries against a model under seeded random writes, subscriptions and processes.",
        discussion: """
            Every event's snapshot is compared with the model's result at the event's version, every \
            changeset is applied to the previous snapshot and through a UIKit-style list model, and every \
            write's outcome and version is accounted for. A failure prints the seed and the first wrong \
            event; `--single-threaded` replays a seed deterministically.
            """
    )

    @Option(help: "How long the writers write, in seconds.")
    var seconds: Double = 10

    @Option(help: "The seed of the data, queries, writes and subscriptions.")
    var seed: UInt64 = 1

    @Option(help: "Processes writing to the database, this one included (the others are `ripple stress-child`).")
    var processes = 1

    @Option(help: "Writer threads per process.")
    var threads = 3

    @Flag(help: "Replay deterministically: one writer thread, .immediate delivery only, no child process.")
    var singleThreaded = false

    @Option(help: "The most subscriptions open at once.")
    var maxSubscribers = 200

    @Option(help: "Stop the writers after about this many operations (default: only --seconds).")
    var maxOperations: Int?

    @Option(help: ArgumentHelp("The share of writes (0…1) committed outside a store.write: in writeWithoutTransaction, "
                               + "in a migration, or by a connection that is not Ripple's (as the sqlite3 shell writes).",
                               valueName: "SHARE"))
    var outsideWrites = 0.0

    @Option(help: ArgumentHelp("Keep the database in DIR (default: a temporary directory, removed when the run passes).",
                               valueName: "DIR"))
    var path: String?

    @Flag(help: "Print each finding as it is found, and progress every 5 seconds.")
    var verbose = false

    @Flag(help: ArgumentHelp("Run the capture fuzzer: random schemas (key forms, WITHOUT ROWID layouts, generated "
                             + "columns, triggers, cascades, views, FTS5) written with random raw SQL and ALTERs; "
                             + "live queries and history checked against fresh reads after every commit."))
    var capture = false

    func validate() throws {
        guard seconds > 0 else { throw ValidationError("--seconds must be positive") }
        guard processes >= 1 else { throw ValidationError("--processes must be at least 1") }
        guard threads >= 1 else { throw ValidationError("--threads must be at least 1") }
        guard maxSubscribers >= 1 else { throw ValidationError("--max-subscribers must be at least 1") }
    }

    func run() throws {
        if capture { return try runCaptureFuzzer() }
        var configuration = StressConfiguration()
        configuration.seed = seed
        configuration.seconds = seconds
        configuration.processes = processes
        configuration.threads = threads
        configuration.singleThreaded = singleThreaded
        configuration.maxSubscribers = maxSubscribers
        configuration.maxOperations = maxOperations
        configuration.outsideWrites = outsideWrites
        configuration.verbose = verbose
        configuration.directory = path
        configuration.childExecutable = CrashTestCommand.executablePath()
        if verbose { configuration.log = { Console.note($0) } }

        let report = try StressTest.run(configuration)
        if !report.passed {
            Console.note(report.details)
            Console.note("replay: ripple stress --seed \(seed) --single-threaded --seconds \(Self.format(seconds))"
                         + (maxOperations.map { " --max-operations \($0)" } ?? "")
                         + (outsideWrites > 0 ? " --outside-writes \(outsideWrites)" : ""))
        }
        print(report.summaryLine)
        if !report.passed { throw ExitCode.failure }
    }

    private func runCaptureFuzzer() throws {
        var log: (@Sendable (String) -> Void)?
        if verbose { log = { @Sendable line in Console.note(line) } }
        let report = try CaptureFuzzer.run(seed: seed, operations: maxOperations, seconds: seconds, directory: path, log: log)
        if !report.passed {
            Console.note(report.details)
            Console.note("replay: ripple stress --capture --seed \(seed) --seconds \(Self.format(seconds))"
                         + " --max-operations \(report.operations)")
        }
        print(report.summaryLine)
        if !report.passed { throw ExitCode.failure }
    }

    private static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}

/// `ripple stress-child --db PATH --seed S --index I --threads T` (hidden): a writer process of a
/// multi-process `ripple stress`; reports each write as a JSON line on stdout until stdin ends.
struct StressChildCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress-child",
        abstract: "A writing process of `ripple stress --processes N` (not for direct use).",
        shouldDisplay: false
    )

    @Option(help: "The database file.")
    var db: String

    @Option(help: "The run's seed.")
    var seed: UInt64

    @Option(help: "This child's number (1…).")
    var index: Int

    @Option(help: "Writer threads.")
    var threads = 1

    @Option(help: "The share of writes committed outside a store.write.")
    var outsideWrites = 0.0

    func run() throws {
        let status = try StressChild.run(database: db, seed: seed, outsideWrites: outsideWrites, index: index, threads: threads)
        if status != 0 { throw ExitCode(status) }
    }
}
