import Foundation
import RippleDiffTesting
import RippleSync
import Testing

/// The fast reader of server frames (`ServerMessage(json:)`) against two oracles, on seeded
/// random messages: the message the server wrote (read back exactly, to the bit of every
/// `Double`), and Foundation's `JSONDecoder` (equal, once every number is seen as a `Double`:
/// `JSONDecoder` reads `1.0` as an integer). Each message is read as `ServerMessage.json` writes it and as scrambled, still valid
/// JSON of the same meaning; malformed frames are refused with the place and what was expected.
@Suite struct FrameReaderTests {
    // MARK: Oracles

    /// What a frame means, read by the fast reader: the message itself, except that ±Infinity
    /// and NaN, which JSON cannot spell, travel as strings.
    static func meaning(_ message: ServerMessage) -> ServerMessage {
        message.mappingValues { value in
            guard case .real(let real) = value, !real.isFinite else { return value }
            return .text(real.isNaN ? "NaN" : real > 0 ? "Infinity" : "-Infinity")
        }
    }

    /// A message with every integer as the nearest `Double`, to compare with what `JSONDecoder`
    /// reads: `WireValue`'s `Decodable` tries `Int64` before `Double`, and `JSONDecoder` reads
    /// a number with a fraction or an exponent as `Int64` when the decimal or the `Double` it
    /// names is whole (`1.0`, `1e22`, `1.1967236201487749e+17` as 119672362014877490).
    static func asNumbers(_ message: ServerMessage) -> ServerMessage {
        message.mappingValues { value in
            guard case .integer(let integer) = value else { return value }
            return .real(Double(integer))
        }
    }

    static func decodedByFoundation(_ bytes: [UInt8]) throws -> ServerMessage {
        try JSONDecoder().decode(ServerMessage.self, from: Data(bytes))
    }

    /// Reads `bytes` with both readers and checks each against the message they were made from.
    static func expectBothRead(_ bytes: [UInt8], as message: ServerMessage, seed: UInt64, case number: Int) throws {
        let text = String(decoding: bytes, as: UTF8.self)
        let fast = try ServerMessage(json: bytes)
        #expect(fast == meaning(message), "seed \(seed) case \(number): \(text)")
        #expect(fast.json == message.json, "seed \(seed) case \(number), every value to the bit: \(text)")
        let foundation = try decodedByFoundation(bytes)
        #expect(asNumbers(fast) == asNumbers(foundation), "seed \(seed) case \(number): \(text)")
    }

    // MARK: Random messages

    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func randomMessagesReadAsWrittenAndAsJSONDecoderReadsThem(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for number in 0..<400 {
            let message = RandomMessages.message(&random)
            let written = message.json
            try Self.expectBothRead(written, as: message, seed: seed, case: number)
            var scrambler = Scrambler(random: SeededGenerator(seed: random.next()))
            for _ in 0..<2 {
                try Self.expectBothRead(Array(scrambler.message(message).utf8), as: message, seed: seed, case: number)
            }
        }
    }

