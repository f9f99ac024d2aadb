import Foundation
import RippleSQLite

/// A filter as the store evaluates it: its SQL and arguments (equal filters share an evaluation).
/// Arguments are equal when SQLite binds the same values, by type and bytes: `"\u{e9}"` and
/// `"e\u{301}"`, equal as Swift strings, are two filters.
struct FilterKey: Hashable, Sendable {
    let filterSQL: String
    let arguments: [SQLValue]
    private let exactArguments: [RowKey]

    init(filterSQL: String, arguments: [SQLValue]) {
        self.filterSQL = filterSQL
        self.arguments = arguments
        exactArguments = arguments.map(RowKey.init)
    }

    static func == (lhs: FilterKey, rhs: FilterKey) -> Bool {
        ExactText(lhs.filterSQL) == ExactText(rhs.filterSQL) && lhs.exactArguments == rhs.exactArguments
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(ExactText(filterSQL))
        hasher.combine(exactArguments)
    }
}

/// The filters of a store's row-precise live queries, grouped (observers with the same filter
/// share one evaluation) and indexed per table, so that a commit finds the observers its changed
/// rows may concern without looking at the others: equality and `IN` terms by value in hash maps,
/// ranges in an interval index, and only what no index covers (LIKE, OR, NOT, a collation, a
/// conversion) evaluated by SQLite, in batches.
///
/// Used under its lock by the writer (evaluations) and by registrations.
struct FilterRegistry {
    /// The version of the commit evaluated last (see ``ObservationCenter/register(_:store:interest:)``).
    private(set) var lastEvaluatedVersion: Int64 = 0
    private var tables: [String: TableFilters] = [:]
    /// Per observer, its filters: that of its table, then those of its dependencies (see
    /// ``RowInterest/dependencies``).
    private var memberships: [ObservationCenter.ObserverID: [(table: String, key: FilterKey, isDependency: Bool)]] = [:]

    /// Adds an observer's filter, and those of its dependencies; returns the version of the
    /// commit evaluated last, which may commit after the observer's first read without having
    /// evaluated its filters.
    mutating func add(_ id: ObservationCenter.ObserverID, _ interest: RowInterest) -> Int64 {
        var added: [(table: String, key: FilterKey, isDependency: Bool)] = []
        for (interest, isDependency) in [(interest, false)] + interest.dependencies.map({ ($0, true) }) {
            let key = FilterKey(filterSQL: interest.filterSQL, arguments: interest.filterArguments)
            added.append((interest.table, key, isDependency))
            tables[interest.table, default: TableFilters(interest: interest)]
                .add(id, key: key, interest: interest, isDependency: isDependency)
        }
        memberships[id] = added
        return lastEvaluatedVersion
    }

    /// How many distinct filters `table` has.
    func groupCount(of table: String) -> Int { tables[table]?.groupCount ?? 0 }

    /// How many times the index of `table` was built (for tests: a value term's values change in
    /// place, without a build).
    func buildCount(of table: String) -> Int { tables[table]?.builds ?? 0 }

    /// Makes `values` (one set per value term of the observer's interest, see
    /// ``RowInterest/valueTerms``) the values its terms hold in the index of its table, in place:
    /// the other observers' entries are not touched. Returns the version of the commit evaluated
    /// last when they changed (a commit evaluated before, with the values that were, may still
    /// be routed: the observer hears every commit to its table until it has read past it), or
    /// `nil` when they did not change.
    ///
    /// - Complexity: O(values), plus O(values that left or entered) index updates.
    mutating func setValues(_ id: ObservationCenter.ObserverID, _ values: [Set<IndexedValue>]) -> Int64? {
        guard let table = memberships[id]?.first(where: { !$0.isDependency })?.table,
              tables[table]?.setValues(id, values) == true else { return nil }
        return lastEvaluatedVersion
    }

    mutating func remove(_ id: ObservationCenter.ObserverID) {
        guard let filters = memberships.removeValue(forKey: id) else { return }
        // The table's index stays, even empty: its statements belong to the writer connection and
        // are released by its next rebuild, on the writer (this may be any thread).
        for (table, key, isDependency) in filters { tables[table]?.remove(id, key: key, isDependency: isDependency) }
    }

