import Foundation
@testable import RippleSync
import RippleDiffTesting
import RippleTesting
import Testing

/// The frame reader against Foundation's `JSONSerialization` on random JSON of every shape and
/// on the same texts damaged: both agree on what is JSON, and on what a JSON text means; the
/// server's frames and the clients' messages carrying the text in a field they skip read only
/// when it is JSON. Where the protocol reads on purpose what Foundation refuses (a number
/// beyond a double's range, an unpaired surrogate escape: both are in JSON's grammar), the
/// fuzzer leaves it to ``extremesAreJSONAndReadAsTheProtocolSays()``.
@Suite struct FrameReaderFuzzTests {
    static func foundationReads(_ bytes: [UInt8]) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
    }

    static func tree(_ bytes: [UInt8], depth: Int = 600) throws -> JSONTree { try FrameReader.tree(in: bytes, depth: depth) }

    /// Whether the tree means what Foundation read: numbers by value (as doubles, within 12
    /// digits: Foundation's reading is not always correctly rounded), strings by their
    /// characters' scalars (U+FEFF left out: Foundation drops it inside strings), arrays element
    /// by element, objects member by member (a name written twice is left out of the
    /// comparison: which one a reader keeps is its own).
    static func same(_ tree: JSONTree, _ object: Any) -> Bool {
        func scalars(_ string: String) -> [Unicode.Scalar] { string.unicodeScalars.filter { $0 != "\u{FEFF}" } }
        switch tree {
        case .null: return object is NSNull
        case .bool(let bool):
            if let read = object as? Bool { return read == bool }
            return (object as? NSNumber)?.boolValue == bool
        case .number(let number):
            guard let read = (object as? NSNumber)?.doubleValue ?? (object as? Double) ?? (object as? Int).map(Double.init) else {
                return false
            }
            let value: Double = switch number.value {
            case .integer(let integer): Double(integer)
            case .real(let real): real
            }
            return read == value || abs(read - value) <= 1e-12 * max(abs(read), abs(value))
        case .string(let string):
            guard let read = object as? String else { return false }
            return scalars(read) == scalars(string)
        case .array(let elements):
            guard let read = object as? [Any], read.count == elements.count else { return false }
            return zip(elements, read).allSatisfy { same($0, $1) }
        case .object(let members):
            guard let read = object as? [String: Any] else { return false }
            let byName = Dictionary(read.map { (String(String.UnicodeScalarView(scalars($0.key))), $0.value) }, uniquingKeysWith: { a, _ in a })
            let names = members.map { String(String.UnicodeScalarView(scalars($0.name))) }
            return zip(names, members).allSatisfy { name, member in
                names.filter { $0 == name }.count > 1 || byName[name].map { same(member.value, $0) } == true
            }
        case .unreadable:
            return false
        }
    }

    /// Whether the tree holds what JSON's grammar allows and the protocol reads on purpose,
    /// though Foundation refuses it: an unpaired surrogate escape, a number beyond a double's
    /// range.
    static func holdsExtremes(_ tree: JSONTree) -> Bool {
        switch tree {
        case .unreadable: true
        case .number(let number): if case .real(let real) = number.value { real.isInfinite } else { false }
        case .array(let elements): elements.contains(where: holdsExtremes)
        case .object(let members): members.contains { holdsExtremes($0.value) }
        case .null, .bool, .string: false
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func theReaderAndFoundationAgreeOnWhatIsJSONAndWhatItMeans(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var (valid, invalid, extremes) = (0, 0, 0)
        for number in 0..<1_500 {
            let text = RandomJSON.value(depth: Int.random(in: 0...6, using: &random), using: &random)
            let bytes = Int.random(in: 0..<2, using: &random) == 0 ? Array(text.utf8) : RandomJSON.damaged(text, using: &random)
            let shown = "seed \(seed) case \(number): \(String(decoding: bytes.prefix(300), as: UTF8.self))"
            let foundation = Self.foundationReads(bytes)
            let tree = try? Self.tree(bytes)
            if let tree, Self.holdsExtremes(tree) {
                // JSON's grammar allows it; Foundation refuses it, a client's message ignores
                // it where it ignores the field.
                extremes += 1
                #expect(foundation == nil, "Foundation reads what it refused before: \(shown)")
                let ping = Array(#"{"type":"ping","x":"#.utf8) + bytes + Array("}".utf8)
                #expect((try? ClientMessage.read(json: ping)) == .ping, "a ping skipping it: \(shown)")
                continue
            }
            #expect((tree != nil) == (foundation != nil), "JSON or not: \(shown) — reader \(tree == nil ? "refuses" : "reads"), Foundation \(foundation == nil ? "refuses" : "reads")")
            if let tree, let foundation {
                valid += 1
                #expect(Self.same(tree, foundation), "meaning: \(shown) — reader \(tree), Foundation \(foundation)")
            } else {
                invalid += 1
            }
            // In a field the server's frame and the client's message do not define.
            let pong = Array(#"{"type":"pong","lsn":"0/0","x":"#.utf8) + bytes + Array("}".utf8)
            let serverRead = try? ServerMessage(json: pong)
            #expect((serverRead == .pong(lsn: "0/0")) == (foundation != nil), "a pong skipping it: \(shown)")
            let ping = Array(#"{"type":"ping","x":"#.utf8) + bytes + Array("}".utf8)
            let clientRead = Result { () throws(ClientMessageRefusal) -> ClientMessage in try ClientMessage.read(json: ping) }
            switch clientRead {
            case .success(let message): #expect(message == .ping && foundation != nil, "a ping skipping it: \(shown)")
            case .failure(let refusal):
                #expect(refusal.code == .malformed && refusal.id == nil && foundation == nil, "a ping skipping it: \(shown) — \(refusal)")
            }
        }
        // The fuzzer reaches both sides.
        #expect(valid > 300 && invalid > 300, "seed \(seed): \(valid) JSON texts, \(invalid) others, \(extremes) extremes")
    }

    /// What JSON's grammar allows but a double or a string cannot hold is still JSON to the
    /// reader: a frame around it is read, and the value itself says why it is no value.
    @Test func extremesAreJSONAndReadAsTheProtocolSays() throws {
        for number in ["1e400", "-1e400", "1e309", "1" + String(repeating: "0", count: 400)] {
            guard case .number(let read) = try Self.tree(Array(number.utf8)), case .real(let real) = read.value else {
                Issue.record("\(number) is not a number to the reader")
                continue
            }
            #expect(real.isInfinite && read.text == number)
            #expect(try ServerMessage(json: Array(#"{"type":"pong","lsn":"0/0","x":\#(number)}"#.utf8)) == .pong(lsn: "0/0"))
        }
        for string in [#""\ud800""#, #""\uDFFF""#, #""\ud800\u0041""#, #""\udc00\ud800""#, #""a\ud800b""#] {
            guard case .unreadable(let reason) = try Self.tree(Array(string.utf8)) else {
                Issue.record("\(string) is not unreadable")
                continue
            }
            #expect(reason.contains("surrogate"))
            #expect(throws: SyncFrameError.self, "a server frame never holds one: \(string)") {
                try ServerMessage(json: Array(#"{"type":"pong","lsn":\#(string)}"#.utf8))
            }
        }
        // Nesting: as deep as the text goes, on the reader's own stack.
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        guard case .array(let outer) = try Self.tree(Array(deep.utf8), depth: 64) else { Issue.record("not an array"); return }
        var level = outer
        var depth = 1
        while case .array(let inner)? = level.first {
            level = inner
            depth += 1
        }
        #expect(depth == 64 && level.first == .unreadable(reason: "arrays and objects nested deeper than 64"))
        #expect(throws: SyncFrameError.self) { try Self.tree(Array(String(repeating: "[", count: 100_000).utf8)) }
    }
}
