import Foundation
import Ripple

/// How SQLite converts an operand compared with a column (its type affinity).
enum StressAffinity: Sendable {
    /// INTEGER: text that reads as a number is compared as that number.
    case integer
    /// TEXT: numbers compared with the column are compared as their text.
    case text
    /// BLOB, or no declared type: operands compare as they are.
    case none
}

/// A column of a stress table.
struct StressColumn: Sendable {
    let name: String
    let affinity: StressAffinity
    let nullable: Bool
}

/// The tables the stress test writes and queries: four collections whose identities are of
/// different types, and two tables made with raw SQL — one with a composite primary key, one
/// whose key column has no declared type (so one key column holds integers, text and blobs).
public enum StressTable: Int, CaseIterable, Codable, Sendable, CustomStringConvertible {
    /// Collection of `StressRecord`s identified by `Int` (Int64 extremes included).
    case ints
    /// Collection identified by `String`: "", NUL, combining marks vs precomposed, emoji.
    case strings
    /// Collection identified by `Data` (a BLOB key).
    case blobs
    /// Collection identified by `UUID` (stored as upper-case text).
    case uuids
    /// Raw table with the composite key `(a TEXT, b INTEGER)`.
    case pairs
    /// Raw table whose key column `k` has no declared type.
    case loose

    /// The SQL table name.
    public var name: String {
        switch self {
        case .ints: "stress_ints"
        case .strings: "stress_strings"
        case .blobs: "stress_blobs"
        case .uuids: "stress_uuids"
        case .pairs: "stress_pairs"
        case .loose: "stress_loose"
        }
    }

    /// The SQL table name.
    public var description: String { name }

    /// Whether the table is a Ripple collection (else it is written with raw SQL only).
    var isCollection: Bool { rawValue <= StressTable.uuids.rawValue }

    var columns: [StressColumn] {
        switch self {
        case .ints, .strings, .blobs, .uuids:
            let key: StressAffinity = self == .ints ? .integer : self == .blobs ? .none : .text
            return [StressColumn(name: "id", affinity: key, nullable: false),
                    StressColumn(name: "rank", affinity: .integer, nullable: false),
                    StressColumn(name: "score", affinity: .integer, nullable: false),
                    StressColumn(name: "label", affinity: .text, nullable: true),
                    StressColumn(name: "flag", affinity: .integer, nullable: false)]
        case .pairs:
            return [StressColumn(name: "a", affinity: .text, nullable: false),
                    StressColumn(name: "b", affinity: .integer, nullable: false),
                    StressColumn(name: "v", affinity: .integer, nullable: false),
                    StressColumn(name: "note", affinity: .text, nullable: true)]
        case .loose:
            return [StressColumn(name: "k", affinity: .none, nullable: false),
                    StressColumn(name: "v", affinity: .integer, nullable: false),
                    StressColumn(name: "t", affinity: .text, nullable: true)]
        }
    }

    /// The primary key's columns (indices into ``columns``), in key order.
    var keyColumns: [Int] { self == .pairs ? [0, 1] : [0] }

    /// The columns that are not part of the key.
    var valueColumns: [Int] { columns.indices.filter { !keyColumns.contains($0) } }

    /// The columns with few distinct values, to order by (ties on purpose).
    var tieColumns: [Int] {
        switch self {
        case .ints, .strings, .blobs, .uuids: [1, 2, 3, 4]
        case .pairs: [1, 2, 3]
        case .loose: [1, 2]
        }
    }

    /// The `CREATE TABLE` of a raw table (collections create their own).
    var createSQL: String? {
        switch self {
        case .pairs:
            "CREATE TABLE stress_pairs (a TEXT NOT NULL, b INTEGER NOT NULL, v INTEGER NOT NULL, note TEXT, PRIMARY KEY (a, b))"
        case .loose:
            "CREATE TABLE stress_loose (k PRIMARY KEY NOT NULL, v INTEGER NOT NULL, t TEXT)"
        default:
            nil
        }
    }

