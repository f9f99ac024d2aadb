/// Minimal JSON text building for the change log (no Foundation round trip per key).
///
/// Strings are written between double quotes with `"` and `\` escaped by a backslash and the
/// other control characters below U+0020 as `\u00XX`; every other byte is copied as is.
enum JSONText {
    /// The strings of a JSON array of strings, as ``array(_:)`` writes them, or `nil` when
    /// `text` is not one (read by the records' own JSON parser).
    static func strings(_ text: String) -> [String]? {
        var text = text
        return text.withUTF8 { RecordJSON.parseStringArray($0) }
    }

    /// A JSON array of strings, built as UTF-8 bytes in one buffer.
    ///
    /// - Complexity: O(n) in the strings' total length. When no string needs escaping (the usual
    ///   keys: numbers, UUIDs), each is copied in one piece into a buffer of the exact size.
    static func array(_ strings: [String]) -> String {
        var size = 1 + max(strings.count, 1)   // brackets and commas
        var plain = true
        for string in strings {
            size += string.utf8.count + 2
            if plain { plain = string.utf8.withContiguousStorageIfAvailable { !needsEscaping($0) } ?? false }
        }
        if plain {
            let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
                var next = buffer.baseAddress!
                func put(_ byte: UInt8) {
                    next.initialize(to: byte)
                    next += 1
                }
                put(UInt8(ascii: "["))
                for (index, string) in strings.enumerated() {
                    if index > 0 { put(UInt8(ascii: ",")) }
                    put(UInt8(ascii: "\""))
                    string.utf8.withContiguousStorageIfAvailable { utf8 in
                        guard let base = utf8.baseAddress else { return }
                        next.initialize(from: base, count: utf8.count)
                        next += utf8.count
                    }
                    put(UInt8(ascii: "\""))
                }
                put(UInt8(ascii: "]"))
                initialized = buffer.baseAddress!.distance(to: next)
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size + size / 2)
        bytes.append(UInt8(ascii: "["))
        for (index, var string) in strings.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string.withUTF8 { utf8 in appendQuoted(utf8, escaping: true, to: &bytes) }
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether any byte of `bytes` must be escaped in a JSON string.
    ///
    /// - Complexity: O(n), without early exit, so that the loop vectorizes: faster than a
    ///   byte-by-byte search on the keys the log writes (a few dozen bytes each, rarely escaped).
    @inline(__always)
    static func needsEscaping(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var found: UInt8 = 0
        for byte in bytes {
            found |= (byte < 0x20 ? 1 : 0) | (byte == UInt8(ascii: "\"") ? 1 : 0) | (byte == UInt8(ascii: "\\") ? 1 : 0)
        }
        return found != 0
    }

    /// Appends `utf8` as a quoted JSON string. When `escaping` is false the caller knows that no
    /// byte needs escaping and the bytes are copied in one piece.
    @inline(__always)
    static func appendQuoted(_ utf8: UnsafeBufferPointer<UInt8>, escaping: Bool, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        if escaping && needsEscaping(utf8) {
            appendEscaped(utf8, to: &bytes)
        } else {
            bytes.append(contentsOf: utf8)
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `utf8` with the bytes that need it escaped (no quotes).
    static func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0xF)])
            default:
                bytes.append(byte)
            }
        }
    }
}
