#if Sync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import ServiceLifecycle
import Testing

/// A node's lifecycle as a group of services: it drains its sockets when shut down gracefully
/// (a signal to `ripple-server serve`, or its `ServiceGroup`), a part that fails stops it with
/// an error naming the part, and `/metrics` is the Prometheus exposition of its figures.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: node lifecycle tests skipped"), .timeLimit(.minutes(15)))
struct NodeLifecycleTests {
    static let rules = #"{"tables": {"items": {"read": true}}}"#

    /// SIGTERM to `ripple-server serve` with sockets open: every socket hears `retry_later`
    /// (the protocol's "the node is stopping; connect again") and is closed, and the process
    /// exits with status 0. Its log, asked for as JSON, is one JSON object per line.
    @Test func sigtermDrainsEverySocketWithRetryLaterAndExitsZero() async throws {
        let executable = try #require(NodeDescriptorTests.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in try await Self.sigtermDrains(postgres, executable: executable) }
    }

    static func sigtermDrains(_ postgres: ThrowawayPostgres, executable: String) async throws {
        try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1), (2)")
        let directory = try TemporaryDirectory()
        let secret = "a lifecycle test secret of at least thirty-two bytes"
        try Self.rules.write(toFile: directory.path("rules.json"), atomically: true, encoding: .utf8)
        try secret.write(toFile: directory.path("secret"), atomically: true, encoding: .utf8)
        let (process, output) = try launchServer(executable, [
            "serve", "--postgres", postgres.url, "--tables", "items", "--rules", directory.path("rules.json"),
            "--secret-file", directory.path("secret"), "--replica", directory.path("replica.sqlite"),
            "--slot", "ripple_lifecycle", "--port", "0", "--log-level", "info", "--log-format", "json"], directory: directory)
        defer {
            if process.isRunning {
                process.terminate()
                try? Wait.exit(of: process, "the node to stop")
            }
        }
        let port = try await servedPort(output)
        let token = try SyncToken.sign(user: "u", expires: Date().addingTimeInterval(3600), secret: Array(secret.utf8))

