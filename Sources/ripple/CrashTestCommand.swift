import ArgumentParser
import Foundation
import Ripple
import RippleTesting

/// `ripple crashtest --rounds N [--seed S] [--path DIR]`: kills a writing process at random
/// moments and checks, after each kill, that the store kept every commit it reported.
///
/// Each round starts `ripple crashtest-child` on the same database, reads the line it prints
/// after each commit, kills it with SIGKILL after a seeded number of commits and a seeded pause,
/// reopens the database and checks:
/// * `PRAGMA integrity_check` is `ok`;
/// * every reported transaction is committed, and at most one more (committed, killed before
///   its line was written), which is complete;
/// * the change log holds, under each transaction's version, exactly the keys it wrote, and no
///   other version came in between;
/// * the keys alive are the inserts minus the deletes of the whole change log;
/// * the table holds exactly the rows the transactions (generated from the seed) leave;
/// * live queries opened now deliver that state as their initial snapshot.
///
/// The last line reads `rounds=20 versions_verified=1834 lost=0 integrity=ok`; the exit status is
/// 0 when nothing was lost, the database was intact and every check passed.
struct CrashTestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crashtest",
        abstract: "Kill a writing process at random moments; check after each crash that no reported commit was lost.",
        discussion: """
            Every round restarts the writer (`ripple crashtest-child`) on the same database, kills it \
            with SIGKILL after a random (seeded) number of commits, then reopens the database and \
            checks its integrity, the content of every reported version (through the change log), \
            the table's exact rows and a live query's initial snapshot.
            """
    )

    @Option(help: "How many times the writer is started and killed.")
    var rounds = 20

    @Option(help: "The seed of the transactions and of the kill moments.")
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp(
        "Keep the database in DIR (its crashtest.sqlite files are replaced); default: a temporary directory, removed after a successful run.",
        valueName: "DIR"))
    var path: String?

    @Option(help: "The most commits a round waits for before killing the writer.")
    var maxCommits = 150

    func validate() throws {
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
        guard maxCommits >= 1 else { throw ValidationError("--max-commits must be at least 1") }
    }

    func run() throws {
        let files = FileManager.default
        let directory: URL
        if let path {
            directory = URL(fileURLWithPath: path)
        } else {
            directory = files.temporaryDirectory.appendingPathComponent("ripple-crashtest-\(UUID().uuidString)")
        }
        try files.createDirectory(at: directory, withIntermediateDirectories: true)
        let database = directory.appendingPathComponent(CrashWorkload.fileName).path
        for suffix in ["", "-wal", "-shm", "-journal"] where files.fileExists(atPath: database + suffix) {
            try files.removeItem(atPath: database + suffix)
        }

        var run = CrashTestRun(database: database, seed: seed, executable: Self.executablePath())
        var random = SeededGenerator(seed: seed ^ 0x6372_6173_6874_6573)
        for round in 1...rounds {
            let killAfter = Int.random(in: 1...maxCommits, using: &random)
            let pause = UInt32.random(in: 0...4_000, using: &random)
            run.round(round, killAfter: killAfter, pauseMicroseconds: pause)
        }
        print("rounds=\(rounds) versions_verified=\(run.versionsVerified) lost=\(run.lost) "
              + "integrity=\(run.integrityOK ? "ok" : "failed")")
        let passed = run.lost == 0 && run.integrityOK && run.failures.isEmpty
        if path == nil {
            if passed {
                try? files.removeItem(at: directory)
            } else {
                Console.note("the database is kept in \(directory.path)")
            }
        }
        if !passed { throw ExitCode.failure }
    }

    /// This executable, to start the child with.
    static func executablePath() -> String {
        #if os(Linux)
        if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return resolved
        }
        #endif
        return Bundle.main.executablePath ?? CommandLine.arguments[0]
    }
}

/// One line of the child: a commit it saw return.
struct CrashReport {
    var transaction: Int
    var version: Int64
    var digest: String
    var rows: Int

