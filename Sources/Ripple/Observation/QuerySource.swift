import Foundation
import RippleDiff
import RippleSQLite

/// The result of one query at one version, as a live query keeps it: the elements, and for each
/// one its identity (the key column's value exactly, a ``RowKey``) and a fingerprint of every
/// column, to tell which elements and which columns changed.
struct Snapshot<Element: Sendable>: Sendable {
    var elements: [Element] = []
    /// Per element: identity and content fingerprint, what the diff compares.
    var items: [SnapshotItem] = []
    /// The result's column names.
    var columnNames: [String] = []
    /// Per element, one fingerprint per column (`items.count × columnNames.count`, row-major).
    var columnHashes: [UInt64] = []
    /// For a source that places rows in place (see ``QuerySource/orderTerms``): per element, the
    /// values of its ORDER BY terms as SQLite compares them, `nil` for NULL
    /// (`items.count × sortWidth`, row-major).
    var sortValues: [IndexedValue?] = []
    var sortWidth = 0

    /// The columns whose values differ between element `old` of `self` and element `new` of `next`.
    func changedColumns(from old: Int, to new: Int, in next: Snapshot) -> Set<String> {
        let width = columnNames.count
        guard next.columnNames == columnNames else { return Set(next.columnNames) }
        var changed: Set<String> = []
        for column in 0..<width where columnHashes[old * width + column] != next.columnHashes[new * width + column] {
            changed.insert(columnNames[column])
        }
        return changed
    }

    /// Removes element `index`.
    mutating func remove(at index: Int) {
        let width = columnNames.count
        elements.remove(at: index)
        items.remove(at: index)
        columnHashes.removeSubrange(index * width ..< (index + 1) * width)
        sortValues.removeSubrange(index * sortWidth ..< (index + 1) * sortWidth)
    }

    /// Replaces element `index` with element `row` of `rows` (same columns).
    mutating func replace(_ index: Int, with row: Int, of rows: Snapshot) {
        let width = columnNames.count
        elements[index] = rows.elements[row]
        items[index] = rows.items[row]
        columnHashes.replaceSubrange(index * width ..< (index + 1) * width,
                                     with: rows.columnHashes[row * width ..< (row + 1) * width])
        sortValues.replaceSubrange(index * sortWidth ..< (index + 1) * sortWidth, with: rows.sortValues(of: row))
    }

    /// Inserts element `row` of `rows` (same columns) at `index`.
    mutating func insert(_ row: Int, of rows: Snapshot, at index: Int) {
        let width = columnNames.count
        elements.insert(rows.elements[row], at: index)
        items.insert(rows.items[row], at: index)
        columnHashes.insert(contentsOf: rows.columnHashes[row * width ..< (row + 1) * width], at: index * width)
        sortValues.insert(contentsOf: rows.sortValues(of: row), at: index * sortWidth)
    }

    /// Appends element `index` of `other` (same columns).
    mutating func append(_ index: Int, of other: Snapshot) {
        let width = columnNames.count
        elements.append(other.elements[index])
        items.append(other.items[index])
        columnHashes.append(contentsOf: other.columnHashes[index * width ..< (index + 1) * width])
        sortValues.append(contentsOf: other.sortValues(of: index))
    }

    /// The ORDER BY values of element `index` (empty when the source does not keep them).
    func sortValues(of index: Int) -> ArraySlice<IndexedValue?> {
        sortValues[index * sortWidth ..< (index + 1) * sortWidth]
    }
}

/// One element of a snapshot as the diff sees it: identity = the key's value, by type and bytes
/// (its hash computed once: the diff's symbol table hashes identities); content equal when every
/// column's value is.
struct SnapshotItem: Diffable, Hashable, Sendable {
    var key: RowKey
    var content: UInt64

    init(key: RowKey, content: UInt64) {
        self.key = key
        self.content = content
    }