    /// Evaluates, inside the write transaction about to commit, the filters of the changed tables
    /// on the changed rows: which observers matched (and which could not be evaluated). Never
    /// fails the write.
    ///
    /// - Complexity: per changed table, one read of the changed rows' indexed columns, then
    ///   O(changed rows × (1 + log groups) + matches) lookups; plus SQLite's evaluation of the
    ///   filters no index covers (and of the matches of partial index terms), in batches.
    mutating func evaluate(_ summary: CommitSummary, in db: Database) -> FilterMatches {
        lastEvaluatedVersion = summary.version
        var matches = FilterMatches()
        guard let rowKeys = summary.rowKeys else { return matches }
        let schemaVersion = db.changeCapture?.schemaVersion ?? 0
        for (table, keys) in rowKeys {
            matches.evaluatedTables.insert(table)
            guard !keys.isEmpty else { continue }
            // In place: a copy of the table's index would be made on its first change.
            tables[table]?.evaluate(Array(keys), schemaVersion: schemaVersion, into: &matches, in: db)
        }
        return matches
    }
}

/// Which row-precise observers one commit's changed rows concern, decided inside its
/// transaction (see ``FilterRegistry/evaluate(_:in:)``): facts about observers, kept apart
/// from the facts about the commit (``CommitSummary``).
struct FilterMatches: Sendable {
    /// The tables whose observers' filters were evaluated on the changed rows.
    var evaluatedTables: Set<String> = []
    /// The observers whose filter matched a changed row.
    var matching: Set<ObservationCenter.ObserverID> = []
    /// The observers whose filter could not be evaluated (they are told).
    var unevaluated: Set<ObservationCenter.ObserverID> = []
    /// The observers whose filter of a dependency (``RowInterest/dependencies``) matched a
    /// changed row of that table (they run their query again).
    var dependencyMatching: Set<ObservationCenter.ObserverID> = []
    /// The observers whose filter of a dependency could not be evaluated (told, as matched).
    var dependencyUnevaluated: Set<ObservationCenter.ObserverID> = []
    /// The observers of which a value term (``RowInterest/valueTerms``) holds the value of a
    /// changed row (told; whether the row matches the whole condition is read).
    var valueMatching: Set<ObservationCenter.ObserverID> = []
}

/// The filter groups of one table and their index.
struct TableFilters {
    private struct Group {
        var key: FilterKey
        /// The observers of the table with this filter.
        var members: Set<ObservationCenter.ObserverID> = []
        /// The observers with this filter for a dependency on the table.
        var dependents: Set<ObservationCenter.ObserverID> = []
        var interest: RowInterest
        var plan: FilterPlan = .unindexed

        var isEmpty: Bool { members.isEmpty && dependents.isEmpty }
    }

    private let quotedTable: String
    /// How SQL names a row of the table as the change log does (a `?` slot's counterpart in
    /// `IN` lists): the observers' key column, or for a table only dependencies read, found from
    /// the table's layout at each build (empty until found; `nil` found: no way to name it, its
    /// filters cannot be evaluated).
    private var quotedKey: String
    /// The number of columns of the key (a composite key is compared as a row value).
    private var keyWidth = 1
    /// Whether the key is found from the table's layout (no observer of the table named it).
    private var findsKey: Bool
    private let table: String
    private var groups: [Int: Group] = [:]
    private var groupOfKey: [FilterKey: Int] = [:]
    private var nextGroup = 0

    /// What SQLite's comparison of a value term depends on: the columns compared.
    private struct TermShape: Hashable {
        let column: String
        let dependencyTable: String
        let selectedColumn: String
    }

    /// An observer of the table with value terms (see ``RowInterest/valueTerms``).
    private struct ValueTerms {
        let terms: [RowInterest.ValueTerm]
        /// The values it registered, per column (a column two terms compare holds both's).
        var values: [String: Set<IndexedValue>] = [:]
    }

