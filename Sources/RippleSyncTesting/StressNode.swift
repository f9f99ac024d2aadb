#if Sync
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Ripple
import RippleServer
import RippleTesting
import WSClient

/// The node of a sync stress run: in the run's process, or a child process that faults can kill.
enum StressNode {
    case inProcess(SyncServer, Task<Void, any Error>)
    case child(StressNodeProcess)
}

/// A `ripple-server serve` child process: started until it listens, stopped with SIGTERM or
/// killed with SIGKILL, always waited for.
final class StressNodeProcess: Sendable {
    private let process: Process
    /// Whether it exited, and who waits for that.
    private let exit = Locked<(exited: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    private init(process: Process) {
        self.process = process
    }

    /// Starts `executable` with `arguments` (its standard error appended to `log`) and waits
    /// until it prints that it serves.
    ///
    /// - Throws: when it exits, or has not listened within 60 s (then killed).
    static func start(_ executable: String, arguments: [String], log: String) async throws -> StressNodeProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? logHandle.close() }
        try logHandle.seekToEnd()
        process.standardError = logHandle
        let node = StressNodeProcess(process: process)
        process.terminationHandler = { _ in
            let waiters = node.exit.withLock { state in
                state.exited = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        try ProcessLaunch.run(process)
        SyncStress.running.withLock { _ = $0.nodes.insert(process.processIdentifier) }
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            Glibc.kill(process.processIdentifier, SIGKILL)
        }
        defer { watchdog.cancel() }
        let reader = output.fileHandleForReading
        let listening = try await onOwnThread("stress node start") { () -> Bool in
            var text = ""
            while true {
                let data = reader.availableData
                if data.isEmpty { return false }
                text += String(decoding: data, as: UTF8.self)
                if text.contains("ripple-server: serving") { return true }
            }
        }
        guard listening else {
            await node.kill()
            throw SyncStressSetupError("the node exited (status \(process.terminationStatus)) before it listened; its log: \(log)")
        }
        return node
    }

    /// Whether the process ended, and how (its exit status, or the signal that ended it).
    var ended: String? {
        guard exit.withLock({ $0.exited }) else { return nil }
        return process.terminationReason == .uncaughtSignal ? "signal \(process.terminationStatus)" : "status \(process.terminationStatus)"
    }

    /// The process's resident memory in bytes (`VmRSS`), while it runs.
    var residentBytes: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return nil }
        return kilobytes * 1024
    }

    /// Sends SIGTERM and waits up to `limit` for the process to end.
    ///
    /// - Returns: whether it ended in time.
    func stop(within limit: Duration) async -> Bool {
        Glibc.kill(process.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if exit.withLock({ $0.exited }) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return exit.withLock { $0.exited }
    }

    /// Every thread's backtrace (`lldb`, attached for a moment), for a process that does not
    /// stop; `nil` when there is no `lldb` on the `PATH` or it cannot attach.
    func threadBacktraces() async -> String? {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
            .map { "\($0)/lldb" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path, !exit.withLock({ $0.exited }) else { return nil }
        let lldb = Process()
        lldb.executableURL = URL(fileURLWithPath: path)
        lldb.arguments = ["--batch", "--no-lldbinit", "-p", String(process.processIdentifier),
                          "-o", "thread backtrace all", "-o", "detach"]
        let output = Pipe()
        lldb.standardOutput = output
        lldb.standardError = output
        return try? await Wait.run(lldb, "lldb's backtraces of node \(process.processIdentifier)", within: .seconds(120)) {
            String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
    }

    /// Sends SIGKILL and waits for the process to end.
    func kill() async {
        Glibc.kill(process.processIdentifier, SIGKILL)
        await exited()
        SyncStress.running.withLock { _ = $0.nodes.remove(process.processIdentifier) }
    }

    private func exited() async {
        await withCheckedContinuation { continuation in
            let done = exit.withLock { state -> Bool in
                if !state.exited { state.waiters.append(continuation) }
                return state.exited
            }
            if done { continuation.resume() }
        }
    }
}

/// A sync stress run that could not be set up.
struct SyncStressSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Log lines appended to a file (the in-process node's log in a stress run), one per message:
/// `time level label: message`.
package struct FileLogHandler: LogHandler {
    private let file: Locked<FileHandle>
    private let label: String
    package var logLevel: Logger.Level = .info
    package var metadata: Logger.Metadata = [:]

    package init(label: String, path: String) throws {
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        file = Locked(handle)
        self.label = label
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let line = "\(Date()) \(event.level) \(label): \(event.message)\n"
        file.withLock { $0.write(Data(line.utf8)) }
    }
}

/// One socket of a reconnect storm: it connects, says hello, subscribes to the user's notes and
/// closes once an answer comes (the subscription's result, or `retry_later`).
enum StormSocket {
    /// Whether the node answered within 60 s (the socket is left to close by itself after that).
    static func visit(url: String, token: String) async -> Bool {
        let outcome = FirstOutcome<Bool>()
        let hello = #"{"type":"hello","protocol":1,"token":""# + token + #""}"#
        let subscribe = #"{"type":"subscribe","id":"storm","query":{"table":"notes","order":[{"column":"id"}]}}"#
        Task {
            var configuration = WebSocketClientConfiguration()
            configuration.maxFrameSize = 1 << 24
            do {
                try await WebSocketClient.connect(url: url, configuration: configuration, logger: Self.logger) { inbound, outbound, _ in
                    try await outbound.write(.text(hello))
                    try await outbound.write(.text(subscribe))
                    for try await message in inbound.messages(maxSize: 1 << 24) {
                        guard case .text(let text) = message else { continue }
                        if text.hasPrefix(#"{"type":"changes""#) || text.contains(#""retry_later""#) {
                            outcome.finish(true)
                            break
                        }
                    }
                    try? await outbound.close(.normalClosure, reason: nil)
                }
            } catch {}
            outcome.finish(false)
        }
        let limit = Task {
            try await Task.sleep(for: .seconds(60))
            outcome.finish(false)
        }
        defer { limit.cancel() }
        return await outcome.value
    }

    private static let logger = Logger(label: "ripple.stress.storm", factory: { _ in SwiftLogNoOpLogHandler() })
}
#endif