    var diffID: RowKey { key }
    func isContentEqual(to other: SnapshotItem) -> Bool { content == other.content }
}

/// A fast 64-bit hash of column values (multiply–rotate rounds over 8-byte words, a murmur-style
/// finish), seeded per process so that crafted keys cannot aim at collisions. Fingerprints are
/// compared, never stored: a snapshot lives in one process.
enum Fingerprint {
    private static let seed = UInt64.random(in: 1 ... .max)
    private static let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
    private static let multiplier2: UInt64 = 0xC2B2_AE3D_27D4_EB4F

    static var start: UInt64 { seed }

    @inline(__always)
    private static func rotate(_ value: UInt64, _ bits: UInt64) -> UInt64 { value << bits | value >> (64 - bits) }

    /// One round over a word (murmur3's 64-bit body).
    @inline(__always)
    private static func round(_ state: UInt64, _ word: UInt64) -> UInt64 {
        let mixed = rotate(word &* multiplier2, 31) &* multiplier
        return rotate(state ^ mixed, 27) &* 5 &+ 0x52DC_E729
    }

    @inline(__always)
    static func finish(_ state: UInt64) -> UInt64 {
        var h = state
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }

    /// Folds a column's fingerprint into a row's.
    @inline(__always)
    static func combine(_ state: UInt64, _ value: UInt64) -> UInt64 { round(state, value) }

    /// One 8-byte value of a type (integers, reals by their bits).
    @inline(__always)
    static func word(_ value: UInt64, type: UInt64) -> UInt64 {
        finish(round(round(seed, type), value))
    }

    /// Bytes of a type.
    static func bytes(_ buffer: UnsafeRawBufferPointer, type: UInt64) -> UInt64 {
        var state = round(seed, type &+ UInt64(buffer.count) << 8)
        guard let base = buffer.baseAddress else { return finish(state) }
        let count = buffer.count
        var offset = 0
        while offset + 8 <= count {
            state = round(state, base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            offset += 8
        }
        if offset < count {
            var tail: UInt64 = 0
            for index in offset..<count { tail = tail << 8 | UInt64(base.load(fromByteOffset: index, as: UInt8.self)) }
            state = round(state, tail)
        }
        return finish(state)
    }
}

/// Reads the rows of a statement into a ``Snapshot``, decoding each with `decode`.
///
/// The result's columns are read once the statement has stepped: after a schema change, SQLite
/// prepares a statement again in its first step, and until then reports the columns it had
/// (a column renamed under its old name, a column added missing).
struct SnapshotReader {
    /// The column whose value identifies an element (see ``keyColumnName``).
    var keyColumn: Int32
    /// The result columns whose values the snapshot keeps, to place rows by the query's order
    /// (see ``QuerySource/orderTerms``).
    var sortColumns: [Int32] = []
    /// When set, the key column is the result column of this name, found once the statement
    /// stepped; `sql` names the query in the error when it has none.
    var keyColumnName: String?
    var sql = ""

    init(keyColumn: Int32, sortColumns: [Int32] = []) {
        self.keyColumn = keyColumn
        self.sortColumns = sortColumns
    }

    /// A reader whose key is the result column `name`.
    init(keyColumnNamed name: String, sql: String) {
        self.init(keyColumn: 0)
        keyColumnName = name
        self.sql = sql
    }