    /// The observers with value terms, each with its values; changed in place, one observer at a time.
    private var valueTerms: [ObservationCenter.ObserverID: ValueTerms] = [:]
    /// Per column, per value, the observers whose value terms hold it.
    private var valueIndex: [String: [IndexedValue: Set<ObservationCenter.ObserverID>]] = [:]
    /// The observers with a term of each shape (a new shape rebuilds the index, which reads its column).
    private var termShapes: [TermShape: Set<ObservationCenter.ObserverID>] = [:]
    /// The shapes SQLite compares otherwise than value for value (found with the index): their
    /// observers are told of every commit to the table.
    private var unindexedShapes: [TermShape] = []
    /// How many times the index was built.
    private(set) var builds = 0

    // The index, rebuilt when groups come or go or the schema changes.
    private var isBuilt = false
    private var builtSchemaVersion: Int64 = -1
    /// The indexed columns (read from each changed row, after its key).
    private var columns: [String] = []
    private var equality: [[IndexedValue: [Int]]] = []
    private var intervals: [IntervalIndex<Int>] = []
    private var everyRow: [Int] = []
    private var unindexed: [Int] = []
    /// SQLite's evaluation of the unindexed groups, per batch (rebuilt with the index).
    private var batchStatements: [Int: Statement] = [:]
    /// The read of the changed rows' indexed columns, by its number of key slots (rebuilt with
    /// the index).
    private var columnReads: [Int: String] = [:]

    init(interest: RowInterest) {
        table = interest.table
        quotedTable = interest.quotedTable
        quotedKey = interest.quotedKey
        findsKey = interest.quotedKey.isEmpty
    }

    var groupCount: Int { groups.count }

    mutating func add(_ id: ObservationCenter.ObserverID, key: FilterKey, interest: RowInterest, isDependency: Bool) {
        if findsKey && !interest.quotedKey.isEmpty {
            // An observer of the table names its key: the index reads rows by it.
            (quotedKey, keyWidth, findsKey) = (interest.quotedKey, 1, false)
            isBuilt = false
        }
        if !isDependency && !interest.valueTerms.isEmpty {
            valueTerms[id] = ValueTerms(terms: interest.valueTerms)
            for term in interest.valueTerms {
                let shape = TermShape(column: term.column, dependencyTable: term.dependencyTable,
                                      selectedColumn: term.selectedColumn)
                if termShapes[shape] == nil { isBuilt = false }
                termShapes[shape, default: []].insert(id)
            }
        }
        if let group = groupOfKey[key] {
            if isDependency { groups[group]!.dependents.insert(id) } else { groups[group]!.members.insert(id) }
            return
        }
        let group = nextGroup
        nextGroup += 1
        groups[group] = Group(key: key, members: isDependency ? [] : [id], dependents: isDependency ? [id] : [],
                              interest: interest)
        groupOfKey[key] = group
        isBuilt = false
    }

    mutating func remove(_ id: ObservationCenter.ObserverID, key: FilterKey, isDependency: Bool) {
        if !isDependency, let observer = valueTerms.removeValue(forKey: id) {
            for (column, values) in observer.values { unindex(id, values, of: column) }
            for term in observer.terms {
                let shape = TermShape(column: term.column, dependencyTable: term.dependencyTable,
                                      selectedColumn: term.selectedColumn)
                termShapes[shape]?.remove(id)
                // (A shape left without observers stays until the next build: its column is read.)
                if termShapes[shape]?.isEmpty == true { termShapes[shape] = nil }
            }
        }
        guard let group = groupOfKey[key] else { return }
        if isDependency { groups[group]!.dependents.remove(id) } else { groups[group]!.members.remove(id) }
        if groups[group]!.isEmpty {
            groups[group] = nil
            groupOfKey[key] = nil
            isBuilt = false
        }
    }

