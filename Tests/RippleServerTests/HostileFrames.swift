#if Sync
import Foundation
import NIOWebSocket
import RippleDiffTesting
import RippleSync
import RippleTesting

/// Random hostile frames for a node serving ``SyncProtocolTests``' tables (`todos`: id int8,
/// owner text, title text, rank int4, done bool, read rule `owner = user`; `tags`: id int8,
/// name text, readable by all), each with the answer the protocol page gives for it: the
/// model of the page that ``HostileFrameFuzzTests`` checks the node against.
///
/// Every shape: text that is not JSON (or not UTF-8), JSON that is not an object, objects
/// without a string `type`, unknown types, every message with fields missing, of every wrong
/// type and with fields it ignores (holding numbers beyond a double's range, unpaired
/// surrogates, nesting), binary frames, messages beyond both size bounds, and subscriptions
/// whose queries are right or wrong in every way the page lists.
struct HostileFrames {
    enum Frame {
        case text(String)
        /// A text frame of these bytes (not always UTF-8).
        case textBytes([UInt8])
        case binary([UInt8])
    }

    enum Expected: Equatable, CustomStringConvertible {
        case error(SyncErrorCode, id: String?)
        /// A subscription's first result (then the fuzzer unsubscribes it).
        case result(id: String)
        case pong
        /// No answer (an `unsubscribe` of a subscription the socket holds).
        case nothing
        /// The socket closes with this status.
        case closed(WebSocketErrorCode)

        var description: String {
            switch self {
            case .error(let code, let id): "\(code.rawValue) naming \(id.map { JSONBytes.quoted($0) } ?? "no id")"
            case .result(let id): "the first result of \(JSONBytes.quoted(id))"
            case .pong: "pong"
            case .nothing: "no answer"
            case .closed(let code): "the socket closing with \(code)"
            }
        }
    }

    struct Case {
        var frame: Frame
        var expected: Expected
        /// What kind of case it is (the fuzzer counts them, to show its reach).
        var kind: String
    }

    var random: SeededGenerator
    /// Subscriptions are named h1, h2…: never one the socket holds, unless on purpose.
    private var serial = 0
    /// The subscription the hostile socket keeps (a `subscribe` under it is a duplicate).
    static let held = "held"
    /// The node's `max_message_bytes`.
    let maxMessageBytes: Int

    init(seed: UInt64, maxMessageBytes: Int) {
        random = SeededGenerator(seed: seed)
        self.maxMessageBytes = maxMessageBytes
    }

    private mutating func chance(_ n: Int) -> Bool { Int.random(in: 0..<n, using: &random) == 0 }
    private mutating func pick<T>(_ items: [T]) -> T { items.randomElement(using: &random)! }
    private func q(_ text: String) -> String { JSONBytes.quoted(text) }

    /// Whether the answer depends on the `hello` the socket said.
    private var helloSaid = true