    /// `columnsKnown` is called once the result's columns are known, before the first element
    /// is decoded.
    func read<Element>(_ statement: Statement, columnsKnown: (Row.Columns) throws -> Void = { _ in },
                       decode: () throws -> Element) throws -> Snapshot<Element> {
        let handle = statement.handle
        var width: Int32 = -1
        var keyColumn = self.keyColumn
        var snapshot = Snapshot<Element>()
        snapshot.sortWidth = sortColumns.count
        func learnColumns() throws {
            width = Int32(statement.columnCount)
            snapshot.columnNames = (0..<Int(width)).map(statement.columnName)
            let columns = Row.Columns(snapshot.columnNames)
            if let keyColumnName {
                guard let index = columns.indexByName[keyColumnName] else {
                    throw StoreError(.invalidQuery, "no column \"\(keyColumnName)\" in the result of "
                                     + "\(DatabaseError.abbreviated(sql)) (columns: \(columns.names.joined(separator: ", ")))")
                }
                keyColumn = Int32(index)
            }
            try columnsKnown(columns)
        }
        while try statement.step() {
            if width < 0 { try learnColumns() }
            for column in sortColumns { snapshot.sortValues.append(IndexedValue(column: column, of: handle)) }
            // Fingerprints first: they read each column with the accessor of its own type, so no
            // value is converted before the decoder reads it.
            var row = Fingerprint.start
            for column in 0..<width {
                let hash = Self.fingerprint(handle, column)
                snapshot.columnHashes.append(hash)
                row = Fingerprint.combine(row, hash)
            }
            let key = RowKey(column: keyColumn, of: handle)
            snapshot.items.append(SnapshotItem(key: key, content: Fingerprint.finish(row)))
            snapshot.elements.append(try decode())
        }
        if width < 0 { try learnColumns() }
        return snapshot
    }

    /// The rows of `statement` (bound, not yet stepped) as ``Row``s, identified by the result
    /// column `identity`. `sql` names the query in the error for a missing column.
    static func rows(of statement: Statement, identity: String, sql: String) throws -> Snapshot<Row> {
        var columns = Row.Columns([])
        return try SnapshotReader(keyColumnNamed: identity, sql: sql).read(statement, columnsKnown: { columns = $0 }) {
            Row(columns: columns, values: (0..<Int32(columns.names.count)).map(statement.value(at:)))
        }
    }

    /// A fingerprint of one column's value and type.
    static func fingerprint(_ handle: OpaquePointer, _ column: Int32) -> UInt64 {
        let type = sqlite3_column_type(handle, column)
        switch type {
        case SQLITE_INTEGER:
            return Fingerprint.word(UInt64(bitPattern: sqlite3_column_int64(handle, column)), type: 1)
        case SQLITE_FLOAT:
            return Fingerprint.word(sqlite3_column_double(handle, column).bitPattern, type: 2)
        case SQLITE_TEXT:
            let count = Int(sqlite3_column_bytes(handle, column))
            return Fingerprint.bytes(UnsafeRawBufferPointer(start: sqlite3_column_text(handle, column), count: count), type: 3)
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, column))
            return Fingerprint.bytes(UnsafeRawBufferPointer(start: sqlite3_column_blob(handle, column), count: count), type: 4)
        default:
            return Fingerprint.word(0, type: 5)
        }
    }
}

/// What a live query reads and what can change it.
struct QuerySource<Element: Sendable>: Sendable {
    /// The query, readably (errors and recorded transcripts show it).
    let description: String
    /// The SQL text and arguments of the query.
    let sql: String
    let arguments: [SQLValue]
    /// The tables the query reads, when known in advance (a collection); otherwise found by
    /// preparing the SQL under an authorizer.
    let knownTables: Set<String>?
    /// For a single-table filter without offset: how to tell that changed rows cannot affect the
    /// result (row-precise invalidation). `nil`: any change to the tables re-runs the query.
    let rowCheck: RowCheck?
    /// Reads the result.
    let fetch: @Sendable (Database) throws -> Snapshot<Element>
    /// For row-precise sources with an order: reads the rows with these keys that match the
    /// filter now (in no particular order), to patch the result in place when only their
    /// non-ordering columns changed.
    var fetchRows: (@Sendable (Database, [RowKey]) throws -> Snapshot<Element>)? = nil
    /// The result columns of the ORDER BY terms.
    var orderColumns: [Int] = []
    /// For an ordered source without a window whose snapshots keep their rows' ORDER BY values
    /// (in the order of these terms, the primary key last, so that the order is total): a row
    /// that enters the result, or whose ordering columns changed, is placed where the query's
    /// order puts it, without running the query again (see ``RowOrder``).
    var orderTerms: [RowOrder.Term] = []
    /// Whether the query has a window (LIMIT): a row leaving it lets another in.
    var isWindowed = false
    /// What live queries of the same result share (see ``SharedRead``); `nil`: nothing.
    var shareKey: SharedReadKey?

