import NIOCore

/// Writes a session's frames straight into its channel, on the channel's event loop.
///
/// A change that reaches 10,000 sockets costs one write per socket and a few tasks per event
/// loop (``SyncServer/wake(_:)`` hands each loop its sockets in batches) — no task per socket,
/// no hop through an async writer, no frame encoder: the handler sits first in the pipeline,
/// next to the socket, and writes each frame as its header and payload in one buffer. The
/// node negotiates no WebSocket extension, so a server's text frame is exactly that. The
/// frames Hummingbird writes itself (pongs, pings, the closing handshake) pass by it.
///
/// It writes only while the channel is writable: the frames a client has not read wait in its
/// session's bounded queue (``SocketFrames``), where a socket that never reads is dropped, and
/// writing goes on when the channel becomes writable again.
final class SocketWriter: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    // `context` and `closeTimer` are touched only on the channel's event loop.
    typealias InboundIn = NIOAny
    typealias OutboundOut = ByteBuffer

    /// What the writer writes and tells: the session.
    protocol Source: AnyObject, Sendable {
        /// The next frames' payloads (about `budget` bytes, at least one frame when any waits),
        /// counted as written; and whether the socket is closing, and whether nothing more will
        /// ever come. When they empty the queue, the source wakes the writer for the next frame.
        func takeFrames(budget: Int) -> (frames: [[UInt8]], closing: Bool, drained: Bool)
        /// Whether the socket is closing (its last frames wait).
        var isClosing: Bool { get }
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
    private var closeTimer: Scheduled<Void>?

    init(channel: any Channel, source: any Source) {
        self.channel = channel
        self.source = source
    }

    var eventLoop: any EventLoop { channel.eventLoop }

    /// Puts the writer first in the channel's pipeline.
    func install() async throws {
        try await channel.pipeline.addHandler(self, position: .first).get()
    }

    /// Pumps on the channel's event loop (from any thread).
    func wake() {
        eventLoop.execute {
            var cache = WireCache()
            self.pump(&cache)
        }
    }

    /// Writes what waits while the channel is writable; on the channel's event loop.
    func pump(_ cache: inout WireCache) {
        eventLoop.preconditionInEventLoop()
        guard let source else { return }
        guard let context, channel.isActive else {
            if context == nil, !channel.isActive { source.writerFinished() }
            return
        }
        var (frames, bytes) = (0, 0)
        var closing: Bool?
        while channel.isWritable {
            let taken = source.takeFrames(budget: Self.budget)
            for payload in taken.frames {
                context.write(wrapOutboundOut(cache.wire(payload, allocator: context.channel.allocator)), promise: nil)
                bytes += payload.count
            }
            frames += taken.frames.count
            closing = taken.closing
            if taken.drained {
                if frames > 0 { context.flush() }
                source.wrote(frames: frames, bytes: bytes)
                source.writerFinished()
                return
            }
            if taken.frames.isEmpty { break }
        }
        if frames > 0 {
            context.flush()
            source.wrote(frames: frames, bytes: bytes)
        }
        if closing ?? source.isClosing, closeTimer == nil {
            // A closing socket whose client does not read its last frames is given up on: the
            // connection closes (what waits for the client is not worth holding for it).
            closeTimer = eventLoop.scheduleTask(in: Self.closingGrace) { [weak self] in
                guard let self else { return }
                self.source?.writerFinished()
                self.context?.close(promise: nil)
            }
        }
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
        var cache = WireCache()
        pump(&cache)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        closeTimer?.cancel()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            var cache = WireCache()
            pump(&cache)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        source?.writerFinished()
        context.fireChannelInactive()
    }
}
