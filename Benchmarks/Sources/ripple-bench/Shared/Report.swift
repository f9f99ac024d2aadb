import Foundation

/// A JSON value that the benchmark prints: a string, an integer or a number.
enum JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, Sendable {
    case string(String)
    case int(Int)
    /// Printed with 5 significant digits; `nan` and infinities print as `null`.
    case number(Double)

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(value) }

    /// The value as JSON text.
    var json: String {
        switch self {
        case .string(let string): JSONValue.quoted(string)
        case .int(let int): String(int)
        case .number(let number) where number.isFinite: String(Double(String(format: "%.5g", number))!)
        case .number: "null"
        }
    }

    /// `string` as a JSON string literal.
    private static func quoted(_ string: String) -> String {
        var result = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// One key of a JSON object and its value.
typealias JSONField = (key: String, value: JSONValue)

/// Where the benchmark's output goes: JSON lines on stdout, notes for people on stderr.
enum Report {
    /// Prints one JSON object, keys in the given order, as one line on stdout.
    static func emit(_ fields: [JSONField]) {
        let body = fields.map { "\(JSONValue.string($0.key).json):\($0.value.json)" }
        write("{" + body.joined(separator: ",") + "}\n", to: .standardOutput)
    }

    /// Prints a note for people on stderr.
    static func note(_ message: String) {
        write("ripple-bench: " + message + "\n", to: .standardError)
    }

    private static func write(_ text: String, to handle: FileHandle) {
        handle.write(Data(text.utf8))
    }
}
