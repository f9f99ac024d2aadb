#if Sync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import NIOCore
import NIOWebSocket
import PostgresNIO
import Ripple
import RippleServer
import RippleSync
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing
import WSClient

extension TestNode {
    /// Stops the node; a node that does not stop in time fails the test.
    func stop() async {
        do { try await shutDown() } catch { Issue.record(error) }
    }
}

/// A raw protocol client: sends JSON text — or whatever it is given: binary frames, text frames
/// whose bytes are not UTF-8, for the hostile side of the edge tests — and receives the server's
/// frames in order, and the code it closes with.
final class TestSocket: @unchecked Sendable {   // the mutable fields are guarded by `lock`
    private let lock = NSLock()
    private var writer: WebSocketOutboundWriter?
    private var buffer: [String] = []
    /// Frames received so far, and the last one (said when a wait fails).
    private var received = (count: 0, last: "")
    private var closed = false
    /// The code of the node's close frame, once the socket closed (`nil`: none came).
    private var closeCode: WebSocketErrorCode?
    private var waiter: CheckedContinuation<Void, Never>?
    private var task: Task<Void, any Error>?

    init(url: String) async throws {
        let opened = AsyncStream<WebSocketOutboundWriter>.makeStream()
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 1 << 28
        task = Task { [self] in
            defer {
                opened.continuation.finish()
                lock.withLock { closed = true }
                wake()
            }
            let close = try await WebSocketClient.connect(url: url, configuration: configuration,
                                                          logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })) { inbound, outbound, _ in
                opened.continuation.yield(outbound)
                for try await message in inbound.messages(maxSize: 1 << 28) {
                    if case .text(let text) = message {
                        self.lock.withLock {
                            self.buffer.append(text)
                            self.received = (self.received.count + 1, text)
                        }
                        self.wake()
                    }
                }
            }
            lock.withLock { closeCode = close?.closeCode }
        }
        do {
            guard let writer = try await Wait.next(opened.stream, "the socket to \(url) to open") else {
                throw SyncClientTestError("the socket did not open")
            }
            lock.withLock { self.writer = writer }
        } catch {
            await end()
            throw error
        }
    }

    private func wake() {
        let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume()
    }

    func send(_ json: String) async throws { try await lock.withLock { writer }?.write(.text(json)) }

    func send(_ message: ClientMessage) async throws {
        try await send(String(decoding: try JSONEncoder().encode(message), as: UTF8.self))
    }

    func send(binary bytes: [UInt8]) async throws { try await lock.withLock { writer }?.write(.binary(ByteBuffer(bytes: bytes))) }

    /// Sends `bytes` as one text frame, whether or not they are UTF-8.
    func send(textBytes bytes: [UInt8]) async throws {
        let frame = WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: bytes))
        try await lock.withLock { writer }?.write(.custom(frame))
    }

    /// The next frame, or `nil` once the socket closed; fails after `seconds`.
    func nextText(within seconds: Double = Wait.limit.timeInterval) async throws -> String? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        let timeout = Task { [self] in
            try await Task.sleep(until: deadline, clock: .continuous)
            wake()
        }
        defer { timeout.cancel() }
        while true {
            let (frame, isClosed) = lock.withLock { () -> (String?, Bool) in
                buffer.isEmpty ? (nil, closed) : (buffer.removeFirst(), false)
            }
            if let frame { return frame }
            if isClosed { return nil }
            if ContinuousClock.now >= deadline {
                let (count, last) = lock.withLock { received }
                throw SyncClientTestError("no frame within \(seconds) s (\(count) received; the last: \(last.prefix(300)))")
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // The deadline is checked under the lock: a timer that fired before the waiter
                // was registered would wake nobody.
                let ready = lock.withLock { () -> Bool in
                    if !buffer.isEmpty || closed || ContinuousClock.now >= deadline { return true }
                    waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    func next(within seconds: Double = Wait.limit.timeInterval, what: String? = nil) async throws -> ServerMessage? {
        let text: String?
        do {
            text = try await nextText(within: seconds)
        } catch let error as SyncClientTestError {
            guard let what else { throw error }
            throw SyncClientTestError("waiting for \(what): \(error)")
        }
        guard let text else { return nil }
        return try JSONDecoder().decode(ServerMessage.self, from: Data(text.utf8))
    }

    /// The next message that is not a heartbeat (`what`: what is awaited, said if none comes),
    /// within `seconds` in all: heartbeats do not extend the wait.
    func nextSkippingHeartbeats(within seconds: Double = Wait.limit.timeInterval, what: String? = nil) async throws -> ServerMessage? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while true {
            let left = deadline - ContinuousClock.now
            let message = try await next(within: max(0, left.timeInterval), what: what)
            if case .heartbeat = message { continue }
            return message
        }
    }

    /// The next message that is not a heartbeat, read with the client's own frame reader
    /// (``ServerMessage/init(json:)``), within `seconds` in all; `nil` once the socket closed.
    func nextMessage(within seconds: Double = Wait.limit.timeInterval, what: String) async throws -> ServerMessage? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        do {
            while let text = try await nextText(within: max(0, (deadline - ContinuousClock.now).timeInterval)) {
                let message = try ServerMessage(json: text.utf8)
                if case .heartbeat = message { continue }
                return message
            }
            return nil
        } catch let error as SyncClientTestError {
            throw SyncClientTestError("waiting for \(what): \(error)")
        }
    }

    /// The code the node closed the socket with, once it closed (frames before it are skipped).
    func closingCode(within seconds: Double = Wait.limit.timeInterval) async throws -> WebSocketErrorCode? {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while try await nextText(within: max(0, (deadline - ContinuousClock.now).timeInterval)) != nil {}
        if let task = lock.withLock({ self.task }) {
            _ = try await Wait.value("the socket's task to end") { () async -> Result<Void, any Error> in await task.result }
        }
        return lock.withLock { closeCode }
    }

    /// Sends `hello` (with the client id the device claims, if any) and returns the welcome.
    func hello(_ token: String, client: String? = nil) async throws -> ServerMessage.Welcome {
        try await send(.hello(protocol: 1, token: token, client: client))
        guard case .welcome(let welcome)? = try await nextSkippingHeartbeats(what: "the welcome") else {
            throw SyncClientTestError("no welcome")
        }
        return welcome
    }

    /// Pushes `mutations` and returns the results of the `pushed` answer.
    func push(_ mutations: [Mutation]) async throws -> [MutationResult] {
        try await send(.push(mutations: mutations))
        while let message = try await next(what: "the answer to a push") {
            if case .pushed(let results) = message { return results }
            if case .error(let code, let text, _) = message { throw SyncClientTestError("\(code.rawValue): \(text)") }
        }
        throw SyncClientTestError("no pushed")
    }

    /// Starts closing the socket (its task is cancelled); ``end()`` waits for it.
    func close() {
        lock.withLock { task }?.cancel()
    }

    /// Closes the socket and returns once its task ended (bounded: a task that does not end is
    /// recorded as an issue).
    func end() async {
        guard let task = lock.withLock({ self.task }) else { return }
        task.cancel()
        do {
            _ = try await Wait.value("the socket's task to end") { () async -> Result<Void, any Error> in await task.result }
        } catch {
            Issue.record(error)
        }
    }
}

