#if Sync
import Ripple
import RippleSync

/// How the client keeps a synced value in its local store: the same rule as the server's
/// replica (see the protocol page), so that a local query reads what the server's reads.
///
/// | `types` | Local column | Value |
/// |---|---|---|
/// | `int2`, `int4`, `int8` | `INTEGER` | the integer (int8 beyond 2⁵³ arrives as a string) |
/// | `bool` | `INTEGER` | 1 or 0 |
/// | `float4`, `float8` | `REAL` | the number; `Infinity`/`-Infinity` as infinities; `NaN` as the text `NaN` |
/// | `bytea` | `BLOB` | the bytes (the wire has `\x` hex) |
/// | anything else | `TEXT` | the text (`numeric` keeps its exact digits and scale) |
enum WireTypes {
    static func columnType(of type: String) -> String {
        switch type {
        case "int2", "int4", "int8", "bool": "INTEGER"
        case "float4", "float8": "REAL"
        case "bytea": "BLOB"
        default: "TEXT"
        }
    }

    /// A wire type as the local store keeps it, resolved once per column.
    enum Kind {
        case integer, bool, float, bytea, other

        init(_ type: String) {
            self = switch type {
            case "int2", "int4", "int8": .integer
            case "bool": .bool
            case "float4", "float8": .float
            case "bytea": .bytea
            default: .other
            }
        }
    }

    /// The local value of a wire value of `type`.
    ///
    /// - Throws: ``SyncClientError`` when the value does not fit its type (the server and the
    ///   client disagree: the subscription is resubscribed).
    static func localValue(_ value: WireValue, type: String) throws -> SQLValue {
        try localValue(value, kind: Kind(type))
    }

    /// ``localValue(_:type:)`` for a type already resolved.
    static func localValue(_ value: WireValue, kind: Kind) throws -> SQLValue {
        switch (kind, value) {
        case (_, .null): return .null
        case (.integer, .integer(let integer)): return .integer(integer)
        case (.integer, .text(let text)):
            guard let integer = Int64(text) else { throw SyncClientError("\(text) is not an int8") }
            return .integer(integer)
        case (.bool, .bool(let bool)): return .integer(bool ? 1 : 0)
        case (.bool, .integer(let integer)): return .integer(integer == 0 ? 0 : 1)
        case (.float, .real(let real)): return .real(real)
        case (.float, .integer(let integer)): return .real(Double(integer))
        case (.float, .text(let text)):
            switch text {
            case "NaN": return .text("NaN")
            case "Infinity": return .real(.infinity)
            case "-Infinity": return .real(-.infinity)
            default: throw SyncClientError("\(text) is not a float")
            }
        case (.bytea, .text(let text)): return .blob(try bytes(ofHex: text))
        case (_, .text(let text)): return .text(text)
        case (_, .integer(let integer)): return .integer(integer)
        case (_, .real(let real)): return .real(real)
        case (_, .bool(let bool)): return .integer(bool ? 1 : 0)
        }
    }

    static func bytes(ofHex text: String) throws -> [UInt8] {
        guard let bytes = Hex.bytes(of: text) else { throw SyncClientError("a bytea value is not \\x hex") }
        return bytes
    }
}

/// What went wrong on the client's side of a sync conversation.
public struct SyncClientError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, in words.
    public let description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
#endif
