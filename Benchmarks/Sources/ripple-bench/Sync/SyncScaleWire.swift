import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// Bare NIO WebSockets for N1–N2: many client sockets for the load generator (one channel per
/// socket, no task per socket) and the fan-out floor's server. Both speak only what the
/// workloads need: text frames, pings answered.
enum ScaleWire {
    /// A client text frame (clients mask their frames).
    static func textFrame(_ text: String, allocator: ByteBufferAllocator) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: allocator.buffer(string: text))
    }

    /// A server text frame (unmasked).
    static func serverFrame(_ text: String, allocator: ByteBufferAllocator) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, data: allocator.buffer(string: text))
    }
}

/// What a socket's frames are handed to: `text` on the channel's event loop, with the instant it
/// arrived (`CLOCK_MONOTONIC`, nanoseconds).
protocol ScaleFrameSink: AnyObject, Sendable {
    func received(_ text: ByteBuffer, at nanoseconds: UInt64, on socket: Int, channel: any Channel)
    func closed(_ socket: Int)
}

extension ByteBuffer {
    /// Whether the readable bytes contain `pattern` (a byte search: no string is made).
    func contains(_ pattern: [UInt8]) -> Bool {
        withUnsafeReadableBytes { bytes in
            guard let first = pattern.first, bytes.count >= pattern.count else { return false }
            var index = 0
            let last = bytes.count - pattern.count
            while index <= last {
                if bytes[index] == first {
                    var matched = 1
                    while matched < pattern.count, bytes[index + matched] == pattern[matched] { matched += 1 }
                    if matched == pattern.count { return true }
                }
                index += 1
            }
            return false
        }
    }

    /// Whether the readable bytes begin with `prefix`.
    func begins(with prefix: [UInt8]) -> Bool {
        readableBytes >= prefix.count && readableBytesView.prefix(prefix.count).elementsEqual(prefix)
    }
}

/// A WebSocket's frames after the upgrade: text (fragments joined) to the sink, pings
/// answered, a close answered and the channel closed.
final class ScaleFrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let socket: Int
    private let sink: any ScaleFrameSink
    private let masks: Bool
    private var fragments: ByteBuffer?

    init(socket: Int, sink: any ScaleFrameSink, masks: Bool) {
        (self.socket, self.sink, self.masks) = (socket, sink, masks)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var frame = unwrapInboundIn(data)
        let now = MonotonicClock.now()
        switch frame.opcode {
        case .text, .continuation:
            var payload = frame.unmaskedData
            if frame.opcode == .text, frame.fin {
                sink.received(payload, at: now, on: socket, channel: context.channel)
                return
            }
            if fragments == nil { fragments = payload } else { fragments!.writeBuffer(&payload) }
            if frame.fin, let whole = fragments {
                fragments = nil
                sink.received(whole, at: now, on: socket, channel: context.channel)
            }
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: masks ? .random() : nil, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            let close = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: masks ? .random() : nil, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(close), promise: nil)
            context.close(promise: nil)
        default:
            frame.data.clear()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        sink.closed(socket)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Sends the upgrade request once connected (the upgrader adds its headers).
private final class UpgradeRequest: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let host: String
    private let path: String

    init(host: String, path: String) { (self.host, self.path) = (host, path) }

    func channelActive(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: host)
        headers.add(name: "Content-Length", value: "0")
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A response that is not the upgrade (a refusal): the socket is of no use.
        if case .head(let head) = unwrapInboundIn(data), head.status != .switchingProtocols { context.close(promise: nil) }
    }
}

