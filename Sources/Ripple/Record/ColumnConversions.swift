/// What a column's affinity would change of the values a record binds, so that they would not
/// read back as written (SQLite's rules, `STRICT` tables included: there too a column converts
/// what it can convert without loss of the number).
///
/// A collection refuses such a value before it is written (a ``StoreError`` of kind
/// ``StoreError/Kind/encoding``). The types a collection checks when it opens never bind one;
/// a type that cannot be checked (see ``Store/collection(_:of:primaryKey:)``) might.
struct ColumnConversions: OptionSet, Sendable {
    let rawValue: UInt8

    /// Text that reads as a number becomes that number (INTEGER, REAL and NUMERIC affinity; see
    /// ``NumericText``).
    static let numericText = ColumnConversions(rawValue: 1)
    /// Integers become text (TEXT affinity) or REALs (REAL affinity).
    static let integers = ColumnConversions(rawValue: 2)
    /// REALs become text (TEXT affinity).
    static let reals = ColumnConversions(rawValue: 4)
    /// The table is not `STRICT` (for messages: there `ANY` has NUMERIC affinity).
    static let inLooseTable = ColumnConversions(rawValue: 8)

    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// For a column of SQLite affinity `affinity` (see ``DeclaredTable/affinity(of:strict:)``:
    /// `nil` keeps every value as given). An integral REAL that becomes its INTEGER in a column
    /// of INTEGER or NUMERIC affinity reads back as the same `Double`: not a change.
    init(affinity: String?, strict: Bool) {
        switch affinity {
        case "TEXT"?: self = [.integers, .reals]
        case "REAL"?: self = [.numericText, .integers]
        case "INTEGER"?, "NUMERIC"?: self = [.numericText]
        default: self = []
        }
        if !isEmpty && !strict { insert(.inLooseTable) }
    }
}