        // Three sockets, each subscribed and up to date.
        try await withSockets { opened in
        var sockets: [TestSocket] = []
        for index in 0..<3 {
            let socket = try await opened.open("ws://127.0.0.1:\(port)/sync")
            sockets.append(socket)
            _ = try await socket.hello(token)
            try await socket.send(.subscribe(id: "s\(index)", query: QueryDescription(table: "items", order: [OrderDescription(column: "id")]),
                                             resume: nil))
            var rows = ClientRows()
            try await rows.readFirstResult(from: socket, id: "s\(index)")
        }

        kill(process.processIdentifier, SIGTERM)
        for (index, socket) in sockets.enumerated() {
            guard case .error(let code, let message, _) = try await socket.nextSkippingHeartbeats(within: 30, what: "socket \(index)'s retry_later")
            else {
                Issue.record("socket \(index) was not told to come back later")
                continue
            }
            #expect(code == .retryLater, "socket \(index): \(message)")
            #expect(try await socket.nextSkippingHeartbeats(within: 30) == nil, "socket \(index) was not closed")
        }
        }
        try await Wait.exit(of: process, "the node to exit after SIGTERM", within: .seconds(60))
        let log = (try? String(contentsOfFile: directory.path("node.err"), encoding: .utf8)) ?? ""
        #expect(process.terminationReason == .exit && process.terminationStatus == 0,
                "the node exited with \(process.terminationReason == .exit ? "status" : "signal") \(process.terminationStatus): \(log)")
        // Its log: JSON lines, each with the five fields.
        let lines = log.split(separator: "\n")
        #expect(!lines.isEmpty, "the node logged nothing at info")
        for line in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object.map { Set($0.keys) == ["time", "level", "label", "message", "metadata"] } == true, "not a JSON log line: \(line)")
        }
    }

    /// A node run in an application's own `ServiceGroup` drains its sockets when the group shuts
    /// down gracefully, and its `run()` returns without error.
    @Test func aNodeInAServiceGroupDrainsItsSocketsOnGracefulShutdown() async throws {
        try await withThrowawayPostgres { postgres in try await Self.drainsInAGroup(postgres) }
    }

    static func drainsInAGroup(_ postgres: ThrowawayPostgres) async throws {
        try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1)")
        let directory = try TemporaryDirectory()
        let secret = Array("a test secret of at least thirty-two bytes".utf8)
        var configuration = SyncServerConfiguration(
            postgres: try SyncServerConfiguration.postgres(url: postgres.url), tables: ["items"],
            rules: try SyncRules(json: Data(Self.rules.utf8)), secret: secret, replicaPath: directory.path("node.sqlite"))
        configuration.port = 0
        configuration.slot = "ripple_group"
        let node = try SyncServer(configuration: configuration)
        let group = ServiceGroup(configuration: .init(services: [node], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
        let running = Task { try await group.run() }
        // The group ends before this returns, whatever happens in between.
        func ended() async throws -> Result<Void, any Error> {
            await group.triggerGracefulShutdown()
            return try await Wait.value("the group to end") { await running.result }
        }
        do {
            let port = try await Wait.value("the node to listen") { try await node.port }
            try await withSocket("ws://127.0.0.1:\(port)/sync") { socket in
                _ = try await socket.hello(try SyncToken.sign(user: "u", expires: Date().addingTimeInterval(3600), secret: secret))
                await group.triggerGracefulShutdown()
                guard case .error(let code, _, _) = try await socket.nextSkippingHeartbeats(within: 30, what: "retry_later") else {
                    Issue.record("the socket was not told to come back later")
                    return
                }
                #expect(code == .retryLater)
                #expect(try await socket.nextSkippingHeartbeats(within: 30) == nil, "the socket was not closed")
            }
        } catch {
            _ = try? await ended()
            throw error
        }
        let outcome = try await ended()
        #expect(throws: Never.self) { try outcome.get() }
    }

    /// A node asked to stop while its feed waits on Postgres (here its first copy, on a table
    /// another session holds locked) stops at once, and its `run()` returns without error: the
    /// feed's read is given up, which is a stop, not a failure.
    @Test func aNodeStoppedWhileItsFeedWaitsOnPostgresStopsCleanly() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1)")
            try await postgres.withTableLocked("items") {
                let directory = try TemporaryDirectory()
                let configuration = try TestNode.configuration(postgres, tables: ["items"], rules: Self.rules, directory: directory,
                                                               name: "locked", superuser: true)
                let node = try SyncServer(configuration: configuration)
                let group = ServiceGroup(configuration: .init(services: [node], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
                let running = Task { try await group.run() }
                try await Wait.until("the node's feed to wait on the lock") {
                    try await postgres.rows("SELECT count(*) FROM pg_locks WHERE relation = 'items'::regclass AND NOT granted") != ["0"]
                }
                let start = ContinuousClock.now
                await group.triggerGracefulShutdown()
                let outcome = try await Wait.value("the group to end") { await running.result }
                #expect(throws: Never.self) { try outcome.get() }
                #expect(ContinuousClock.now - start < .seconds(15), "the node took \(ContinuousClock.now - start) to stop")
            }
        }
    }

    /// A node asked to stop whose stop grace runs out (its parts are then cancelled) has still
    /// stopped as asked: its `run()` returns without error. (On a loaded machine the 10 s grace
    /// ran out once in the whole suite, and the group's run threw `CancellationError`.)
    @Test func aNodeWhoseStopGraceRunsOutStillStopsWithoutError() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1)")
            let directory = try TemporaryDirectory()
            var configuration = try TestNode.configuration(postgres, tables: ["items"], rules: Self.rules, directory: directory,
                                                           name: "grace", superuser: true)
            configuration.stopGrace = .zero
            let node = try SyncServer(configuration: configuration)
            let group = ServiceGroup(configuration: .init(services: [node], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })))
            let running = Task { try await group.run() }
            let port = try await Wait.value("the node to listen") { try await node.port }
            try await withSocket("ws://127.0.0.1:\(port)/sync") { socket in
                _ = try await socket.hello(try SyncToken.sign(user: "u", expires: Date().addingTimeInterval(3600), secret: configuration.secret))
                await group.triggerGracefulShutdown()
                let outcome = try await Wait.value("the group to end") { await running.result }
                #expect(throws: Never.self) { try outcome.get() }
            }
        }
    }

    /// A part that fails stops the node, and its error says which part: here the HTTP
    /// listener, whose port another node holds.
    @Test func aFailingPartStopsTheNodeWithAnErrorNamingIt() async throws {
        try await withThrowawayPostgres { postgres in
        try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
        let directory = try TemporaryDirectory()
        let outcome = try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory) { first in
        var configuration = SyncServerConfiguration(
            postgres: try SyncServerConfiguration.postgres(url: postgres.url), tables: ["items"],
            rules: try SyncRules(json: Data(Self.rules.utf8)), secret: first.secret, replicaPath: directory.path("second.sqlite"))
        configuration.port = first.port
        configuration.slot = "ripple_second"
        let second = try SyncServer(configuration: configuration)
        return try await Wait.value("the second node to fail") { await Task { try await second.run() }.result }
        }
        guard case .failure(let error) = outcome else {
            Issue.record("the node on a taken port did not fail")
            return
        }
        let failure = try #require(error as? SyncServerError, "\(error)")
        #expect(failure.part == "the HTTP listener", "\(failure)")
        #expect(failure.description.hasPrefix("the HTTP listener stopped: "), "\(failure)")
        }
    }

    /// A node whose Postgres refuses it stops with an error naming the feed (once PostgresNIO's
    /// pool gives up connecting: its circuit breaker opens after 60 s of failed attempts).
    @Test func aNodeWhosePostgresIsGoneStopsWithAnErrorNamingTheFeed() async throws {
        // A cluster that existed and is gone: its address refuses connections.
        let url = try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            return postgres.url
        }
        let directory = try TemporaryDirectory()
        var configuration = SyncServerConfiguration(
            postgres: try SyncServerConfiguration.postgres(url: url), tables: ["items"],
            rules: try SyncRules(json: Data(Self.rules.utf8)), secret: Array("a test secret of at least thirty-two bytes".utf8),
            replicaPath: directory.path("node.sqlite"))
        configuration.port = 0
        let node = try SyncServer(configuration: configuration)
        let outcome = try await Wait.value("the node to fail") { await Task { try await node.run() }.result }
        guard case .failure(let error) = outcome else {
            Issue.record("the node without Postgres did not fail")
            return
        }
        #expect((error as? SyncServerError)?.part == "the feed from Postgres", "\(error)")
        await #expect(throws: (any Error).self) { try await node.port }
    }

    /// `/metrics` is swift-prometheus's exposition of the node's figures, which move with traffic.
    @Test func metricsAreThePrometheusExpositionOfTheNodesFigures() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1)")
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory) { node in
                try await withSocket(node.url) { socket in try await Self.metricsMove(node, postgres, socket) }
            }
        }
    }

    static func metricsMove(_ node: TestNode, _ postgres: ThrowawayPostgres, _ socket: TestSocket) async throws {
        _ = try await socket.hello(try node.token("u"))
        try await socket.send(.subscribe(id: "all", query: QueryDescription(table: "items", order: [OrderDescription(column: "id")]),
                                         resume: nil))
        var rows = ClientRows()
        try await rows.readFirstResult(from: socket, id: "all")
        try await postgres.psql("INSERT INTO items VALUES (2)")
        while rows.rows.count < 2 { _ = try rows.take(try #require(try await socket.nextSkippingHeartbeats()), id: "all") }

        let (body, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(node.port)/metrics")!)
        let text = String(decoding: body, as: UTF8.self)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let values = Dictionary(text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line -> (String, Double)? in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let value = Double(parts[1]) else { return nil }
            return (String(parts[0]), value)
        }, uniquingKeysWith: { $1 })
        for (name, type) in [("ripple_sockets", "gauge"), ("ripple_subscriptions", "gauge"), ("ripple_live_queries", "gauge"),
                             ("ripple_sent_frames_total", "counter"), ("ripple_sent_bytes_total", "counter"),
                             ("ripple_dropped_sockets_total", "counter"), ("ripple_refused_sockets_total", "counter"),
                             ("ripple_feed_restarts_total", "counter"), ("ripple_replica_version", "gauge"),
                             ("ripple_replica_position", "gauge"), ("ripple_replica_lag_bytes", "gauge"),
                             ("ripple_replica_lag_seconds", "gauge")] {
            #expect(text.contains("# TYPE \(name) \(type)\n"), "no \(type) \(name) in \(text)")
            #expect(values[name] != nil, "no value of \(name) in \(text)")
        }
        #expect(values["ripple_sockets"] == 1, "\(text)")
        #expect(values["ripple_subscriptions"] == 1, "\(text)")
        #expect(values["ripple_live_queries"] == 1, "\(text)")
        #expect((values["ripple_sent_frames_total"] ?? 0) >= 3, "welcome, result, changes: \(text)")
        #expect((values["ripple_sent_bytes_total"] ?? 0) > 0, "\(text)")
        #expect((values["ripple_replica_version"] ?? 0) >= 1, "\(text)")
        #expect((values["ripple_replica_position"] ?? 0) > 0, "\(text)")
    }
}
#endif