/// Opens a socket to `url`, runs `body` with it, and closes it before returning — when `body`
/// returns and when it throws — once its task ended.
func withSocket<Result>(_ url: String, isolation: isolated (any Actor)? = #isolation,
                        _ body: (TestSocket) async throws -> Result) async throws -> Result {
    let socket = try await TestSocket(url: url)
    do {
        let result = try await body(socket)
        await socket.end()
        return result
    } catch {
        await socket.end()
        throw error
    }
}

/// The sockets a test opens one after another (reopening after a close, moving between nodes):
/// ``withSockets(_:_:)`` closes every one of them when its scope ends.
final class TestSockets: @unchecked Sendable {   // `opened` is guarded by `lock`
    private let lock = NSLock()
    private var opened: [TestSocket] = []

    /// Opens a socket to `url`, closed when the scope ends (or before, by its `end()`).
    func open(_ url: String) async throws -> TestSocket {
        let socket = try await TestSocket(url: url)
        lock.withLock { opened.append(socket) }
        return socket
    }

    fileprivate func endAll() async {
        for socket in lock.withLock({ opened }) { await socket.end() }
    }
}

/// Runs `body` with a ``TestSockets`` and closes every socket it opened before returning — when
/// `body` returns and when it throws — once their tasks ended.
func withSockets<Result>(isolation: isolated (any Actor)? = #isolation,
                         _ body: (TestSockets) async throws -> Result) async throws -> Result {
    let sockets = TestSockets()
    do {
        let result = try await body(sockets)
        await sockets.endAll()
        return result
    } catch {
        await sockets.endAll()
        throw error
    }
}

