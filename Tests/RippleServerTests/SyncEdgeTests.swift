#if Sync
import Foundation
import NIOWebSocket
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// The node's edge answers what the protocol page says for every input JSON's grammar allows
/// (and for some it does not): the documented code, naming the subscription a `subscribe`
/// names; a query the replica cannot run is refused at subscribe; text that is not UTF-8
/// closes the socket with 1007. Each case here is a member of a class the hostile-frame
/// fuzzer (``HostileFrameFuzzTests``) reaches at random.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync edge tests skipped"), .timeLimit(.minutes(15)))
struct SyncEdgeTests {
    /// What a frame must get: an error with a code and an id, or a subscription's first result.
    enum Answer: CustomStringConvertible {
        case error(SyncErrorCode, id: String?, saying: String)
        case result(id: String, rows: Int? = nil)
        case pong

        var description: String {
            switch self {
            case .error(let code, let id, let words): "\(code.rawValue) naming \(id ?? "no subscription") saying \(words)"
            case .result(let id, let rows): "the first result of \(id)" + (rows.map { " with \($0) rows" } ?? "")
            case .pong: "pong"
            }
        }
    }

    static func subscribe(_ id: String, _ query: String) -> String { #"{"type":"subscribe","id":"\#(id)","query":\#(query)}"# }

    /// Frames JSON's grammar allows, each with the answer the protocol page gives.
    static let cases: [(String, Answer)] = [
        // Numbers: integers by value; a fraction or a number beyond a double's range is refused
        // naming the subscription.
        (subscribe("frac", #"{"table":"todos","limit":1.5}"#), .error(.invalidQuery, id: "frac", saying: "limit")),
        (subscribe("huge", #"{"table":"todos","limit":1e400}"#), .error(.invalidQuery, id: "huge", saying: "limit")),
        (subscribe("big", #"{"table":"todos","limit":9223372036854775808}"#), .error(.invalidQuery, id: "big", saying: "limit")),
        (subscribe("exp", #"{"table":"todos","limit":1e1,"order":[{"column":"id"}]}"#), .result(id: "exp", rows: 10)),
        (subscribe("zero", #"{"table":"todos","limit":-0}"#), .result(id: "zero", rows: 0)),
        (subscribe("value", #"{"table":"todos","filter":{"column":"rank","op":"<","value":1e400}}"#),
         .error(.invalidQuery, id: "value", saying: "1e400")),
        (subscribe("neg", #"{"table":"todos","filter":{"column":"rank","op":">","value":-1e400}}"#),
         .error(.invalidQuery, id: "neg", saying: "1e400")),
        (#"{"type":"ping","junk":1e400}"#, .pong),
        // Nesting: refused naming the subscription, however deep.
        (subscribe("deep", #"{"table":"todos","filter":"# + String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000) + "}"),
         .error(.malformed, id: "deep", saying: "nest")),
        (subscribe("nots", #"{"table":"todos","filter":"# + String(repeating: #"{"not":"#, count: 100) + #"{"column":"done","op":"is null"}"#
                   + String(repeating: "}", count: 100) + "}"),
         .error(.malformed, id: "nots", saying: "nest")),
        (String(repeating: "[", count: 10_000), .error(.malformed, id: nil, saying: "not JSON")),
        (subscribe("levels", #"{"table":"todos","filter":"# + String(repeating: #"{"not":"#, count: 25) + #"{"column":"done","op":"is null"}"#
                   + String(repeating: "}", count: 25) + "}"),
         .error(.invalidQuery, id: "levels", saying: "levels")),
        (subscribe("shallow", #"{"table":"todos","filter":"# + String(repeating: #"{"not":{"not":"#, count: 9)
                   + #"{"column":"done","op":"is not null"}"# + String(repeating: "}}", count: 9) + "}"),
         .result(id: "shallow", rows: 20)),
        // Strings: an unpaired surrogate names no character.
        (subscribe("lone", #"{"table":"todos","filter":{"column":"title","op":"=","value":"\ud800"}}"#),
         .error(.invalidQuery, id: "lone", saying: "surrogate")),
        (subscribe("pair", #"{"table":"todos","filter":{"column":"title","op":"=","value":"\ud83d\ude00 \u0000 \"\\\/"}}"#),
         .result(id: "pair", rows: 0)),
        (#"{"type":"ping","junk":"\udc00"}"#, .pong),
        // Duplicate keys: the first counts.
        (#"{"type":"subscribe","id":"dup","id":"other","query":{"table":"tags"},"query":7}"#, .result(id: "dup", rows: 2)),
        // Queries the replica could not run: refused at subscribe, saying why.
        (subscribe("glob", #"{"table":"todos","filter":{"column":"title","op":"like","value":""# + String(repeating: "%", count: 60_000) + #""}}"#),
         .error(.invalidQuery, id: "glob", saying: "like")),
        (subscribe("wide", #"{"table":"todos","filter":{"column":"rank","op":"in","values":["# + Array(repeating: "1", count: 40_000).joined(separator: ",") + "]}}"),
         .error(.invalidQuery, id: "wide", saying: "values")),
        (subscribe("twice", #"{"table":"tags","order":["# + Array(repeating: #"{"column":"name"}"#, count: 2_500).joined(separator: ",") + "]}"),
         .result(id: "twice", rows: 2)),
        (subscribe("cols", #"{"table":"tags","columns":["# + Array(repeating: #""name""#, count: 2_500).joined(separator: ",") + "]}"),
         .error(.invalidQuery, id: "cols", saying: "name")),
        // A long list of terms is a query the replica runs.
        (subscribe("terms", #"{"table":"todos","filter":{"and":["# + Array(repeating: #"{"column":"rank","op":">","value":0}"#, count: 1_500).joined(separator: ",") + "]}}"),
         .result(id: "terms", rows: 20)),
        // A list of more than 8 compiles as balanced groups, meaning the same: alice's ids 1 to 20.
        (subscribe("ors", #"{"table":"todos","filter":{"or":["# + (1...20).map { #"{"column":"id","op":"=","value":\#($0)}"# }
            .joined(separator: ",") + "]}}"),
         .result(id: "ors", rows: 10)),
    ]

    /// Every case gets its documented answer on one socket, which keeps working, beside an
    /// honest client that sees none of it and stays correct.
    @Test func everyFrameJSONAllowsGetsItsDocumentedAnswer() async throws {
        try await withThrowawayPostgres { postgres in
            try await SyncProtocolTests.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: SyncProtocolTests.rules, directory: directory) { node in
                try await withSocket(node.url) { honest in
                    _ = try await honest.hello(try node.token("alice"))
                    try await honest.send(.subscribe(id: "open", query: SyncProtocolTests.aliceOpen, resume: nil))
                    var open = ClientRows()
                    try await open.readFirstResult(from: honest, id: "open")

                    try await withSocket(node.url) { socket in
                        try await socket.send(String(decoding: try JSONEncoder().encode(ClientMessage.hello(protocol: 1, token: try node.token("alice"))),
                                                     as: UTF8.self))
                        guard case .welcome? = try await socket.nextMessage(what: "the welcome") else { Issue.record("no welcome"); return }
                        var failures: [String] = []
                        for (frame, expected) in Self.cases {
                            try await socket.send(frame)
                            let answer = try await socket.nextMessage(what: "the answer to \(frame.prefix(120))")
                            let shown = "\(frame.prefix(120)): expected \(expected), got \(answer.map { "\($0)".prefix(300) } ?? "a closed socket")"
                            switch (expected, answer) {
                            case (.error(let code, let id, let words), .error(let got, let text, let gotID)?):
                                if got != code || gotID != id || !text.localizedCaseInsensitiveContains(words) { failures.append(shown) }
                            case (.result(let id, let rows), .changes(_, let snapshots, _)?):
                                if let snapshot = snapshots[id], rows.map({ $0 == snapshot.rows.count }) ?? true {
                                    try await socket.send(#"{"type":"unsubscribe","id":"\#(id)"}"#)
                                } else {
                                    failures.append(shown)
                                }
                            case (.pong, .pong?):
                                break
                            default:
                                failures.append(shown)
                            }
                            guard answer != nil else { break }
                        }
                        #expect(failures.isEmpty, "\(failures.count) of \(Self.cases.count) frames got another answer:\n\(failures.joined(separator: "\n"))")
                        // The socket still serves, and the honest client follows a write exactly.
                        try await socket.send(#"{"type":"ping"}"#)
                        guard case .pong? = try await socket.nextMessage(what: "the pong after the cases") else { Issue.record("no pong"); return }
                        try await postgres.psql("UPDATE todos SET title = 'after the edge' WHERE id = 2")
                        while open.rows.map(psqlText) != (try await postgres.rows(SyncProtocolTests.aliceOpenSQL)) {
                            _ = try open.take(try #require(try await honest.nextSkippingHeartbeats(what: "the honest client's change")), id: "open")
                        }
                    }
                }
            }
        }
    }

    /// A text frame whose bytes are not UTF-8 closes the socket with 1007 (RFC 6455's "data
    /// inconsistent with the message"); a binary frame is `malformed`, and the socket stays.
    @Test func textThatIsNotUTF8ClosesTheSocketWith1007() async throws {
        try await withThrowawayPostgres { postgres in
            try await SyncProtocolTests.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: SyncProtocolTests.rules, directory: directory) { node in
                try await withSocket(node.url) { socket in
                    try await socket.send(binary: Array(#"{"type":"ping"}"#.utf8))
                    guard case .error(.malformed, _, nil)? = try await socket.nextMessage(what: "the answer to a binary frame") else {
                        Issue.record("a binary frame is not malformed")
                        return
                    }
                    try await socket.send(textBytes: Array(#"{"type":"ping","x":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8))
                    let code = try await socket.closingCode()
                    #expect(code == .dataInconsistentWithMessage, "closed with \(String(describing: code))")
                }
            }
        }
    }

    /// A message beyond the frame bound (four times `max_message_bytes`) closes the socket with
    /// 1009; one between the two bounds is `message_too_large`, and the socket stays.
    @Test func aMessageBeyondTheFrameBoundClosesTheSocketWith1009() async throws {
        try await withThrowawayPostgres { postgres in
            try await SyncProtocolTests.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: SyncProtocolTests.rules, directory: directory, adjust: {
                $0.maxMessageBytes = 65_536
            }) { node in
                try await withSocket(node.url) { socket in
                    try await socket.send(#"{"type":"ping","x":""# + String(repeating: "x", count: 100_000) + #""}"#)
                    guard case .error(.messageTooLarge, _, nil)? = try await socket.nextMessage(what: "the answer to a message too large") else {
                        Issue.record("a message between the bounds is not message_too_large")
                        return
                    }
                    try await socket.send(#"{"type":"ping","x":""# + String(repeating: "x", count: 300_000) + #""}"#)
                    let code = try await socket.closingCode()
                    #expect(code == .messageTooLarge, "closed with \(String(describing: code))")
                }
            }
        }
    }
}
#endif
