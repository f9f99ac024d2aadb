/// Random JSON texts of every shape, for fuzzing whatever reads JSON from outside: null,
/// booleans, numbers in every spelling JSON's grammar has, strings with every escape, arrays
/// and objects (empty ones, names written twice), whitespace between any two tokens; and the
/// same texts damaged, which are mostly not JSON any more.
///
/// ```swift
/// var random = SeededGenerator(seed: 7)
/// let text = RandomJSON.value(depth: 4, using: &random)   // e.g. {"a" :[-0.5e-3, "\u00e9"]}
/// ```
///
/// `extremes` adds what the grammar allows but readers tend to trip on: numbers beyond a
/// double's range (`1e400`), unpaired surrogate escapes (`"\ud800"`), and long runs of digits.
public enum RandomJSON {
    /// A random value's text, nested at most `depth` arrays and objects deep.
    public static func value(depth: Int, extremes: Bool = false, using random: inout some RandomNumberGenerator) -> String {
        let kinds = depth > 0 ? 7 : 5
        switch Int.random(in: 0..<kinds, using: &random) {
        case 0: return ["null", "true", "false"].randomElement(using: &random)!
        case 1, 2: return number(extremes: extremes, using: &random)
        case 3, 4: return string(extremes: extremes, using: &random)
        case 5:
            let count = Int.random(in: 0...4, using: &random)
            let elements = (0..<count).map { _ in value(depth: depth - 1, extremes: extremes, using: &random) }
            return "[" + space(&random) + elements.joined(separator: space(&random) + "," + space(&random)) + space(&random) + "]"
        default:
            let count = Int.random(in: 0...4, using: &random)
            var names = (0..<count).map { _ in string(extremes: false, using: &random) }
            // A name written twice.
            if count > 1, Int.random(in: 0..<4, using: &random) == 0 { names[1] = names[0] }
            let members = names.map { name in
                name + space(&random) + ":" + space(&random) + value(depth: depth - 1, extremes: extremes, using: &random)
            }
            return "{" + space(&random) + members.joined(separator: space(&random) + "," + space(&random)) + space(&random) + "}"
        }
    }

    /// A number in any of JSON's spellings: integers (Int64's edges and beyond), fractions,
    /// exponents, `-0`; within a double's range unless `extremes`.
    public static func number(extremes: Bool = false, using random: inout some RandomNumberGenerator) -> String {
        switch Int.random(in: 0..<(extremes ? 9 : 7), using: &random) {
        case 0: return String(Int.random(in: -1_000...1_000, using: &random))
        case 1: return ["0", "-0", "-0.0", "0e0", "1E+2", "1e2", "100.0", "9223372036854775807", "-9223372036854775808",
                        "9223372036854775808", "18446744073709551616", "9007199254740993", "1.7976931348623157e308",
                        "5e-324", "1e-320", "2.5e-3", "-1.5"].randomElement(using: &random)!
        case 2: return String(Int64.random(in: .min ... .max, using: &random))
        case 3:
            var double: Double
            repeat { double = Double(bitPattern: random.next()) } while !double.isFinite
            return "\(double)".replacingOccurrences(of: "e+", with: "e")
        case 4, 5, 6:
            let digits = String(Int.random(in: 1...999_999, using: &random))
            let fraction = Bool.random(using: &random) ? "." + String(Int.random(in: 0...99_999, using: &random)) : ""
            let exponent = Bool.random(using: &random)
                ? ["e", "E", "e+", "e-", "E-"].randomElement(using: &random)! + String(Int.random(in: 0...290, using: &random)) : ""
            return (Bool.random(using: &random) ? "-" : "") + digits + fraction + exponent
        case 7: return ["1e400", "-1e400", "1e309", "1" + String(repeating: "0", count: 400), "1e-400", "-1e99999999999"]
            .randomElement(using: &random)!
        default: return String(repeating: "9", count: Int.random(in: 20...2_000, using: &random))
        }
    }

    /// A string literal: plain text, non-ASCII characters (combining marks, emoji), and every
    /// escape, `\u0000` and surrogate pairs included; unpaired surrogates when `extremes`.
    public static func string(extremes: Bool = false, using random: inout some RandomNumberGenerator) -> String {
        let pieces = [
            "a", "id", "type", "query", " ", "é", "e\u{301}", "😀", "\u{FEFF}", "中", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r",
            "\\t", "\\u0000", "\\u001f", "\\u00e9", "\\uFFFF", "\\ud83d\\ude00", "\\uD834\\uDD1E", "%", "_", "'", "<", ";",
        ]
        let unpaired = ["\\ud800", "\\uDFFF", "\\ud800\\u0041", "\\udc00\\ud800"]
        var text = "\""
        for _ in 0..<Int.random(in: 0...6, using: &random) {
            if extremes, Int.random(in: 0..<8, using: &random) == 0 {
                text += unpaired.randomElement(using: &random)!
            } else {
                text += pieces.randomElement(using: &random)!
            }
        }
        return text + "\""
    }

    /// Whitespace JSON allows between tokens: mostly none.
    private static func space(_ random: inout some RandomNumberGenerator) -> String {
        Int.random(in: 0..<6, using: &random) == 0 ? [" ", "\n", "\t", "\r\n", "  "].randomElement(using: &random)! : ""
    }

    /// `text` damaged by one to three random edits — a byte deleted, inserted or repeated, a
    /// cut — so that it is mostly, not always, no longer JSON.
    public static func damaged(_ text: String, using random: inout some RandomNumberGenerator) -> [UInt8] {
        var bytes = Array(text.utf8)
        let inserts: [[UInt8]] = ["{", "}", "[", "]", ",", ":", "\"", "\\", "0", "-", ".", "e", "+", "t", "n", " ", "\u{0}", "\u{7}",
                                  "\t", "'", "x", "NaN", "\\u", "é"].map { Array($0.utf8) } + [[0xC3], [0x80], [0xFF], [0xED, 0xA0, 0x80]]
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let at = Int.random(in: 0...bytes.count, using: &random)
            switch Int.random(in: 0..<4, using: &random) {
            case 0 where at < bytes.count: bytes.remove(at: at)
            case 1: bytes.insert(contentsOf: inserts.randomElement(using: &random)!, at: at)
            case 2 where at < bytes.count: bytes.insert(bytes[at], at: at)
            default: bytes = Array(bytes.prefix(at))
            }
        }
        return bytes
    }
}