    /// Parses `commit <transaction> <version> <digest> <rows>`.
    init?(line: String) {
        let parts = line.split(separator: " ")
        guard parts.count == 5, parts[0] == "commit", let transaction = Int(parts[1]), let version = Int64(parts[2]),
              let rows = Int(parts[4]) else { return nil }
        self.transaction = transaction
        self.version = version
        self.digest = String(parts[3])
        self.rows = rows
    }
}

/// The state of a crash test across rounds: the expected table, and what was verified.
struct CrashTestRun {
    let database: String
    let seed: UInt64
    let executable: String
    /// The expected state after the transaction the database ended with in the last round.
    private var model: CrashModel
    /// The version the database ended with in the last round (0 before the first).
    private var lastVersion: Int64 = 0
    private(set) var versionsVerified = 0
    private(set) var lost = 0
    private(set) var integrityOK = true
    private(set) var failures: [String] = []

    init(database: String, seed: UInt64, executable: String) {
        self.database = database
        self.seed = seed
        self.executable = executable
        self.model = CrashModel(seed: seed)
    }

    /// Records a failed check, and says it on stderr at once.
    private mutating func fail(_ round: Int, _ message: String) {
        failures.append("round \(round): \(message)")
        fflush(nil)   // every stream: the round lines before the error
        Console.error("round \(round): \(message)")
    }

    /// Runs the child until `killAfter` commits were reported, pauses, kills it, and verifies.
    mutating func round(_ round: Int, killAfter: Int, pauseMicroseconds: UInt32) {
        let outcome: ChildOutcome
        do {
            outcome = try ChildOutcome.run(executable: executable, database: database, seed: seed,
                                           killAfter: killAfter, pauseMicroseconds: pauseMicroseconds)
        } catch {
            fail(round, "cannot run the child \(executable): \(error)")
            return
        }
        if !outcome.killed {
            fail(round, "the child ended on its own (\(outcome.termination)) after \(outcome.lines.count) lines")
        }
        var reports: [CrashReport] = []
        for line in outcome.lines {
            guard let report = CrashReport(line: line) else {
                fail(round, "unexpected line from the child: \(line)")
                continue
            }
            reports.append(report)
        }
        do {
            try verify(round, reports: reports)
        } catch {
            fail(round, "verification failed: \(error)")
        }
    }

