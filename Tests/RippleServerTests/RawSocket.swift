import Foundation
import Logging
import NIOCore
import NIOWebSocket
import RippleSync
import WSClient

/// A WebSocket client that sends whatever it is given — text, binary frames, text frames whose
/// bytes are not UTF-8 — and keeps every text frame the node sends and the close code it
/// closes with: the hostile side of the edge tests.
final class RawSocket: @unchecked Sendable {   // the mutable fields are guarded by `lock`
    private let lock = NSLock()
    private var writer: WebSocketOutboundWriter?
    private var buffer: [String] = []
    private var closed = false
    /// The code of the node's close frame, once the socket closed (`nil`: none came).
    private var closeCode: WebSocketErrorCode?
    private var waiter: CheckedContinuation<Void, Never>?
    private var task: Task<Void, any Error>?

    init(url: String) async throws {
        let opened = AsyncStream<WebSocketOutboundWriter>.makeStream()
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 1 << 26
        task = Task { [self] in
            defer {
                opened.continuation.finish()
                lock.withLock { closed = true }
                wake()
            }
            let close = try await WebSocketClient.connect(url: url, configuration: configuration,
                                                          logger: Logger(label: "raw", factory: { _ in SwiftLogNoOpLogHandler() })) { inbound, outbound, _ in
                opened.continuation.yield(outbound)
                for try await message in inbound.messages(maxSize: 1 << 26) {
                    if case .text(let text) = message {
                        self.lock.withLock { self.buffer.append(text) }
                        self.wake()
                    }
                }
            }
            lock.withLock { closeCode = close?.closeCode }
        }
        var waiting = opened.stream.makeAsyncIterator()
        guard let writer = await waiting.next() else { throw SyncClientTestError("the raw socket did not open") }
        lock.withLock { self.writer = writer }
    }

    private func wake() {
        let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume()
    }

    func send(_ text: String) async throws { try await lock.withLock { writer }?.write(.text(text)) }

    func send(binary bytes: [UInt8]) async throws { try await lock.withLock { writer }?.write(.binary(ByteBuffer(bytes: bytes))) }

    /// Sends `bytes` as one text frame, whether or not they are UTF-8.
    func send(textBytes bytes: [UInt8]) async throws {
        let frame = WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: bytes))
        try await lock.withLock { writer }?.write(.custom(frame))
    }

    /// The next text frame, or `nil` once the socket closed; fails after `seconds`, saying
    /// what it waited for.
    func next(within seconds: Double = 30, what: String) async throws -> String? {
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
            if ContinuousClock.now >= deadline { throw SyncClientTestError("no frame within \(seconds) s while waiting for \(what)") }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = lock.withLock { () -> Bool in
                    if !buffer.isEmpty || closed { return true }
                    waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// The next message that is not a heartbeat, read with the client's own frame reader.
    func nextMessage(within seconds: Double = 30, what: String) async throws -> ServerMessage? {
        while let text = try await next(within: seconds, what: what) {
            let message = try ServerMessage(json: text.utf8)
            if case .heartbeat = message { continue }
            return message
        }
        return nil
    }

    /// The code the node closed the socket with, once it closed (waiting at most `seconds`).
    func closingCode(within seconds: Double = 30) async throws -> WebSocketErrorCode? {
        while try await next(within: seconds, what: "the socket to close") != nil {}
        _ = await task?.result
        return lock.withLock { closeCode }
    }

    func close() { lock.withLock { task }?.cancel() }
}
