import Foundation
import Ripple
import RippleDiff

/// One member of an event as the checker sees it: the rows (as the model's rows, whatever the
/// element type), the changeset, and the versions.
struct StressObservedMember: Sendable {
    var version: Int64
    var previousVersion: Int64?
    var rows: [StressRow]
    var changeset: Changeset
    /// Rows the checker could not read back into values (reported, then left out).
    var unreadable: Int
}

/// An event of a subscription (one member) or of a group (one member per query).
struct StressObservedEvent: Sendable {
    var members: [StressObservedMember]
    var version: Int64 { members[0].version }
    var previousVersion: Int64? { members[0].previousVersion }
}

/// Live queries of one element type, ready to be subscribed to in every way a user can.
protocol StressLiveSet: Sendable {
    /// `subscribe(on:onError:_:)` (a ``LiveQueryGroup`` when there are several queries).
    func subscribe(on delivery: Delivery, onError: @escaping @Sendable (any Error) -> Void,
                   _ onEvent: @escaping @Sendable (StressObservedEvent) -> Void) -> Subscription
    /// A task running `for try await event in query.events()`, leaving the loop after `limit`
    /// events (the iterator's release cancels the subscription); `onEnd` runs when the loop ends.
    func iterate(limit: Int, _ onEvent: @escaping @Sendable (StressObservedEvent) -> Void,
                 onEnd: @escaping @Sendable ((any Error)?) -> Void) -> Task<Void, Never>
}

/// Live queries whose elements convert to model rows with `convert` (given the index of the
/// query the element came from).
struct StressLiveQueries<Element: Sendable>: StressLiveSet {
    let queries: [LiveQuery<Element>]
    /// The queries as one group, when there are several.
    let group: LiveQueryGroup<Element>?
    let convert: @Sendable (Int, Element) -> StressRow?

    init(queries: [LiveQuery<Element>], convert: @escaping @Sendable (Int, Element) -> StressRow?) throws {
        self.queries = queries
        self.group = queries.count == 1 ? nil : try LiveQueryGroup(queries)
        self.convert = convert
    }

    func subscribe(on delivery: Delivery, onError: @escaping @Sendable (any Error) -> Void,
                   _ onEvent: @escaping @Sendable (StressObservedEvent) -> Void) -> Subscription {
        let convert = self.convert
        guard let group else {
            return queries[0].subscribe(on: delivery, onError: onError) { event in
                onEvent(StressObservedEvent(members: [Self.member(event, 0, convert)]))
            }
        }
        return group.subscribe(on: delivery, onError: onError) { event in
            onEvent(StressObservedEvent(members: event.members.enumerated().map { Self.member($1, $0, convert) }))
        }
    }

    func iterate(limit: Int, _ onEvent: @escaping @Sendable (StressObservedEvent) -> Void,
                 onEnd: @escaping @Sendable ((any Error)?) -> Void) -> Task<Void, Never> {
        let convert = self.convert
        let queries = self.queries
        let group = self.group
        return Task {
            do {
                var count = 0
                if let group {
                    for try await event in group.events() {
                        onEvent(StressObservedEvent(members: event.members.enumerated().map { Self.member($1, $0, convert) }))
                        count += 1
                        if count >= limit { break }
                    }
                } else {
                    for try await event in queries[0].events() {
                        onEvent(StressObservedEvent(members: [Self.member(event, 0, convert)]))
                        count += 1
                        if count >= limit { break }
                    }
                }
                onEnd(nil)
            } catch {
                onEnd(error)
            }
        }
    }

    private static func member(_ event: LiveQueryEvent<Element>, _ index: Int,
                               _ convert: (Int, Element) -> StressRow?) -> StressObservedMember {
        let rows = event.snapshot.compactMap { convert(index, $0) }
        return StressObservedMember(version: event.version, previousVersion: event.previousVersion, rows: rows,
                                    changeset: event.changeset, unreadable: event.snapshot.count - rows.count)
    }
}