    /// Reopens the database and checks it against `reports` and the model.
    private mutating func verify(_ round: Int, reports: [CrashReport]) throws {
        let start = model.transaction
        let store = try Store(path: database, configuration: CrashWorkload.configuration)

        // The file.
        let integrity = try store.read { db in try db.fetchAll("PRAGMA integrity_check") }
            .map { $0.values.first.flatMap { String(sqlValue: $0) } ?? "?" }
        if integrity != ["ok"] {
            integrityOK = false
            fail(round, "integrity_check: \(integrity.prefix(5).joined(separator: "; "))")
        }

        // The reports follow one another.
        for (offset, report) in reports.enumerated() {
            if report.transaction != start + offset + 1 {
                fail(round, "the child reported transaction \(report.transaction), expected \(start + offset + 1)")
                return
            }
            if offset > 0, report.version != reports[offset - 1].version + 1 {
                fail(round, "transaction \(report.transaction) took v\(report.version), the one before "
                     + "v\(reports[offset - 1].version)")
            }
        }
        if let first = reports.first, round > 1, first.version != lastVersion + 1 {
            fail(round, "the first transaction of the round took v\(first.version), the database was at v\(lastVersion)")
        }

        // Which transactions the database kept: every reported one, and at most one more.
        let committed = try CrashWorkload.committedTransaction(in: store)
        let currentVersion = try store.currentVersion()
        let lastReported = reports.last?.transaction ?? start
        if committed < lastReported {
            lost += lastReported - committed
            fail(round, "transactions \(committed + 1)…\(lastReported) were reported committed and are lost "
                 + "(the database ends with transaction \(committed), v\(currentVersion))")
        }
        if committed > lastReported + 1 {
            fail(round, "the database ends with transaction \(committed), \(committed - lastReported) after the last "
                 + "reported one (at most one may be committed unreported)")
        }
        if committed < start {
            fail(round, "the database ends with transaction \(committed), before the previous round's \(start)")
        }

        // The transactions of the round, as generated from the seed.
        var transactions: [Int: CrashTransaction] = [:]
        var next = model
        while next.transaction < max(committed, lastReported) {
            let transaction = next.next()
            transactions[transaction.number] = transaction
            next.apply(transaction)
        }
        for report in reports where transactions[report.transaction]?.digest != report.digest
            || transactions[report.transaction]?.rowCount != report.rows {
            fail(round, "transaction \(report.transaction): the child's digest \(report.digest) differs from the "
                 + "parent's \(transactions[report.transaction]?.digest ?? "none") (the generators disagree)")
        }

        // Each committed transaction's version holds exactly its changes, and nothing else came between.
        var versions: [Int: Int64] = [:]
        for report in reports { versions[report.transaction] = report.version }
        if committed == lastReported + 1 {
            versions[committed] = (reports.last?.version ?? lastVersion) + 1
        }
        let firstVersion = reports.first?.version ?? lastVersion + 1
        let entries = try store.changes(after: firstVersion - 1)
        var logged: [Int64: [String: [String]]] = [:]
        for entry in entries {
            logged[entry.version, default: [:]]["\(entry.table)/\(entry.operation.rawValue)", default: []] += entry.rowKeys
        }
        if committed >= start + 1 {
            for number in (start + 1)...committed {
                guard let version = versions[number], let transaction = transactions[number] else { continue }
                let found = logged.removeValue(forKey: version)?.mapValues { $0.sorted() }
                if found == transaction.expectedLog {
                    versionsVerified += 1
                } else {
                    if number <= lastReported { lost += 1 }
                    fail(round, "v\(version) (transaction \(number)): the change log holds "
                         + "\(found.map { Self.describe($0) } ?? "nothing"), expected \(Self.describe(transaction.expectedLog))")
                }
            }
        }
        for (version, extra) in logged.sorted(by: { $0.key < $1.key }) where version <= currentVersion {
            fail(round, "v\(version) is no transaction of the round, yet logs \(Self.describe(extra))")
        }
        let expectedVersion = committed == start ? lastVersion : versions[committed]
        if round > 1 || committed > start, let expectedVersion, currentVersion != expectedVersion {
            fail(round, "the database is at v\(currentVersion), its last transaction \(committed) took v\(expectedVersion)")
        }

        // The expected state: the model after the transaction the database ends with.
        if committed < next.transaction {
            next = CrashModel.replayed(seed: seed, through: committed)
        }
        model = next
        lastVersion = currentVersion

        // The change log agrees with the data: alive keys = inserts − deletes over the whole log.
        var alive = Set<String>()
        for entry in try store.changes(after: 0) where entry.table == CrashWorkload.itemsTable {
            switch entry.operation {
            case .insert: alive.formUnion(entry.rowKeys)
            case .delete: alive.subtract(entry.rowKeys)
            case .update: break
            }
        }
        let items = try store.collection(CrashWorkload.itemsTable, of: CrashItem.self)
        let stored = try items.order(by: Column("id")).fetchAll()
        if alive != Set(stored.map { String($0.id) }) {
            fail(round, "the change log leaves \(alive.count) keys alive, the table holds \(stored.count) rows "
                 + "(\(alive.symmetricDifference(stored.map { String($0.id) }).count) differ)")
        }

        // The exact rows: no transaction partly visible, none lost.
        let expected = model.sortedItems
        if stored != expected {
            let difference = zip(stored, expected).first { $0 != $1 }
            fail(round, "the table holds \(stored.count) rows, \(expected.count) expected after transaction \(committed)"
                 + (difference.map { "; first difference: \($0.0) instead of \($0.1)" } ?? ""))
        }

        // A live query opened now delivers the current state.
        try checkLiveQueries(round, store: store, items: items, expected: expected, version: currentVersion)
        let unreported = committed == lastReported + 1 ? ", 1 committed unreported" : ""
        print("round \(round): \(reports.count) commits reported\(unreported); database at transaction \(committed) "
              + "(v\(currentVersion), \(expected.count) rows)")
        fflush(nil)   // the round line now, even when stdout is a pipe
    }

