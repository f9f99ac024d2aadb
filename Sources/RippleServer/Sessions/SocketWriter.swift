#if Sync
import NIOCore
import NIOWebSocket

/// Writes a session's frames straight into its channel, on the channel's event loop.
///
/// A change that reaches 10,000 sockets costs one write per socket and a few tasks per event
/// loop (``SessionRegistry/wake(_:queue:)`` hands each loop its sockets in batches) — no task per
/// socket, no hop through an async writer, no frame encoder: the handler sits on the socket's
/// side of the WebSocket frame encoder and writes each frame as its header and payload in one
/// buffer. The node negotiates no WebSocket extension, so a server's text frame is exactly
/// that. The frames Hummingbird writes itself (pongs, pings, the closing handshake) pass by
/// it; once its close frame went, nothing more is written.
///
/// It writes only while the channel is writable: the frames a client has not read wait in its
/// session's bounded queue (``SocketFrames``), where a socket that never reads is dropped, and
/// writing goes on when the channel becomes writable again. A closing socket whose client does
/// not read is given ``closingGrace`` from its last progress, then closed.
final class SocketWriter: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {   // its mutable fields are touched only on the channel's event loop
    typealias InboundIn = NIOAny
    typealias OutboundOut = ByteBuffer

    /// What the writer writes and tells: the session.
    protocol Source: AnyObject, Sendable {
        /// The next frames' payloads (about `budget` bytes, at least one frame when any waits),
        /// counted as written; and whether nothing more will ever come. When they empty the
        /// queue, the source wakes the writer for the next frame.
        func takeFrames(budget: Int) -> (frames: [[UInt8]], drained: Bool)
        /// Whether the socket is closing (its last frames wait).
        var isClosing: Bool { get }
        /// Whether nothing more will ever be queued and nothing waits.
        var isDrained: Bool { get }
        /// Frames and their bytes written by one pump (for the metrics).
        func wrote(frames: Int, bytes: Int)
        /// The writer is done: everything was written, the client did not read the last frames
        /// within ``SocketWriter/closingGrace`` (the channel is then closed), or the channel
        /// closed.
        func writerFinished()
    }

    /// The wire form of the payloads a pump wrote last: sockets pumped together (a batch of
    /// an event loop) that send the same frame (its payload's storage) share one buffer.
    struct WireCache {
        fileprivate var payload: [UInt8] = []
        fileprivate var wire: ByteBuffer?

        init() {}

        mutating func wire(_ payload: [UInt8], allocator: ByteBufferAllocator) -> ByteBuffer {
            let same = payload.withUnsafeBytes { new in
                self.payload.withUnsafeBytes { old in new.baseAddress == old.baseAddress && new.count == old.count }
            }
            if same, !payload.isEmpty, let wire { return wire }
            let made = SocketWriter.textFrame(payload, allocator: allocator)
            (self.payload, wire) = (payload, made)
            return made
        }
    }

    /// Bytes a pump takes from the queue at a time.
    static let budget = 64 * 1024

    /// How long a closing socket's last frames may wait for a client that does not read.
    static let closingGrace = TimeAmount.seconds(1)

    let channel: any Channel
    private weak var source: (any Source)?
    private var context: ChannelHandlerContext?
    /// Set once the WebSocket's close frame went out (Hummingbird's): nothing follows it.
    private var closeSent = false
    /// The grace of a socket that closes, armed while its client does not read.
    private var graceTimer: Scheduled<Void>?

    /// A writer for `channel`; it writes nothing until ``serve(_:)`` names its source.
    init(channel: any Channel) {
        self.channel = channel
    }

    /// Makes `source` what the writer writes (held weakly: the source owns the writer). Call it
    /// before ``install()``.
    func serve(_ source: any Source) {
        self.source = source
    }

    var eventLoop: any EventLoop { channel.eventLoop }

    /// Puts the writer in the channel's pipeline, on the socket's side of the WebSocket frame
    /// encoder (its frames are encoded already; a TLS handler nearer the socket would still
    /// see them), and a watcher of the frames the encoder gets (``CloseWatch``).
    func install() async throws {
        try await eventLoop.submit { try self.installOnLoop() }.get()
    }

