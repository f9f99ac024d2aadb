#if Sync
import Foundation
import Ripple
import RippleSync

/// How a PostgreSQL column's values are kept in the replica (a SQLite table), one rule per type,
/// from the type's text form — what pgoutput sends and what `column::text` reads in the initial
/// copy, so that both paths store the same value:
///
/// | Postgres | Replica column | Value |
/// |---|---|---|
/// | `int2`, `int4`, `int8` | `INTEGER` | the integer, every digit (int8's whole range fits) |
/// | `bool` | `INTEGER` | 1 for `t` (`true`), 0 for `f` (`false`) |
/// | `float4`, `float8` | `REAL` | the number (a float4 exactly, widened); ±Infinity as SQLite's infinities; `NaN` as the text `NaN` (SQLite has no NaN: it would store NULL) |
/// | `numeric` | `TEXT` | its exact text, scale kept (`1.50`), `NaN` and `±Infinity` spelled out |
/// | `text`, `varchar`, `char`, `name` | `TEXT` | the text |
/// | `uuid` | `TEXT` | lower-case text, as Postgres prints it |
/// | `bytea` | `BLOB` | the bytes |
/// | `json`, `jsonb` | `TEXT` | the JSON text (jsonb's as Postgres normalizes it) |
/// | `date`, `timestamp`, `timestamptz` | `TEXT` | Postgres's ISO text (the feed's session runs in UTC, so `timestamptz` ends in `+00`) |
/// | anything else | `TEXT` | the type's text form |
///
/// NULL is NULL in every type.
public enum PostgresTypes {
    /// The type OIDs the rules above name.
    public enum OID {
        public static let bool: UInt32 = 16
        public static let bytea: UInt32 = 17
        public static let name: UInt32 = 19
        public static let int8: UInt32 = 20
        public static let int2: UInt32 = 21
        public static let int4: UInt32 = 23
        public static let text: UInt32 = 25
        public static let json: UInt32 = 114
        public static let float4: UInt32 = 700
        public static let float8: UInt32 = 701
        public static let bpchar: UInt32 = 1042
        public static let varchar: UInt32 = 1043
        public static let date: UInt32 = 1082
        public static let timestamp: UInt32 = 1114
        public static let timestamptz: UInt32 = 1184
        public static let numeric: UInt32 = 1700
        public static let uuid: UInt32 = 2950
        public static let jsonb: UInt32 = 3802
    }

    /// The name a type goes by on the wire (the protocol's `types`): the types of the table
    /// above by their Postgres names; every other type, kept as its text form, as `text`.
    public static func wireName(of oid: UInt32) -> String {
        switch oid {
        case OID.bool: "bool"
        case OID.bytea: "bytea"
        case OID.int2: "int2"
        case OID.int4: "int4"
        case OID.int8: "int8"
        case OID.float4: "float4"
        case OID.float8: "float8"
        case OID.numeric: "numeric"
        case OID.uuid: "uuid"
        case OID.json: "json"
        case OID.jsonb: "jsonb"
        case OID.date: "date"
        case OID.timestamp: "timestamp"
        case OID.timestamptz: "timestamptz"
        case OID.varchar: "varchar"
        case OID.bpchar: "bpchar"
        default: "text"
        }
    }

    /// The replica column's declared type for a Postgres type.
    public static func replicaType(of oid: UInt32) -> String {
        switch oid {
        case OID.int2, OID.int4, OID.int8, OID.bool: "INTEGER"
        case OID.float4, OID.float8: "REAL"
        case OID.bytea: "BLOB"
        default: "TEXT"
        }
    }

    /// The replica's value for a value of type `oid` in its Postgres text form.
    ///
    /// - Throws: ``PostgresTypesError`` when the text is not a value of that type (it came
    ///   from Postgres: a mismatch means the feed's idea of the table is wrong).
    public static func replicaValue(_ text: String, of oid: UInt32) throws -> SQLValue {
        switch oid {
        case OID.int2, OID.int4, OID.int8:
            guard let integer = Int64(text) else { throw PostgresTypesError("\(text) is not an integer") }
            return .integer(integer)
        case OID.bool:
            switch text {
            case "t", "true": return .integer(1)
            case "f", "false": return .integer(0)
            default: throw PostgresTypesError("\(text) is not a bool")
            }
        case OID.float4, OID.float8:
            switch text {
            case "NaN": return .text("NaN")
            case "Infinity": return .real(.infinity)
            case "-Infinity": return .real(-.infinity)
            default:
                // A float4's shortest text may name another Double than the float: read it as
                // the Float it is, then widen (exact).
                let real = oid == OID.float4 ? Float(text).map(Double.init) : Double(text)
                guard let real else { throw PostgresTypesError("\(text) is not a float") }
                return .real(real)
            }
        case OID.bytea:
            return .blob(try bytes(ofHex: text))
        default:
            return .text(text)
        }
    }

    /// The bytes of bytea's hex text form, `\x0aff`.
    static func bytes(ofHex text: String) throws -> [UInt8] {
        guard let bytes = Hex.bytes(of: text) else {
            throw PostgresTypesError("a bytea value is not in hex form (set bytea_output = 'hex')")
        }
        return bytes
    }
}

/// A value that does not fit its Postgres type's rule.
public struct PostgresTypesError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
#endif
