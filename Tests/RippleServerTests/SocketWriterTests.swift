#if Sync
import Foundation
import NIOCore
import NIOEmbedded
import NIOWebSocket
@testable import RippleServer
import RippleSync
import Testing

/// The direct write path of a socket (``SocketWriter``): frames as a WebSocket client decodes
/// them, written only while the channel is writable, a closing socket's grace; and the frames
/// many sockets share (``FrameMemo``, ``SocketWriter/WireCache``).
@Suite struct SocketWriterTests {
    /// A queue of payloads, as a session holds them.
    final class Queue: SocketWriter.Source, @unchecked Sendable {   // every field is guarded by `lock`
        private let lock = NSLock()
        private var frames: [[UInt8]] = []
        private var closing = false
        private(set) var finished = 0
        private(set) var written = (frames: 0, bytes: 0)

        func push(_ text: String, last: Bool = false) {
            lock.withLock {
                frames.append(Array(text.utf8))
                closing = closing || last
            }
        }

        func takeFrames(budget: Int) -> (frames: [[UInt8]], drained: Bool) {
            lock.withLock {
                var (taken, bytes) = ([[UInt8]](), 0)
                while bytes < budget, !frames.isEmpty {
                    bytes += frames[0].count
                    taken.append(frames.removeFirst())
                }
                return (taken, closing && frames.isEmpty)
            }
        }

        var isClosing: Bool { lock.withLock { closing } }

        var isDrained: Bool { lock.withLock { closing && frames.isEmpty } }

        func wrote(frames: Int, bytes: Int) { lock.withLock { written = (written.frames + frames, written.bytes + bytes) } }

        func writerFinished() { lock.withLock { finished += 1 } }
    }

    /// A connected channel with a writer (first in its pipeline) for a queue of its own.
    static func connectedWriter() throws -> (EmbeddedChannel, Queue, SocketWriter) {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let queue = Queue()
        let writer = SocketWriter(channel: channel)
        writer.serve(queue)
        try channel.pipeline.syncOperations.addHandler(writer, position: .first)
        return (channel, queue, writer)
    }