/// What one typed collection of the stress store can do, its record type erased.
protocol StressCollectionAccess: Sendable {
    /// Performs `operation` with the collection's methods — in `db`'s transaction, or, without
    /// `db`, with the method that opens its own write — and returns the rows it changed (0 for
    /// an insert of an existing key, an update of a missing one, a batch that failed).
    func perform(_ operation: StressOperation, in db: Database?) throws -> Int
    /// The live form of collection queries of this table.
    func live(_ queries: [StressQuery]) throws -> any StressLiveSet
    /// A fresh `fetchAll()` of a collection query.
    func fetchAll(_ query: StressQuery) throws -> [StressRow]
}

/// ``StressCollectionAccess`` for the collection of `StressRecord<ID>`.
struct StressTypedCollection<ID: StressKey>: StressCollectionAccess {
    let table: StressTable
    let collection: RecordCollection<StressRecord<ID>>

    private func record(_ row: StressRow) throws -> StressRecord<ID> {
        guard let record = StressRecord<ID>(row) else {
            throw StressError("row \(row.describe(in: table)) does not fit the record type of \(table)")
        }
        return record
    }

    private func id(_ key: [StressValue]) throws -> ID {
        guard let id = ID(stressValue: key[0]) else { throw StressError("key \(key) does not fit \(ID.self)") }
        return id
    }

    private static func isConstraint(_ error: any Error) -> Bool {
        (error as? DatabaseError)?.code.primary == .constraint
    }

    private static func isNotFound(_ error: any Error) -> Bool {
        (error as? StoreError)?.kind == .notFound
    }

    func perform(_ operation: StressOperation, in db: Database?) throws -> Int {
        let collection = self.collection
        switch operation {
        case .insert(_, let row):
            let record = try record(row)
            do {
                // Inside a write, in a savepoint of its own: a duplicate key fails that alone.
                if let db { try db.transaction { try collection.insert(record, in: db) } } else { try collection.insert(record) }
                return 1
            } catch where Self.isConstraint(error) {
                return 0
            }
        case .upsert(_, let row):
            let record = try record(row)
            if let db { try collection.upsert(record, in: db) } else { try collection.upsert(record) }
            return 1
        case .update(_, let row):
            let record = try record(row)
            do {
                if let db { try db.transaction { try collection.update(record, in: db) } } else { try collection.update(record) }
                return 1
            } catch where Self.isNotFound(error) {
                return 0
            }
        case .delete(_, let key):
            let id = try id(key)
            return try (db.map { try collection.delete(id: id, in: $0) } ?? collection.delete(id: id)) ? 1 : 0
        case .insertAll(_, let rows):
            let records = try rows.map(record)
            do {
                if let db { try collection.insert(contentsOf: records, in: db) } else { try collection.insert(contentsOf: records) }
                return records.count
            } catch where Self.isConstraint(error) {
                return 0
            }
        case .upsertAll(_, let rows):
            let records = try rows.map(record)
            if let db { try collection.upsert(contentsOf: records, in: db) } else { try collection.upsert(contentsOf: records) }
            return records.count
        case .updateAll(_, let rows):
            let records = try rows.map(record)
            do {
                if let db { try collection.update(contentsOf: records, in: db) } else { try collection.update(contentsOf: records) }
                return records.count
            } catch where Self.isNotFound(error) {
                return 0
            }
        case .deleteAll(_, let keys):
            let ids = try keys.map(id)
            if let db { return try collection.delete(ids: ids, in: db) }
            return try collection.delete(ids: ids)
        case .updateWhere, .deleteWhere:
            throw StressError("\(operation.description) has no collection method")
        }
    }