    /// The next case, before or after the socket's `hello`.
    mutating func next(afterHello: Bool) -> Case {
        helloSaid = afterHello
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<8: return notJSON()
        case 8..<12: return notAnObject()
        case 12..<16: return noStringType()
        case 16..<19: return Case(frame: .text(#"{"type":\#(q(pick(["launch", "Ping", "hello ", "", "welcome", "pushed"])))}"#),
                                  expected: .error(.unknownMessage, id: nil), kind: "unknown type")
        case 19..<21: return Case(frame: .binary(Array(pick([#"{"type":"ping"}"#, "", "\u{0}"]).utf8)),
                                  expected: .error(.malformed, id: nil), kind: "binary frame")
        case 21..<22: return notUTF8()
        case 22..<23: return tooLarge()
        case 23..<32: return ping()
        case 32..<38: return unsubscribe()
        case 38..<42: return hello()
        case 42..<47: return push()
        default: return subscribe()
        }
    }

    // MARK: Frames that are not messages

    private mutating func notJSON() -> Case {
        // A random JSON text, damaged until it is not JSON (as Foundation, RFC 8259's reader
        // here, sees it) and still UTF-8.
        while true {
            let bytes = RandomJSON.damaged(RandomJSON.value(depth: 3, using: &random), using: &random)
            guard let text = String(validating: bytes, as: UTF8.self),
                  (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) == nil else { continue }
            return Case(frame: .text(text), expected: .error(.malformed, id: nil), kind: "not JSON")
        }
    }

    private mutating func notAnObject() -> Case {
        var text: String
        repeat { text = RandomJSON.value(depth: 3, extremes: true, using: &random) } while text.hasPrefix("{")
        return Case(frame: .text(text), expected: .error(.malformed, id: nil), kind: "JSON, not an object")
    }

    private mutating func noStringType() -> Case {
        let type = pick(["", #""type":null,"#, #""type":1,"#, #""type":["ping"],"#, #""type":{"a":1},"#, #""Type":"ping","#])
        return Case(frame: .text("{\(type)\"id\":\"x\",\"junk\":\(RandomJSON.value(depth: 2, using: &random))}"),
                    expected: .error(.malformed, id: nil), kind: "no string type")
    }

    private mutating func notUTF8() -> Case {
        let bad = pick([[0xC3, 0x28], [0xFF], [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82]] as [[UInt8]])
        return Case(frame: .textBytes(Array(#"{"type":"ping","x":""#.utf8) + bad + Array(#""}"#.utf8)),
                    expected: .closed(.dataInconsistentWithMessage), kind: "not UTF-8")
    }

    private mutating func tooLarge() -> Case {
        if chance(3) {
            let padding = String(repeating: "x", count: maxMessageBytes * 4 + 10)
            return Case(frame: .text(#"{"type":"ping","x":"\#(padding)"}"#), expected: .closed(.messageTooLarge), kind: "beyond the frame bound")
        }
        let padding = String(repeating: "y", count: maxMessageBytes + Int.random(in: 1...1_000, using: &random))
        return Case(frame: .text(#"{"type":"subscribe","id":"big","x":"\#(padding)"}"#), expected: .error(.messageTooLarge, id: nil),
                    kind: "message too large")
    }

    // MARK: Messages

    /// Members a message does not define, holding anything JSON allows.
    private mutating func junk() -> String {
        guard chance(2) else { return "" }
        let name = pick(["junk", "x", "query2", "ID", "typ\\u0065s", "\\ud800"])
        return ",\(q(name).replacingOccurrences(of: "\\\\", with: "\\")):\(RandomJSON.value(depth: 3, extremes: true, using: &random))"
    }

    /// A value nested `depth` arrays deep.
    private func nested(_ depth: Int) -> String { String(repeating: "[", count: depth) + String(repeating: "]", count: depth) }

    /// The answer to a message whose fields are right: `answer` after `hello`, `out_of_order`
    /// before.
    private func afterHello(_ answer: Expected) -> Expected { helloSaid ? answer : .error(.outOfOrder, id: nil) }

    private mutating func ping() -> Case {
        if chance(8) {
            // Nesting beyond 64, in a field the node ignores: still refused.
            let depth = pick([62, 63, 64, 200, 5_000])
            return Case(frame: .text(#"{"type":"ping","x":\#(nested(depth))}"#),
                        expected: depth + 1 <= SyncProtocol.maximumNesting ? afterHello(.pong) : .error(.malformed, id: nil),
                        kind: "ping nesting \(depth + 1)")
        }
        let extra = junk()
        let text = extra.isEmpty || chance(2) ? #"{"type":"ping"\#(extra)}"# : #"{\#(extra.dropFirst()),"type":"ping"}"#
        return Case(frame: .text(text), expected: afterHello(.pong), kind: "ping")
    }

    private mutating func unsubscribe() -> Case {
        switch Int.random(in: 0..<5, using: &random) {
        case 0: return Case(frame: .text(#"{"type":"unsubscribe"\#(junk())}"#), expected: .error(.malformed, id: nil), kind: "unsubscribe without id")
        case 1:
            return Case(frame: .text(#"{"type":"unsubscribe","id":\#(pick(["5", "null", "[\"a\"]", "{}", "\"\\ud800\""]))}"#),
                        expected: .error(.malformed, id: nil), kind: "unsubscribe, id not a string")
        default:
            let id = pick(["never", "h0", "", "é\u{301}", "😀", "a\nb", String(repeating: "z", count: 300)])
            return Case(frame: .text(#"{"type":"unsubscribe","id":\#(q(id))\#(junk())}"#),
                        expected: afterHello(.error(.unknownSubscription, id: id)), kind: "unsubscribe unknown id")
        }
    }

    private mutating func hello() -> Case {
        guard helloSaid else {
            // Before hello only a hello whose fields are wrong: a right one opens the socket.
            return Case(frame: .text(#"{"type":"hello","protocol":1\#(junk())}"#), expected: .error(.malformed, id: nil), kind: "hello without token")
        }
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return Case(frame: .text(#"{"type":"hello","token":"x"}"#), expected: .error(.malformed, id: nil), kind: "hello without protocol")
        case 1:
            let number = pick(["1.5", "1e400", "\"1\"", "null", "9223372036854775808"])
            return Case(frame: .text(#"{"type":"hello","protocol":\#(number),"token":"x"}"#), expected: .error(.malformed, id: nil),
                        kind: "hello, protocol not an integer")
        default:
            let number = pick(["1", "1e0", "1.0", "2", "-0"])
            return Case(frame: .text(#"{"type":"hello","protocol":\#(number),"token":"x"\#(junk())}"#),
                        expected: .error(.outOfOrder, id: nil), kind: "hello again")
        }
    }

    private mutating func push() -> Case {
        switch Int.random(in: 0..<4, using: &random) {
        case 0:
            let mutations = pick(["null", "5", #"[{"id":1.5,"ops":[]}]"#, #"[{"id":1e400,"ops":[]}]"#, #"[{"id":1}]"#,
                                  #"[{"id":1,"ops":[{"op":"upsert","table":"todos","values":{}}]}]"#,
                                  #"[{"id":1,"ops":[{"op":"put","table":"todos","values":{"id":[1]}}]}]"#,
                                  #"[{"id":1,"ops":[{"op":"put","table":"todos","values":{"id":1e400}}]}]"#,
                                  #"[{"id":1,"ops":[{"op":"put","table":"todos","values":{"title":"\ud800"}}]}]"#])
            return Case(frame: .text(#"{"type":"push","mutations":\#(mutations)}"#), expected: .error(.malformed, id: nil), kind: "push, wrong fields")
        default:
            let mutations = pick(["[]", #"[{"id":1,"ops":[]}]"#, #"[{"id":1e0,"ops":[{"op":"patch","table":"todos","values":{"id":2,"title":"\u00e9","id":3}}]}]"#])
            // The hostile socket said hello without `client`: it cannot push.
            return Case(frame: .text(#"{"type":"push","mutations":\#(mutations)\#(junk())}"#), expected: afterHello(.error(.unavailable, id: nil)),
                        kind: "push without a client id")
        }
    }

    // MARK: Subscriptions

    /// A part of a query, with whether the node reads it (`decodes`), and whether it then fits
    /// the table (`fits`), and how many values it binds.
    struct Part {
        var json: String
        var decodes = true
        var fits = true
        var values = 0

        static func + (a: Part, b: Part) -> Part {
            Part(json: a.json + b.json, decodes: a.decodes && b.decodes, fits: a.fits && b.fits, values: a.values + b.values)
        }
    }

    enum ColumnType { case integer, text, bool }

    static let tables: [String: [(String, ColumnType)]] = [
        "todos": [("id", .integer), ("owner", .text), ("title", .text), ("rank", .integer), ("done", .bool)],
        "tags": [("id", .integer), ("name", .text)],
    ]

    private mutating func subscribe() -> Case {
        serial += 1
        var id = "h\(serial)"
        var idPart = q(id)
        var idAnswers = true   // whether errors name the id
        var idDecodes = true   // a string
        var idRight = true     // of 1 to 256 bytes
        switch Int.random(in: 0..<40, using: &random) {
        case 0: (idPart, idAnswers, idDecodes, idRight) = (pick(["5", "null", "[]"]), false, false, false)
        case 1: (idPart, idAnswers, idRight) = (#""""#, false, false)
        case 2: (id, idAnswers, idRight) = (String(repeating: "i", count: 257), false, false); idPart = q(id)
        case 3: (id, idPart) = (Self.held, q(Self.held))
        case 4: (id, idPart) = ("é😀\u{0}\"", q("é😀\u{0}\""))
        default: break
        }
        let named: String? = idAnswers ? id : nil
        if chance(25) {
            // A filter of `not`s, nested as deep as the text says.
            let nots = pick([10, 19, 20, 40, 61, 62, 100, 3_000])
            let filter = String(repeating: #"{"not":"#, count: nots) + #"{"column":"done","op":"is null"}"# + String(repeating: "}", count: nots)
            let text = #"{"type":"subscribe","id":\#(idPart),"query":{"table":"todos","filter":\#(filter)}}"#
            guard 3 + nots <= SyncProtocol.maximumNesting else {
                return Case(frame: .text(text), expected: .error(.malformed, id: named), kind: "subscribe nesting \(3 + nots)")
            }
            guard idDecodes else { return Case(frame: .text(text), expected: .error(.malformed, id: nil), kind: "subscribe, id not a string") }
            // The read rule of todos adds a level (an and).
            let fits = nots + 1 <= 20
            return Case(frame: .text(text), expected: answer(id: id, named: named, idRight: idRight, query: Part(json: "", fits: fits)),
                        kind: fits ? "subscribe, deep filter" : "subscribe, filter beyond 20 levels")
        }
        if chance(30) {
            return Case(frame: .text(#"{"type":"subscribe","id":\#(idPart)\#(junk())}"#), expected: .error(.malformed, id: named),
                        kind: "subscribe without query")
        }
        var query = self.query()
        if chance(30) { query = Part(json: pick(["5", "\"todos\"", "[]", "true"]), decodes: false) }
        var resume = ""
        var resumeRight = true
        if chance(10) {
            let (text, right) = pick([(#","resume":{"basis":"b","lsn":"0/0"}"#, true), (#","resume":null"#, true),
                                      (#","resume":{"basis":"b"}"#, false), (#","resume":"0/0""#, false),
                                      (#","resume":{"basis":1,"lsn":"0/0"}"#, false)])
            (resume, resumeRight) = (text, right)
        }
        let text = #"{"type":"subscribe","id":\#(idPart),"query":\#(query.json)\#(resume)\#(junk())}"#
        // The fields in the order the node reads them: id, query, resume.
        if !idDecodes {
            return Case(frame: .text(text), expected: .error(.malformed, id: nil), kind: "subscribe, id not a string")
        }
        if !query.decodes {
            return Case(frame: .text(text), expected: .error(.invalidQuery, id: named), kind: "subscribe, query unreadable")
        }
        if !resumeRight {
            return Case(frame: .text(text), expected: .error(.malformed, id: named), kind: "subscribe, resume unreadable")
        }
        return Case(frame: .text(text), expected: answer(id: id, named: named, idRight: idRight, query: query),
                    kind: query.fits ? "subscribe, query right" : "subscribe, query that does not fit")
    }

    /// The answer to a `subscribe` whose fields the node reads: then `hello` must have come,
    /// the id be 1 to 256 bytes, the query fit, the id be free.
    private func answer(id: String, named: String?, idRight: Bool, query: Part) -> Expected {
        guard helloSaid else { return .error(.outOfOrder, id: nil) }
        guard idRight else { return .error(.malformed, id: nil) }
        guard query.fits else { return .error(.invalidQuery, id: named) }
        return id == Self.held ? .error(.duplicateSubscription, id: id) : .result(id: id)
    }

    private mutating func query() -> Part {
        var table = pick(["todos", "todos", "todos", "tags", "tags", "secrets"])
        var part = Part(json: "{")
        switch Int.random(in: 0..<25, using: &random) {
        case 0: part = part + Part(json: #""table":7"#, decodes: false)
        case 1: part = part + Part(json: #""tabel":"todos""#, decodes: false)
        default: part = part + Part(json: #""table":\#(q(table))"#, fits: table != "secrets")
        }
        if table == "secrets" { table = "todos" }
        let columns = Self.tables[table]!
        if chance(2) { part = part + Part(json: #","filter":"#) + filter(columns, depth: 3) }
        if chance(3) { part = part + Part(json: #","order":"#) + order(columns) }
        if chance(3) { part = part + Part(json: #","limit":"#) + window() }
        if chance(4) { part = part + Part(json: #","offset":"#) + window() }
        if chance(4) { part = part + Part(json: #","columns":"#) + selection(columns) }
        if chance(5) { part = part + Part(json: #","extra":\#(RandomJSON.value(depth: 2, extremes: true, using: &random))"#) }
        part = part + Part(json: "}")
        // The read rule of todos binds the user: one more value.
        let ruleValues = table == "todos" ? 1 : 0
        if part.values + ruleValues > 10_000 { part.fits = false }
        return part
    }

    private mutating func window() -> Part {
        let (text, decodes, fits) = pick([("10", true, true), ("0", true, true), ("-0", true, true), ("1e1", true, true), ("100.0", true, true),
                                          ("9223372036854775807", true, true), ("null", true, true), ("-1", true, false),
                                          ("-1e2", true, false), ("1.5", false, true), ("1e400", false, true), ("-1e400", false, true),
                                          ("9223372036854775808", false, true), ("\"10\"", false, true), ("[10]", false, true),
                                          ("true", false, true), ("1e-400", true, true)])
        return Part(json: text, decodes: decodes, fits: fits)
    }

    private mutating func selection(_ columns: [(String, ColumnType)]) -> Part {
        switch Int.random(in: 0..<6, using: &random) {
        case 0: return Part(json: pick(["\"id\"", "{}", "[1]", "[null]"]), decodes: false)
        case 1: return Part(json: "[]")
        case 2: return Part(json: #"["id","nope"]"#, fits: false)
        default:
            let chosen = (0..<Int.random(in: 1...4, using: &random)).map { _ in pick(columns).0 }
            return Part(json: "[" + chosen.map(q).joined(separator: ",") + "]", fits: Set(chosen).count == chosen.count)
        }
    }

    private mutating func order(_ columns: [(String, ColumnType)]) -> Part {
        if chance(8) { return Part(json: pick(["{}", "\"id\"", "[\"id\"]", "[{\"descending\":true}]"]), decodes: false) }
        var part = Part(json: "[")
        for index in 0..<Int.random(in: 0...3, using: &random) {
            if index > 0 { part = part + Part(json: ",") }
            let name = chance(10) ? "nope" : pick(columns).0
            part = part + Part(json: #"{"column":\#(q(name))"#, fits: name != "nope")
            for flag in ["descending", "nulls_first"] where chance(3) {
                let (value, decodes) = pick([("true", true), ("false", true), ("null", true), ("1", false), ("\"yes\"", false)])
                part = part + Part(json: #","\#(flag)":\#(value)"#, decodes: decodes)
            }
            part = part + Part(json: "}")
        }
        return part + Part(json: "]")
    }

    /// A value for a column of `type`, with whether the node reads it and whether it suits the
    /// column (the page's table of values).
    private mutating func value(for type: ColumnType) -> Part {
        switch Int.random(in: 0..<14, using: &random) {
        case 0: return Part(json: "null")
        case 1: return Part(json: pick(["true", "false"]), fits: type == .bool)
        case 2:
            let number = Int.random(in: -3...50, using: &random)
            return Part(json: String(number), fits: type == .integer || (type == .bool && (number == 0 || number == 1)))
        case 3:
            let (text, whole) = pick([("1e0", 1), ("1.0", 1), ("-0", 0), ("0.0", 0), ("1E+0", 1), ("2e1", 20), ("-0.0", 0)])
            return Part(json: text, fits: type == .integer || (type == .bool && (whole == 0 || whole == 1)))
        case 4: return Part(json: pick(["2.5", "-0.5", "1e-3", "12345678901234567890", "1e300"]), fits: type == .integer)
        case 5: return Part(json: pick(["1e400", "-1e400", "1" + String(repeating: "0", count: 400)]), decodes: false)
        case 6, 7:
            let text = pick(["todo 3", "alice", "bob", "", "home", "todo_1", "é", "e\u{301}", "😀"])
            return Part(json: q(text), fits: type == .text)
        case 8:
            let text = pick(["42", "9007199254740993", "x", "1.5", "99999999999999999999", " 4"])
            return Part(json: q(text), fits: type == .text || (type == .integer && Int64(text) != nil))
        case 9: return Part(json: pick([#""\ud800""#, #""a\udc00""#, #""\ud800\u0041""#]), decodes: false)
        case 10: return Part(json: #""\u00e9\n\t\"\\\/\ud83d\ude00\u0000""#, fits: type == .text)
        case 11: return Part(json: pick(["[]", "[1]", "{}", #"{"user":true}"#]), decodes: false)
        default:
            let number = Int.random(in: 0...40, using: &random)
            return Part(json: String(number), fits: type != .text && (type == .integer || number <= 1))
        }
    }

    private mutating func filter(_ columns: [(String, ColumnType)], depth: Int) -> Part {
        let kind = Int.random(in: 0..<(depth > 0 ? 16 : 12), using: &random)
        if kind >= 12 {
            let connective = pick(["and", "or", "not"])
            if connective == "not" { return Part(json: #"{"not":"#) + filter(columns, depth: depth - 1) + Part(json: "}") }
            if chance(10) { return Part(json: #"{"\#(connective)":\#(pick(["{}", "1", "\"x\""]))}"#, decodes: false) }
            var part = Part(json: #"{"\#(connective)":["#)
            for index in 0..<Int.random(in: 0...3, using: &random) {
                if index > 0 { part = part + Part(json: ",") }
                part = part + filter(columns, depth: depth - 1)
            }
            return part + Part(json: "]}")
        }
        let (column, type) = pick(columns)
        let columnPart = chance(15) ? Part(json: #""column":"nope""#, fits: false) : Part(json: #""column":\#(q(column))"#)
        switch kind {
        case 0: return Part(json: "{") + columnPart + Part(json: #","op":"\#(pick(["is null", "is not null"]))"}"#)
        case 1: return Part(json: #"{"column":5,"op":"is null"}"#, decodes: false)
        case 2: return Part(json: #"{"op":"=","value":1}"#, decodes: false)
        case 3:
            return Part(json: "{") + columnPart + Part(json: #","op":\#(q(pick(["~", "==", "<>", "LIKE", "IN", "is"]))),"value":1}"#, decodes: false)
        case 4:
            return Part(json: "{") + columnPart + Part(json: #","op":"\#(pick(["=", "<"]))"}"#, decodes: false)
        case 5, 6:
            var part = Part(json: "{") + columnPart + Part(json: #","op":"like","value":"#)
            switch Int.random(in: 0..<6, using: &random) {
            case 0: part = part + Part(json: pick(["null", "5", "[\"a\"]"]), decodes: false)
            case 1: part = part + Part(json: q("abc\\"), fits: false, values: 1)
            case 2:
                let length = pick([10_000, 10_001])
                part = part + Part(json: q(String(repeating: "%", count: length)), fits: length <= 10_000, values: 1)
            default: part = part + Part(json: q(pick(["%o%", "todo _", "\\%", "a\\\\", "[*?]", "é%", ""])), values: 1)
            }
            if type != .text { part.fits = false }
            return part + Part(json: "}")
        case 7, 8:
            if chance(8) { return Part(json: "{") + columnPart + Part(json: #","op":"in","values":"x"}"#, decodes: false) }
            var part = Part(json: "{") + columnPart + Part(json: #","op":"in","values":["#)
            if chance(40) {
                // Near the limit of values.
                let count = pick([9_999, 10_000])
                part = part + Part(json: Array(repeating: type == .text ? "\"a\"" : "0", count: count).joined(separator: ","), values: count)
            } else {
                for index in 0..<Int.random(in: 0...4, using: &random) {
                    if index > 0 { part = part + Part(json: ",") }
                    part = part + value(for: type)
                    part.values += 1
                }
            }
            return part + Part(json: "]}")
        default:
            var part = Part(json: "{") + columnPart + Part(json: #","op":\#(q(pick(["=", "!=", "<", "<=", ">", ">="]))),"value":"#)
            part = part + value(for: type)
            part.values += 1
            return part + Part(json: "}")
        }
    }
}
#endif
