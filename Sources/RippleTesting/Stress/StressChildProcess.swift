import Foundation
import Ripple

/// What a child writer process tells its parent, one JSON object per line on its stdout.
enum StressChildMessage: Codable {
    /// A write it performed (committed or rolled back on purpose).
    case write(StressWriteRecord)
    /// A write that failed with an error nobody expected.
    case failure(source: String, error: String, plan: String)
    /// It stopped: how many writes it retried after `SQLITE_BUSY`.
    case finished(busyRetried: Int)
}

/// The writing side of a multi-process stress run: `ripple stress-child` runs this in each child.
///
/// It opens the parent's database (the parent created the tables), starts writer threads that
/// write exactly as the parent's do, and reports every write on stdout as it completes, until
/// its stdin ends (the parent closes it to stop the children).
public enum StressChild {
    /// Writes to `database` with `threads` threads until standard input ends.
    ///
    /// - Parameters:
    ///   - database: the path of the store's file.
    ///   - index: the child's number (1…), which names its writers (`c1/t0`) and picks their seeds.
    ///   - threads: how many writer threads to run.
    ///   - seed: the run's seed, from which each writer's seed derives.
    ///   - outsideWrites: the share of writes committed outside a `store.write` (see
    ///     ``StressConfiguration/outsideWrites``).
    /// - Returns: the exit status: 0 when the child could write and report.
    public static func run(database: String, seed: UInt64, outsideWrites: Double = 0, index: Int, threads: Int) throws -> Int32 {
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = nil
        let store = try Store(path: database, configuration: configuration)
        let access = try StressStoreAccess(store: store, createTables: false)
        let directory = (database as NSString).deletingLastPathComponent
        let output = StressLineWriter()
        let stop = StressFlag()
        let group = DispatchGroup()
        for thread in 0..<max(1, threads) {
            group.enter()
            Thread {
                defer { group.leave() }
                let source = Self.source(child: index, thread: thread)
                let writer: StressWriter
                do {
                    var generator = StressGenerator(seed: seed, stream: Self.stream(child: index, thread: thread))
                    generator.outsideShare = outsideWrites
                    writer = try StressWriter(access: access, source: source, gateDirectory: directory, generator: generator)
                } catch {
                    output.send(.failure(source: source, error: "cannot start the writer: \(error)", plan: "none"))
                    return
                }
                while !stop.isSet {
                    switch writer.writeNext() {
                    case .done(let record): output.send(.write(record))
                    case .failed(let error, let plan): output.send(.failure(source: writer.source, error: error, plan: plan))
                    }
                }
                output.send(.finished(busyRetried: writer.busyRetried))
            }.start()
        }
        _ = FileHandle.standardInput.readToEndRetryingInterrupts()   // the parent closes it to stop us
        stop.set()
        group.wait()
        return 0
    }

    static func source(child: Int, thread: Int) -> String { "c\(child)/t\(thread)" }
    static func stream(child: Int, thread: Int) -> UInt64 { UInt64(1_000 * child + thread) }
}

/// Writes messages as JSON lines to stdout, one whole line at a time.
final class StressLineWriter: @unchecked Sendable {   // `encoder` is used under `lock` only
    private let lock = NSLock()
    private let encoder = JSONEncoder()

    func send(_ message: StressChildMessage) {
        lock.withLock {
            guard var data = try? encoder.encode(message) else { return }
            data.append(UInt8(ascii: "\n"))
            FileHandle.standardOutput.write(data)
        }
    }
}

/// A flag set once, read from any thread.
final class StressFlag: @unchecked Sendable {   // `value` is guarded by `lock`
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// A child writer process as the parent sees it: started from the `ripple` executable, its
/// reports read line by line into the ledger until it ends.
final class StressChildProcess {
    let index: Int
    let threads: Int
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors = Pipe()
    private let done = DispatchGroup()

    init(executable: String, database: String, seed: UInt64, outsideWrites: Double, index: Int, threads: Int) {
        self.index = index
        self.threads = threads
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["stress-child", "--db", database, "--seed", String(seed), "--index", String(index),
                             "--threads", String(threads), "--outside-writes", String(outsideWrites)]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
    }

    /// The sources (writer names) the child reports as.
    var sources: [String] { (0..<threads).map { StressChild.source(child: index, thread: $0) } }

    /// Starts the child and a thread reading its reports into `ledger`.
    func start(ledger: StressLedger) throws {
        try ProcessLaunch.run(process)
        let handle = output.fileHandleForReading
        let errorHandle = errors.fileHandleForReading
        let index = self.index
        let sources = self.sources
        let process = self.process
        done.enter()
        Thread { [done] in
            let decoder = JSONDecoder()
            var buffer = Data()
            var finishedThreads = 0
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = buffer[buffer.startIndex..<newline]
                    buffer.removeSubrange(buffer.startIndex...newline)
                    switch try? decoder.decode(StressChildMessage.self, from: line) {
                    case .write(let record)?:
                        ledger.submit(.done(record))
                    case .failure(let source, let error, let plan)?:
                        ledger.submit(.failed(error: "[\(source)] \(error)", plan: plan))
                    case .finished(let busyRetried)?:
                        finishedThreads += 1
                        ledger.count(busyRetried: busyRetried)
                    case nil:
                        ledger.reportChildFailure("child \(index) wrote an unreadable line",
                                                  detail: String(decoding: line, as: UTF8.self))
                    }
                }
            }
            let diagnostics = String(decoding: errorHandle.readToEndRetryingInterrupts(), as: UTF8.self)
            process.waitUntilExit()
            if process.terminationStatus != 0 || finishedThreads != sources.count {
                ledger.reportChildFailure(
                    "child \(index) ended with status \(process.terminationStatus) after \(finishedThreads) of "
                        + "\(sources.count) writers finished",
                    detail: diagnostics)
            }
            for source in sources { ledger.finish(source: source) }
            done.leave()
        }.start()
    }

    /// Tells the child to stop (closes its stdin) and waits until its last report is in.
    func stopAndWait() {
        try? input.fileHandleForWriting.close()
        done.wait()
    }
}