    /// The column a raw live query names as its identity: the key column, or for the composite
    /// key a computed one.
    var identityColumn: String { self == .pairs ? "rid" : columns[keyColumns[0]].name }

    /// The select list of a raw query: every column as it is, and as `typeof()` and `hex()`
    /// (which the checker compares, so that text that is not UTF-8 survives), plus the identity.
    var rawSelectList: String {
        var items: [String] = []
        for column in columns {
            items.append("\"\(column.name)\"")
            items.append("typeof(\"\(column.name)\") AS \"\(column.name)_type\"")
            items.append("hex(\"\(column.name)\") AS \"\(column.name)_hex\"")
        }
        if self == .pairs { items.append("json_array(hex(a), b) AS rid") }
        return items.joined(separator: ", ")
    }

    /// A row read by a raw query over ``rawSelectList``, rebuilt from its `typeof`/`hex` columns.
    func row(from row: Row) -> StressRow? {
        var values: [StressValue] = []
        for column in columns {
            guard case .text(let type)? = row["\(column.name)_type"] else { return nil }
            let hex: String
            switch row["\(column.name)_hex"] {
            case .text(let text)?: hex = text
            default: return nil
            }
            guard let value = StressValue(typeName: type, hex: hex) else { return nil }
            values.append(value)
        }
        return StressRow(values)
    }
}

/// The identity types of the stress collections, and how each is stored.
protocol StressKey: Codable, Hashable, Sendable {
    /// The value SQLite stores for this identity.
    var stressValue: StressValue { get }
    /// The identity stored as `value`, if it is one.
    init?(stressValue value: StressValue)
}

extension Int: StressKey {
    var stressValue: StressValue { .integer(Int64(self)) }
    init?(stressValue value: StressValue) {
        guard case .integer(let number) = value else { return nil }
        self = Int(number)
    }
}

extension String: StressKey {
    var stressValue: StressValue { .string(self) }
    init?(stressValue value: StressValue) {
        guard case .text(let bytes) = value, let string = StressValue.utf8String(bytes) else { return nil }
        self = string
    }
}

extension Data: StressKey {
    var stressValue: StressValue { .blob([UInt8](self)) }
    init?(stressValue value: StressValue) {
        guard case .blob(let bytes) = value else { return nil }
        self = Data(bytes)
    }
}

extension UUID: StressKey {
    /// Upper-case text, as Ripple stores a `UUID`.
    var stressValue: StressValue { .string(uuidString) }
    init?(stressValue value: StressValue) {
        guard case .text(let bytes) = value, let string = StressValue.utf8String(bytes),
              let uuid = UUID(uuidString: string), uuid.uuidString == string else { return nil }
        self = uuid
    }
}

/// The record of the stress collections: an identity of type `ID` and a few properties with
/// many ties (`rank`, `flag`), extremes (`score`) and awkward optional text (`label`).
struct StressRecord<ID: StressKey>: Codable, Sendable, Identifiable, Equatable {
    var id: ID
    var rank: Int
    var score: Int
    var label: String?
    var flag: Bool

    /// A record from a row of a collection table (`nil` when a value does not fit the type).
    init?(_ row: StressRow) {
        guard row.values.count == 5, let id = ID(stressValue: row.values[0]),
              case .integer(let rank) = row.values[1], case .integer(let score) = row.values[2],
              case .integer(let flag) = row.values[4] else { return nil }
        switch row.values[3] {
        case .null: label = nil
        case .text(let bytes):
            guard let text = StressValue.utf8String(bytes) else { return nil }
            label = text
        default: return nil
        }
        self.id = id
        self.rank = Int(rank)
        self.score = Int(score)
        self.flag = flag != 0
    }

    /// The record as a row of its table.
    var row: StressRow {
        StressRow([id.stressValue, .integer(Int64(rank)), .integer(Int64(score)), label.map(StressValue.string) ?? .null,
                   .integer(flag ? 1 : 0)])
    }
}
