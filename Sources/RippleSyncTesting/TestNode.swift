#if Sync
import Foundation
import Logging
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Ripple
import RippleServer
import RippleSync
import RippleSyncClient
import RippleTesting

/// A node on a throwaway cluster, listening on a free port, for the protocol's tests. It logs in
/// as ``ThrowawayPostgres/nodeRole`` (`LOGIN REPLICATION`, not a superuser), with the cluster set
/// up for its tables as an administrator would (``ThrowawayPostgres/setUpNode(tables:writes:publication:)``).
package struct TestNode {
    package let postgres: ThrowawayPostgres
    package let server: SyncServer
    package let task: Task<Void, any Error>
    /// Set once the node's `run()` returned.
    package let ended: Locked<Bool>
    package let port: Int
    package let secret = TestNode.secret
    /// The `v1.` token secret of every test node.
    package static let secret = Array("a test secret of at least thirty-two bytes".utf8)

    package var url: String { "ws://127.0.0.1:\(port)/sync" }

    /// Starts a node following `tables` of `postgres` under `rules` (JSON), runs `body` with it,
    /// and stops it before returning — when `body` returns and when it throws (its error is the
    /// one thrown; a node that does not stop then is reported on standard error, and after a
    /// body that returned, its error is thrown). A node `body` stopped itself (to start another
    /// in its place) is not stopped twice.
    ///
    /// With ``start(_:tables:rules:directory:name:adjust:isolation:)`` and ``shutDown()``, the
    /// one place the tests start and stop a node.
    package static func with<Result>(_ postgres: ThrowawayPostgres, tables: [String], rules: String, directory: TemporaryDirectory,
                             name: String = "node", adjust: (inout SyncServerConfiguration) -> Void = { _ in },
                             isolation: isolated (any Actor)? = #isolation,
                             _ body: (TestNode) async throws -> Result) async throws -> Result {
        let node = try await start(postgres, tables: tables, rules: rules, directory: directory, name: name, adjust: adjust)
        let result: Result
        do {
            result = try await body(node)
        } catch {
            do { try await node.shutDown() } catch let stopping {
                FileHandle.standardError.write(Data("a node did not stop after its test failed: \(stopping)\n".utf8))
            }
            throw error
        }
        try await node.shutDown()
        return result
    }

    /// Starts a node following `tables` of `postgres` under `rules` (JSON). Its caller stops it
    /// (``shutDown()``) on every path: ``with(_:tables:rules:directory:name:adjust:isolation:_:)``
    /// does.
    package static func start(_ postgres: ThrowawayPostgres, tables: [String], rules: String, directory: TemporaryDirectory,
                      name: String = "node", adjust: (inout SyncServerConfiguration) -> Void = { _ in },
                      isolation: isolated (any Actor)? = #isolation) async throws -> TestNode {
        var configuration = try configuration(postgres, tables: tables, rules: rules, directory: directory, name: name)
        configuration.heartbeatInterval = .milliseconds(200)
        // Generous: a loaded machine must not close a test's socket before it says hello.
        configuration.helloTimeout = .seconds(120)
        adjust(&configuration)
        // The node runs as a role that is not a superuser, as on a managed Postgres: what it
        // needs is set up first, as an administrator would (the writers and DDL of the tests go
        // through the superuser).
        let writes = configuration.rules.tables.filter { $0.value.write != nil }.map(\.key)
        try await postgres.setUpNode(tables: configuration.tables, writes: configuration.tables.filter(writes.contains),
                                     publication: configuration.publication)
        // Its errors on standard error: a test that waits on a node says what the node waits for
        // (a stop that outlasts its grace names the parts still running).
        var logger = Logger(label: "test node") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .error
        let server = try SyncServer(configuration: configuration, logger: logger)
        let ended = Locked(false)
        let task = Task {
            defer { ended.withLock { $0 = true } }
            try await server.run()
        }
        // A node that cannot start fails the test instead of holding it up, and is stopped.
        do {
            let port = try await Wait.value("the node to listen") { try await server.port }
            return TestNode(postgres: postgres, server: server, task: task, ended: ended, port: port)
        } catch {
            task.cancel()
            _ = try? await Wait.value("the node that did not listen to stop") { await task.result }
            throw error
        }
    }

    /// Returns once the node's `/health` says `ok`: its feed has copied Postgres (or caught up
    /// from its slot). A node listens before that.
    /// A test node's configuration: `tables` of `postgres` under `rules` (JSON), the test
    /// secret, any free port, slot `ripple_<name>` and replica `<directory>/<name>.sqlite`,
    /// connecting as the node's role that is not a superuser (`superuser`: as the cluster's
    /// superuser, which makes what it lacks itself).
    package static func configuration(_ postgres: ThrowawayPostgres, tables: [String], rules: String, directory: TemporaryDirectory,
                                      name: String = "node", superuser: Bool = false) throws -> SyncServerConfiguration {
        var configuration = SyncServerConfiguration(
            postgres: try SyncServerConfiguration.postgres(url: superuser ? postgres.url : postgres.nodeURL), tables: tables,
            rules: try SyncRules(json: Data(rules.utf8)), secret: Self.secret,
            replicaPath: directory.path("\(name).sqlite"))
        configuration.port = 0
        configuration.slot = "ripple_\(name)"
        return configuration
    }

    package func untilReady(within limit: Duration = Wait.limit) async throws {
        try await Wait.until("the node's /health to say ok", within: limit) {
            guard let (body, _) = try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/health")!)
            else { return false }
            return String(decoding: body, as: UTF8.self) == "ok\n"
        }
    }

    package func token(_ user: String, expires: Date = Date().addingTimeInterval(3600)) throws -> String {
        try SyncToken.sign(user: user, expires: expires, secret: secret)
    }

    /// Whether the node's `run()` returned.
    package var hasEnded: Bool { ended.withLock { $0 } }

    /// Stops the node and returns once it ended (at once if it had ended); throws when it does
    /// not end in time. (Each test target's `stop()` records that as the test's issue.)
    package func shutDown() async throws {
        task.cancel()
        let task = task
        _ = try await Wait.value("the node to stop") { await task.result }
    }
}

