#if Sync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// `ripple-server serve` and `ripple-server subscribe` as a newcomer meets them, the real
/// binary in child processes: what `serve` prints, `subscribe` ending (status 1, one error)
/// when the node refuses its token instead of reconnecting forever, and not saying it
/// reconnects when it stops by itself; the node counting and logging each refused token, and
/// saying once why it could not start.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: command tests skipped"), .timeLimit(.minutes(10)))
struct ServeAndSubscribeCommandTests {
    static let rules = #"{"tables": {"items": {"read": true}}}"#

    /// What `ripple-server subscribe` said and how it ended.
    struct Run {
        var status: Int32
        var output: String
        var errors: String
    }

    /// Runs `ripple-server subscribe` (`executable`) with `arguments` to its end (within 60 s).
    static func subscribe(_ executable: String, _ arguments: [String], directory: TemporaryDirectory) async throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["subscribe"] + arguments
        let output = Pipe()
        process.standardOutput = output
        let errorsPath = directory.path("subscribe-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: errorsPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: errorsPath)
        let reader = output.fileHandleForReading
        let data = try await Wait.run(process, "ripple-server subscribe \(arguments.joined(separator: " "))", within: .seconds(60)) {
            reader.readDataToEndOfFile()
        }
        return Run(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self),
                   errors: (try? String(contentsOfFile: errorsPath, encoding: .utf8)) ?? "")
    }

    /// What a child process printed on `output` until it said `marker` (or closed it).
    static func output(_ output: Pipe, until marker: String) async throws -> String {
        let reader = output.fileHandleForReading
        return try await Wait.value("the output to say \(marker)") {
            try await onOwnThread("command output") { () -> String in
                var text = ""
                while !text.contains(marker) {
                    let data = reader.availableData
                    if data.isEmpty { break }
                    text += String(decoding: data, as: UTF8.self)
                }
                return text
            }
        }
    }

    static func occurrences(of part: String, in text: String) -> Int { text.components(separatedBy: part).count - 1 }

    @Test func subscribeEndsWhenItsTokenIsRefusedAndTheNodeCountsAndLogsEachRefusal() async throws {
        let executable = try #require(NodeDescriptorTests.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY); INSERT INTO items VALUES (1), (2)")
            let directory = try TemporaryDirectory()
            let secret = "a command test secret of at least thirty-two bytes"
            let jwtSecret = "the identity provider's secret, thirty-two bytes or more"
            try Self.rules.write(toFile: directory.path("rules.json"), atomically: true, encoding: .utf8)
            try secret.write(toFile: directory.path("secret"), atomically: true, encoding: .utf8)
            try jwtSecret.write(toFile: directory.path("jwt-secret"), atomically: true, encoding: .utf8)
            let (node, served) = try launchServer(executable, [
                "serve", "--postgres", postgres.url, "--tables", "items", "--rules", directory.path("rules.json"),
                "--secret-file", directory.path("secret"), "--jwt-secret-file", directory.path("jwt-secret"), "--jwt-audience", "ripple",
                "--replica", directory.path("replica.sqlite"), "--slot", "ripple_commands", "--publication", "ripple_commands",
                "--port", "0", "--log-level", "info"], directory: directory)
            defer {
                if node.isRunning {
                    node.terminate()
                    try? Wait.exit(of: node, "the node to stop")
                }
            }
            // What `serve` prints: where it serves, and the live-list page with what it takes.
            let said = try await Self.output(served, until: "#token=")
            let port = try #require(said.firstMatch(of: /ripple-server: serving ws:\/\/127\.0\.0\.1:(\d+)\/sync/).flatMap { Int($0.1) }, "\(said)")
            #expect(said.contains("http://127.0.0.1:\(port)/ "), "\(said)")
            #expect(said.contains("http://127.0.0.1:\(port)/#token=…&table=…"), "\(said)")
            // --publication: the node (a superuser's) made the publication it names.
            #expect(try await postgres.rows("SELECT pubname FROM pg_publication") == ["ripple_commands"])

            let url = "ws://127.0.0.1:\(port)/sync"
            let key = TestSigningKey(kid: nil, material: .hs256(Array(jwtSecret.utf8)))
            let now = Date()
            let refused: [(what: String, token: String, code: String, says: String)] = [
                ("the wrong audience", try key.token(["sub": "alice", "aud": "another-app"]), "token_wrong_audience",
                 "the node refused the token (token_wrong_audience: "),
                ("a foreign key, no kid", try TestSigningKey.hs256().token(["sub": "alice", "aud": "ripple"]), "token_bad_signature",
                 "the token's signature does not match the node's key (the token names no kid)"),
                ("an expired node token", try SyncToken.sign(user: "alice", expires: now.addingTimeInterval(-60), secret: Array(secret.utf8)),
                 "token_expired", "the token expired (token_expired: "),
                ("a node token of another secret",
                 try SyncToken.sign(user: "alice", expires: now.addingTimeInterval(3600), secret: Array("another secret of thirty-two bytes or more".utf8)),
                 "unauthorized", "the node refused the token (unauthorized: "),
            ]
            for (what, token, code, says) in refused {
                let run = try await Self.subscribe(executable, ["--url", url, "--token", token, "--table", "items"], directory: directory)
                #expect(run.status == 1, "\(what): \(run)")
                #expect(run.errors.contains(says), "\(what): \(run)")
                #expect(run.errors.contains("--token"), "\(what): says what to do: \(run)")
                #expect(Self.occurrences(of: code, in: run.output + run.errors) == 1, "\(what): said once: \(run)")
                #expect(!run.output.contains("reconnecting"), "\(what): \(run)")
            }

            // A good token: --events 1 ends it after the first result, without a word of reconnecting.
            let good = try SyncToken.sign(user: "u", expires: now.addingTimeInterval(3600), secret: Array(secret.utf8))
            let once = try await Self.subscribe(executable, ["--url", url, "--token", good, "--table", "items", "--events", "1"],
                                                directory: directory)
            #expect(once.status == 0, "\(once)")
            #expect(once.output.contains("connected as u") && once.output.contains("2 rows"), "\(once)")
            #expect(!once.output.contains("reconnecting"), "\(once)")

            // SIGTERM after the first result: the same.
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["subscribe", "--url", url, "--token", good, "--table", "items"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try ProcessLaunch.run(process)
            defer {
                if process.isRunning {
                    process.terminate()
                    try? Wait.exit(of: process, "subscribe to stop")
                }
            }
            var text = try await Self.output(output, until: "2 rows")
            kill(process.processIdentifier, SIGTERM)
            let reader = output.fileHandleForReading
            text += String(decoding: try await onOwnThread("subscribe's last output") {
                try Wait.exit(of: process, "subscribe to exit after SIGTERM", within: .seconds(60)) { reader.readDataToEndOfFile() }
            }, as: UTF8.self)
            #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(text)")
            #expect(!text.contains("reconnecting"), "\(text)")

            // The node counted each refusal by its code (the client may have come back once more
            // before it stopped), and logged each at info: its code and why, never the token.
            let (body, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
            let metrics = String(decoding: body, as: UTF8.self)
            for (what, _, code, _) in refused {
                let count = metrics.firstMatch(of: try Regex("ripple_refused_tokens_total\\{code=\"\(code)\"\\} (\\d+)"))
                    .flatMap { Int($0.output[1].substring ?? "") }
                #expect((count ?? 0) >= 1, "\(what): \(metrics)")
            }
            kill(node.processIdentifier, SIGTERM)
            try await Wait.exit(of: node, "the node to exit after SIGTERM", within: .seconds(60))
            let log = (try? String(contentsOfFile: directory.path("node.err"), encoding: .utf8)) ?? ""
            #expect(log.contains("a token was refused: token_wrong_audience: the token's aud does not name ripple"), "\(log)")
            #expect(log.contains("a token was refused: token_expired: the token expired"), "\(log)")
            for (what, token, _, _) in refused {
                #expect(!log.contains(token), "\(what): the token is in the log")
            }
        }
    }

    /// A node that cannot start (its address is not this machine's) says why once: its log line
    /// when its log takes errors; the command's error when it does not.
    @Test func aNodeThatCannotStartSaysWhyOnce() async throws {
        let executable = try #require(NodeDescriptorTests.serverExecutable, "ripple-server is not built beside the tests")
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE items(id int8 PRIMARY KEY)")
            let directory = try TemporaryDirectory()
            try Self.rules.write(toFile: directory.path("rules.json"), atomically: true, encoding: .utf8)
            for level in ["warning", "critical"] {
                var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RIPPLE_") }
                environment["RIPPLE_SYNC_SECRET"] = "a start test secret of at least thirty-two bytes"
                // 192.0.2.1 (TEST-NET-1) is no interface's address: the listener cannot bind it.
                let (process, output) = try launchServer(executable, [
                    "serve", "--postgres", postgres.url, "--tables", "items", "--rules", directory.path("rules.json"),
                    "--replica", directory.path("replica-\(level).sqlite"), "--slot", "ripple_start_\(level)",
                    "--host", "192.0.2.1", "--port", "0", "--log-level", level], directory: directory, environment: environment)
                let said = try await onOwnThread("the node's output") {
                    try Wait.exit(of: process, "the node that cannot listen to exit", within: .seconds(60)) {
                        output.fileHandleForReading.readDataToEndOfFile()
                    }
                }
                let log = (try? String(contentsOfFile: directory.path("node.err"), encoding: .utf8)) ?? ""
                #expect(process.terminationReason == .exit && process.terminationStatus == 1, "\(level): \(log)")
                #expect(!String(decoding: said, as: UTF8.self).contains("serving"), "\(level)")
                #expect(Self.occurrences(of: "the HTTP listener stopped", in: log) == 1, "\(level): said once: \(log)")
                if level == "warning" {
                    #expect(log.contains("the node stopped: the HTTP listener stopped"), "\(log)")
                    #expect(!log.contains("Error:"), "\(log)")
                } else {
                    #expect(log.contains("Error: the HTTP listener stopped"), "\(log)")
                }
            }
        }
    }
}
#endif
