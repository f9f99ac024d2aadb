import Foundation
import Ripple

/// What a writer does in one write: a collection method that opens its own write, or a
/// `store.write` closure running steps (some in savepoints), possibly rolled back on purpose.
enum StressPlan: Sendable {
    case method(StressOperation)
    case write([StressPlanStep], rollBack: Bool)
    /// One raw SQL operation committed outside a `store.write`: in `writeWithoutTransaction`, in
    /// a migration, or by a connection that is not Ripple's (`via` says which).
    case outside(StressOperation, via: StressVia)
}

/// A step a write closure will run.
indirect enum StressPlanStep: Sendable {
    case operation(StressOperation, StressVia)
    case savepoint([StressPlanStep], rollBack: Bool)
}

/// Seeded random data, queries and writes that aim at the awkward corners: keys that differ only
/// in bytes Swift's `String ==` ignores (combining marks vs precomposed, NUL), BLOB and
/// non-UTF-8 keys, Int64 extremes, empty strings and blobs, a key column holding integers, text
/// and blobs at once, and few distinct values in ordering columns so that ties are everywhere.
///
/// Keys come from small pools, so that inserts collide, updates find their rows and live
/// queries see rows come and go.
struct StressGenerator {
    var random: SeededGenerator
    /// The UUID identities: the same in every process of a run (derived from the run's seed).
    let uuids: [UUID]
    /// The share of writes committed outside a `store.write` (see ``StressPlan/outside(_:via:)``);
    /// 0 leaves a seed's writes as they always were.
    var outsideShare = 0.0

