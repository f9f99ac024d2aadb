/// Bytes as Postgres's `bytea` hex text (`\x0aff`), the form they travel in on the wire.
package enum Hex {
    /// `\x` and two lower-case hexadecimal digits per byte.
    package static func text(of bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var utf8: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        utf8.reserveCapacity(2 + bytes.count * 2)
        for byte in bytes {
            utf8.append(digits[Int(byte >> 4)])
            utf8.append(digits[Int(byte & 15)])
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// The bytes of `\x` hex text; `nil` when the text is not that (either case of digit).
    package static func bytes(of text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}
