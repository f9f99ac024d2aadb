/// A JSON value as it was written, read by ``FrameReader`` for the messages clients send: what
/// the node checks against the protocol, field by field, so that every refusal can say which
/// field was wrong and name the subscription the message is about.
package indirect enum JSONTree: Hashable, Sendable {
    case null
    case bool(Bool)
    /// A number, with its text as written (for messages) and its value.
    case number(JSONNumber)
    case string(String)
    case array([JSONTree])
    /// The members in the order written; a name written twice is kept twice (see ``member(_:)``).
    case object([JSONMember])
    /// A value that JSON's grammar allows but that names nothing the node can hold: a string
    /// with an unpaired surrogate escape (`"\uD800"`), or an array or object nested deeper than
    /// the reader keeps. `reason` says which.
    case unreadable(reason: String)

    /// The value of the first member named `name`, when this is an object that has one (a name
    /// written twice counts the first time, as the server's frames are read).
    package func member(_ name: String) -> JSONTree? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.name == name }?.value
    }

    /// What kind of value this is, in words, for errors.
    package var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number(let number): "the number \(number.text)"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        case .unreadable(let reason): reason
        }
    }
}

/// A member of a JSON object.
package struct JSONMember: Hashable, Sendable {
    package var name: String
    package var value: JSONTree
}

/// A JSON number: its text as written and its value.
package struct JSONNumber: Hashable, Sendable {
    /// The number as written (`1e2`, `-0`, `1.50`).
    package var text: String
    /// Its value: an integer when written without a fraction or an exponent and within
    /// `Int64`, otherwise the nearest `Double` (infinite when beyond a double's range).
    package var value: Value

    package enum Value: Hashable, Sendable {
        case integer(Int64)
        case real(Double)
    }

    /// The integer the number is, whatever its spelling (`100`, `1e2`, `100.0`, and `-0` is 0);
    /// `nil` when it has a fraction or lies beyond `Int64`.
    package var wholeValue: Int64? {
        switch value {
        case .integer(let integer): integer
        case .real(let real): Int64(exactly: real)
        }
    }
}

extension FrameReader {
    /// The JSON value `text` (one whole frame) holds, as written: any JSON of RFC 8259 reads,
    /// and anything else throws. Arrays and objects nested deeper than `depth` are checked
    /// and read as ``JSONTree/unreadable(reason:)``, so the tree is never deeper than `depth`
    /// + 1 however deep the text nests (the reader keeps its own stack, never the thread's).
    ///
    /// - Throws: ``SyncFrameError`` for text that is not JSON.
    /// - Complexity: O(bytes).
    package static func tree(in text: UnsafeBufferPointer<UInt8>, depth: Int) throws(SyncFrameError) -> JSONTree {
        var reader = FrameReader(text)
        reader.toleratesUnpairedSurrogates = true
        reader.skipByteOrderMark()
        let tree = try reader.readTree(depth: depth)
        try reader.expectEnd()
        return tree
    }

    /// ``tree(in:depth:)`` over any collection of bytes.
    package static func tree(in bytes: some Collection<UInt8>, depth: Int) throws(SyncFrameError) -> JSONTree {
        let read = { (text: UnsafeBufferPointer<UInt8>) -> Result<JSONTree, SyncFrameError> in
            Result { () throws(SyncFrameError) -> JSONTree in try FrameReader.tree(in: text, depth: depth) }
        }
        return try (bytes.withContiguousStorageIfAvailable(read) ?? Array(bytes).withUnsafeBufferPointer(read)).get()
    }

    /// An array or object being read: its elements or members so far (`kept: false` for one
    /// nested too deep, which is checked but not kept).
    private enum Open {
        case array(kept: Bool)
        case object(kept: Bool)

        var isKept: Bool {
            switch self {
            case .array(let kept), .object(let kept): kept
            }
        }
    }

    /// Reads one JSON value, iteratively: `open` holds the arrays and objects entered, and
    /// their elements and members so far wait in `elements` and `members`.
    private mutating func readTree(depth limit: Int) throws(SyncFrameError) -> JSONTree {
        var open: [Open] = []
        var elements: [[JSONTree]] = []
        var members: [[JSONMember]] = []
        var names: [(name: String, isReadable: Bool)] = []
        let tooDeep = JSONTree.unreadable(reason: "arrays and objects nested deeper than \(limit)")
        while true {
            skipWhitespace()
            var value: JSONTree
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let isObject = byte == UInt8(ascii: "{")
                let kept = open.count < limit && (open.last.map(\.isKept) ?? true)
                position += 1
                skipWhitespace()
                if byte == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    position += 1
                    value = kept ? (isObject ? .object([]) : .array([])) : tooDeep
                } else if isObject {
                    names.append(try readMemberName())
                    open.append(.object(kept: kept))
                    members.append([])
                    continue
                } else {
                    open.append(.array(kept: kept))
                    elements.append([])
                    continue
                }
            case UInt8(ascii: "\""):
                position += 1
                unpairedSurrogate = nil
                let start = position - 1
                let string = try readStringBody()
                value = unpairedSurrogate == nil ? .string(string)
                    : .unreadable(reason: "a string with an unpaired surrogate escape (at byte \(start)), which names no character")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                let start = position
                let number = try readNumber()
                let text = String(decoding: UnsafeBufferPointer(rebasing: self.text[start..<position]), as: UTF8.self)
                value = switch number {
                case .integer(let integer): .number(JSONNumber(text: text, value: .integer(integer)))
                case .real(let real): .number(JSONNumber(text: text, value: .real(real)))
                }
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw expected("a JSON value")
            }
            // Puts the value in the array or object around it, and closes those it completes.
            while true {
                guard let around = open.last else { return value }
                skipWhitespace()
                switch around {
                case .array(let kept):
                    if kept { elements[elements.count - 1].append(value) }
                    if byte == UInt8(ascii: ",") {
                        position += 1
                    } else if byte == UInt8(ascii: "]") {
                        position += 1
                        open.removeLast()
                        let done = elements.removeLast()
                        value = kept ? .array(done) : tooDeep
                        continue
                    } else {
                        throw expected("',' or ']' after an element of an array")
                    }
                case .object(let kept):
                    let name = names.removeLast()
                    if !name.isReadable {
                        value = .unreadable(reason: "a member whose name has an unpaired surrogate escape, which names no character")
                    }
                    if kept { members[members.count - 1].append(JSONMember(name: name.name, value: value)) }
                    if byte == UInt8(ascii: ",") {
                        position += 1
                        skipWhitespace()
                        names.append(try readMemberName())
                    } else if byte == UInt8(ascii: "}") {
                        position += 1
                        open.removeLast()
                        let done = members.removeLast()
                        value = kept ? .object(done) : tooDeep
                        continue
                    } else {
                        throw expected("',' or '}' after a member of an object")
                    }
                }
                break
            }
        }
    }

    /// Reads a member's name and the `:` after it. A name with an unpaired surrogate escape
    /// comes back `nil`: its member's value is then unreadable (and its name, which names no
    /// field of the protocol, is kept with U+FFFD in the surrogate's place).
    private mutating func readMemberName() throws(SyncFrameError) -> (name: String, isReadable: Bool) {
        guard byte == UInt8(ascii: "\"") else { throw expected("a member's name (a string)") }
        position += 1
        unpairedSurrogate = nil
        let name = try readStringBody()
        let isReadable = unpairedSurrogate == nil
        try expectColon()
        return (name, isReadable)
    }
}
