/// A fast path for the most common nested value, `[String]`: written and parsed directly as
/// bytes, without Foundation's JSON coders. The text is ordinary JSON (the general coders read it
/// and produce the same); anything the parser does not recognise falls back to `JSONDecoder`.
extension RecordJSON {
    /// Writes `strings` as a JSON array into `buffer` (cleared first).
    static func writeStringArray(_ strings: [String], into buffer: inout [UInt8]) {
        buffer.removeAll(keepingCapacity: true)
        buffer.append(UInt8(ascii: "["))
        var first = true
        for var string in strings {
            if !first { buffer.append(UInt8(ascii: ",")) }
            first = false
            buffer.append(UInt8(ascii: "\""))
            string.withUTF8 { utf8 in
                if !utf8.contains(where: needsEscape) {
                    buffer.append(contentsOf: utf8)
                    return
                }
                for byte in utf8 {
                    guard needsEscape(byte) else { buffer.append(byte); continue }
                    buffer.append(UInt8(ascii: "\\"))
                    switch byte {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"): buffer.append(byte)
                    case UInt8(ascii: "\n"): buffer.append(UInt8(ascii: "n"))
                    case UInt8(ascii: "\r"): buffer.append(UInt8(ascii: "r"))
                    case UInt8(ascii: "\t"): buffer.append(UInt8(ascii: "t"))
                    case 0x08: buffer.append(UInt8(ascii: "b"))
                    case 0x0C: buffer.append(UInt8(ascii: "f"))
                    default:
                        let hex: [UInt8] = Array("0123456789abcdef".utf8)
                        buffer.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                                   hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                    }
                }
            }
            buffer.append(UInt8(ascii: "\""))
        }
        buffer.append(UInt8(ascii: "]"))
    }

    @inline(__always)
    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Parses a JSON array of strings, or returns `nil` for anything else (left to `JSONDecoder`).
    static func parseStringArray(_ text: UnsafeBufferPointer<UInt8>) -> [String]? {
        var parser = StringArrayParser(text: text)
        return parser.parse()
    }
}

private struct StringArrayParser {
    let text: UnsafeBufferPointer<UInt8>
    var position = 0
    var scratch: [UInt8] = []

    mutating func parse() -> [String]? {
        skipSpace()
        guard next() == UInt8(ascii: "[") else { return nil }
        var result: [String] = []
        skipSpace()
        if peek() == UInt8(ascii: "]") {
            position += 1
        } else {
            while true {
                skipSpace()
                guard let string = parseString() else { return nil }
                result.append(string)
                skipSpace()
                let separator = next()
                if separator == UInt8(ascii: "]") { break }
                guard separator == UInt8(ascii: ",") else { return nil }
            }
        }
        skipSpace()
        return position == text.count ? result : nil
    }

    private mutating func parseString() -> String? {
        guard next() == UInt8(ascii: "\"") else { return nil }
        let start = position
        while position < text.count {
            let byte = text[position]
            if byte == UInt8(ascii: "\"") {
                let string = String(decoding: UnsafeBufferPointer(rebasing: text[start..<position]), as: UTF8.self)
                position += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { return parseEscapedString(from: start) }
            if byte < 0x20 { return nil }
            position += 1
        }
        return nil
    }

    private mutating func parseEscapedString(from start: Int) -> String? {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: text[start..<position]))
        while let byte = next() {
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: scratch, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = next() else { return nil }
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(escaped)
                case UInt8(ascii: "n"): scratch.append(UInt8(ascii: "\n"))
                case UInt8(ascii: "r"): scratch.append(UInt8(ascii: "\r"))
                case UInt8(ascii: "t"): scratch.append(UInt8(ascii: "\t"))
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "u"):
                    guard var code = parseHex4() else { return nil }
                    if (0xD800..<0xDC00).contains(code) {   // a surrogate pair
                        guard next() == UInt8(ascii: "\\"), next() == UInt8(ascii: "u"),
                              let low = parseHex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { return nil }
                    scratch.append(contentsOf: UTF8.encode(scalar)!)
                default: return nil
                }
            case 0..<0x20: return nil
            default: scratch.append(byte)
            }
        }
        return nil
    }

    private mutating func parseHex4() -> UInt32? {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = next() else { return nil }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    @inline(__always)
    private mutating func next() -> UInt8? {
        guard position < text.count else { return nil }
        defer { position += 1 }
        return text[position]
    }

    @inline(__always)
    private func peek() -> UInt8? { position < text.count ? text[position] : nil }

    @inline(__always)
    private mutating func skipSpace() {
        while position < text.count {
            switch text[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }
}