    /// Makes `values` (one set per value term) the values `id`'s terms hold; returns whether they changed.
    ///
    /// - Complexity: O(values), plus O(values that left or entered) index updates; the index is
    ///   not rebuilt.
    mutating func setValues(_ id: ObservationCenter.ObserverID, _ values: [Set<IndexedValue>]) -> Bool {
        guard let observer = valueTerms[id] else { return false }
        var byColumn: [String: Set<IndexedValue>] = [:]
        for (term, values) in zip(observer.terms, values) { byColumn[term.column, default: []].formUnion(values) }
        guard byColumn != observer.values else { return false }
        for column in Set(byColumn.keys).union(observer.values.keys) {
            let old = observer.values[column] ?? [], new = byColumn[column] ?? []
            unindex(id, old.subtracting(new), of: column)
            for value in new.subtracting(old) { valueIndex[column, default: [:]][value, default: []].insert(id) }
        }
        valueTerms[id]!.values = byColumn
        return true
    }

    private mutating func unindex(_ id: ObservationCenter.ObserverID, _ values: Set<IndexedValue>, of column: String) {
        for value in values {
            guard let index = valueIndex[column]?.index(forKey: value) else { continue }
            valueIndex[column]!.values[index].remove(id)
            if valueIndex[column]!.values[index].isEmpty { valueIndex[column]!.remove(at: index) }
        }
    }

    /// Observers whose filters one SQLite statement evaluates at most (SQLite allows 2,000
    /// result columns and, as built on Debian, 250,000 parameters; the batch stays far below).
    private static var batchSize: Int { 200 }
    /// Parameters of one statement at most (the filters' arguments and the keys).
    private static var parameterLimit: Int { 30_000 }

    private mutating func build(schemaVersion: Int64, in db: Database) {
        var comparisons: [String: ColumnComparison?] = [:]
        let table = self.table
        func comparison(_ column: String) -> ColumnComparison? {
            if let known = comparisons[column] { return known }
            let found = ColumnComparison(table: table, column: column, in: db)
            comparisons[column] = found
            return found
        }
        var columnIndex: [String: Int] = [:]
        var equalityEntries: [[IndexedValue: [Int]]] = []
        var intervalEntries: [[(ValueInterval, Int)]] = []
        everyRow = []
        unindexed = []
        func index(of column: String) -> Int {
            if let index = columnIndex[column] { return index }
            columnIndex[column] = equalityEntries.count
            equalityEntries.append([:])
            intervalEntries.append([])
            return equalityEntries.count - 1
        }
        for id in groups.keys.sorted() {
            let plan = FilterPlan.of(groups[id]!.interest.filter, comparison: comparison)
            groups[id]!.plan = plan
            switch plan {
            case .everyRow:
                everyRow.append(id)
            case .equality(let column, let values, _):
                let slot = index(of: column)
                for value in values { equalityEntries[slot][value, default: []].append(id) }
            case .interval(let column, let interval, _):
                intervalEntries[index(of: column)].append((interval, id))
            case .unindexed:
                unindexed.append(id)
            }
        }
        // Value terms: their columns are read, and compared value for value when SQLite would
        // too (no affinity converts either side, and the column's collation compares bytes).
        unindexedShapes = []
        for shape in termShapes.keys.sorted(by: { ($0.column, $0.dependencyTable, $0.selectedColumn)
                                                  < ($1.column, $1.dependencyTable, $1.selectedColumn) }) {
            _ = index(of: shape.column)
            guard let own = comparison(shape.column), own.comparesUTF8Bytes,
                  let selected = ColumnComparison(table: shape.dependencyTable, column: shape.selectedColumn, in: db),
                  own.affinity.comparisonClass == selected.affinity.comparisonClass else {
                unindexedShapes.append(shape)
                continue
            }
        }
        if findsKey {
            // Only dependencies read the table: its key as the change log names its rows.
            let key = (try? TableLayout.read(db, table: table))?.flatMap(LoggedRowKey.init)
            quotedKey = key?.sql ?? ""
            keyWidth = key?.columns.count ?? 1
        }
        columns = columnIndex.sorted { $0.value < $1.value }.map(\.key)
        equality = equalityEntries
        intervals = intervalEntries.map(IntervalIndex.init)
        batchStatements = [:]
        columnReads = [:]
        builtSchemaVersion = schemaVersion
        isBuilt = true
        builds += 1
    }