    /// The text frames written to `channel` so far, decoded by NIO's own WebSocket decoder.
    static func sent(_ channel: EmbeddedChannel) throws -> [String] {
        let decoder = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 22)))
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { try decoder.writeInbound(bytes) }
        var texts: [String] = []
        while let frame = try decoder.readInbound(as: WebSocketFrame.self) {
            #expect(frame.fin && frame.opcode == .text && frame.maskKey == nil)
            texts.append(String(buffer: frame.unmaskedData))
        }
        _ = try decoder.finish()
        return texts
    }

    @Test func aFrameOfEveryLengthClassIsWhatAClientDecodes() throws {
        let channel = EmbeddedChannel()
        for length in [0, 1, 125, 126, 127, 65_535, 65_536, 300_000] {
            let payload = (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            try channel.writeOutbound(SocketWriter.textFrame(payload, allocator: channel.allocator))
            #expect(try Self.sent(channel) == [String(decoding: payload, as: UTF8.self)], "\(length) bytes")
        }
    }

    @Test func framesAreWrittenWhileTheChannelIsWritableAndResumeWhenItIsAgain() throws {
        let (channel, queue, writer) = try Self.connectedWriter()
        queue.push("one")
        queue.push("two")
        writer.wake()
        channel.embeddedEventLoop.run()
        #expect(try Self.sent(channel) == ["one", "two"])
        #expect(queue.written == (2, 6))

        channel.isWritable = false
        queue.push("three")
        writer.wake()
        channel.embeddedEventLoop.run()
        #expect(try Self.sent(channel) == [], "nothing is written while the channel is not writable")
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(try Self.sent(channel) == ["three"], "and it goes on when it is")
        #expect(queue.finished == 0)
        _ = try channel.finish()
    }

    @Test func aClosingSocketIsDoneOnceWrittenOrAfterItsGrace() throws {
        // Written: done at once.
        let (channel, queue, writer) = try Self.connectedWriter()
        queue.push("bye", last: true)
        writer.wake()
        channel.embeddedEventLoop.run()
        #expect(try Self.sent(channel) == ["bye"])
        #expect(queue.finished >= 1)
        _ = try channel.finish()

        // Not read: done after the grace, the frame unwritten.
        let (stalled, left, stalledWriter) = try Self.connectedWriter()
        stalled.isWritable = false
        left.push("bye", last: true)
        stalledWriter.wake()
        stalled.embeddedEventLoop.run()
        stalled.embeddedEventLoop.advanceTime(by: SocketWriter.closingGrace - .milliseconds(1))
        #expect(left.finished == 0)
        stalled.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(left.finished >= 1)
        #expect(!stalled.isActive, "the connection is closed")
        #expect(try Self.sent(stalled) == [])
    }

    /// Makes its channel unwritable when a write passes (a client that stopped reading, and
    /// the frame that filled its buffers).
    final class FillsTheBuffers: ChannelOutboundHandler {
        typealias OutboundIn = NIOAny
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            (context.channel as? EmbeddedChannel)?.isWritable = false
            context.write(data, promise: promise)
        }
    }

    @Test func aClosingSocketWrittenOutButNotReadIsClosedAfterItsGrace() throws {
        // Its last frame went, and filled the client's buffers: Hummingbird's close frame
        // would wait for the client to read. (It was held for as long as the client kept
        // the connection.)
        let (channel, queue, writer) = try Self.connectedWriter()
        try channel.pipeline.syncOperations.addHandler(FillsTheBuffers(), position: .first)
        queue.push("bye", last: true)
        writer.wake()
        channel.embeddedEventLoop.run()
        #expect(queue.finished >= 1, "everything was written")
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: SocketWriter.closingGrace)
        #expect(!channel.isActive, "the connection is closed")

        // A session that let go of its socket (queue dropped) while the client does not read.
        let (other, dropped, otherWriter) = try Self.connectedWriter()
        other.isWritable = false
        otherWriter.released()
        other.embeddedEventLoop.run()
        other.embeddedEventLoop.advanceTime(by: SocketWriter.closingGrace)
        #expect(!other.isActive, "the connection is closed")
        withExtendedLifetime(dropped) {}   // (the writer holds its session weakly)
    }

    @Test func aSlowReaderGetsItsGraceFromItsLastProgress() throws {
        let (channel, queue, writer) = try Self.connectedWriter()
        channel.isWritable = false
        queue.push("one")
        queue.push("bye", last: true)
        writer.wake()
        channel.embeddedEventLoop.run()
        channel.embeddedEventLoop.advanceTime(by: SocketWriter.closingGrace - .milliseconds(100))
        // The client reads: everything goes out; the grace that was running is forgotten.
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(try Self.sent(channel) == ["one", "bye"])
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive, "a client that read is not cut off")
        _ = try channel.finish()
    }

    @Test func nothingIsWrittenAfterTheCloseFrame() throws {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let queue = Queue()
        let writer = SocketWriter(channel: channel)
        writer.serve(queue)
        try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
        try writer.installOnLoop()
        queue.push("before")
        writer.wake()
        channel.embeddedEventLoop.run()
        // Hummingbird answers a client's close (from the end of the pipeline, through the encoder).
        var reason = channel.allocator.buffer(capacity: 2)
        reason.writeInteger(UInt16(1000))
        try channel.writeOutbound(WebSocketFrame(fin: true, opcode: .connectionClose, data: reason))
        #expect(queue.finished >= 1, "the writer is done")
        queue.push("after")
        writer.wake()
        channel.embeddedEventLoop.run()
        let decoder = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) { try decoder.writeInbound(bytes) }
        var opcodes: [WebSocketOpcode] = []
        while let frame = try decoder.readInbound(as: WebSocketFrame.self) { opcodes.append(frame.opcode) }
        #expect(opcodes == [.text, .connectionClose], "the close frame is the last")
        _ = try channel.finish()
    }

    @Test func socketsToldTheSameThingShareOneFrameEqualToAFreshOne() throws {
        let shared = SocketFramesTests.change
        let other = SocketFramesTests.event(.changes(WireChangeset()), #"{"C":2}"#)
        func socket(_ ids: [(String, SubscriptionEvent)], at start: PGOutput.LSN = PGOutput.LSN(0)) throws -> SocketFrames {
            var frames = SocketFrames(maxQueuedBytes: 1 << 20)
            frames.start(at: start)
            for (id, event) in ids {
                let generation = try #require(SocketFramesTests.reserve(&frames, id))
                frames.file(event, subscription: id, generation: generation, at: 2)
            }
            return frames
        }
        let sockets = [try socket([("a", shared)]), try socket([("a", shared)]), try socket([("b", shared)]),
                       try socket([("a", other)]), try socket([("a", shared), ("b", other)]),
                       try socket([("a", shared)], at: PGOutput.LSN(0x900))]
        let memo = FrameMemo()
        var memoized = sockets, fresh = sockets
        var frames: [[UInt8]] = []
        for index in sockets.indices {
            memoized[index].flush(upTo: 2, position: SocketFramesTests.position, memo: memo)
            fresh[index].flush(upTo: 2, position: SocketFramesTests.position)
            let next = memoized[index].next()
            let made = try #require(next)
            #expect(made == fresh[index].next(), "socket \(index): the shared frame is the fresh one")
            frames.append(made)
        }
        func storage(_ bytes: [UInt8]) -> UnsafeRawPointer? { bytes.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) } }
        #expect(storage(frames[0]) == storage(frames[1]), "the same id, event and position: one frame")
        for index in 2..<frames.count {
            #expect(storage(frames[index]) != storage(frames[0]), "socket \(index) was told something else")
        }

        var cache = SocketWriter.WireCache()
        let allocator = ByteBufferAllocator()
        let first = cache.wire(frames[0], allocator: allocator)
        let again = cache.wire(frames[1], allocator: allocator)
        func storage(_ buffer: ByteBuffer) -> UnsafeRawPointer? { buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) } }
        #expect(storage(first) == storage(again), "one wire buffer for one frame")
        let next = cache.wire(frames[3], allocator: allocator)
        #expect(next == SocketWriter.textFrame(frames[3], allocator: allocator))
    }
}
#endif