    /// ``install()``, on the channel's event loop.
    func installOnLoop() throws {
        let pipeline = channel.pipeline.syncOperations
        let encoder = try pipeline.handler(type: WebSocketFrameEncoder.self)
        try pipeline.addHandler(self, position: .before(encoder))
        try pipeline.addHandler(CloseWatch(writer: self), position: .after(encoder))
    }

    /// Pumps on the channel's event loop (from any thread).
    func wake() {
        eventLoop.execute { self.pump() }
    }

    /// ``pump(_:)`` with a cache of its own (a socket pumped alone).
    private func pump() {
        var cache = WireCache()
        pump(&cache)
    }

    /// Writes what waits while the channel is writable; on the channel's event loop.
    func pump(_ cache: inout WireCache) {
        eventLoop.preconditionInEventLoop()
        guard let source else { return }
        guard let context, channel.isActive, !closeSent else {
            if closeSent || (context == nil && !channel.isActive) { source.writerFinished() }
            return
        }
        var (frames, bytes) = (0, 0)
        var drained = false
        while channel.isWritable {
            let taken = source.takeFrames(budget: Self.budget)
            for payload in taken.frames {
                context.write(wrapOutboundOut(cache.wire(payload, allocator: context.channel.allocator)), promise: nil)
                bytes += payload.count
            }
            frames += taken.frames.count
            if taken.drained || taken.frames.isEmpty {
                drained = taken.drained
                break
            }
        }
        if frames > 0 {
            // (A flush can make the channel writable again and pump within this one.)
            context.flush()
            source.wrote(frames: frames, bytes: bytes)
            // Progress: a slow reader's grace starts again.
            graceTimer?.cancel()
            graceTimer = nil
        }
        if drained { source.writerFinished() }
        if source.isClosing, !channel.isWritable { armGrace() }
    }

    /// The session let go of a closing socket (its queue dropped): one that its client does not
    /// read is given its grace.
    func released() {
        eventLoop.execute { [self] in
            if channel.isActive, !channel.isWritable { armGrace() }
        }
    }

    /// A closing socket whose client does not read gets ``closingGrace``: then the writer is
    /// done and, unless everything was written and the channel can take Hummingbird's close
    /// frame, the connection closes (what waits for that client is not worth holding for it;
    /// Hummingbird's closing handshake would wait for it to read).
    private func armGrace() {
        guard graceTimer == nil else { return }
        graceTimer = eventLoop.scheduleTask(in: Self.closingGrace) { [weak self] in
            guard let self else { return }
            self.graceTimer = nil
            let stuck = !(self.source?.isDrained ?? true) || !self.channel.isWritable
            self.source?.writerFinished()
            if stuck { self.context?.close(promise: nil) }
        }
    }

    /// Hummingbird wrote the WebSocket's close frame: nothing more is written after it.
    fileprivate func closeFrameSent() {
        closeSent = true
        source?.writerFinished()
    }

    /// A server's text frame (unmasked, no extension): its header and `payload`.
    static func textFrame(_ payload: [UInt8], allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: payload.count + 10)
        buffer.writeInteger(UInt8(0x81))   // FIN, text
        switch payload.count {
        case ..<126:
            buffer.writeInteger(UInt8(payload.count))
        case ...Int(UInt16.max):
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(payload.count))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(payload.count))
        }
        buffer.writeBytes(payload)
        return buffer
    }

    // MARK: ChannelInboundHandler

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        guard context.channel.isActive else {
            source?.writerFinished()
            return
        }
        pump()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        graceTimer?.cancel()
        source?.writerFinished()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        graceTimer?.cancel()
        source?.writerFinished()
        context.fireChannelInactive()
    }
}

/// Watches the frames Hummingbird writes (it sits on their way to the frame encoder) and tells
/// the ``SocketWriter`` when the close frame goes: a WebSocket sends nothing after it.
private final class CloseWatch: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let writer: SocketWriter

    init(writer: SocketWriter) { self.writer = writer }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if unwrapOutboundIn(data).opcode == .connectionClose { writer.closeFrameSent() }
        context.write(data, promise: promise)
    }
}
#endif