    mutating func evaluate(_ keys: [RowKey], schemaVersion: Int64, into matches: inout FilterMatches, in db: Database) {
        if !isBuilt || builtSchemaVersion != schemaVersion { build(schemaVersion: schemaVersion, in: db) }
        guard !quotedKey.isEmpty else {
            // Rows of the table cannot be named: every filter is told as not evaluated.
            for group in groups.values {
                matches.unevaluated.formUnion(group.members)
                matches.dependencyUnevaluated.formUnion(group.dependents)
            }
            return
        }
        for shape in unindexedShapes { matches.unevaluated.formUnion(termShapes[shape] ?? []) }
        var matched: [Int] = []
        var toVerify: [Int] = []
        var failed: [Int] = []
        if !columns.isEmpty || !everyRow.isEmpty {
            do {
                var candidates: [Int] = []
                let read = columnRead(for: keys.count)
                let found = try readIndexedColumns(of: keys, sql: read, in: db) { values in
                    for (slot, value) in values.enumerated() {
                        guard let value else { continue }
                        if let groups = equality[slot][value] { candidates += groups }
                        intervals[slot].members(containing: value, into: &candidates)
                        if let observers = valueIndex[columns[slot]]?[value] { matches.valueMatching.formUnion(observers) }
                    }
                }
                if found { matched += everyRow }
                for group in Set(candidates) {
                    switch groups[group]?.plan {
                    case .equality(_, _, exact: true)?, .interval(_, _, exact: true)?: matched.append(group)
                    case nil: break
                    default: toVerify.append(group)
                    }
                }
            } catch {
                failed += everyRow
                for (id, group) in groups where group.plan.isIndexed { failed.append(id) }
                matches.unevaluated.formUnion(valueTerms.keys)
            }
        }
        // What the index cannot decide: SQLite evaluates it on the changed rows.
        for (batch, start) in stride(from: 0, to: unindexed.count, by: Self.batchSize).enumerated() {
            let members = Array(unindexed[start..<min(start + Self.batchSize, unindexed.count)])
            evaluateInSQLite(members, batch: batch, keys: keys, matched: &matched, failed: &failed, in: db)
        }
        for start in stride(from: 0, to: toVerify.count, by: Self.batchSize) {
            let members = Array(toVerify[start..<min(start + Self.batchSize, toVerify.count)])
            evaluateInSQLite(members, batch: nil, keys: keys, matched: &matched, failed: &failed, in: db)
        }
        for group in matched {
            matches.matching.formUnion(groups[group]?.members ?? [])
            matches.dependencyMatching.formUnion(groups[group]?.dependents ?? [])
        }
        for group in failed {
            matches.unevaluated.formUnion(groups[group]?.members ?? [])
            matches.dependencyUnevaluated.formUnion(groups[group]?.dependents ?? [])
        }
    }

    /// The SQL of ``readIndexedColumns(of:sql:in:_:)`` for `count` keys (built once per size).
    private mutating func columnRead(for count: Int) -> String {
        let slots = Self.slotCount(for: count)
        if let built = columnReads[slots] { return built }
        // (Column 0 is not read: a composite key, a row value, is no result column.)
        let selected = ([keyWidth == 1 ? quotedKey : "1"] + columns.map(SQLIdentifier.quoted)).joined(separator: ", ")
        let sql = "SELECT \(selected) FROM \(quotedTable) WHERE \(quotedKey) IN (" + keySlots(for: count) + ")"
        columnReads[slots] = sql
        return sql
    }

    /// Reads the indexed columns of the rows of `keys` (those that still exist), calling `body`
    /// with each row's values; returns whether any row exists.
    private func readIndexedColumns(of keys: [RowKey], sql: String, in db: Database,
                                    _ body: ([IndexedValue?]) -> Void) throws -> Bool {
        let statement = try db.cachedStatement(sql)
        defer { statement.reset() }
        try Self.bind(keys, to: statement, from: 1)
        var found = false
        var values = [IndexedValue?](repeating: nil, count: columns.count)
        while try statement.step() {
            found = true
            for slot in columns.indices {
                values[slot] = IndexedValue(column: Int32(slot + 1), of: statement.handle)
            }
            body(values)
        }
        return found
    }