extension ScaleWire {
    /// Opens a WebSocket to `host:port/path` from `source` (an address of 127.0.0.0/8, port any);
    /// the future succeeds once the upgrade is done and frames go to `sink`.
    static func connect(group: any EventLoopGroup, host: String, port: Int, path: String, source: String?,
                        socket: Int, sink: any ScaleFrameSink) -> EventLoopFuture<any Channel> {
        let upgraded = group.next().makePromise(of: Void.self)
        var bootstrap = ClientBootstrap(group: group)
            .channelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(30))
        if let source, let address = try? SocketAddress(ipAddress: source, port: 0) {
            bootstrap = bootstrap.bind(to: address)
        }
        let connected = bootstrap.channelInitializer { channel in
            let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: 1 << 26, automaticErrorHandling: false) { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScaleFrameHandler(socket: socket, sink: sink, masks: true))
                    upgraded.succeed(())
                }
            }
            return channel.eventLoop.makeCompletedFuture {
                let request = UpgradeRequest(host: "\(host):\(port)", path: path)
                try channel.pipeline.syncOperations.addHTTPClientHandlers(
                    withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in
                        channel.pipeline.removeHandler(name: "upgrade-request", promise: nil)
                    }))
                try channel.pipeline.syncOperations.addHandler(request, name: "upgrade-request")
            }
        }.connect(host: host, port: port)
        connected.whenFailure { upgraded.fail($0) }
        connected.whenSuccess { channel in
            channel.closeFuture.whenComplete { _ in upgraded.fail(ScaleWireError("closed before the upgrade")) }
        }
        return connected.and(upgraded.futureResult).map { channel, _ in channel }
    }
}

struct ScaleWireError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The fan-out floor: a bare WebSocket server that answers `hello` and `subscribe` with
/// precomputed frames and, asked to, writes one precomputed frame to every socket that
/// subscribed to a given id — the least a server must do to fan a change out.
final class FloorServer: ScaleFrameSink, @unchecked Sendable {   // `holders` is guarded by `lock`
    private let group: MultiThreadedEventLoopGroup
    private let lock = NSLock()
    private var holders: [String: [any Channel]] = [:]
    private var channel: (any Channel)?
    /// The answers: `welcome`, and a `changes` frame with a snapshot per subscription id.
    private let welcome: String
    private let snapshots: [String: String]

    init(welcome: String, snapshots: [String: String], threads: Int) {
        self.welcome = welcome
        self.snapshots = snapshots
        group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }

    /// Listens on 127.0.0.1 (any port); returns the port.
    func start() async throws -> Int {
        let sink = self
        let upgrader = NIOWebSocketServerUpgrader(maxFrameSize: 1 << 20, automaticErrorHandling: false,
                                                  shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
                                                  upgradePipelineHandler: { channel, _ in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(ScaleFrameHandler(socket: 0, sink: sink, masks: false))
            }
        })
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 4096)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        lock.withLock { self.channel = channel }
        return channel.localAddress?.port ?? 0
    }

    func received(_ bytes: ByteBuffer, at nanoseconds: UInt64, on socket: Int, channel: any Channel) {
        let text = String(buffer: bytes)
        let answer: String?
        if text.hasPrefix(#"{"type":"hello""#) {
            answer = welcome
        } else if text.hasPrefix(#"{"type":"subscribe""#), let id = Self.id(in: text) {
            answer = snapshots[id]
            lock.withLock { holders[id, default: []].append(channel) }
        } else {
            answer = nil
        }
        if let answer { channel.writeAndFlush(ScaleWire.serverFrame(answer, allocator: channel.allocator), promise: nil) }
    }

    func closed(_ socket: Int) {}

    /// The subscription id of a `subscribe` message (the workloads write `"id":"…"` first).
    static func id(in text: String) -> String? {
        guard let start = text.range(of: #""id":""#) else { return nil }
        let rest = text[start.upperBound...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }

    /// Writes `frame` to every socket that subscribed to `id`, each on its event loop; returns
    /// how many.
    @discardableResult
    func broadcast(_ frame: String, to id: String) -> Int {
        let channels = lock.withLock { holders[id] ?? [] }
        let message = WebSocketFrame(fin: true, opcode: .text, data: ByteBufferAllocator().buffer(string: frame))
        for channel in channels {
            channel.eventLoop.execute { channel.writeAndFlush(message, promise: nil) }
        }
        return channels.count
    }

    func stop() async {
        let channel = lock.withLock { () -> (any Channel)? in
            holders = [:]
            return self.channel
        }
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }
}
