/// A typed collection: the table of one record type, opened with
/// ``Store/collection(_:of:primaryKey:)``. Records are `Codable & Sendable & Identifiable`
/// values; each top-level property is a column, nested values are JSON text.
///
/// ```swift
/// let todos = try store.collection("todos", of: Todo.self)
/// try todos.insert(contentsOf: newTodos)            // one transaction
/// let open = try todos.filter(Column("done") == false)
///     .order(by: Column("rank").descending, Column("title"))
///     .limit(20)
///     .fetchAll()
/// ```
///
/// Every method has a variant taking a ``Database``, to compose several operations in one
/// transaction: `try store.write { db in try todos.insert(a, in: db); try todos.delete(id: b.id, in: db) }`.
/// The other variants write through ``Store/write(tag:_:)`` and read through ``Store/read(_:)``.
///
/// Named `RecordCollection` rather than `Collection` so as not to shadow `Swift.Collection`.
public struct RecordCollection<Record: Codable & Sendable & Identifiable>: Sendable where Record.ID: Encodable {
    /// The store holding the collection.
    public let store: Store
    let schema: CollectionSchema

    init(store: Store, schema: CollectionSchema) {
        self.store = store
        self.schema = schema
    }

    /// The table's name.
    public var name: String { schema.table }

    /// The table's columns, in order.
    public var columnNames: [String] { schema.layout.names }

    /// The column holding each record's `id`.
    public var primaryKey: String { schema.primaryKey }

    // MARK: Reading

    /// The record with `id`, or `nil`.
    public func fetch(id: Record.ID) throws -> Record? {
        try store.read { db in try fetch(id: id, in: db) }
    }

    /// The record with `id`, or `nil`, read in `db`'s transaction.
    public func fetch(id: Record.ID, in db: Database) throws -> Record? {
        let statement = try db.cachedStatement(schema.selectByIDSQL)
        defer { statement.reset() }
        try statement.bind(try keyValue(id), at: 1)
        return try RowDecoder(statement: statement, layout: schema.layout, recordType: Record.self)
            .decodeNext(Record.self, from: statement)
    }

    /// Every record, in table order.
    ///
    /// - Complexity: O(n); no per-row dictionaries or name lookups.
    public func fetchAll() throws -> [Record] {
        try store.read { db in try fetchAll(in: db) }
    }

    /// Every record, in table order, read in `db`'s transaction.
    public func fetchAll(in db: Database) throws -> [Record] {
        try fetchRecords(sql: schema.selectAllSQL, arguments: [], cached: true, in: db)
    }

    /// The number of records.
    public func count() throws -> Int {
        try store.read { db in try count(in: db) }
    }

    /// The number of records, read in `db`'s transaction.
    public func count(in db: Database) throws -> Int {
        try db.fetchValue(schema.countSQL, as: Int.self) ?? 0
    }

    // MARK: Queries

    /// A query over every record, to refine with ``RecordQuery/filter(_:)``,
    /// `order(by:)` and ``RecordQuery/limit(_:offset:)``.
    public var all: RecordQuery<Record> { RecordQuery(collection: self) }

    /// The records matching `filter`: `todos.filter(Column("done") == false && Column("rank") < 10)`.
    public func filter(_ filter: Filter) -> RecordQuery<Record> { all.filter(filter) }

    /// Every record, in the given order: `todos.order(by: Column("rank").descending, Column("title"))`.
    public func order(by terms: any OrderingTerm...) -> RecordQuery<Record> { all.order(by: terms) }

    /// At most `limit` records, after skipping `offset`, in table order.
    public func limit(_ limit: Int, offset: Int = 0) -> RecordQuery<Record> { all.limit(limit, offset: offset) }

    // MARK: Internals

    /// The stored form of a record identity, as the row encoder stores the primary key.
    func keyValue(_ id: Record.ID) throws -> SQLValue {
        try ColumnValueEncoder.sqlValue(of: id)
    }

    func fetchRecords(sql: String, arguments: [SQLValue], cached: Bool, in db: Database) throws -> [Record] {
        let statement = cached ? try db.cachedStatement(sql) : try db.makeStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        return try RowDecoder(statement: statement, layout: schema.layout, recordType: Record.self)
            .decodeAll(Record.self, from: statement)
    }
}
