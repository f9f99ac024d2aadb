import Foundation

/// An existing table as SQLite declares it: what ``Store/collection(_:of:primaryKey:)`` compares
/// a record type with.
struct DeclaredTable {
    struct Column {
        var name: String
        /// The declared type, upper-cased (`""` when none).
        var declaredType: String
        var notNull: Bool
        var hasDefault: Bool
        /// 1-based position in the primary key, 0 when not part of it.
        var primaryKeyPosition: Int
        /// A generated column (`VIRTUAL` or `STORED`): SQLite computes its values, which a
        /// collection reads and never writes.
        var isGenerated = false
    }

    var columns: [Column]
    /// Whether the table is `STRICT`: SQLite enforces its declared types (tables made by Ripple
    /// since types were enforced; older ones are not).
    var isStrict: Bool
    /// Whether it is a view (its rows are those of the tables it reads).
    var isView: Bool
    /// Whether the change log names the table's rows by their rowid (see
    /// ``TableLayout/isKeyedByRowid``), and the name of the column that is the rowid's alias.
    var isKeyedByRowid: Bool
    var rowidAlias: String?

    /// The shape of `table` in `main`, or `nil` when `main` has no such table or view. (A `TEMP`
    /// table, or one of an attached database, is never a collection's: the change log sees
    /// `main` only.) Generated columns are among its columns (`pragma table_xinfo`: `hidden` is
    /// 2 or 3 for them).
    static func read(_ table: String, in db: Database) throws -> DeclaredTable? {
        let rows = try db.fetchAll("""
            SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?, 'main') WHERE hidden IN (0, 2, 3) ORDER BY cid
            """, [table])
        guard !rows.isEmpty else { return nil }
        let columns = try rows.map { row in
            Column(name: try row.value("name"), declaredType: ((try? row.value("type", as: String.self)) ?? "").uppercased(),
                   notNull: try row.value("notnull", as: Int.self) != 0, hasDefault: row["dflt_value"] != .null,
                   primaryKeyPosition: try row.value("pk"), isGenerated: try row.value("hidden", as: Int.self) != 0)
        }
        let listed = try db.fetchAll("SELECT type, strict FROM pragma_table_list(?) WHERE schema = 'main'", [table]).first
        let isView = listed?["type"]?.textValue == "view"
        let layout = isView ? nil : try TableLayout.read(db, table: table)
        return DeclaredTable(columns: columns, isStrict: listed?["strict"] == .integer(1), isView: isView,
                             isKeyedByRowid: layout?.isKeyedByRowid ?? false,
                             rowidAlias: layout?.rowidAlias.map { layout!.columns[$0].name })
    }

    /// How a collection keyed by `primaryKey` over this table is observed (see
    /// ``CollectionSchema/Observation``).
    func observation(keyedBy primaryKey: String) -> CollectionSchema.Observation {
        if isView { return .byTablesRead }
        // The log names a rowid table's rows by rowid: the collection's key only when it is the
        // rowid's alias (names compared as SQLite compares them).
        if isKeyedByRowid && rowidAlias.map(SQLIdentifier.folded) != SQLIdentifier.folded(primaryKey) { return .byTable }
        return .byKey
    }

    /// SQLite's affinity of a declared type (its rules, in its order: `datatype3`), or `nil` for
    /// BLOB affinity (no type, or one containing `BLOB`) and for `ANY` in a `STRICT` table, which
    /// keep every value as given. In a table that is not `STRICT`, `ANY` is a type like any
    /// other name: NUMERIC affinity.
    static func affinity(of declaredType: String, strict: Bool) -> String? {
        let declaredType = declaredType.uppercased()
        if declaredType.isEmpty || (strict && declaredType == "ANY") { return nil }
        if declaredType.contains("INT") { return "INTEGER" }
        if declaredType.contains("CHAR") || declaredType.contains("CLOB") || declaredType.contains("TEXT") { return "TEXT" }
        if declaredType.contains("BLOB") { return nil }
        if declaredType.contains("REAL") || declaredType.contains("FLOA") || declaredType.contains("DOUB") { return "REAL" }
        return "NUMERIC"
    }
}

