#if Sync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// A node flooded with connections beyond its descriptors: `ripple-server serve` as a child
/// process under a hard limit of 160 open files. It holds connections up to its cap and keeps
/// a reserve of descriptors (never EMFILE); its open socket goes on receiving Postgres's
/// changes (its feed, replica readers and Postgres connections unharmed), and once
/// connections go away it accepts again.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: descriptor tests skipped"), .timeLimit(.minutes(15)))
struct NodeDescriptorTests {
    static let limit = 160

    /// The `ripple-server` beside the test bundle (built with the tests), if any.
    static var serverExecutable: String? {
        RippleExecutable.url().map { $0.deletingLastPathComponent().appendingPathComponent("ripple-server").path }
            .flatMap { FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil }
    }

    /// How many descriptors process `pid` holds open.
    static func openDescriptors(_ pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    /// A plain TCP connection to 127.0.0.1:`port` (the kernel completes it from the listen
    /// backlog whether or not the node accepts it).
    static func connectTCP(_ port: Int) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    @Test func aFloodedNodeKeepsDescriptorsInReserveServesItsSocketAndAcceptsAgain() async throws {
        let executable = try #require(Self.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE todos(id int8 PRIMARY KEY, title text NOT NULL);
                INSERT INTO todos SELECT n, 'todo ' || n FROM generate_series(1, 5) AS n;
                """)
            let directory = try TemporaryDirectory()
            let secret = "a descriptor test secret of at least thirty-two bytes"
            try #"{"tables": {"todos": {"read": true}}}"#.write(toFile: directory.path("rules.json"), atomically: true, encoding: .utf8)
            try secret.write(toFile: directory.path("secret"), atomically: true, encoding: .utf8)
            // Its errors go to a file, told when the test fails.
            let (process, output) = try launchServer(executable, [
                "serve", "--postgres", postgres.url, "--tables", "todos", "--rules", directory.path("rules.json"),
                "--secret-file", directory.path("secret"), "--replica", directory.path("replica.sqlite"), "--slot", "ripple_descriptors",
                "--port", "0", "--heartbeat", "0.2", "--log-level", "warning"], directory: directory,
                through: ["/usr/bin/prlimit", "--nofile=\(Self.limit):\(Self.limit)"])
            defer {
                // A node that ended, at whatever step the test stopped: how, and what it said.
                if !process.isRunning {
                    let how = process.terminationReason == .uncaughtSignal ? "signal" : "status"
                    Issue.record("""
                        the node ended (\(how) \(process.terminationStatus)): \
                        \((try? String(contentsOfFile: directory.path("node.err"), encoding: .utf8)) ?? "")
                        """)
                }
                process.terminate()
                do { try Wait.exit(of: process, "the node to stop") } catch { Issue.record(error) }
            }
            // It says where it serves once it listens.
            let port = try await servedPort(output)
            let token = try SyncToken.sign(user: "u", expires: Date().addingTimeInterval(3600), secret: Array(secret.utf8))

            // A socket subscribed before the flood.
            try await withSocket("ws://127.0.0.1:\(port)/sync") { socket in
                _ = try await socket.hello(token)
                try await socket.send(.subscribe(id: "all", query: QueryDescription(table: "todos", order: [OrderDescription(column: "id")]),
                                                 resume: nil))
                var rows = ClientRows()
                try await rows.readFirstResult(from: socket, id: "all")

                // The flood: more connections than the node may hold. It takes them up to its cap (its
                // limit less a reserve), the rest wait in the listen backlog, and it keeps the reserve:
                // a node that ran out of descriptors crashed (libdispatch could not open the
                // `/proc/<thread>/stat` it watches its workers by, and raised SIGILL).
                var flood: [Int32] = []
                defer { for descriptor in flood { close(descriptor) } }
                let pid = process.processIdentifier
                for _ in 0..<(Self.limit + 60) {
                    guard let descriptor = Self.connectTCP(port) else { break }
                    flood.append(descriptor)
                }
                // Until the node took connections up to its cap (however slowly a loaded machine lets
                // it), then until it stops taking them (its count unchanged for a second).
                let cap = Self.limit - max(64, Self.limit / 8)
                try await Wait.until("the node to take connections up to its cap (\(cap) descriptors)") {
                    Self.openDescriptors(pid) >= cap
                }
                var held = Self.openDescriptors(pid)
                var steadySince = ContinuousClock.now
                let deadline = ContinuousClock.now + .seconds(30)
                while ContinuousClock.now - steadySince < .seconds(1), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                    let now = Self.openDescriptors(pid)
                    if now != held { (held, steadySince) = (now, .now) }
                }
                #expect(held >= cap, "the node took connections up to its cap (it holds \(held) descriptors)")
                #expect(held <= Self.limit - 16, "the node kept descriptors in reserve (it holds \(held) of \(Self.limit))")

                // Its connections full, it still follows Postgres and serves the socket it has.
                try await postgres.psql("UPDATE todos SET title = 'while full' WHERE id = 3")
                while rows.rows.map(psqlText) != (try await postgres.rows("SELECT id, title FROM todos ORDER BY id")) {
                    _ = try rows.take(try #require(try await socket.nextSkippingHeartbeats(within: 30), "the open socket heard nothing"),
                                      id: "all")
                }
                #expect(process.isRunning)

                // The flood goes away: the node accepts again.
                for descriptor in flood { close(descriptor) }
                flood = []
                try await withSocket("ws://127.0.0.1:\(port)/sync") { again in
                    let welcome = try await again.hello(token)
                    #expect(welcome.user == "u")
                    let (health, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/health")!)
                    #expect(String(decoding: health, as: UTF8.self) == "ok\n")
                }
            }
        }
    }
}
#endif
