#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple
import RippleServer
import RippleTesting
import Testing

/// A node whose Postgres accepts its connections and never answers (a server overloaded,
/// a network that drops packets) stops when told to, without waiting for its connections.
@Suite(.timeLimit(.minutes(3)))
struct NodeStopSilentPostgresTests {
    /// A TCP socket that listens and never accepts: connections complete in the kernel and
    /// hear nothing.
    static func silentListener() throws -> (socket: Int32, port: Int) {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(socket, $0, length) == 0 && Glibc.listen(socket, 64) == 0 && getsockname(socket, $0, &length) == 0
            }
        }
        guard ok else { throw SyncServerError("no silent listener") }
        return (socket, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test(arguments: [200, 700, 1500])
    func aNodeWhosePostgresNeverAnswersStopsWithinItsGrace(after delay: Int) async throws {
        let (socket, port) = try Self.silentListener()
        defer { Glibc.close(socket) }
        let directory = try TemporaryDirectory()
        var configuration = SyncServerConfiguration(
            postgres: PostgresClient.Configuration(host: "127.0.0.1", port: port, username: "node", password: nil, database: "app", tls: .disable),
            tables: ["items"], rules: try SyncRules(json: Data(#"{"tables": {"items": {"read": true}}}"#.utf8)),
            secret: Array("a test secret of at least thirty-two bytes".utf8), replicaPath: directory.path("node.sqlite"))
        configuration.stopGrace = .seconds(2)
        var logger = Logger(label: "silent") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .error
        let server = try SyncServer(configuration: configuration, logger: logger)
        let task = Task { try await server.run() }
        try await Task.sleep(for: .milliseconds(delay))   // the moment the stop comes: the node is connecting
        let stopping = ContinuousClock.now
        task.cancel()
        _ = try await Wait.value("the node to stop", within: .seconds(60)) { await task.result }
        let took = ContinuousClock.now - stopping
        // Alone, within the grace (2 s) and the pool's 1 s; beside the whole suite (whose
        // CPU-bound tests hold the cooperative threads) up to 24 s. A hang is what this catches.
        #expect(took < .seconds(40), "told to stop \(delay) ms after its start, the node took \(took)")
    }
}
#endif