    @Test(arguments: [11, 12, 13] as [UInt64])
    func everyTruncatedFrameAndEveryFrameWithTrailingGarbageIsRefused(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for number in 0..<300 {
            let message = RandomMessages.message(&random)
            let written = message.json
            for _ in 0..<4 {
                let cut = Int.random(in: 0..<written.count, using: &random)
                #expect(throws: SyncFrameError.self, "seed \(seed) case \(number) cut at \(cut)") {
                    try ServerMessage(json: written[..<cut])
                }
            }
            let garbage = ["x", "}", ",", "0", "\"", "{}", "null", "\u{0}", "\u{FEFF}"].randomElement(using: &random)!
            let bytes = written + Array(garbage.utf8)
            #expect(throws: SyncFrameError.self, "seed \(seed) case \(number) + \(garbage)") { try ServerMessage(json: bytes) }
            #expect(throws: (any Error).self) { try Self.decodedByFoundation(bytes) }
        }
    }

    // MARK: Golden frames

    @Test func theGoldenFramesReadAsTheirMessages() throws {
        for (name, message) in GoldenFrameTests.serverMessages {
            let golden = try #require(GoldenFrameTests.golden[name], "no golden line \(name)")
            #expect(try ServerMessage(json: golden.utf8) == message, "\(name)")
            #expect(try ServerMessage(json: Array(golden.utf8)) == message, "\(name)")
            #expect(try ServerMessage(json: Data(golden.utf8)) == message, "\(name)")
            #expect(try ServerMessage(json: golden.utf8.lazy.map { $0 }) == message, "\(name): bytes without contiguous storage")
        }
    }

    // MARK: Numbers

    /// Integers within `Int64` as `.integer`; everything else as `Double(String)` reads it.
    static func expectedNumber(_ text: String) -> WireValue {
        if !text.contains(where: { ".eE".contains($0) }), let integer = Int64(text) { return .integer(integer) }
        return .real(Double(text)!)
    }

    static func readNumber(_ text: String) throws -> WireValue {
        let bytes = Array("[\(text)]".utf8)
        let values = try bytes.withUnsafeBufferPointer { buffer throws(SyncFrameError) in try FrameReader.values(in: buffer) }
        return values[0]
    }

    static func sameBits(_ a: WireValue, _ b: WireValue) -> Bool {
        switch (a, b) {
        case (.real(let x), .real(let y)): x.bitPattern == y.bitPattern
        default: a == b
        }
    }

    @Test(arguments: [
        "0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "99999999999999999999", "123456789012345678901234567890",
        "9007199254740992", "9007199254740993", "9007199254740993.0", "9007199254740993e0",
        "0.0", "-0.0", "0e0", "-0e-5", "0.1", "0.2", "0.3", "1.0", "1e0", "1E+2", "1e-2", "2.5E-3", "1e22", "1e23", "1e-22",
        "1e-300", "1e-320", "5e-324", "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
        "2.2250738585072011e-308", "2.2250738585072014e-308", "1.7976931348623157e308", "1.7976931348623158e308",
        "1.7976931348623159e308", "1e309", "1e400", "-1e400", "1e-400", "1e100000000000", "1e-100000000000",
        "0.000000000000000000000000000001", "1000000000000000000000000000000.5", "3.141592653589793", "123456.789",
        "0.1000000000000000055511151231257827021181583404541015625", "7.2057594037927933e16", "9.223372036854775807e18",
        "1" + String(repeating: "0", count: 400), "0." + String(repeating: "0", count: 400) + "1",
        "4." + String(repeating: "9", count: 800),
    ])
    func numbersReadAsDoubleOfStringReadsThem(text: String) throws {
        let read = try Self.readNumber(text)
        #expect(Self.sameBits(read, Self.expectedNumber(text)), "\(text) read as \(read)")
    }

    @Test(arguments: [21, 22, 23] as [UInt64])
    func randomDecimalsReadAsDoubleOfStringReadsThem(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for _ in 0..<5_000 {
            let text: String
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                // A double's shortest form, or its digits spelled another way.
                var double: Double
                repeat { double = Double(bitPattern: random.next()) } while !double.isFinite
                text = Scrambler.spellings(of: double).randomElement(using: &random)!
            case 1:
                text = String(Int64.random(in: .min ... .max, using: &random))
            default:
                let digits = (0..<Int.random(in: 1...24, using: &random)).map { _ in String(Int.random(in: 0...9, using: &random)) }
                var mantissa = digits.joined().drop { $0 == "0" }
                if mantissa.isEmpty { mantissa = "0" }
                if Bool.random(using: &random) {
                    let point = Int.random(in: 1...mantissa.count, using: &random)
                    let index = mantissa.index(mantissa.startIndex, offsetBy: point)
                    mantissa = mantissa[..<index] + "." + (index == mantissa.endIndex ? "0" : mantissa[index...])
                }
                let exponent = Bool.random(using: &random) ? "e\(Int.random(in: -340...320, using: &random))" : ""
                text = (Bool.random(using: &random) ? "-" : "") + mantissa + exponent
            }
            let read = try Self.readNumber(text)
            #expect(Self.sameBits(read, Self.expectedNumber(text)), "seed \(seed): \(text) read as \(read)")
        }
    }

    @Test func wholeNumbersWithAFractionOrAnExponentReadAsIntegersInIntegerFields() throws {
        let frame = #"{"type":"welcome","protocol":1.0,"user":"u","lsn":"0/0","heartbeat_ms":5e3,"max_subscriptions":0.1e3,"#
            + #""max_message_bytes":262144}"#
        let expected = ServerMessage.welcome(.init(protocol: 1, user: "u", lsn: "0/0", heartbeatMilliseconds: 5000,
                                                   maxSubscriptions: 100, maxMessageBytes: 262_144))
        #expect(try ServerMessage(json: frame.utf8) == expected)
        #expect(try Self.decodedByFoundation(Array(frame.utf8)) == expected)
    }

    // MARK: Strings, keys and shapes

    @Test func escapesReadAsTheirCharacters() throws {
        let frame = #"{"type":"pong","lsn":"\"\\\/\b\f\n\r\t\u0000\u001f\u00e9\u4E2D\uD83D\uDE00\uDBFF\uDFFF\uFEFF/é😀"}"#
        #expect(try ServerMessage(json: frame.utf8) == .pong(lsn: "\"\\/\u{8}\u{C}\n\r\t\u{0}\u{1F}é中😀\u{10FFFF}\u{FEFF}/é😀"))
    }

    @Test func keysMayBeEscapedAndInAnyOrderAndUnknownOnesAreSkipped() throws {
        let frame = """
             \t{ "x": {"type": "welcome", "lsn": [1, {"a": null}], "k": "\\u00e9"}, "lsn" :"0/1",\r\n
              "snapshots": null, "\\u0074ype": "changes", "changesets": {"s": {"moves": [[1, 2]], "extra": [[[]]]}},
              "id": 7 }\n
            """
        let expected = ServerMessage.changes(lsn: "0/1", snapshots: [:], changesets: ["s": WireChangeset(moves: [.init(old: 1, new: 2)])])
        #expect(try ServerMessage(json: frame.utf8) == expected)
        #expect(try Self.decodedByFoundation(Array(frame.utf8)) == expected)
    }

    @Test func aKeyWrittenTwiceCountsTheFirstTimeAsJSONDecoderReadsIt() throws {
        let frames = [
            #"{"type":"pong","lsn":"a","lsn":"b"}"#,
            #"{"lsn":"a","type":"pong","lsn":"b"}"#,
            #"{"lsn":"a","lsn":"b","type":"pong","type":"heartbeat"}"#,
        ]
        for frame in frames {
            #expect(try ServerMessage(json: frame.utf8) == .pong(lsn: "a"), "\(frame)")
            #expect(try Self.decodedByFoundation(Array(frame.utf8)) == .pong(lsn: "a"), "\(frame)")
        }
        let snapshots = #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[]},"s":5}}"#
        #expect(try ServerMessage(json: snapshots.utf8)
            == .changes(lsn: "1", snapshots: ["s": WireSnapshot(basis: "b", columns: [], types: [], key: [], rows: [])], changesets: [:]))
    }

    @Test func aChangesetMayLeaveOutItsEmptyLists() throws {
        let frame = #"{"type":"changes","lsn":"1","changesets":{"a":{},"b":{"updates":[[0,1,{"2":true,"10":-0.0}]]},"c":{"deletes":null}}}"#
        let expected = ServerMessage.changes(lsn: "1", snapshots: [:], changesets: [
            "a": WireChangeset(), "b": WireChangeset(updates: [.init(old: 0, new: 1, columns: [2: .bool(true), 10: .real(-0.0)])]),
            "c": WireChangeset(),
        ])
        let read = try ServerMessage(json: frame.utf8)
        #expect(read == expected)
        #expect(Self.asNumbers(try Self.decodedByFoundation(Array(frame.utf8))) == Self.asNumbers(expected))
        guard case .changes(_, _, let changesets) = read, case .real(let zero)? = changesets["b"]?.updates.first?.columns[10] else {
            Issue.record("not the changes read")
            return
        }
        #expect(zero.sign == .minus)
    }

    @Test func aByteOrderMarkAtTheStartIsSkipped() throws {
        #expect(try ServerMessage(json: [0xEF, 0xBB, 0xBF] + Array(#"{"type":"pong","lsn":"0/0"}"#.utf8)) == .pong(lsn: "0/0"))
    }

    @Test func unknownValuesMayNestAsDeepAsJSONDecoderAllows() throws {
        func frame(depth: Int) -> String {
            #"{"type":"pong","lsn":"0/0","x":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}"
        }
        #expect(try ServerMessage(json: frame(depth: 511).utf8) == .pong(lsn: "0/0"))
        #expect(throws: SyncFrameError.self) { try ServerMessage(json: frame(depth: 100_000).utf8) }
    }

    // MARK: Malformed frames

    /// Frames that are not server messages, and whether `JSONDecoder` refuses them too (it
    /// accepts a trailing comma; bad escapes, numbers and UTF-8 in a value it skips; and an
    /// insert, move or update with more elements than it reads).
    static let malformed: [(frame: [UInt8], foundationRefuses: Bool)] = [
        "", " ", "[]", "null", "\"pong\"", "{", "{}", "{\"type\"}", "{\"type\":}", "{\"type\" \"pong\"}",
        #"{"type":"nope","lsn":"1"}"#, #"{"type":5,"lsn":"1"}"#, #"{"type":"heartbeat"}"#, #"{"type":"heartbeat","lsn":5}"#,
        #"{"type":"heartbeat","lsn":null}"#, #"{"type":"heartbeat","lsn":"x"} x"#, #"{"type":"heartbeat","lsn":"x"}}"#,
        #"{"type":"heartbeat","lsn":"x" "id":"y"}"#, #"{'type':'pong','lsn':'x'}"#,
        #"{type:"pong","lsn":"x"}"#, #"{"type":"pong","lsn":"\x"}"#, #"{"type":"pong","lsn":"\u12"}"#,
        #"{"type":"pong","lsn":"\u12G4"}"#, #"{"type":"pong","lsn":"\uD800"}"#, #"{"type":"pong","lsn":"\uD800\u0041"}"#,
        #"{"type":"pong","lsn":"\uDC00\uD800"}"#, #"{"type":"pong","lsn":"\uD800x"}"#, #"{"type":"pong","lsn":"a"#,
        "{\"type\":\"pong\",\"lsn\":\"a\tb\"}", "{\"type\":\"pong\",\"lsn\":\"a\u{0}\"}", "{\"type\":\"pong\",\"lsn\":\"a\u{1F}\"}",
        #"{"type":"pong","lsn":"x","extra":tru}"#, #"{"type":"pong","lsn":"x","extra":nul}"#, #"{"type":"pong","lsn":"x","extra":True}"#,
        #"{"type":"pong","lsn":"x","extra":{"a"}}"#, #"{"type":"pong","lsn":"x","extra":{1:2}}"#,
        #"{"type":"welcome","protocol":"1","user":"u","lsn":"0","heartbeat_ms":1,"max_subscriptions":1,"max_message_bytes":1}"#,
        #"{"type":"welcome","protocol":1.5,"user":"u","lsn":"0","heartbeat_ms":1,"max_subscriptions":1,"max_message_bytes":1}"#,
        #"{"type":"welcome","protocol":1e400,"user":"u","lsn":"0","heartbeat_ms":1,"max_subscriptions":1,"max_message_bytes":1}"#,
        #"{"type":"welcome","protocol":9223372036854775808,"user":"u","lsn":"0","heartbeat_ms":1,"max_subscriptions":1,"max_message_bytes":1}"#,
        #"{"type":"welcome","protocol":1,"user":"u","lsn":"0","heartbeat_ms":1,"max_subscriptions":1}"#,
        #"{"type":"error","code":1,"message":"m"}"#, #"{"type":"error","code":"internal"}"#, #"{"type":"error","code":"internal","message":"m","id":5}"#,
        #"{"type":"changes"}"#, #"{"type":"changes","lsn":"1","snapshots":[]}"#, #"{"type":"changes","lsn":"1","snapshots":{"s":null}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[1],"types":[],"key":[],"rows":[]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":["0"],"rows":[]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[0.5],"rows":[]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":{}}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[1]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[[1]]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[{}]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[NaN]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[-]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[1.]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[.5]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[+1]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[1e]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[1e+]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[0x10]]}}}"#,
        #"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[[1 2]]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":[]}}"#, #"{"type":"changes","lsn":"1","changesets":{"c":{"deletes":["1"]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"inserts":[[0]]}}}"#, #"{"type":"changes","lsn":"1","changesets":{"c":{"inserts":[[0,1]]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"moves":[[0]]}}}"#, #"{"type":"changes","lsn":"1","changesets":{"c":{"moves":[0,1]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"updates":[[0,1]]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"updates":[[0,1,{"a":1}]]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"updates":[[0,1,{"-1":1}]]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"updates":[[0,1,{"1":[]}]]}}}"#,
    ].map { (Array($0.utf8), true) } + [
        #"{"type":"heartbeat","lsn":"x",}"#, #"{"type":"pong","lsn":"x","extra":[1,]}"#, #"{"type":"pong","lsn":"x","extra":"\q"}"#,
        #"{"type":"pong","lsn":"x","extra":[01]}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"inserts":[[0,[1],2]]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"moves":[[0,1,2]]}}}"#,
        #"{"type":"changes","lsn":"1","changesets":{"c":{"updates":[[0,1,{},3]]}}}"#,
    ].map { (Array($0.utf8), false) } + [
        [0xFF], Array(#"{"type":"pong","lsn":""#.utf8) + [0xFF, 0x22, 0x7D],
        Array(#"{"type":"pong","lsn":""#.utf8) + [0xC0, 0xAF, 0x22, 0x7D],
        Array(#"{"type":"pong","lsn":""#.utf8) + [0xED, 0xA0, 0x80, 0x22, 0x7D],
        Array(#"{"type":"pong","lsn":"\n"#.utf8) + [0xF4, 0x90, 0x80, 0x80, 0x22, 0x7D],
        Array(#"{"type":"pong","lsn":"x"}"#.utf8) + [0xC3, 0xA9],
    ].map { ($0, true) } + [
        Array(#"{"type":"pong","lsn":"x","extra":""#.utf8) + [0xE2, 0x82, 0x22, 0x7D],
        Array(#"{"type":"pong","lsn":"x","extra":"\t"#.utf8) + [0x80, 0x22, 0x7D],
    ].map { ($0, false) }

    @Test func malformedFramesAreRefusedSayingWhereAndWhatWasExpected() throws {
        for (frame, foundationRefuses) in Self.malformed {
            let text = String(decoding: frame, as: UTF8.self)
            do {
                let message = try ServerMessage(json: frame)
                Issue.record("\(text) read as \(message)")
            } catch {
                #expect(error.offset >= 0 && error.offset <= frame.count, "\(text): \(error)")
                #expect(error.description.hasPrefix("the frame is not a server message: at byte \(error.offset), "), "\(text): \(error)")
            }
            if foundationRefuses {
                #expect(throws: (any Error).self, "\(text)") { try Self.decodedByFoundation(frame) }
            }
        }
    }

    @Test(arguments: [
        (#"{"type":"heartbeat","lsn":5}"#, "at byte 26, expected a string for `lsn`, found a number"),
        (#"{"type":"nope"}"#, #"at byte 8, unknown message type "nope""#),
        (#"{"lsn":"1"}"#, "at byte 0, the message has no `type`"),
        (#"{"type":"pong"}"#, "at byte 0, the pong message has no `lsn`"),
        (#"{"type":"pong","lsn":"1"} x"#, "at byte 26, expected the end of the frame, found 'x'"),
        (#"{"type":"pong","lsn":"1""#, "at byte 24, expected ',' or '}' after a member of the message, found the end of the frame"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"rows":[[1,[2]]]}}}"#,
         "at byte 57, expected a value (null, true, false, a number or a string), found an array"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"rows":[[1 2]]}}}"#, "at byte 57, expected ',' or ']' after an element of a row, found a number"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"rows":[]}}}"#, "at byte 45, the snapshot has no `basis`"),
        (#"{"type":"pong","lsn":"\uD800"}"#, #"at byte 28, expected \u and a low surrogate after the high surrogate \uD800, found '"'"#),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"updates":[[0,1,{"x":1}]]}}}"#,
         #"at byte 64, expected a column position (a decimal string), found "x""#),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"moves":[[0]]}}}"#, "at byte 58, expected ',' in a move ([old, new]), found ']'"),
    ])
    func errorsSayWhereAndWhat(frame: String, description: String) {
        #expect(throws: SyncFrameError.self) { try ServerMessage(json: frame.utf8) }
        do {
            _ = try ServerMessage(json: frame.utf8)
        } catch {
            #expect(error.description == "the frame is not a server message: " + description)
        }
    }
}

extension ServerMessage {
    /// The message with every value of its rows and updates replaced by `transform`'s.
    func mappingValues(_ transform: (WireValue) -> WireValue) -> ServerMessage {
        guard case .changes(let lsn, let snapshots, let changesets) = self else { return self }
        return .changes(
            lsn: lsn,
            snapshots: snapshots.mapValues { snapshot in
                var snapshot = snapshot
                snapshot.rows = snapshot.rows.map { $0.map(transform) }
                snapshot.included = snapshot.included?.mapValues { included in
                    var included = included
                    included.rows = included.rows.map { $0.map(transform) }
                    return included
                }
                return snapshot
            },
            changesets: changesets.mapValues { changeset in
                var changeset = changeset
                changeset.inserts = changeset.inserts.map { .init(index: $0.index, row: $0.row.map(transform)) }
                changeset.updates = changeset.updates.map { .init(old: $0.old, new: $0.new, columns: $0.columns.mapValues(transform)) }
                changeset.included = changeset.included?.mapValues { change in
                    switch change {
                    case .keyed(let keyed):
                        return .keyed(WireKeyedChange(puts: keyed.puts.map { $0.mapValues(transform) },
                                                      deletes: keyed.deletes.map { $0.map(transform) }))
                    case .sectioned(var sectioned):
                        sectioned.inserts = sectioned.inserts.map { .init(path: $0.path, row: $0.row.map(transform)) }
                        sectioned.updates = sectioned.updates.map { .init(old: $0.old, new: $0.new, columns: $0.columns.mapValues(transform)) }
                        return .sectioned(sectioned)
                    }
                }
                return changeset
            })
    }
}

/// Random server messages that reach the awkward corners: strings with quotes, backslashes,
/// control characters, NUL, combining marks and emoji; integers at Int64's ends; doubles at
/// Double's ends, negative zero, and the non-finite ones JSON cannot spell.
enum RandomMessages {
    static let pieces: [String] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{8}", "\u{C}", "\u{1F}", "\u{7F}", "é", "e\u{301}",
        "ß", "中", "\u{2028}", "\u{FEFF}", "\u{FFFF}", "\u{E000}", "😀", "👨‍👩‍👧", "🇫🇷", "\u{10FFFF}", "{", "}", "[", "]", ":", ",",
        "true", "null", "1e5", "\\u0041", "\\\"", "type",
    ]

    static func string(_ random: inout SeededGenerator) -> String {
        if Int.random(in: 0..<8, using: &random) == 0 {
            return String((0..<Int.random(in: 16...40, using: &random)).map { _ in "abcdefghij klmnop:".randomElement(using: &random)! })
        }
        return (0..<Int.random(in: 0...8, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
    }

    static let integers: [Int64] = [
        0, 1, -1, 42, .max, .min, .max - 1, .min + 1, 9_007_199_254_740_992, 9_007_199_254_740_993, -9_007_199_254_740_993,
        1_000_000_000_000_000_000,
    ]

    static let reals: [Double] = [
        0.1, 0.2, 0.3, 1e-300, -0.0, 0.0, 1.7976931348623157e308, -1.7976931348623157e308, .leastNonzeroMagnitude,
        -.leastNonzeroMagnitude, .leastNormalMagnitude, Double.leastNormalMagnitude.nextDown, 1.0, -1.0, 100.0, 1e22, 1e23, 9_007_199_254_740_993.0, 123456.789, 1.5,
        .pi, 1e16, 9.223372036854776e18, -9.223372036854776e18, 1.8446744073709552e19, .infinity, -.infinity, .nan,
    ]

    static func value(_ random: inout SeededGenerator) -> WireValue {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .integer(integers.randomElement(using: &random)!)
        case 3: return .integer(Int64.random(in: .min ... .max, using: &random))
        case 4: return .integer(Int64.random(in: -1000...1000, using: &random))
        case 5: return .real(reals.randomElement(using: &random)!)
        case 6: return .real(Double(bitPattern: random.next()))
        case 7: return .real(Double(Int.random(in: -100_000...100_000, using: &random)) / 100)
        default: return .text(string(&random))
        }
    }

    static func row(_ count: Int, _ random: inout SeededGenerator) -> [WireValue] { (0..<count).map { _ in value(&random) } }

    static func int(_ random: inout SeededGenerator) -> Int {
        Bool.random(using: &random) ? Int.random(in: 0...1000, using: &random) : Int(integers.randomElement(using: &random)!)
    }

    static func snapshot(_ random: inout SeededGenerator) -> WireSnapshot {
        let columns = Int.random(in: 0...6, using: &random)
        var snapshot = WireSnapshot(basis: string(&random), columns: (0..<columns).map { _ in string(&random) },
                                    types: (0..<columns).map { _ in ["int8", "text", "bool", "float8", "numeric"].randomElement(using: &random)! },
                                    key: (0..<Int.random(in: 0...2, using: &random)).map { _ in int(&random) },
                                    rows: (0..<Int.random(in: 0...8, using: &random)).map { _ in row(columns, &random) })
        if Int.random(in: 0..<3, using: &random) == 0 {
            var included: [String: WireIncludedSnapshot] = [:]
            for _ in 0..<Int.random(in: 1...3, using: &random) { included[string(&random)] = includedSnapshot(&random) }
            snapshot.included = included
        }
        return snapshot
    }

    /// An include's rows: a keyed set, or a sectioned list whose counts add up to its rows.
    static func includedSnapshot(_ random: inout SeededGenerator) -> WireIncludedSnapshot {
        let columns = Int.random(in: 1...4, using: &random)
        let rows = (0..<Int.random(in: 0...6, using: &random)).map { _ in row(columns, &random) }
        var counts: [Int]?
        if Bool.random(using: &random) {
            var left = rows.count
            var parts: [Int] = []
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                let part = Int.random(in: 0...left, using: &random)
                parts.append(part)
                left -= part
            }
            if left > 0 || parts.isEmpty { parts.append(left) }
            counts = parts
        }
        return WireIncludedSnapshot(columns: (0..<columns).map { _ in string(&random) },
                                    types: (0..<columns).map { _ in ["int8", "text", "uuid"].randomElement(using: &random)! },
                                    key: [Int.random(in: 0..<columns, using: &random)], rows: rows, counts: counts)
    }

    /// A place in a sectioned list (never below 0).
    static func path(_ random: inout SeededGenerator) -> WirePath {
        func index() -> Int { Bool.random(using: &random) ? Int.random(in: 0...50, using: &random) : Int(int(&random).magnitude & 0xFFFF_FFFF) }
        return WirePath(section: index(), item: index())
    }

    static func columns(_ random: inout SeededGenerator) -> [Int: WireValue] {
        var columns: [Int: WireValue] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &random) { columns[Int.random(in: 0..<20, using: &random)] = value(&random) }
        return columns
    }

    /// An include's change that is not empty: a keyed set's puts and deletes, or a sectioned
    /// list's changes.
    static func includedChange(_ random: inout SeededGenerator) -> WireIncludedChange {
        func some<Item>(_ make: (inout SeededGenerator) -> Item) -> [Item] {
            Int.random(in: 0..<3, using: &random) == 0 ? [] : (0..<Int.random(in: 1...3, using: &random)).map { _ in make(&random) }
        }
        if Bool.random(using: &random) {
            var keyed = WireKeyedChange(puts: some { columns(&$0) }, deletes: some { row(Int.random(in: 1...2, using: &$0), &$0) })
            if keyed.isEmpty { keyed.deletes = [[value(&random)]] }
            return .keyed(keyed)
        }
        var sectioned = WireSectionedChangeset(
            deletes: some { path(&$0) },
            inserts: some { .init(path: path(&$0), row: row(Int.random(in: 0...4, using: &$0), &$0)) },
            moves: some { .init(old: path(&$0), new: path(&$0)) },
            updates: some { .init(old: path(&$0), new: path(&$0), columns: columns(&$0)) })
        if sectioned.isEmpty { sectioned.moves = [.init(old: path(&random), new: path(&random))] }
        return .sectioned(sectioned)
    }

    static func changeset(_ random: inout SeededGenerator) -> WireChangeset {
        func some<Item>(_ make: (inout SeededGenerator) -> Item) -> [Item] {
            Int.random(in: 0..<3, using: &random) == 0 ? [] : (0..<Int.random(in: 1...4, using: &random)).map { _ in make(&random) }
        }
        return WireChangeset(
            deletes: some { int(&$0) },
            inserts: some { .init(index: int(&$0), row: row(Int.random(in: 0...5, using: &$0), &$0)) },
            moves: some { .init(old: int(&$0), new: int(&$0)) },
            updates: some { random in
                var columns: [Int: WireValue] = [:]
                for _ in 0..<Int.random(in: 0...4, using: &random) {
                    columns[Bool.random(using: &random) ? Int.random(in: 0..<20, using: &random) : int(&random).magnitude.hashValue & 0xFFFF] = value(&random)
                }
                return .init(old: int(&random), new: int(&random), columns: columns)
            },
            included: Int.random(in: 0..<3, using: &random) > 0 ? nil
                : Dictionary((0..<Int.random(in: 1...3, using: &random)).map { _ in (string(&random), includedChange(&random)) }) { first, _ in first })
    }

    static func message(_ random: inout SeededGenerator) -> ServerMessage {
        switch Int.random(in: 0..<11, using: &random) {
        case 0:
            return .welcome(.init(protocol: int(&random), user: string(&random), lsn: string(&random), heartbeatMilliseconds: int(&random),
                                  maxSubscriptions: int(&random), maxMessageBytes: int(&random),
                                  client: Bool.random(using: &random) ? string(&random) : nil,
                                  lastMutation: Bool.random(using: &random) ? Int64(int(&random)) : nil))
        case 4:
            return .pushed(results: (0..<Int.random(in: 0...3, using: &random)).map { _ in
                MutationResult(id: Int64(int(&random)), status: Bool.random(using: &random) ? .applied : .rejected,
                               code: Bool.random(using: &random) ? string(&random) : nil,
                               constraint: Bool.random(using: &random) ? string(&random) : nil,
                               message: Bool.random(using: &random) ? string(&random) : nil,
                               lsn: Bool.random(using: &random) ? string(&random) : nil)
            })
        case 1: return .heartbeat(lsn: string(&random))
        case 2: return .pong(lsn: string(&random))
        case 3:
            return .error(code: SyncErrorCode.allCases.randomElement(using: &random)!, message: string(&random),
                          id: Bool.random(using: &random) ? string(&random) : nil)
        default:
            var snapshots: [String: WireSnapshot] = [:]
            for _ in 0..<Int.random(in: 0...3, using: &random) { snapshots[string(&random)] = snapshot(&random) }
            var changesets: [String: WireChangeset] = [:]
            for _ in 0..<Int.random(in: 0...3, using: &random) { changesets[string(&random)] = changeset(&random) }
            return .changes(lsn: string(&random), snapshots: snapshots, changesets: changesets)
        }
    }
}

/// Writes a message as valid JSON of the same meaning, differently from the server: whitespace
/// anywhere, members in random order, unknown members (nested values of every kind), escapes
/// where none are needed (`\u` for any character, surrogate pairs for emoji, `\/`), numbers
/// spelled other ways (`1.0` as `10e-1`, an integer field `5` as `5.0`), empty lists and
/// absent fields left out or written as `null`.
struct Scrambler {
    var random: SeededGenerator

    mutating func chance(_ oneIn: Int) -> Bool { Int.random(in: 0..<oneIn, using: &random) == 0 }

    mutating func space() -> String {
        guard chance(3) else { return "" }
        return (0..<Int.random(in: 1...3, using: &random)).map { _ in [" ", "\n", "\t", "\r", "  "].randomElement(using: &random)! }.joined()
    }

    /// An object of `members`; `unknown`: with members the reader must skip, sometimes.
    mutating func object(_ members: [(String, String)], unknown: Bool = false) -> String {
        var members = members
        for _ in 0..<(unknown && chance(3) ? Int.random(in: 1...2, using: &random) : 0) {
            members.append(("_" + RandomMessages.string(&random), unknownValue(depth: 0)))
        }
        members.shuffle(using: &random)
        var parts: [String] = []
        for (name, value) in members {
            parts.append(space() + string(name) + space() + ":" + space() + value + space())
        }
        return "{" + space() + parts.joined(separator: ",") + "}"
    }

    mutating func array(_ elements: [String]) -> String {
        "[" + space() + elements.map { $0 + space() }.joined(separator: "," + space()) + "]"
    }

    mutating func string(_ text: String) -> String {
        let escapeOneIn = [1, 3, 1000].randomElement(using: &random)!
        var out = "\""
        for scalar in text.unicodeScalars {
            let escape = chance(escapeOneIn)
            switch scalar {
            case "\"": out += escape ? hexEscape(scalar.value) : "\\\""
            case "\\": out += escape ? hexEscape(scalar.value) : "\\\\"
            case "/": out += escape ? "\\/" : "/"
            case "\u{8}": out += escape ? hexEscape(8) : "\\b"
            case "\u{C}": out += escape ? hexEscape(12) : "\\f"
            case "\n": out += escape ? hexEscape(10) : "\\n"
            case "\r": out += escape ? hexEscape(13) : "\\r"
            case "\t": out += escape ? hexEscape(9) : "\\t"
            case "\u{0}"..."\u{1F}": out += hexEscape(scalar.value)
            default:
                if !escape {
                    out.unicodeScalars.append(scalar)
                } else if scalar.value < 0x10000 {
                    out += hexEscape(scalar.value)
                } else {
                    let value = scalar.value - 0x10000
                    out += hexEscape(0xD800 + value >> 10) + hexEscape(0xDC00 + value & 0x3FF)
                }
            }
        }
        return out + "\""
    }

    mutating func hexEscape(_ code: UInt32) -> String {
        let digits = String(code, radix: 16, uppercase: Bool.random(using: &random))
        return "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
    }

    /// An integer field's value: as written, or as a whole number with a fraction or an exponent.
    mutating func integerField(_ value: Int) -> String {
        guard value.magnitude < 1 << 50, chance(4) else { return String(value) }
        return ["\(value).0", "\(value)e0", value == 0 ? "0.0e5" : "\(value)0e-1", "\(value)E+0"].randomElement(using: &random)!
    }

    /// The ways to spell `double` (finite) that read as it: each the same decimal.
    static func spellings(of double: Double) -> [String] {
        let shortest = double.description
        var body = Substring(shortest)
        let sign = body.hasPrefix("-") ? "-" : ""
        if !sign.isEmpty { body = body.dropFirst() }
        let parts = body.split(separator: "e")
        let exponent = parts.count > 1 ? Int(parts[1].replacingOccurrences(of: "+", with: ""))! : 0
        let mantissa = parts[0].split(separator: ".", omittingEmptySubsequences: false)
        let fraction = mantissa.count > 1 ? String(mantissa[1]) : ""
        var digits = String((String(mantissa[0]) + fraction).drop { $0 == "0" })
        if digits.isEmpty { digits = "0" }
        let scale = exponent - fraction.count // double == digits × 10^scale
        var spellings = [shortest, "\(sign)\(digits)e\(scale)", "\(sign)\(digits)E\(scale >= 0 ? "+" : "")\(scale)",
                         "\(sign)0.\(digits)e\(scale + digits.count)"]
        if digits != "0" { spellings.append("\(sign)\(digits)000e\(scale - 3)") }
        if abs(scale) <= 40 {
            if scale >= 0 {
                spellings.append(sign + digits + String(repeating: "0", count: scale) + ".000")
            } else if digits.count > -scale {
                spellings.append(sign + digits.dropLast(-scale) + "." + digits.suffix(-scale) + "0")
            } else {
                spellings.append(sign + "0." + String(repeating: "0", count: -scale - digits.count) + digits)
            }
        }
        return spellings
    }

    mutating func value(_ value: WireValue) -> String {
        switch value {
        case .null: "null"
        case .bool(let bool): bool ? "true" : "false"
        case .integer(let integer): String(integer)
        case .real(let real) where real.isFinite: Self.spellings(of: real).randomElement(using: &random)!
        case .real(let real): string(real.isNaN ? "NaN" : real > 0 ? "Infinity" : "-Infinity")
        case .text(let text): string(text)
        }
    }

    mutating func unknownValue(depth: Int) -> String {
        switch Int.random(in: 0..<(depth < 3 ? 8 : 6), using: &random) {
        case 0: return string(RandomMessages.string(&random))
        case 1: return ["true", "false", "null"].randomElement(using: &random)!
        case 2: return ["0", "-0", "1e400", "-1.5E-3", "123456789012345678901234567890", "0.0"].randomElement(using: &random)!
        case 3, 4, 5: return value(RandomMessages.value(&random))
        case 6: return array((0..<Int.random(in: 0...3, using: &random)).map { _ in unknownValue(depth: depth + 1) })
        default:
            return object((0..<Int.random(in: 0...3, using: &random)).map { _ in
                (RandomMessages.string(&random), unknownValue(depth: depth + 1))
            })
        }
    }

    /// An optional member: left out or `null` when absent.
    mutating func optional(_ name: String, _ value: String?) -> [(String, String)] {
        if let value { return [(name, value)] }
        return chance(2) ? [] : [(name, "null")]
    }

    /// A list that may be empty: left out, `null` or `[]` when it is.
    mutating func list(_ name: String, _ elements: [String]) -> [(String, String)] {
        guard elements.isEmpty else { return [(name, array(elements))] }
        return [[], [(name, "null")], [(name, "[]")]].randomElement(using: &random)!
    }

    mutating func row(_ row: [WireValue]) -> String { array(row.map { value($0) }) }

    mutating func snapshot(_ snapshot: WireSnapshot) -> String {
        object([("basis", string(snapshot.basis)), ("columns", array(snapshot.columns.map { string($0) })),
                ("types", array(snapshot.types.map { string($0) })), ("key", array(snapshot.key.map { integerField($0) })),
                ("rows", array(snapshot.rows.map { row($0) }))]
               + optional("included", snapshot.included.map { included in
                   object(included.map { ($0.key, includedSnapshot($0.value)) })
               }), unknown: true)
    }

    mutating func includedSnapshot(_ snapshot: WireIncludedSnapshot) -> String {
        object([("columns", array(snapshot.columns.map { string($0) })), ("types", array(snapshot.types.map { string($0) })),
                ("key", array(snapshot.key.map { integerField($0) })), ("rows", array(snapshot.rows.map { row($0) }))]
               + optional("counts", snapshot.counts.map { counts in array(counts.map { integerField($0) }) }), unknown: true)
    }

    mutating func path(_ path: WirePath) -> String { array([integerField(path.section), integerField(path.item)]) }

    mutating func columns(_ columns: [Int: WireValue]) -> String { object(columns.map { (String($0.key), value($0.value)) }) }

    mutating func includedChange(_ change: WireIncludedChange) -> String {
        switch change {
        case .keyed(let keyed):
            return object(list("put", keyed.puts.map { columns($0) }) + list("delete", keyed.deletes.map { row($0) }), unknown: true)
        case .sectioned(let sectioned):
            var members = list("deletes", sectioned.deletes.map { path($0) })
            members += list("inserts", sectioned.inserts.map { array([integerField($0.path.section), integerField($0.path.item), row($0.row)]) })
            members += list("moves", sectioned.moves.map { array([path($0.old), path($0.new)]) })
            members += list("updates", sectioned.updates.map { array([path($0.old), path($0.new), columns($0.columns)]) })
            return object(members, unknown: true)
        }
    }

    mutating func changeset(_ changeset: WireChangeset) -> String {
        var members = list("deletes", changeset.deletes.map { integerField($0) })
        members += list("inserts", changeset.inserts.map { array([integerField($0.index), row($0.row)]) })
        members += list("moves", changeset.moves.map { array([integerField($0.old), integerField($0.new)]) })
        members += list("updates", changeset.updates.map { update in
            array([integerField(update.old), integerField(update.new),
                   object(update.columns.map { (String($0.key), value($0.value)) })])
        })
        members += optional("included", changeset.included.map { included in
            object(included.map { ($0.key, includedChange($0.value)) })
        })
        return object(members, unknown: true)
    }

    /// `members` as an object of ids, or when empty: left out, `null` or `{}`.
    mutating func byID(_ name: String, _ members: [(String, String)]) -> [(String, String)] {
        guard members.isEmpty else { return [(name, object(members))] }
        return [[], [(name, "null")], [(name, "{}")]].randomElement(using: &random)!
    }

    mutating func message(_ message: ServerMessage) -> String {
        let members: [(String, String)]
        switch message {
        case .welcome(let welcome):
            members = [("type", string("welcome")), ("protocol", integerField(welcome.protocol)), ("user", string(welcome.user)),
                       ("lsn", string(welcome.lsn)), ("heartbeat_ms", integerField(welcome.heartbeatMilliseconds)),
                       ("max_subscriptions", integerField(welcome.maxSubscriptions)),
                       ("max_message_bytes", integerField(welcome.maxMessageBytes))]
                + optional("client", welcome.client.map { string($0) })
                + optional("last_mutation", welcome.lastMutation.map { integerField(Int($0)) })
        case .pushed(let results):
            let elements = results.map { result in
                object([("id", integerField(Int(result.id))), ("status", string(result.status.rawValue))]
                       + optional("code", result.code.map { string($0) })
                       + optional("constraint", result.constraint.map { string($0) })
                       + optional("message", result.message.map { string($0) })
                       + optional("lsn", result.lsn.map { string($0) }), unknown: true)
            }
            members = [("type", string("pushed")), ("results", array(elements))]
        case .changes(let lsn, let snapshots, let changesets):
            members = [("type", string("changes")), ("lsn", string(lsn))]
                + byID("snapshots", snapshots.map { ($0.key, snapshot($0.value)) })
                + byID("changesets", changesets.map { ($0.key, changeset($0.value)) })
        case .heartbeat(let lsn): members = [("type", string("heartbeat")), ("lsn", string(lsn))]
        case .pong(let lsn): members = [("type", string("pong")), ("lsn", string(lsn))]
        case .error(let code, let text, let id):
            members = [("type", string("error")), ("code", string(code.rawValue)), ("message", string(text))]
                + optional("id", id.map { string($0) })
        case .authed(let expires): members = [("type", string("authed")), ("expires", integerField(Int(expires)))]
        }
        return space() + object(members, unknown: true) + space()
    }
}
