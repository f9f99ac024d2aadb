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

        func takeFrames(budget: Int) -> (frames: [[UInt8]], closing: Bool, drained: Bool) {
            lock.withLock {
                var (taken, bytes) = ([[UInt8]](), 0)
                while bytes < budget, !frames.isEmpty {
                    bytes += frames[0].count
                    taken.append(frames.removeFirst())
                }
                return (taken, closing, closing && frames.isEmpty)
            }
        }

        var isClosing: Bool { lock.withLock { closing } }

        func wrote(frames: Int, bytes: Int) { lock.withLock { written = (written.frames + frames, written.bytes + bytes) } }

        func writerFinished() { lock.withLock { finished += 1 } }
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
        let channel = EmbeddedChannel()
        let queue = Queue()
        let writer = SocketWriter(channel: channel, source: queue)
        try channel.pipeline.syncOperations.addHandler(writer, position: .first)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
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
        let channel = EmbeddedChannel()
        let queue = Queue()
        let writer = SocketWriter(channel: channel, source: queue)
        try channel.pipeline.syncOperations.addHandler(writer, position: .first)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        queue.push("bye", last: true)
        writer.wake()
        channel.embeddedEventLoop.run()
        #expect(try Self.sent(channel) == ["bye"])
        #expect(queue.finished == 1)
        _ = try channel.finish()

        // Not read: done after the grace, the frame unwritten.
        let stalled = EmbeddedChannel()
        let left = Queue()
        let stalledWriter = SocketWriter(channel: stalled, source: left)
        try stalled.pipeline.syncOperations.addHandler(stalledWriter, position: .first)
        try stalled.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
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
