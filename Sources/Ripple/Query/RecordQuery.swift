/// A query over a collection: a filter, an order and a window, compiled to one parameterized
/// `SELECT`. Queries are values: each refinement returns a new query.
///
/// ```swift
/// let page = try todos
///     .filter(Column("done") == false && Column("rank") < 10)
///     .order(by: Column("rank").descending, Column("title"))
///     .limit(20, offset: 40)
///     .fetchAll()
/// ```
///
/// Column names are checked against the collection's columns when the query runs (or is
/// compiled): an unknown column throws ``StoreError`` with kind ``StoreError/Kind/invalidQuery``.
/// An ordered query's order is total: rows that tie on every ordering column come in primary-key
/// order (the key is appended as the last ordering term), so a window's rows and their order are a
/// function of the data, whatever index SQLite uses — what a live query's snapshots rely on.
/// Without an order, rows come in SQLite's table order.
public struct RecordQuery<Record: Codable & Sendable & Identifiable>: Sendable where Record.ID: Encodable {
    /// The collection queried.
    public internal(set) var collection: RecordCollection<Record>
    /// The condition records must meet, if any.
    public private(set) var filter: Filter?
    /// The sort order, most significant first.
    public private(set) var orderings: [ColumnOrdering] = []
    /// The most records returned, if limited.
    public private(set) var limit: Int?
    /// How many records are skipped first.
    public private(set) var offset: Int = 0

    init(collection: RecordCollection<Record>) { self.collection = collection }

    /// The records of this query that also match `filter` (the filters are combined with AND).
    public func filter(_ filter: Filter) -> RecordQuery {
        var query = self
        query.filter = self.filter.map { $0 && filter } ?? filter
        return query
    }

    /// This query sorted by `terms` (replacing any previous order):
    /// `order(by: Column("rank").descending, Column("title"))`.
    public func order(by terms: any OrderingTerm...) -> RecordQuery { order(by: terms) }

    /// This query sorted by `terms` (replacing any previous order).
    public func order(by terms: [any OrderingTerm]) -> RecordQuery {
        var query = self
        query.orderings = terms.map(\.ordering)
        return query
    }

    /// At most `limit` records, after skipping `offset` (replacing any previous window).
    public func limit(_ limit: Int, offset: Int = 0) -> RecordQuery {
        var query = self
        query.limit = limit
        query.offset = offset
        return query
    }

    // MARK: Running

    /// The matching records, in order.
    public func fetchAll() throws -> [Record] {
        try collection.store.read { db in try fetchAll(in: db) }
    }

    /// The matching records, in order, read in `db`'s transaction.
    public func fetchAll(in db: Database) throws -> [Record] {
        let compiled = try compiled()
        return try collection.fetchRecords(sql: compiled.sql, arguments: compiled.arguments,
                                           cached: !(filter?.hasInList ?? false), in: db)
    }

    /// The first matching record, or `nil`.
    public func fetchOne() throws -> Record? {
        try collection.store.read { db in try fetchOne(in: db) }
    }

    /// The first matching record, or `nil`, read in `db`'s transaction.
    public func fetchOne(in db: Database) throws -> Record? {
        try limit(min(limit ?? 1, 1), offset: offset).fetchAll(in: db).first
    }

    /// The number of matching records (within the window, when limited).
    public func count() throws -> Int {
        try collection.store.read { db in try count(in: db) }
    }

    /// The number of matching records, read in `db`'s transaction.
    public func count(in db: Database) throws -> Int {
        let compiled = try compiledCount()
        return try db.fetchValue(compiled.sql, compiled.arguments, as: Int.self) ?? 0
    }

    /// Deletes the matching records (the window, when limited); returns how many there were.
    @discardableResult
    public func deleteAll() throws -> Int {
        try collection.store.write { db in try deleteAll(in: db) }
    }

    /// Deletes the matching records in `db`'s transaction; returns how many there were.
    @discardableResult
    public func deleteAll(in db: Database) throws -> Int {
        let compiled = try compiledDelete()
        try db.execute(compiled.sql, compiled.arguments)
        return db.changedRowCount
    }
}

/// SQL text and its bound arguments, as a query runs them. For inspection and tests:
/// values never appear in ``sql``, only as `?` parameters.
public struct CompiledQuery: Sendable, Hashable, CustomStringConvertible {
    /// The SQL, with a `?` for each argument.
    public let sql: String
    /// The values bound to the parameters, in order.
    public let arguments: [SQLValue]

    public var description: String { "\(sql) — \(arguments.count) arguments" }
}
