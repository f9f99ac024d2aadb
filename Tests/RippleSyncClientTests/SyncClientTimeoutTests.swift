#if Sync
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ripple
import RippleSyncClient
import RippleSyncTesting
import RippleTesting
import Testing

/// A server that accepts a socket and never answers must not hold the client.
struct SyncClientTimeoutTests {
    /// A listener that never accepts: the kernel completes each TCP handshake (its backlog) and
    /// nothing ever answers the WebSocket upgrade, as with a node stopping or wedged at that
    /// moment. The client gives up on each connection after its handshake timeout and tries
    /// again, instead of waiting forever.
    @Test(.timeLimit(.minutes(15))) func aConnectionNeverWelcomedIsGivenUpOn() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0)
        try #require(listen(listener, 16) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        try #require(named == 0)
        let port = Int(UInt16(bigEndian: address.sin_port))

        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("device.sqlite"))
        let client = SyncClient(url: "ws://127.0.0.1:\(port)/sync", store: store) { "a token" }
        await client.setTimeouts(handshake: .milliseconds(300), silence: .seconds(30))
        await client.setBackoff(min: .milliseconds(10), max: .milliseconds(20))
        try await withStarted(client) {
            let reasons = try await Wait.value("two disconnections of the client") {
                var reasons: [String] = []
                for await event in client.events {
                    if case .disconnected(let reason) = event { reasons.append(reason) }
                    if reasons.count == 2 { break }
                }
                return reasons
            }
            #expect(reasons.count == 2)
            #expect(reasons.allSatisfy { $0.contains("no welcome") }, "\(reasons)")
        }
    }
}
#endif
