#if Sync
import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// What a node serves over HTTP: `/health`, `/metrics`, the live-list page (`/`,
/// `/live-list.js`, `/tables`), and the sync protocol's WebSocket at `/sync`.
enum NodeRoutes {
    /// The plain HTTP routes.
    static func pages(of server: SyncServer) -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/health") { _, _ -> Response in
            let status = health(server.feedStatus.withLock { $0 })
            return Response(status: status.ok ? .ok : .serviceUnavailable,
                            headers: [.contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: status.text)))
        }
        router.get("/metrics") { _, _ -> Response in
            let text = await server.metricsText()
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        // The live-list page (see ``LiveListPage``) and the tables it may choose from.
        let page: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-cache",
                                .contentSecurityPolicy: "default-src 'self'; style-src 'self' 'unsafe-inline'"]
        router.get("/") { _, _ -> Response in
            Response(status: .ok, headers: page, body: .init(byteBuffer: ByteBuffer(bytes: LiveListPage.html)))
        }
        router.get("/live-list.js") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/javascript; charset=utf-8", .cacheControl: "no-cache"],
                     body: .init(byteBuffer: ByteBuffer(bytes: LiveListPage.script)))
        }
        router.get("/tables") { _, _ -> Response in
            var schemas: [SyncedTableSchema] = []
            for table in server.configuration.tables {
                if let schema = await server.schema(of: table) { schemas.append(schema) }
            }
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-cache"],
                            body: .init(byteBuffer: ByteBuffer(string: LiveListPage.tablesJSON(schemas))))
        }
        return router
    }

    /// `/sync`: each socket is a ``SyncSession`` (frames are written by the session's own
    /// writer, straight into the channel).
    static func sockets(of server: SyncServer) -> Router<SocketRequestContext> {
        let sockets = Router(context: SocketRequestContext.self)
        sockets.ws("/sync") { inbound, _, context in
            let session = SyncSession(server: server, channel: context.requestContext.channel)
            try await session.run(inbound: inbound)
        }
        return sockets
    }

    /// `/health`: `ok`, or `starting`, or why the feed is failing (then 503).
    static func health(_ status: FeedStatus) -> (ok: Bool, text: String) {
        guard status.ready else { return (false, "starting\n") }
        if let failure = status.failure { return (false, "failing: \(failure)\n") }
        return (true, "ok\n")
    }
}
#endif
