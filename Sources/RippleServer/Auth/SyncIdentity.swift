#if Sync
import Foundation
import RippleSync

/// Who a socket speaks for, as its verified token says: the user, until when, and the token's
/// claims (the values rules may use with `{"claim": "name"}`; see ``RuleFilter/RuleValue``).
public struct SyncIdentity: Hashable, Sendable {
    /// The user id (the node's `v1.` token's `sub`; a JSON Web Token's user claim, `sub` unless
    /// configured otherwise).
    public var user: String
    /// When the token expires.
    public var expires: Date
    /// The token's claims by name (empty for the node's own `v1.` tokens).
    public var claims: [String: SyncClaim]

    /// An identity of `user` until `expires`, with `claims`.
    public init(user: String, expires: Date = .distantFuture, claims: [String: SyncClaim] = [:]) {
        (self.user, self.expires, self.claims) = (user, expires, claims)
    }

    /// The claims among `names` (those the rules use): two identities whose rule-relevant
    /// claims are equal read the same rows.
    public func claims(named names: Set<String>) -> [String: SyncClaim] {
        claims.filter { names.contains($0.key) }
    }
}

/// One claim's value, as the token's JSON holds it.
public enum SyncClaim: Hashable, Sendable, Decodable {
    /// A string (a rule compares it as text).
    case string(String)
    /// A whole number within 64 bits.
    case integer(Int64)
    /// Any other number.
    case number(Double)
    /// `true` or `false`.
    case bool(Bool)
    /// An array: with `in`, each element (each a string, number or boolean).
    case array([SyncClaim])
    /// `null` (in a rule, it equals nothing).
    case null
    /// An object: never usable in a rule.
    case other

    /// Reads any JSON value (an object as ``other``).
    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.singleValueContainer() {
            if container.decodeNil() { self = .null; return }
            if let bool = try? container.decode(Bool.self) { self = .bool(bool); return }
            if let integer = try? container.decode(Int64.self) { self = .integer(integer); return }
            if let number = try? container.decode(Double.self) { self = .number(number); return }
            if let string = try? container.decode(String.self) { self = .string(string); return }
            if let array = try? container.decode([SyncClaim].self) { self = .array(array); return }
        }
        self = .other
    }

    /// The claim as seconds since 1970 (`exp`, `nbf`), when it is a number.
    var seconds: Double? {
        switch self {
        case .integer(let integer): Double(integer)
        case .number(let number): number
        default: nil
        }
    }

    /// The claim as one value of a filter (strings, numbers and booleans); `nil` for an array
    /// or an object.
    var scalar: WireValue? {
        switch self {
        case .string(let string): .text(string)
        case .integer(let integer): .integer(integer)
        case .number(let number): .real(number)
        case .bool(let bool): .bool(bool)
        case .null: .null
        case .array, .other: nil
        }
    }
}
#endif
