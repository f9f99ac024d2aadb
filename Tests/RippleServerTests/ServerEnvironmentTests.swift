#if Sync
import Foundation
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// `ripple-server serve` configured from the environment (`RIPPLE_POSTGRES`, `RIPPLE_TABLES`,
/// …), as containers and process managers do: a flag on the command line wins over its
/// variable, and a misspelt `RIPPLE_` variable, or one of another command's options, is
/// reported, not ignored without a word.
@Suite(.timeLimit(.minutes(3)))
struct ServerEnvironmentTests {
    @Test func aNodeTakesItsOptionsFromTheEnvironmentAndFlagsWin() async throws {
        let executable = try #require(NodeDescriptorTests.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1), (2)")
            let directory = try TemporaryDirectory()
            let secret = "an environment test secret of at least thirty-two bytes"
            try NodeLifecycleTests.rules.write(toFile: directory.path("rules.json"), atomically: true, encoding: .utf8)
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RIPPLE_") }
            environment["RIPPLE_POSTGRES"] = postgres.url
            environment["RIPPLE_TABLES"] = "items"
            environment["RIPPLE_RULES"] = directory.path("rules.json")
            environment["RIPPLE_REPLICA"] = directory.path("replica.sqlite")
            environment["RIPPLE_SLOT"] = "ripple_environment"
            environment["RIPPLE_LOG_FORMAT"] = "json"
            environment["RIPPLE_LOG_LEVEL"] = "info"
            environment["RIPPLE_PORT"] = "99999"
            environment["RIPPLE_SYNC_SECRET"] = secret
            environment["RIPPLE_TABLE"] = "misspelt"
            environment["RIPPLE_PUBLICATION"] = "ripple_environment_publication"
            environment["RIPPLE_WRITES"] = "items"   // an option of `check` alone
            // Only the port is a flag; its variable names a port no node can take, so the node
            // serving at all shows that the flag won.
            let (process, output) = try launchServer(executable, ["serve", "--port", "0"], directory: directory, environment: environment)
            defer {
                if process.isRunning {
                    process.terminate()
                    try? Wait.exit(of: process, "the node to stop")
                }
            }
            let port = try await servedPort(output)
            let token = try SyncToken.sign(user: "u", expires: Date().addingTimeInterval(3600), secret: Array(secret.utf8))
            try await withSockets { opened in
                let socket = try await opened.open("ws://127.0.0.1:\(port)/sync")
                _ = try await socket.hello(token)
                try await socket.send(.subscribe(id: "s", query: QueryDescription(table: "items", order: [OrderDescription(column: "id")]),
                                                 resume: nil))
                var rows = ClientRows()
                try await rows.readFirstResult(from: socket, id: "s")
                #expect(rows.rows.count == 2)
            }
            // The node (a superuser's) made the publication RIPPLE_PUBLICATION names.
            #expect(try await postgres.rows("SELECT pubname FROM pg_publication") == ["ripple_environment_publication"])
            kill(process.processIdentifier, SIGTERM)
            try await Wait.exit(of: process, "the node to exit after SIGTERM", within: .seconds(60))
            let log = (try? String(contentsOfFile: directory.path("node.err"), encoding: .utf8)) ?? ""
            #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(log)")
            #expect(log.contains("RIPPLE_TABLE names no option of `ripple-server serve`"), "\(log)")
            #expect(log.contains("RIPPLE_WRITES is an option of `check`, not of `serve`: ignored"), "\(log)")
            #expect(!log.contains("RIPPLE_PUBLICATION"), "\(log)")
            // RIPPLE_LOG_FORMAT=json: every line after the note is a JSON object.
            let lines = log.split(separator: "\n").filter { !$0.hasPrefix("ripple-server:") }
            #expect(!lines.isEmpty)
            for line in lines {
                #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "not a JSON log line: \(line)")
            }
        }
    }
}
#endif
