#if Sync
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The request context of `/sync`: Hummingbird's WebSocket context, and the connection's
/// channel (a session writes its frames straight into it: ``SocketWriter``).
struct SocketRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}
#endif