    private mutating func checkLiveQueries(_ round: Int, store: Store, items: RecordCollection<CrashItem>,
                                           expected: [CrashItem], version: Int64) throws {
        let initial = CrashTestInbox<LiveQueryEvent<CrashItem>>()
        let all = try items.order(by: Column("id")).live().subscribe(on: .immediate) { initial.put($0) }
        defer { all.cancel() }
        let filtered = items.filter(Column("value") < 100).order(by: Column("value"), Column("id"))
        let cheap = CrashTestInbox<LiveQueryEvent<CrashItem>>()
        let subscription = try filtered.live().subscribe(on: .immediate) { cheap.put($0) }
        defer { subscription.cancel() }
        for (name, inbox, fresh) in [("all rows", initial, try items.order(by: Column("id")).fetchAll()),
                                     ("value < 100", cheap, try filtered.fetchAll())] {
            guard let event = inbox.first else {
                fail(round, "the live query over \(name) delivered no initial event")
                continue
            }
            if event.snapshot != fresh || event.version != version {
                fail(round, "the live query over \(name) delivered \(event.snapshot.count) rows at v\(event.version); "
                     + "a fresh fetch reads \(fresh.count) at v\(version)")
            }
        }
        if initial.first.map({ $0.snapshot != expected }) ?? false {
            fail(round, "the live query's initial snapshot is not the expected table")
        }
    }

    private static func describe(_ log: [String: [String]]) -> String {
        "{" + log.sorted { $0.key < $1.key }.map { key, keys in
            "\(key): \(keys.count) keys" + (keys.count <= 6 ? " \(keys)" : "")
        }.joined(separator: ", ") + "}"
    }
}

/// Keeps the first value put (a live query's initial event).
final class CrashTestInbox<Value: Sendable>: @unchecked Sendable {   // `value` is guarded by `lock`
    private let lock = NSLock()
    private var value: Value?

    func put(_ new: Value) {
        lock.withLock { if value == nil { value = new } }
    }

    var first: Value? { lock.withLock { value } }
}

/// One run of the child: the lines it printed, and how it ended.
struct ChildOutcome {
    var lines: [String]
    var killed: Bool
    var termination: String

    /// Starts the child, waits for `killAfter` lines, pauses, kills it with SIGKILL and reads
    /// what it wrote before dying. A child silent for two minutes is killed too (reported as
    /// not killed by us).
    static func run(executable: String, database: String, seed: UInt64, killAfter: Int,
                    pauseMicroseconds: UInt32) throws -> ChildOutcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["crashtest-child", "--db", database, "--seed", String(seed)]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? output.fileHandleForWriting.close()
        let watchdog = DispatchWorkItem { kill(process.processIdentifier, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: watchdog)

        var reader = LineReader(descriptor: output.fileHandleForReading.fileDescriptor)
        var lines: [String] = []
        var killed = false
        while lines.count < killAfter, let line = reader.next() { lines.append(line) }
        if lines.count == killAfter {
            if pauseMicroseconds > 0 { usleep(pauseMicroseconds) }
            killed = kill(process.processIdentifier, SIGKILL) == 0
        }
        while let line = reader.next() { lines.append(line) }
        process.waitUntilExit()
        watchdog.cancel()
        let bySignal = process.terminationReason == .uncaughtSignal
        let termination = bySignal ? "signal \(process.terminationStatus)" : "exit status \(process.terminationStatus)"
        return ChildOutcome(lines: lines, killed: killed && bySignal && process.terminationStatus == SIGKILL,
                            termination: termination)
    }
}

/// Reads lines from a file descriptor until end of file; a last line without its newline (cut by
/// the kill) is dropped.
struct LineReader {
    let descriptor: Int32
    private var buffer: [UInt8] = []
    private var ended = false

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    mutating func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if ended { return nil }
            var chunk = [UInt8](repeating: 0, count: 4_096)
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer += chunk[..<count]
            } else if count == 0 || errno != EINTR {
                ended = true
            }
        }
    }
}