/// What a client holds for one subscription, built from frames as a client in any language
/// would: a snapshot replaces, a changeset applies.
struct ClientRows {
    var columns: [String] = []
    var rows: [[WireValue]] = []
    var basis = ""
    var lsn = ""

    /// Reads `socket`'s frames until subscription `id`'s first result is in.
    mutating func readFirstResult(from socket: TestSocket, id: String) async throws {
        while columns.isEmpty {
            guard let message = try await socket.nextSkippingHeartbeats() else {
                throw SyncClientTestError("the socket closed before \(id)'s first result")
            }
            _ = try take(message, id: id)
        }
    }

    mutating func take(_ message: ServerMessage, id: String) throws -> Bool {
        switch message {
        case .changes(let lsn, let snapshots, let changesets):
            self.lsn = lsn
            if let snapshot = snapshots[id] {
                (columns, rows, basis) = (snapshot.columns, snapshot.rows, snapshot.basis)
                return true
            }
            if let changeset = changesets[id] {
                rows = try changeset.apply(to: rows)
                return true
            }
            return false
        case .heartbeat(let lsn):
            self.lsn = lsn
            return false
        default:
            return false
        }
    }
}

/// Launches `ripple-server` (`executable`) with `arguments` as a test's child process — run
/// through `prefix` (e.g. `prlimit …`) when given, with `environment` when given — its standard
/// error going to `<directory>/node.err`; returns it and its standard output (see
/// ``servedPort(_:)``). The caller ends it on every path.
func launchServer(_ executable: String, _ arguments: [String], directory: TemporaryDirectory,
                  environment: [String: String]? = nil, through prefix: [String] = []) throws -> (Process, Pipe) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: prefix.first ?? executable)
    process.arguments = prefix.isEmpty ? arguments : Array(prefix.dropFirst()) + [executable] + arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    process.standardOutput = output
    _ = FileManager.default.createFile(atPath: directory.path("node.err"), contents: nil)
    process.standardError = FileHandle(forWritingAtPath: directory.path("node.err"))
    try ProcessLaunch.run(process)
    return (process, output)
}

/// The port a `ripple-server` child process serves `/sync` on, read from the line it prints
/// once it listens (its standard output, `output`).
func servedPort(_ output: Pipe) async throws -> Int {
    let reader = output.fileHandleForReading
    let served = try await Wait.value("the node to say where it serves") {
        try await onOwnThread("node output") { () -> String in
            var text = ""
            while !text.contains("/sync") {
                let data = reader.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            return text
        }
    }
    return try #require(served.firstMatch(of: /127\.0\.0\.1:(\d+)\/sync/).flatMap { Int($0.1) }, "\(served)")
}
#endif