    init(seed: UInt64, stream: UInt64) {
        random = SeededGenerator(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ stream &* 0xD1B5_4A32_D192_ED03 ^ 0x5EED)
        var shared = SeededGenerator(seed: seed ^ 0x5555_1D1D)
        uuids = (0..<14).map { _ in
            var bytes = [UInt8](repeating: 0, count: 16)
            for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255, using: &shared) }
            bytes[6] = bytes[6] & 0x0F | 0x40
            bytes[8] = bytes[8] & 0x3F | 0x80
            return bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
        }
    }

    // MARK: Pools

    static let intKeys: [Int] = [.min, .min + 1, -4_294_967_296, -2, -1, 0, 1, 2, 3, 5, 8, 13, 21, 42,
                                 1 << 31, 1 << 32, 1 << 53, (1 << 53) + 1, .max - 1, .max]
    /// Canonically equivalent pairs (`e\u{301}`/`\u{e9}`, `A\u{30A}`/`\u{c5}`/`\u{212B}`,
    /// `u\u{308}`/`\u{fc}`) are different keys in SQLite.
    static let stringKeys: [String] = ["", "\0", "a\0b", "a\0c", "a", "A", "a ", "ab", "b", "e\u{301}", "\u{e9}",
                                       "E\u{301}", "\u{c9}", "A\u{30A}", "\u{c5}", "\u{212B}", "\u{df}", "ss",
                                       "\u{1F44D}", "\u{1F44D}\u{1F3FD}", "\u{1F1EB}\u{1F1F7}", "u\u{308}", "\u{fc}", "z"]
    /// `[0x61]` has the bytes of the text "a"; `[0x65, 0xCC, 0x81]` and `[0xC3, 0xA9]` those of
    /// the two spellings of é.
    static let blobKeys: [[UInt8]] = [[], [0], [0, 0], [0, 1], [1], [0x61], [0x61, 0], [0x41], [0x65, 0xCC, 0x81],
                                      [0xC3, 0xA9], [0x7F], [0x80], [0xFE], [0xFF], [0xFF, 0x61], [0xFF, 0xFF]]
    static let badText: [[UInt8]] = [[0xFF, 0x61], [0xFE, 0x61], [0xFF], [0xC3], [0x61, 0x80, 0x62]]
    static let labels: [String] = ["", "a", "A", "abc", "ABC", "a%b", "a_b", "_", "%", "e\u{301}", "\u{e9}", "a\0b",
                                   "a\0", "\u{1F44D}", "10", "9", "b"]
    static let scores: [Int] = [.min, -2, -1, 0, 1, 2, .max]
    static let likePatterns: [(String, String?)] = [
        ("a%", nil), ("%a", nil), ("A%", nil), ("%b%", nil), ("_", nil), ("__", nil), ("%", nil), ("e%", nil),
        ("%\u{301}", nil), ("\u{e9}", nil), ("\u{c9}%", nil), ("%\u{1F44D}%", nil), ("a\\%%", "\\"), ("a\\_b", "\\"),
        ("%!%%", "!"), ("_b", nil), ("1%", nil), ("a_b", nil), ("a\0zz", nil), ("%\u{FFFD}", nil), ("a!", "!"),
    ]

    // MARK: Values

    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func pick<T>(_ values: [T]) -> T { values[int(0...values.count - 1)] }

    /// A key of `table`. With `raw` (the key goes through raw SQL), a text key of the `strings`
    /// collection is sometimes not UTF-8, which a Swift `String` cannot spell.
    mutating func key(of table: StressTable, raw: Bool = false) -> [StressValue] {
        switch table {
        case .ints: [pick(Self.intKeys).stressValue]
        case .strings: [raw && chance(0.12) ? .text(pick(Self.badText)) : pick(Self.stringKeys).stressValue]
        case .blobs: [.blob(pick(Self.blobKeys))]
        case .uuids: [pick(uuids).stressValue]
        case .pairs:
            [chance(0.2) ? .text(pick(Self.badText)) : .string(pick(["", "a", "A", "a\0b", "e\u{301}", "\u{e9}", "\u{1F44D}"])),
             .integer(Int64(pick([-1, 0, 1, 2, Int.max])))]
        case .loose:
            switch int(0...3) {
            case 0: [.integer(Int64(pick([Int.min, -1, 0, 1, 2, Int.max])))]
            case 1: [.string(pick(["", "0", "1", "01", "a", "a\0b", "e\u{301}", "\u{e9}", "\u{1F44D}"]))]
            case 2: [.text(pick(Self.badText))]
            default: [.blob(pick([[], [0x31], [0x61], [0xFF, 0x61], [0], [0x65, 0xCC, 0x81]]))]
            }
        }
    }

    /// A value for column `column` of `table` as the table stores it: what the record type
    /// encodes, except that with `raw` (written with raw SQL) a collection's label is sometimes
    /// text that is not UTF-8 (read back into a `String`, it decodes with replacement characters).
    mutating func value(of table: StressTable, column: Int, raw: Bool = false) -> StressValue {
        if raw && table.isCollection && column == 3 && chance(0.1) { return .text(pick(Self.badText)) }
        switch (table, column) {
        case (.pairs, 2), (.loose, 1): return .integer(Int64(int(0...3)))
        case (.pairs, 3), (.loose, 2):
            switch int(0...5) {
            case 0: return .null
            case 1: return .text(pick(Self.badText))
            default: return .string(pick(Self.labels))
            }
        case (.pairs, _), (.loose, _): return key(of: table)[table.keyColumns.firstIndex(of: column) ?? 0]
        case (_, 0): return key(of: table)[0]
        case (_, 1): return .integer(Int64(int(0...3)))
        case (_, 2): return .integer(Int64(pick(Self.scores)))
        case (_, 3): return chance(0.3) ? .null : .string(pick(Self.labels))
        default: return .integer(chance(0.5) ? 1 : 0)
        }
    }

    mutating func row(of table: StressTable, raw: Bool = false) -> StressRow {
        let key = key(of: table, raw: raw)
        return StressRow(table.columns.indices.map { column in
            table.keyColumns.firstIndex(of: column).map { key[$0] } ?? value(of: table, column: column, raw: raw)
        })
    }

    /// A filter operand for column `column`: usually a value of the column's own kind, sometimes
    /// another type on purpose (affinity: `rank < '2'`, `label = 10`), sometimes NULL.
    mutating func operand(of table: StressTable, column: Int) -> StressValue {
        if chance(0.04) { return .null }
        if chance(0.12) {
            return pick([.string("2"), .string(" 1 "), .string("abc"), .string(""), .integer(1), .integer(10),
                         .real(1.5), .blob([0x61])])
        }
        var value = value(of: table, column: column)
        if case .text(let bytes) = value, StressValue.utf8String(bytes) == nil { value = .string("a") }
        if value.isNull { value = .string("a") }
        return value
    }

    // MARK: Predicates

    mutating func leaf(of table: StressTable) -> StressPredicate {
        let column = int(0...table.columns.count - 1)
        // LIKE only on TEXT columns: whether a BLOB matches depends on how SQLite was compiled
        // (SQLITE_LIKE_DOESNT_MATCH_BLOBS), not on anything Ripple does.
        let textual = table.columns[column].affinity == .text
        switch int(0...9) {
        case 0...4:
            return .compare(column: column, pick(ComparisonOperator.allCases), operand(of: table, column: column))
        case 5, 6:
            let count = int(0...4)
            return .isIn(column: column, (0..<count).map { _ in operand(of: table, column: column) })
        case 7 where textual, 8 where textual:
            let (pattern, escape) = pick(Self.likePatterns)
            return .like(column: column, pattern: pattern, escape: escape)
        default:
            return table.columns[column].nullable || chance(0.3) ? .isNull(column: column)
                : .compare(column: column, .equal, operand(of: table, column: column))
        }
    }

    mutating func predicate(of table: StressTable, depth: Int = 0) -> StressPredicate {
        guard depth < 2, chance(0.45) else { return chance(0.15) ? .not(leaf(of: table)) : leaf(of: table) }
        let parts = (0..<int(2...3)).map { _ in predicate(of: table, depth: depth + 1) }
        let combined: StressPredicate = chance(0.55) ? .and(parts) : .or(parts)
        return chance(0.15) ? .not(combined) : combined
    }

    // MARK: Queries

    mutating func query(of table: StressTable) -> StressQuery {
        let form: StressQuery.Form = table.isCollection && chance(0.6) ? .collection : .rawSQL
        let predicate = chance(0.25) ? nil : predicate(of: table)
        var orderings: [StressOrdering] = []
        if form == .rawSQL || chance(0.75) {
            var columns = table.tieColumns
            for _ in 0..<int(form == .rawSQL ? 0...2 : 1...2) where !columns.isEmpty {
                let column = columns.remove(at: int(0...columns.count - 1))
                orderings.append(StressOrdering(column: column, descending: chance(0.4)))
            }
        }
        var query = StressQuery(table: table, form: form, predicate: predicate, orderings: orderings, limit: nil, offset: 0)
        if query.isOrdered {
            if chance(0.5) { query.limit = int(1...5) }
            if chance(0.25) { query.offset = int(1...3) }
        }
        return query
    }

    /// The queries of a run: for every table some with ties cut by a window on purpose, and
    /// random ones.
    mutating func queryPool(perTable: Int) -> [StressQuery] {
        var pool: [StressQuery] = []
        for table in StressTable.allCases {
            let form: StressQuery.Form = table.isCollection ? .collection : .rawSQL
            // Ties cut by a window.
            pool.append(StressQuery(table: table, form: form, predicate: nil,
                                    orderings: [StressOrdering(column: table.tieColumns[0], descending: false)],
                                    limit: 3, offset: 0))
            // Rows coming and going on every other write (row by row for a collection).
            pool.append(StressQuery(table: table, form: form, predicate: .compare(column: table.tieColumns[0], .lessOrEqual, .integer(1)),
                                    orderings: [], limit: nil, offset: 0))
            for _ in 2..<max(perTable, 3) { pool.append(query(of: table)) }
        }
        return pool
    }

    // MARK: Writes

    mutating func plan() -> StressPlan {
        if outsideShare > 0, chance(outsideShare) {
            return .outside(rawOperation(on: pick(StressTable.allCases)), via: pick([.withoutTransaction, .migration, .withoutRipple]))
        }
        if chance(0.3) {
            return .method(methodOperation(on: pick([.ints, .strings, .blobs, .uuids])))
        }
        return .write((0..<int(1...4)).map { _ in step(depth: 0) }, rollBack: chance(0.06))
    }

    private mutating func step(depth: Int) -> StressPlanStep {
        if depth < 2, chance(0.18) {
            return .savepoint((0..<int(1...3)).map { _ in step(depth: depth + 1) }, rollBack: chance(0.35))
        }
        let table = pick(StressTable.allCases)
        if table.isCollection && chance(0.5) {
            return .operation(methodOperation(on: table), .collectionInWrite)
        }
        return .operation(rawOperation(on: table), .rawSQL)
    }

    /// Keys SQLite tells apart and Swift's `String ==` does not (canonically equivalent).
    static let equivalentKeys: [[String]] = [["e\u{301}", "\u{e9}"], ["A\u{30A}", "\u{c5}", "\u{212B}"], ["u\u{308}", "\u{fc}"],
                                             ["E\u{301}", "\u{c9}"]]

    /// Rows of `table` for a batch; for the `strings` collection, sometimes one per spelling of
    /// the same text, so that keys Swift calls equal change together.
    private mutating func batch(of table: StressTable, count: ClosedRange<Int>) -> [StressRow] {
        if table == .strings && chance(0.4) {
            return pick(Self.equivalentKeys).map { key in
                var row = row(of: table)
                row.values[0] = .string(key)
                return row
            }
        }
        return (0..<int(count)).map { _ in row(of: table) }
    }

    /// An operation a collection method performs.
    private mutating func methodOperation(on table: StressTable) -> StressOperation {
        switch int(0...19) {
        case 0...3: return .insert(table, row(of: table))
        case 4...8: return .upsert(table, row(of: table))
        case 9...11: return .update(table, row(of: table))
        case 12...14: return .delete(table, key: key(of: table))
        case 15: return .insertAll(table, batch(of: table, count: 1...4))
        case 16, 17: return .upsertAll(table, batch(of: table, count: 1...4))
        case 18: return .updateAll(table, batch(of: table, count: 1...3))
        default: return .deleteAll(table, keys: batch(of: table, count: 1...4).map { $0.key(in: table) })
        }
    }

    /// An operation performed with raw SQL.
    private mutating func rawOperation(on table: StressTable) -> StressOperation {
        switch int(0...19) {
        case 0...3: return .insert(table, row(of: table, raw: true))
        case 4...9: return .upsert(table, row(of: table, raw: true))
        case 10...12: return .update(table, row(of: table, raw: true))
        case 13...15: return .delete(table, key: key(of: table, raw: true))
        case 16...18:
            let column = pick(table.valueColumns)
            return .updateWhere(table, column: column, value: value(of: table, column: column, raw: true),
                                predicate: chance(0.05) ? nil : leaf(of: table))
        default:
            // One random condition and one on a column with ties: few rows at a time, and few
            // statement shapes (the store keeps every distinct SQL text prepared).
            return .deleteWhere(table, predicate: .and([leaf(of: table),
                                                        .compare(column: table.tieColumns[0], .equal, .integer(Int64(int(0...3))))]))
        }
    }
}