    /// The tables the query reads, found by SQLite's authorizer while preparing it.
    func tables(in db: Database) throws -> Set<String> {
        if let knownTables { return Set(knownTables.map(SQLIdentifier.folded)) }
        return try db.tablesRead(by: sql)
    }
}

/// Row-precise invalidation of a single-table query: changed rows that are not in the current
/// result and do not match the filter now cannot change the result (the window has no offset).
struct RowCheck: Sendable {
    /// The table, its key and the filter (also what the store evaluates inside each commit).
    let interest: RowInterest

    /// The table queried.
    var table: String { interest.table }
    /// The filter's SQL (with its `?`s) and arguments; empty SQL for no filter.
    var filterSQL: String { interest.filterSQL }
    var filterArguments: [SQLValue] { interest.filterArguments }

    /// Whether any of `keys` is a row that matches the filter now.
    func anyMatches(_ keys: [RowKey], in db: Database) throws -> Bool {
        guard !keys.isEmpty else { return false }
        var sql = "SELECT 1 FROM \(interest.quotedTable) WHERE \(interest.quotedKey) IN ("
            + Array(repeating: "?", count: keys.count).joined(separator: ", ") + ")"
        if !filterSQL.isEmpty { sql += " AND (" + filterSQL + ")" }
        sql += " LIMIT 1"
        // Keys of a few sizes recur (one row, a handful): cache those statements only.
        let statement = keys.count <= 4 ? try db.cachedStatement(sql) : try db.makeStatement(sql)
        defer { statement.reset() }
        try RowCheck.bind(keys, then: filterArguments, to: statement)
        return try statement.step()
    }

    /// Binds `keys` exactly as stored (type and bytes), then `arguments`.
    static func bind(_ keys: [RowKey], then arguments: [SQLValue], to statement: Statement) throws {
        var index: Int32 = 1
        for key in keys { index += try key.bind(to: statement, at: index) }
        for argument in arguments {
            try statement.bind(argument, at: index)
            index += 1
        }
    }
}

extension Database {
    /// What `sql` reads, as SQLite's authorizer reports it while preparing it: the tables of
    /// `main`, and those of other schemas as `schema.table`.
    private func tablesReportedReading(_ sql: String) throws -> (main: Set<String>, outside: Set<String>, namedMain: Set<String>) {
        collectsTablesRead = true
        tablesReadByStatement = []
        tablesReadOutsideMain = []
        tablesReadInMain = []
        defer {
            collectsTablesRead = false
            tablesReadByStatement = []
            tablesReadOutsideMain = []
            tablesReadInMain = []
        }
        _ = try makeStatement(sql)
        return (tablesReadByStatement, tablesReadOutsideMain, tablesReadInMain)
    }

    /// Whether `sql` reads `table` of `main` (named `main.table`, or by its bare name when no
    /// `TEMP` table of that name hides it): a read the authorizer reports in `main` by name.
    func readsMainTable(_ table: String, sql: String) throws -> Bool {
        try tablesReportedReading(sql).namedMain.contains { SQLIdentifier.folded($0) == SQLIdentifier.folded(table) }
    }

