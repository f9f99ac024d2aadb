import Foundation

/// Any JSON value: how a ``Transcript`` keeps records, so that it can be loaded, compared and
/// replayed without the record type.
///
/// Numbers compare by value: `.int(1) == .double(1)`.
public enum JSONValue: Codable, Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// `value` as the JSON `encoder` writes for it.
    public init(encoding value: some Encodable, with encoder: JSONEncoder = JSONEncoder()) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: encoder.encode(value))
    }

    /// Each of `values` as the JSON `encoder` writes for it.
    public static func array(encoding values: some Encodable, with encoder: JSONEncoder = JSONEncoder()) throws -> [JSONValue] {
        try JSONDecoder().decode([JSONValue].self, from: encoder.encode(values))
    }

    /// Decodes a value of type `type` from this JSON.
    public func decode<T: Decodable>(_ type: T.Type, with decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(T.self, from: JSONEncoder().encode(self))
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.int(a), .int(b)): a == b
        case let (.double(a), .double(b)): a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): Double(exactly: a).map { $0 == b } ?? false
        case let (.string(a), .string(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a == b
        default: false
        }
    }

    // MARK: Text

    /// The value as one line of JSON, keys sorted: `{"id": 1, "title": "Milk"}`.
    public var description: String {
        var text = ""
        writeInline(to: &text)
        return text
    }

    /// The value as indented JSON, keys sorted. A container stays on one line when it holds only
    /// scalars (a record, an index list), or when that line is short; otherwise each member
    /// gets its own line. Non-finite numbers, which JSON cannot hold, are written as `null`.
    public func prettyText(indent: String = "  ") -> String {
        var text = ""
        writePretty(to: &text, indentation: "", step: indent)
        return text
    }

    private var isScalar: Bool {
        switch self {
        case .array, .object: false
        default: true
        }
    }

    private func writePretty(to text: inout String, indentation: String, step: String) {
        let members: [(key: String?, value: JSONValue)]
        let (open, close): (String, String)
        switch self {
        case .array(let values):
            members = values.map { (nil, $0) }
            (open, close) = ("[", "]")
        case .object(let object):
            members = object.keys.sorted().map { ($0, object[$0]!) }
            (open, close) = ("{", "}")
        default:
            return writeInline(to: &text)
        }
        let inline = description
        if members.isEmpty || members.allSatisfy({ $0.value.isScalar }) || inline.count + indentation.count <= 80 {
            text += inline
            return
        }
        let inner = indentation + step
        text += open + "\n"
        for (position, member) in members.enumerated() {
            text += inner
            if let key = member.key { text += Self.quoted(key) + ": " }
            member.value.writePretty(to: &text, indentation: inner, step: step)
            text += position < members.count - 1 ? ",\n" : "\n"
        }
        text += indentation + close
    }

    private func writeInline(to text: inout String) {
        switch self {
        case .null: text += "null"
        case .bool(let value): text += value ? "true" : "false"
        case .int(let value): text += String(value)
        case .double(let value): text += value.isFinite ? "\(value)" : "null"
        case .string(let value): text += Self.quoted(value)
        case .array(let values):
            text += "["
            for (position, value) in values.enumerated() {
                if position > 0 { text += ", " }
                value.writeInline(to: &text)
            }
            text += "]"
        case .object(let object):
            text += "{"
            for (position, key) in object.keys.sorted().enumerated() {
                if position > 0 { text += ", " }
                text += Self.quoted(key) + ": "
                object[key]!.writeInline(to: &text)
            }
            text += "}"
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
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
