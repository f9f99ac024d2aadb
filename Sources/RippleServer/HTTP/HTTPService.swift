#if Sync
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import ServiceLifecycle

/// The node's HTTP listener as a part of the node: a Hummingbird `Application` serving
/// ``NodeRoutes``, started once the feed is ready (a socket must find the subscription hub).
struct HTTPService: Service {
    let server: SyncServer
    /// Called with the port once the listener is bound.
    let listening: @Sendable (Int) -> Void

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { [server] in try await server.started.wait() }
        } catch where Task.isShuttingDownGracefully {
            return   // asked to stop before the feed was ready: nothing to serve.
        }
        let configuration = server.configuration
        let ws = WebSocketServerConfiguration(maxFrameSize: max(configuration.maxMessageBytes * 4, 1 << 16),
                                              autoPing: .enabled(timePeriod: .seconds(30)), closeTimeout: .seconds(2),
                                              // Text that is not UTF-8 closes the socket with 1007.
                                              validateUTF8: true)
        let listening = listening
        let app = Application(
            router: NodeRoutes.pages(of: server),
            server: .http1WebSocketUpgrade(webSocketRouter: NodeRoutes.sockets(of: server), configuration: .init(ws: ws)),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "ripple-server",
                                 availableConnectionsDelegate: SyncServer.connectionLimit().map {
                                     .maximum($0, logger: server.logger)
                                 }),
            onServerRunning: { channel in listening(channel.localAddress?.port ?? 0) },
            logger: server.logger)
        try await app.run()
    }
}
#endif