/// Compares a record type with the table of its collection.
///
/// The rule: the table must say what the type says. Additive, safe changes — a property the table
/// has no column for, which the type may leave out (optional, or decoded with `decodeIfPresent`) —
/// are returned, for the caller to add as a versioned schema change. Anything else is a
/// ``StoreError/Kind/schemaMismatch`` naming each property and column that differ, what differs,
/// and the SQL migration that fixes it:
/// * a property stored as another type than its column's declared type;
/// * an optional property over a `NOT NULL` column (nil could not be stored), or a required one
///   over a column of a `STRICT` table that takes NULL (rows may hold NULL);
/// * a required property the table has no column for (existing rows have no value);
/// * a column the type has no property for that must hold a value (`NOT NULL` without a
///   default): inserts could not fill it. (One that may be NULL or has a default is left so by
///   inserts and kept by updates.)
/// * a primary key other than the collection's.
///
/// Tables made before Ripple enforced types (not `STRICT`, no `NOT NULL`) are compared on types,
/// columns and keys; their nullability is not known, so it is not checked.
enum TableCheck {
    static func compare(recordType: String, probed: [SchemaProbe.Column], table: String, shape: DeclaredTable,
                        primaryKey: String) throws(StoreError) -> [SchemaProbe.Column] {
        let quotedTable = SQLIdentifier.quoted(table)
        let columns = Dictionary(shape.columns.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let properties = Set(probed.map(\.name))
        var additions: [SchemaProbe.Column] = []
        var problems: [(what: String, migration: String?)] = []

        for property in probed {
            let quoted = SQLIdentifier.quoted(property.name)
            let type = property.affinity.declaredType
            guard let column = columns[property.name] else {
                if property.isOptional {
                    additions.append(property)
                } else {
                    problems.append((
                        "property \(quoted) (\(property.typeName)) has no column in table \(quotedTable), and the rows "
                            + "stored so far have no value for it. Make it optional (\(property.typeName)?, or decode it "
                            + "with decodeIfPresent and a default), or add the column with a value for those rows:",
                        "ALTER TABLE \(quotedTable) ADD COLUMN \(quoted) \(property.affinity.declaredType(strict: shape.isStrict)) "
                            + "NOT NULL DEFAULT \(literal(property.placeholder));"))
                }
                continue
            }
            if property.name == primaryKey { continue }
            if let declared = DeclaredTable.affinity(of: column.declaredType, strict: shape.isStrict),
               !accepts(declared, property.affinity) {
                let conversion = property.affinity == .date
                    ? SQLIdentifier.quoted(property.name + "_before")
                    : "CAST(\(SQLIdentifier.quoted(property.name + "_before")) AS \(type))"
                problems.append((
                    "property \(quoted) is \(property.typeName), stored as \(type), but column \(quoted) is declared "
                        + "\(column.declaredType.isEmpty ? "without a type" : column.declaredType) (\(declared) affinity"
                        + (shape.isStrict ? "" : " in a table that is not STRICT")
                        + "): it would change what the type stores, or its rows hold values the type cannot read. "
                        + "Convert the column:",
                    rebuild(table, property, strict: shape.isStrict, conversion: conversion)))
            } else if column.isGenerated {
                continue   // computed by SQLite, never written: read as it is
            } else if property.isOptional && column.notNull {
                problems.append((
                    "property \(quoted) is optional (\(property.typeName)), but column \(quoted) is NOT NULL: nil could not "
                        + "be stored. Make the property required, or let the column take NULL:",
                    rebuild(table, property, strict: shape.isStrict, conversion: SQLIdentifier.quoted(property.name + "_before"))))
            } else if !property.isOptional && !column.notNull && shape.isStrict {
                problems.append((
                    "property \(quoted) is required (\(property.typeName)), but column \(quoted) takes NULL: rows may hold "
                        + "NULL, which the type cannot read. Make the property optional (\(property.typeName)?), or fill "
                        + "the NULLs and make the column NOT NULL:",
                    rebuild(table, property, strict: shape.isStrict, conversion: "coalesce(\(SQLIdentifier.quoted(property.name + "_before")), "
                            + "\(literal(property.placeholder)))")))
            }
        }
        for column in shape.columns where !properties.contains(column.name) {
            if (!column.notNull || column.hasDefault || column.isGenerated) && column.primaryKeyPosition == 0 { continue }
            let quoted = SQLIdentifier.quoted(column.name)
            problems.append((
                "column \(quoted) of table \(quotedTable) has no property in \(recordType): inserts could not fill it. "
                    + "Add the property back (optional if it may be absent), or drop the column (first drop any index on it):",
                "ALTER TABLE \(quotedTable) DROP COLUMN \(quoted);"))
        }
        let key = shape.columns.filter { $0.primaryKeyPosition > 0 }.map(\.name)
        if !key.isEmpty && key != [primaryKey] {
            problems.append(("the primary key of table \(quotedTable) is (\(key.map(SQLIdentifier.quoted).joined(separator: ", "))), "
                             + "not the collection's \(SQLIdentifier.quoted(primaryKey)): pass primaryKey: to collection(_:of:), "
                             + "or open the table with raw SQL", nil))
        }
        guard problems.isEmpty else {
            var message = "\(recordType) does not match table \(quotedTable) (nothing was changed):"
            for problem in problems {
                message += "\n  • " + problem.what
                if let migration = problem.migration { message += "\n    " + migration }
            }
            message += "\nRun the migration with Store.migrate (a Migrator of your domain), then open the collection again."
            throw StoreError(.schemaMismatch, message)
        }
        return additions
    }

    /// Whether a column of SQLite affinity `declared` keeps what the type stores as `affinity`
    /// (it may turn an integral REAL into its INTEGER, which reads back as the same Double), or
    /// changes it as documented: a `REAL` date column (as earlier versions made) makes dates REALs.
    private static func accepts(_ declared: String, _ affinity: ColumnAffinity) -> Bool {
        switch affinity {
        case .integer: declared == "INTEGER" || declared == "NUMERIC"
        case .real: declared == "REAL" || declared == "NUMERIC"
        case .date: declared == "REAL"
        case .text, .json: declared == "TEXT"
        case .blob: false
        }
    }

    /// The SQL that replaces column `property.name` by one that says what the type says, keeping
    /// its values through `conversion` (of the old column, renamed `<name>_before`).
    private static func rebuild(_ table: String, _ property: SchemaProbe.Column, strict: Bool, conversion: String) -> String {
        let quotedTable = SQLIdentifier.quoted(table)
        let column = SQLIdentifier.quoted(property.name)
        let before = SQLIdentifier.quoted(property.name + "_before")
        let definition = property.affinity.declaredType(strict: strict)
            + (property.isOptional ? "" : " NOT NULL DEFAULT \(literal(property.placeholder))")
        return "ALTER TABLE \(quotedTable) RENAME COLUMN \(column) TO \(before); "
            + "ALTER TABLE \(quotedTable) ADD COLUMN \(column) \(definition); "
            + "UPDATE \(quotedTable) SET \(column) = \(conversion); "
            + "ALTER TABLE \(quotedTable) DROP COLUMN \(before);"
    }

    /// `value` written as an SQL literal (for the migrations shown in messages, never run by the store).
    static func literal(_ value: SQLValue) -> String {
        switch value {
        case .null: "NULL"
        case .integer(let integer): "\(integer)"
        case .real(let real): real == real.rounded() && abs(real) < 1e15 ? "\(Int64(real)).0" : "\(real)"
        case .text(let text): "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let bytes): "x'" + bytes.map { String(format: "%02x", $0) }.joined() + "'"
        }
    }
}
