/// Minimal JSON text building for the change log (no Foundation round trip per key).
enum JSONText {
    /// `text` as a JSON string literal.
    static func quoted(_ text: String) -> String {
        var result = "\""
        result.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case let control where control.value < 0x20:
                let hex = String(control.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        result += "\""
        return result
    }

    /// A JSON array of strings.
    static func array(_ strings: [String]) -> String {
        var result = "["
        var first = true
        for string in strings {
            if !first { result += "," }
            first = false
            result += quoted(string)
        }
        result += "]"
        return result
    }
}