    func recordQuery(_ query: StressQuery) -> RecordQuery<StressRecord<ID>> {
        var result = collection.all
        if let predicate = query.predicate { result = result.filter(predicate.filter(for: table)) }
        if !query.orderings.isEmpty {
            result = result.order(by: query.orderings.map { ordering -> any OrderingTerm in
                let column = Column(table.columns[ordering.column].name)
                return ordering.descending ? column.descending : column.ascending
            })
        }
        if query.limit != nil || query.offset != 0 { result = result.limit(query.limit ?? .max, offset: query.offset) }
        return result
    }

    func live(_ queries: [StressQuery]) throws -> any StressLiveSet {
        try StressLiveQueries(queries: try queries.map { try recordQuery($0).live() }, convert: { $1.row })
    }

    func fetchAll(_ query: StressQuery) throws -> [StressRow] {
        try recordQuery(query).fetchAll().map(\.row)
    }
}

/// The stress tables of one store, through Ripple's public API: the four collections and raw SQL.
final class StressStoreAccess: Sendable {
    let store: Store
    private let collections: [StressTable: any StressCollectionAccess]

    /// Opens the collections (creating their tables when `createTables`, with the raw tables).
    init(store: Store, createTables: Bool) throws {
        self.store = store
        if createTables {
            for table in StressTable.allCases {
                if let sql = table.createSQL { try store.write { db in try db.execute(sql) } }
            }
        }
        func open<ID: StressKey>(_ table: StressTable, _ type: ID.Type) throws -> any StressCollectionAccess {
            StressTypedCollection(table: table, collection: try store.collection(table.name, of: StressRecord<ID>.self))
        }
        collections = [.ints: try open(.ints, Int.self), .strings: try open(.strings, String.self),
                       .blobs: try open(.blobs, Data.self), .uuids: try open(.uuids, UUID.self)]
    }

    /// Performs `operation` as `via` says; `db` is the write's connection (none for `.collection`).
    func perform(_ operation: StressOperation, via: StressVia, in db: Database?) throws -> Int {
        switch via {
        case .collection, .collectionInWrite:
            guard let access = collections[operation.table] else {
                throw StressError("\(operation.table) is not a collection")
            }
            return try access.perform(operation, in: via == .collection ? nil : db)
        case .rawSQL, .withoutTransaction, .migration, .withoutRipple:
            guard let db else { throw StressError("raw SQL needs a connection") }
            return try StressSQL.execute(operation, in: db)
        }
    }

    /// The live form of `queries`: collection queries of one table, or raw queries.
    func live(_ queries: [StressQuery]) throws -> any StressLiveSet {
        if queries[0].form == .collection, let access = collections[queries[0].table] {
            return try access.live(queries)
        }
        return try StressLiveQueries(queries: queries.map { query in
            let (sql, arguments) = query.sql()
            return store.liveQuery(sql: sql, arguments: arguments, identity: query.table.identityColumn)
        }, convert: { [tables = queries.map(\.table)] index, row in tables[index].row(from: row) })
    }

    /// A fresh read of `query` (`fetchAll()` for a collection query, `db.fetchAll` for raw SQL).
    func fetch(_ query: StressQuery) throws -> [StressRow] {
        if query.form == .collection, let access = collections[query.table] {
            return try access.fetchAll(query)
        }
        let (sql, arguments) = query.sql()
        let rows = try store.read { db in try db.fetchAll(sql, arguments) }
        return try rows.map { row in
            guard let converted = query.table.row(from: row) else { throw StressError("unreadable row \(row)") }
            return converted
        }
    }

    /// Every row of every table, read in one transaction, and the version it shows.
    func readAll() throws -> (version: Int64, tables: [StressTable: [StressRow]]) {
        try store.read { db in
            let version = try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'version'", as: Int64.self) ?? 0
            var tables: [StressTable: [StressRow]] = [:]
            for table in StressTable.allCases {
                let rows = try db.fetchAll("SELECT \(table.rawSelectList) FROM \"\(table.name)\"")
                tables[table] = try rows.map { row in
                    guard let converted = table.row(from: row) else { throw StressError("unreadable row \(row)") }
                    return converted
                }
            }
            return (version, tables)
        }
    }
}
