#if Sync
import Foundation
import NIOWebSocket
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Hostile frames at random (``HostileFrames``: every shape of JSON and of non-JSON, binary
/// frames, text that is not UTF-8, messages beyond both bounds, queries right and wrong in every
/// way the protocol page lists) sent to a real node on 127.0.0.1, beside an honest client
/// and a writer in psql. Every answer must be the one the page gives for the frame (code, and
/// the subscription id where the frame names one), nothing else may arrive, the node must
/// answer each frame within a bound, and the honest client must end with exactly Postgres's
/// rows.
///
/// `RIPPLE_FUZZ_SEED` and `RIPPLE_FUZZ_CASES` run other seeds, longer.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: hostile-frame fuzzing skipped"), .timeLimit(.minutes(15)))
struct HostileFrameFuzzTests {
    static let seeds: [UInt64] = ProcessInfo.processInfo.environment["RIPPLE_FUZZ_SEED"].flatMap(UInt64.init).map { [$0] } ?? [1, 2]
    static let cases = ProcessInfo.processInfo.environment["RIPPLE_FUZZ_CASES"].flatMap(Int.init) ?? 400
    /// How long the node may take to answer one frame (a loaded machine included).
    static let answerWithin = 60.0
    static let maxMessageBytes = 65_536

    @Test(arguments: seeds)
    func hostileFramesGetTheAnswersThePageGivesAndTheHonestClientStaysCorrect(seed: UInt64) async throws {
        try await withThrowawayPostgres { postgres in
            try await SyncProtocolTests.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: SyncProtocolTests.rules, directory: directory, adjust: {
                $0.maxMessageBytes = Self.maxMessageBytes
            }) { node in

                // The honest client: alice's open todos and every tag, followed while a writer writes.
                try await withSocket(node.url) { honest in
                    _ = try await honest.hello(try node.token("alice"))
                    try await honest.send(.subscribe(id: "open", query: SyncProtocolTests.aliceOpen, resume: nil))
                    try await honest.send(.subscribe(id: "tags", query: QueryDescription(table: "tags", order: [OrderDescription(column: "name")]),
                                                     resume: nil))
                    try await withThrowingTaskGroup(of: Void.self) { writers in
                        writers.addTask {
                            var n = 0
                            while !Task.isCancelled {
                                n += 1
                                let sql = switch n % 4 {
                                case 0: "UPDATE todos SET rank = (rank * 7 + \(n)) % 50 WHERE id = \(n % 40 + 1)"
                                case 1: "UPDATE todos SET title = 'w\(n)', done = NOT done WHERE id = \(n % 40 + 1)"
                                case 2: "INSERT INTO tags VALUES (\(100 + n % 20), 'tag \(n)') ON CONFLICT (id) DO UPDATE SET name = excluded.name"
                                default: "DELETE FROM tags WHERE id = \(100 + (n / 3) % 20)"
                                }
                                _ = try? await postgres.psql(sql)
                                try? await Task.sleep(for: .milliseconds(50))
                            }
                        }

                        try await withSockets { sockets in
                            var frames = HostileFrames(seed: seed, maxMessageBytes: Self.maxMessageBytes)
                            var socket = try await sockets.open(node.url)
                            var reach: [String: Int] = [:]
                            var failures: [String] = []
                            /// Ids whose subscribe was refused: no result may ever come for them.
                            var refused: Set<String> = []

                            /// Reads frames until `stop` says the awaited one came, and returns those that do not
                            /// belong (errors, results of refused ids). Heartbeats, and `changes` frames of the
                            /// socket's other subscriptions (held's, and those unsubscribed, which may still
                            /// arrive), are skipped; `stop` sees `changes` frames only when it `wantsResults`.
                            func read(_ socket: TestSocket, what: String, wantsResults: Bool = true,
                                      until stop: (ServerMessage) -> Bool) async throws -> [ServerMessage] {
                                var others: [ServerMessage] = []
                                while true {
                                    guard let message = try await socket.nextMessage(within: Self.answerWithin, what: what) else {
                                        throw SyncClientTestError("the hostile socket closed while waiting for \(what)")
                                    }
                                    if case .changes(_, let snapshots, _) = message {
                                        if wantsResults, stop(message) { return others }
                                        if snapshots.keys.contains(where: refused.contains) { others.append(message) }
                                        continue
                                    }
                                    if stop(message) { return others }
                                    others.append(message)
                                }
                            }

                            var open = ClientRows()
                            var tags = ClientRows()
                            /// Reads the honest client's frames up to the answer to a ping; whether its rows then
                            /// equal Postgres's.
                            func honestRowsEqualPostgres() async throws -> Bool {
                                try await honest.send(.ping)
                                while true {
                                    guard let message = try await honest.next(within: Self.answerWithin, what: "the honest client's pong") else {
                                        throw SyncClientTestError("the honest socket closed")
                                    }
                                    _ = try open.take(message, id: "open")
                                    _ = try tags.take(message, id: "tags")
                                    if case .pong = message { break }
                                }
                                let (openRows, tagRows) = (try await postgres.rows(SyncProtocolTests.aliceOpenSQL),
                                                           try await postgres.rows("SELECT id, name FROM tags ORDER BY name, id"))
                                return open.rows.map(psqlText) == openRows && tags.rows.map(psqlText) == tagRows
                            }

                            /// Opens the hostile socket again (after a case that closes it) and says hello.
                            func reopen() async throws -> TestSocket {
                                let socket = try await sockets.open(node.url)
                                try await socket.send(#"{"type":"hello","protocol":1,"token":\#(JSONBytes.quoted(try node.token("bob")))}"#)
                                _ = try await read(socket, what: "the welcome") { if case .welcome = $0 { true } else { false } }
                                try await socket.send(#"{"type":"subscribe","id":"held","query":{"table":"tags"}}"#)
                                _ = try await read(socket, what: "held's result") { if case .changes(_, let snapshots, _) = $0 { snapshots["held"] != nil } else { false } }
                                return socket
                            }

                            let preHello = 25
                            for number in 0..<(preHello + Self.cases) {
                                if number == preHello {
                                    await socket.end()
                                    socket = try await reopen()
                                }
                                let item = frames.next(afterHello: number >= preHello)
                                reach[item.kind, default: 0] += 1
                                let shown: String = switch item.frame {
                                case .text(let text): "seed \(seed) case \(number) (\(item.kind)): \(text.prefix(200))"
                                case .textBytes(let bytes): "seed \(seed) case \(number) (\(item.kind)): text bytes \(bytes.prefix(60))"
                                case .binary(let bytes): "seed \(seed) case \(number) (\(item.kind)): binary \(bytes.prefix(60))"
                                }
                                switch item.frame {
                                case .text(let text): try await socket.send(text)
                                case .textBytes(let bytes): try await socket.send(textBytes: bytes)
                                case .binary(let bytes): try await socket.send(binary: bytes)
                                }
                                do {
                                    switch item.expected {
                                    case .closed(let code):
                                        let got = try await socket.closingCode(within: Self.answerWithin)
                                        if got != code { failures.append("\(shown): expected \(item.expected), closed with \(String(describing: got))") }
                                        await socket.end()
                                        socket = number >= preHello ? try await reopen() : try await sockets.open(node.url)
                                    case .result(let id):
                                        let others = try await read(socket, what: "the answer to \(shown)") { message in
                                            switch message {
                                            case .changes(_, let snapshots, _): snapshots[id] != nil
                                            case .error(_, _, let named): named == id
                                            default: false
                                            }
                                        }
                                        failures += others.map { "\(shown): expected \(item.expected), and also got \($0)" }
                                        try await socket.send(#"{"type":"unsubscribe","id":\#(JSONBytes.quoted(id))}"#)
                                    case .error(let code, let id) where code == .invalidQuery || code == .duplicateSubscription:
                                        // A refused subscribe: its error may follow the node's attempt to run it.
                                        let others = try await read(socket, what: "the answer to \(shown)") { message in
                                            if case .error(let got, _, let named) = message, named == id {
                                                if got != code { failures.append("\(shown): expected \(item.expected), got \(message)") }
                                                return true
                                            }
                                            if case .changes(_, let snapshots, _) = message, let id, snapshots[id] != nil, id != HostileFrames.held {
                                                failures.append("\(shown): expected \(item.expected), got a result")
                                                return true
                                            }
                                            return false
                                        }
                                        failures += others.map { "\(shown): expected \(item.expected), and also got \($0)" }
                                        if let id, id != HostileFrames.held { refused.insert(id) }
                                    default:
                                        // Answered in order: the frame's answer comes before the answer to a ping
                                        // sent after it (before hello, the ping's answer is out_of_order).
                                        let helloSaid = number >= preHello
                                        try await socket.send(#"{"type":"ping"}"#)
                                        var answers: [ServerMessage] = []
                                        var others: [ServerMessage] = []
                                        for _ in 0..<(item.expected == .nothing ? 1 : 2) {
                                            others += try await read(socket, what: "the answer to \(shown)", wantsResults: false) { message in
                                                answers.append(message)
                                                return true
                                            }
                                        }
                                        var expected: [HostileFrames.Expected] = item.expected == .nothing ? [] : [item.expected]
                                        expected.append(helloSaid ? .pong : .error(.outOfOrder, id: nil))
                                        let got = answers.map(Self.answer)
                                        if got != expected || !others.isEmpty {
                                            failures.append("\(shown): expected \(expected), got \(answers.map { "\($0)".prefix(200) }) and \(others.count) others")
                                        }
                                    }
                                } catch {
                                    failures.append("\(shown): \(error)")
                                    break
                                }
                                if failures.count > 20 { break }
                                if number % 100 == 99 {
                                    // The honest client is still served: its frames and its pong come.
                                    _ = try await honestRowsEqualPostgres()
                                }
                            }
                            #expect(failures.isEmpty, "\(failures.count) frames got another answer than the page's:\n\(failures.prefix(20).joined(separator: "\n"))")
                            let kinds = reach.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
                            print("hostile frames, seed \(seed): \(kinds)")

                            // Writes stop; the honest client ends with Postgres's rows.
                            writers.cancelAll()
                            try await writers.waitForAll()
                            let deadline = ContinuousClock.now + .seconds(120)
                            while try await !honestRowsEqualPostgres() {
                                guard ContinuousClock.now < deadline else {
                                    Issue.record("the honest client's rows did not reach Postgres's within 120 s after the writes stopped")
                                    return
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// A message as the model names answers.
    static func answer(_ message: ServerMessage) -> HostileFrames.Expected {
        switch message {
        case .error(let code, _, let id): .error(code, id: id)
        case .pong: .pong
        case .changes(_, let snapshots, _): .result(id: snapshots.keys.sorted().joined(separator: ","))
        default: .nothing
        }
    }
}
#endif