    /// The tables `sql` reads, as SQLite's authorizer reports them while preparing it, by their
    /// names folded as SQLite folds them (see ``SQLIdentifier/folded(_:)``), views resolved to
    /// the tables they read.
    ///
    /// Throws ``StoreError/Kind/invalidQuery`` when it reads a virtual table whose module keeps
    /// its rows outside the store's tables (it has no shadow tables), or a table of another schema
    /// than `main` (a `TEMP` table, a table of an attached database): no commit would tell when
    /// they change, so a live query over it could go stale unseen.
    func tablesRead(by sql: String) throws -> Set<String> {
        let (tablesReadByStatement, tablesReadOutsideMain, _) = try tablesReportedReading(sql)
        if let outside = tablesReadOutsideMain.sorted().first {
            throw StoreError(.invalidQuery, "a live query cannot observe \(outside): the change log records the commits of "
                             + "the store's main database only, so no commit tells when a TEMP table or a table of an "
                             + "attached database changes. Read it with fetchAll instead")
        }
        let tables = Set(tablesReadByStatement.filter { !SQLIdentifier.folded($0).hasPrefix("sqlite_") }.map(SQLIdentifier.folded))
        let virtual = try fetchAll("SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'virtual'")
            .compactMap { $0.values.first?.textValue }
        guard !virtual.isEmpty else { return tables }
        let shadows = try fetchAll("SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'shadow'")
            .compactMap { $0.values.first?.textValue }
        let owners = Dictionary(virtual.map { (SQLIdentifier.folded($0), $0) }, uniquingKeysWith: { first, _ in first })
        let observable = Set(shadows.compactMap { TableLayout.owner(ofShadow: $0, among: owners) }.map(SQLIdentifier.folded))
        for name in virtual where tables.contains(SQLIdentifier.folded(name)) && !observable.contains(SQLIdentifier.folded(name)) {
            throw StoreError(.invalidQuery, "a live query cannot observe the virtual table \(name): its module keeps its rows "
                             + "outside the store's tables (it has no shadow tables), so no commit tells when they change. "
                             + "Read it with fetchAll instead, or observe the tables it reads from")
        }
        return tables
    }
}

/// The order of an ordered query's rows, compared in Swift from the values its snapshots keep,
/// exactly as SQLite's `ORDER BY` compares them when every term's column compares text by its
/// UTF-8 bytes (see ``ColumnComparison/comparesUTF8Bytes``): NULL first, numbers by value (an
/// integer and a real exactly), then text, then blobs, by their bytes; `DESC` reversed.
struct RowOrder: Sendable {
    /// One ORDER BY term.
    struct Term: Sendable {
        /// The column's name.
        var column: String
        var isDescending: Bool
    }

    let terms: [Term]

    /// The order of `terms`, or `nil` when SQLite would compare a term's text otherwise than by
    /// its UTF-8 bytes (another collation, a UTF-16 database) or does not know its column.
    init?(terms: [Term], table: String, in db: Database) {
        guard !terms.isEmpty else { return nil }
        for term in terms {
            guard ColumnComparison(table: table, column: term.column, in: db)?.comparesUTF8Bytes == true else {
                return nil
            }
        }
        self.terms = terms
    }

    /// Whether a row with ORDER BY values `lhs` comes before one with `rhs`.
    func precedes(_ lhs: ArraySlice<IndexedValue?>, _ rhs: ArraySlice<IndexedValue?>) -> Bool {
        for (offset, term) in terms.enumerated() {
            let left = lhs[lhs.startIndex + offset], right = rhs[rhs.startIndex + offset]
            if left == right { continue }
            let ascending: Bool
            switch (left, right) {
            case (nil, _): ascending = true
            case (_, nil): ascending = false
            case (let left?, let right?): ascending = left < right
            }
            return ascending != term.isDescending
        }
        return false
    }