    /// The `?`s of an `IN` list for `count` keys: a power of two of them, so that a statement is
    /// reused as the count varies (see ``bind(_:to:from:)``); for a composite key, a `VALUES`
    /// list of row values.
    private func keySlots(for count: Int) -> String {
        guard keyWidth > 1 else { return Array(repeating: "?", count: Self.slotCount(for: count)).joined(separator: ", ") }
        let row = "(" + Array(repeating: "?", count: keyWidth).joined(separator: ", ") + ")"
        return "VALUES " + Array(repeating: row, count: Self.slotCount(for: count)).joined(separator: ", ")
    }

    /// The power of two of `?`s an `IN` list for `count` keys has.
    private static func slotCount(for count: Int) -> Int {
        var slots = 1
        while slots < count { slots *= 2 }
        return slots
    }

    /// Binds `keys` exactly as stored from parameter `index` on, then NULL in the slots left.
    private static func bind(_ keys: [RowKey], to statement: Statement, from index: Int32) throws {
        var index = index
        for key in keys { index += try key.bind(to: statement, at: index) }
        while index <= Int32(statement.parameterCount) {
            try statement.bindNull(at: index)
            index += 1
        }
    }

    /// Evaluates the filters of `members` on the rows of `keys` in one statement (cached per
    /// `batch` for the unindexed groups); adds those matching any row to `matched`, or all to
    /// `failed` when the statement fails.
    private mutating func evaluateInSQLite(_ members: [Int], batch: Int?, keys: [RowKey], matched: inout [Int],
                                           failed: inout [Int], in db: Database) {
        let arguments = members.reduce(0) { $0 + (groups[$1]?.key.arguments.count ?? 0) }
        guard arguments + keys.count < Self.parameterLimit else {
            // Too many arguments for one statement: halve the batch.
            guard members.count > 1 else {
                failed += members
                return
            }
            let half = members.count / 2
            evaluateInSQLite(Array(members[..<half]), batch: nil, keys: keys, matched: &matched, failed: &failed, in: db)
            evaluateInSQLite(Array(members[half...]), batch: nil, keys: keys, matched: &matched, failed: &failed, in: db)
            return
        }
        do {
            let conditions = members.map { group in
                let sql = groups[group]!.key.filterSQL
                return "max(" + (sql.isEmpty ? "1" : "(" + sql + ")") + ")"
            }
            let sql = "SELECT " + conditions.joined(separator: ", ") + " FROM " + quotedTable + " WHERE " + quotedKey
                + " IN (" + keySlots(for: keys.count) + ")"
            let statement: Statement
            if let batch, let cached = batchStatements[batch], cached.sql == sql {
                statement = cached
            } else {
                statement = try db.makeStatement(sql)
                if let batch { batchStatements[batch] = statement }
            }
            defer { statement.reset() }
            var index: Int32 = 1
            for group in members {
                for argument in groups[group]!.key.arguments {
                    try statement.bind(argument, at: index)
                    index += 1
                }
            }
            try Self.bind(keys, to: statement, from: index)
            guard try statement.step() else { return }
            for (column, group) in members.enumerated()
            where !statement.isNull(at: Int32(column)) && statement.integer(at: Int32(column)) != 0 {
                matched.append(group)
            }
        } catch {
            failed += members
        }
    }
}

extension ColumnComparison.Affinity {
    /// The affinities SQLite compares two columns of without converting either: a numeric one
    /// with a numeric one, TEXT with TEXT, none (BLOB) with none.
    var comparisonClass: Int {
        switch self {
        case .integer, .real, .numeric: 0
        case .text: 1
        case .blob: 2
        }
    }
}

extension FilterPlan {
    var isIndexed: Bool {
        switch self {
        case .equality, .interval: true
        case .everyRow, .unindexed: false
        }
    }
}