/// A test's failure, in words.
package struct SyncClientTestError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

extension ThrowawayPostgres {
    /// Runs `body` while another session holds `table` in ACCESS EXCLUSIVE mode (every other
    /// session that touches it waits), and ends that session after it — when `body` returns and
    /// when it throws — waiting until it is gone.
    package func withTableLocked<Result>(_ table: String, isolation: isolated (any Actor)? = #isolation,
                                         _ body: () async throws -> Result) async throws -> Result {
        let tag = "ripple_lock_holder_\(table)"
        let holder = Task {
            try? await psql("BEGIN; LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600) AS \(tag); COMMIT")
        }
        func release() async throws {
            _ = try await psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%\(tag)%' AND pid <> pg_backend_pid()")
            _ = try await Wait.value("the session holding \(table) to end") { await holder.result }
        }
        do {
            try await Wait.until("another session to hold \(table)") {
                try await rows("SELECT count(*) FROM pg_locks WHERE relation = '\(table)'::regclass AND mode = 'AccessExclusiveLock' AND granted")
                    == ["1"]
            }
            let result = try await body()
            try await release()
            return result
        } catch {
            try? await release()
            throw error
        }
    }

    /// The rows `sql` reads, as psql prints them (`|` between columns); psql runs on a thread of
    /// its own (a cooperative thread waiting for it would be one fewer for the node).
    package func rows(_ sql: String) async throws -> [String] {
        try await psql(sql).split(separator: "\n").map(String.init)
    }
}

/// A client's row as psql would print it (`t`/`f` for booleans).
package func psqlText(_ row: [WireValue]) -> String {
    row.map(\.psqlText).joined(separator: "|")
}

/// Starts `client`, runs `body`, and stops the client before returning — when `body` returns
/// and when it throws. The one place the tests start and stop a ``SyncClient``.
package func withStarted<Result>(_ client: SyncClient, isolation: isolated (any Actor)? = #isolation,
                         _ body: () async throws -> Result) async throws -> Result {
    try await client.start()
    do {
        let result = try await body()
        await client.stop()
        return result
    } catch {
        await client.stop()
        throw error
    }
}
#endif
