import Foundation
@testable import RippleSync
import Testing

/// How a node reads a client's message (``ClientMessage/read(json:)``): as `JSONDecoder` reads
/// the messages clients write, and, for everything else JSON allows, with the refusal the
/// protocol page gives, naming the subscription a `subscribe` names.
@Suite struct ClientMessageReadTests {
    static func read(_ text: String) -> Result<ClientMessage, ClientMessageRefusal> {
        Result { () throws(ClientMessageRefusal) -> ClientMessage in try ClientMessage.read(json: Array(text.utf8)) }
    }

    @Test func theGoldenClientMessagesReadAsJSONDecoderReadsThem() throws {
        for (name, message) in GoldenFrameTests.clientMessages {
            let golden = try #require(GoldenFrameTests.golden[name])
            #expect(try Self.read(golden).get() == message, "\(name)")
            let encoded = String(decoding: try JSONEncoder().encode(message), as: UTF8.self)
            #expect(try Self.read(encoded).get() == message, "\(name), as JSONEncoder writes it")
        }
    }

    @Test(arguments: [
        (#"{"type":"subscribe","id":"a","query":{"table":"t","limit":1e2,"offset":-0}}"#,
         ClientMessage.subscribe(id: "a", query: QueryDescription(table: "t", limit: 100, offset: 0), resume: nil)),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","limit":100.0,"filter":{"column":"c","op":"=","value":1.0}}}"#,
         .subscribe(id: "a", query: QueryDescription(table: "t", filter: .compare(column: "c", op: .equal, value: .integer(1)), limit: 100),
                    resume: nil)),
        (#"{"type":"subscribe","id":"a","id":"b","query":{"table":"t","table":"u"},"query":5}"#,
         .subscribe(id: "a", query: QueryDescription(table: "t"), resume: nil)),
        (#"{"x":"\ud800","type":"ping","type":"hello","y":1e400,"z":[[[]]]}"#, .ping),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","filter":{"column":"c","op":"=","value":"\ud83d\ude00\u0000"}},"resume":null}"#,
         .subscribe(id: "a", query: QueryDescription(table: "t", filter: .compare(column: "c", op: .equal, value: .text("😀\u{0}"))),
                    resume: nil)),
        ("\u{FEFF}{\"type\":\"ping\"}", .ping),
        (#"{"type":"hello","protocol":1e0,"token":"t","client":null}"#, .hello(protocol: 1, token: "t", client: nil)),
    ] as [(String, ClientMessage)])
    func whatJSONAllowsReadsByItsMeaning(text: String, message: ClientMessage) throws {
        #expect(try Self.read(text).get() == message)
    }

    @Test(arguments: [
        (#"{"type":"subscribe","id":"a","query":{"table":"t","limit":1.5}}"#, SyncErrorCode.invalidQuery, "a" as String?),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","limit":1e400}}"#, .invalidQuery, "a"),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","limit":9223372036854775808}}"#, .invalidQuery, "a"),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","filter":{"column":"c","op":"=","value":-1e400}}}"#, .invalidQuery, "a"),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","filter":{"column":"c","op":"=","value":"\udc00"}}}"#, .invalidQuery, "a"),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","filter":{"column":"c","op":"like","value":null}}}"#, .invalidQuery, "a"),
        (#"{"type":"subscribe","id":"a","query":5}"#, .invalidQuery, "a"),
        (#"{"type":"subscribe","id":"a"}"#, .malformed, "a"),
        (#"{"type":"subscribe","id":"a","query":{"table":"t"},"resume":{"lsn":"0/0"}}"#, .malformed, "a"),
        (#"{"type":"subscribe","id":5,"query":{"table":"t","limit":1.5}}"#, .malformed, nil),
        (#"{"type":"subscribe","id":"","query":{"table":"t","limit":1.5}}"#, .invalidQuery, nil),
        (#"{"type":"subscribe","id":"a","query":{"table":"t","filter":"# + String(repeating: "[", count: 10_000)
            + String(repeating: "]", count: 10_000) + "}}", .malformed, "a"),
        (String(repeating: "[", count: 10_000), .malformed, nil),
        (#"{"type":"ping","x":"# + String(repeating: "{\"a\":", count: 64) + "1" + String(repeating: "}", count: 64) + "}", .malformed, nil),
        (#"{"type":"unsubscribe","id":"a","x":"# + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}", .malformed, nil),
        (#"{"type":"hello","protocol":1.5,"token":"t"}"#, .malformed, nil),
        (#"{"type":"push","mutations":[{"id":1,"ops":[{"op":"put","table":"t","values":{"a":1e400}}]}]}"#, .malformed, nil),
        (#"{"type":"launch"}"#, .unknownMessage, nil),
        (#"{"type":"\ud800"}"#, .malformed, nil),
        (#"[1,2]"#, .malformed, nil),
        (#"{"type":"ping",}"#, .malformed, nil),
    ] as [(String, SyncErrorCode, String?)])
    func everythingElseIsRefusedWithThePagesCode(text: String, code: SyncErrorCode, id: String?) {
        switch Self.read(text) {
        case .success(let message): Issue.record("\(text.prefix(100)) read as \(message)")
        case .failure(let refusal):
            #expect(refusal.code == code && refusal.id == id, "\(text.prefix(100)): \(refusal)")
        }
    }

    /// Nesting up to the limit reads; one more is refused.
    @Test func aMessageMayNestSixtyFourDeep() throws {
        func ping(_ depth: Int) -> String {
            #"{"type":"ping","x":"# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}"
        }
        #expect(try Self.read(ping(SyncProtocol.maximumNesting)).get() == .ping)
        #expect(throws: ClientMessageRefusal.self) { try Self.read(ping(SyncProtocol.maximumNesting + 1)).get() }
    }
}