    /// Where a row with ORDER BY values `values` goes in `snapshot` (sorted by this order).
    ///
    /// - Complexity: O(log n) comparisons.
    func insertionIndex<Element>(of values: ArraySlice<IndexedValue?>, in snapshot: Snapshot<Element>) -> Int {
        var low = 0, high = snapshot.items.count
        while low < high {
            let middle = (low + high) / 2
            if precedes(snapshot.sortValues(of: middle), values) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// How a row-precise observer reads the keys of the rows one of its dependencies selects (see
/// ``RowInterest/dependencies``): at each run of its query, in the same read, so that the store
/// holds them as it holds the result's keys and a commit that changes one — deletes it, or moves
/// it out of the dependency's filter — tells the observer.
///
/// Why held keys rather than the filters evaluated on before-images: the rows whose change
/// before the commit matters are exactly those the dependency selected at the last run (any
/// change to what it selects since then told the observer, which ran again), so holding their
/// keys answers "was the row selected before?" with the same hash lookups as the result's keys,
/// and races (a row selected by a read under way, changed before its observer is idle) are
/// settled by the recent commits as they are for the result. The price is one read of the
/// dependency's rows per run of the query, an indexed lookup of one user's rows (measured in a
/// debug build: within the noise of a run of the membership query over 20,000 todos, ~1 ms of
/// 5–10), and one key per selected row in the router. Before-images would have to be decoded
/// from the capture (an update's holds only the changed columns), and a filter the index cannot
/// decide (OR, LIKE, a collation) evaluated by SQLite on values that are no longer in any table.
struct DependencyRead: Sendable {
    /// The table, folded.
    let table: String
    private let key: LoggedRowKey
    private let sql: String
    private let arguments: [SQLValue]

    /// The read of `dependency`'s keys, with the table's key as the change log names its rows.
    init(_ dependency: RowInterest, in db: Database) throws {
        guard let layout = try TableLayout.read(db, table: dependency.table), let key = LoggedRowKey(layout) else {
            throw StoreError(.invalidQuery, "a routed live query reads \(dependency.table) in a sub-query, which is no table "
                             + "of the store whose rows the change log names by key: route it by table instead")
        }
        table = dependency.table
        self.key = key
        sql = "SELECT " + key.columns.joined(separator: ", ") + " FROM " + dependency.quotedTable
            + (dependency.filterSQL.isEmpty ? "" : " WHERE (" + dependency.filterSQL + ")")
        arguments = dependency.filterArguments
    }

    /// The keys of the rows the dependency selects now.
    func keys(in db: Database) throws -> [RowKey] {
        let statement = try db.cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        var keys: [RowKey] = []
        while try statement.step() { keys.append(key.read(from: statement.handle)) }
        return keys
    }
}

/// How a row-precise observer reads the values one of its value terms takes from a dependency
/// (see ``RowValueTerm``): at each run of its query, in the same read, so that the store's filter
/// index knows which rows of its table can concern it (a user's projects, say).
struct ValueTermRead: Sendable {
    private let sql: String
    private let arguments: [SQLValue]

    /// The read of `term`'s values, selected by the dependency of `interest` it names.
    init(_ term: RowInterest.ValueTerm, of interest: RowInterest) throws(StoreError) {
        guard interest.dependencies.indices.contains(term.dependency) else {
            throw StoreError(.invalidQuery, "a routed live query's value term on \(term.column) names dependency "
                             + "\(term.dependency), and the query has \(interest.dependencies.count)")
        }
        let dependency = interest.dependencies[term.dependency]
        sql = "SELECT " + SQLIdentifier.quoted(term.selectedColumn) + " FROM " + dependency.quotedTable
            + (dependency.filterSQL.isEmpty ? "" : " WHERE (" + dependency.filterSQL + ")")
        arguments = dependency.filterArguments
    }

    /// The distinct values the dependency selects now (NULL, which `IN` matches with nothing, left out).
    func values(in db: Database) throws -> Set<IndexedValue> {
        let statement = try db.cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        var values: Set<IndexedValue> = []
        while try statement.step() {
            if let value = IndexedValue(column: 0, of: statement.handle) { values.insert(value) }
        }
        return values
    }
}
