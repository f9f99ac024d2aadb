import Foundation
import Logging
import RippleSync
import WSClient

/// A raw `/sync` client: sends the protocol's messages as JSON text and receives the server's
/// frames as they come off the socket, each with the instant it arrived and its exact bytes.
///
/// Frames go to ``frames`` unless an `observer` is given: then the observer sees each one on
/// the socket's task and nothing is kept (for many sockets receiving many frames).
final class SyncSocket: @unchecked Sendable {   // `writer` and `task` are guarded by `lock`
    /// A frame as it arrived.
    struct Frame: Sendable {
        var text: String
        var at: ContinuousClock.Instant

        /// The frame's payload: what the server wrote, in bytes.
        var bytes: Int { text.utf8.count }
        /// The payload and the WebSocket header of a server's (unmasked) text frame.
        var wireBytes: Int { bytes + (bytes < 126 ? 2 : bytes < 65_536 ? 4 : 10) }
        var isChanges: Bool { text.hasPrefix(#"{"type":"changes""#) }

        func message() throws -> ServerMessage { try ServerMessage(json: text.utf8) }
    }

    let frames = SyncMailbox<Frame>()
    private let lock = NSLock()
    private var writer: WebSocketOutboundWriter?
    private var task: Task<Void, Never>?

    /// Connects to `url`; returns once the socket is open.
    init(url: String, observer: (@Sendable (String, ContinuousClock.Instant) -> Void)? = nil) async throws {
        let opened = SyncMailbox<WebSocketOutboundWriter>()
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 1 << 30
        let frames = frames
        let task = Task {
            defer {
                opened.finish()
                frames.finish()
            }
            do {
                try await WebSocketClient.connect(url: url, configuration: configuration, logger: quietLogger) { inbound, outbound, _ in
                    opened.put(outbound)
                    for try await message in inbound.messages(maxSize: 1 << 30) {
                        guard case .text(let text) = message else { continue }
                        let now = ContinuousClock.now
                        if let observer { observer(text, now) } else { frames.put(Frame(text: text, at: now)) }
                    }
                }
            } catch {
                // Closed by this side (cancelled) or by the server: `frames` ends.
            }
        }
        let writer: WebSocketOutboundWriter?
        do {
            writer = try await opened.take(within: 15)
        } catch {
            writer = nil
        }
        guard let writer else {
            task.cancel()
            throw SyncBenchError("the WebSocket to \(url) did not open")
        }
        lock.withLock { (self.writer, self.task) = (writer, task) }
    }

    func send(_ text: String) async throws {
        guard let writer = lock.withLock({ writer }) else { throw SyncBenchError("the socket is closed") }
        try await writer.write(.text(text))
    }

    func send(_ message: ClientMessage) async throws {
        try await send(String(decoding: try JSONEncoder().encode(message), as: UTF8.self))
    }

    /// The next frame (heartbeats included).
    func next(within seconds: Double = 30) async throws -> Frame {
        guard let frame = try await frames.take(within: seconds) else { throw SyncBenchError("the server closed the socket") }
        return frame
    }

    /// The next `changes` frame; an `error` frame throws, heartbeats and pongs are skipped.
    func nextChanges(within seconds: Double = 30) async throws -> Frame {
        while true {
            let frame = try await next(within: seconds)
            if frame.isChanges { return frame }
            if frame.text.hasPrefix(#"{"type":"error""#) { throw SyncBenchError("the server sent \(frame.text)") }
        }
    }

    /// Says hello with `token` and waits for the welcome (not with an observer).
    func hello(_ token: String) async throws {
        try await send(.hello(protocol: SyncProtocol.version, token: token))
        let frame = try await next()
        guard frame.text.hasPrefix(#"{"type":"welcome""#) else { throw SyncBenchError("no welcome but \(frame.text)") }
    }

    /// Closes the socket and waits until it is closed: the server answers the close and the
    /// socket's task ends; a socket that does not is cut off after 2 s, and given up on after 5.
    func close() async {
        let (task, writer) = lock.withLock { () -> (Task<Void, Never>?, WebSocketOutboundWriter?) in
            defer { self.writer = nil }
            return (self.task, self.writer)
        }
        let cutOff = Task {
            try await Task.sleep(for: .seconds(2))
            task?.cancel()
        }
        do {
            try await withDeadline(5, "closing a socket") {
                try? await writer?.close(.normalClosure, reason: nil)
                await task?.value
            }
        } catch {
            Report.note("sync: \(describe(error))")
        }
        cutOff.cancel()
    }
}
