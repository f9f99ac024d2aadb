import RippleDiff

/// What history reads of one query, and how it can read less than the whole result when it moves
/// from one version to the next (see ``HistoryCursor``).
struct HistoryQuery<Element: Sendable> {
    /// The tables history rewinds together, in the order given (the query's own table for a
    /// collection's); `nil`: every table `rawSQL` reads, as SQLite reports them.
    let tables: [String]?
    /// Names the query in an error when its rows may come in table order (its order is not
    /// total), which the rewound copy must then keep; `nil` when its order is total.
    let unordered: String?
    /// For a collection query without offset (over one table): how to follow it row by row.
    /// `nil`: a version that changed a rewound table re-runs the query.
    let rows: RowPrecision?
    /// Reads the whole result.
    let fetch: (Database) throws -> Snapshot<Element>
    /// The raw SQL of a query written by the app (`nil` for a collection's): history checks that
    /// it reads the rewound copy, not `main`'s table.
    var rawSQL: String? = nil

    /// How a single-table query with a filter, an order and a window is followed row by row.
    struct RowPrecision {
        /// The table's column whose value is a result row's identity (its key).
        let keyColumn: String
        /// Whether changed rows match the filter now.
        let rowCheck: RowCheck
        /// For an ordered query: the changed rows that match the filter now, read alone.
        let fetchRows: ((Database, [RowKey]) throws -> Snapshot<Element>)?
        /// The result columns of the ORDER BY terms.
        let orderColumns: [Int]
        /// The window's size, if limited (the offset is 0).
        let limit: Int?
        /// For an ordered query: `SELECT key … WHERE key IN (?, ?) ORDER BY … LIMIT 1`, the key of
        /// whichever of two rows comes first in the query's order (SQLite's own comparison).
        let firstOfTwoSQL: String?
    }
}

extension RecordQuery {
    /// This query as history reads it: the live query's reading and row checks, over the rewound
    /// copy of the table in the `temp` schema.
    func historyQuery() throws -> HistoryQuery<Record> {
        var rewound = self
        rewound.collection = RecordCollection(store: collection.store, schema: collection.schema.reading(from: "temp"))
        let source = try rewound.live().source
        let schema = rewound.collection.schema
        var rows: HistoryQuery<Record>.RowPrecision?
        if let rowCheck = source.rowCheck {
            var firstOfTwo: String?
            if !orderings.isEmpty {
                var builder = SQLBuilder(schema: schema)
                let key = SQLIdentifier.quoted(schema.primaryKey)
                builder.sql = "SELECT \(key) FROM \(schema.quotedTable) WHERE \(key) IN (?, ?)"
                try builder.appendOrder(orderings)
                firstOfTwo = builder.sql + " LIMIT 1"
            }
            rows = HistoryQuery.RowPrecision(keyColumn: schema.primaryKey, rowCheck: rowCheck, fetchRows: source.fetchRows,
                                             orderColumns: source.orderColumns, limit: limit, firstOfTwoSQL: firstOfTwo)
        }
        return HistoryQuery(tables: [schema.table], unordered: orderings.isEmpty ? "a query without an order" : nil,
                            rows: rows, fetch: source.fetch)
    }
}

/// A query's result as history moves the rewound copy of its table forward, version by version,
/// reading as little as each version's changes allow. Given the rows a version changed (their
/// keys), in the order tried:
///
/// 1. **Skip.** None was in the result and none matches the filter now: the result stands
///    (for a window: rows that left the filter beyond it never showed).
/// 2. **Patch.** The changed rows that match now are exactly the changed rows of the result, and
///    their ordering columns kept their values: each is replaced where it stands.
/// 3. **Merge** (ordered queries). The result without the changed rows keeps its order; each
///    changed row that matches now goes in where SQLite's own `ORDER BY` puts it, found by binary
///    search with a two-row query. Without a limit this is the new result. With one, rows beyond
///    the old window could come in when rows left it: every such row comes after the last
///    unchanged row of the old window, so the merge is the new window when that row stays within
///    it (or the old window was not full).
/// 4. **Re-run** the query otherwise (and for raw SQL, an unordered or offset query, many changed
///    rows).
///
/// Each path gives exactly the result a re-run would: the order is total (the key ends it), so a
/// window and its order are a function of the rows.
struct HistoryCursor<Element: Sendable> {
    private let query: HistoryQuery<Element>
    /// The result at the current version.
    private(set) var snapshot: Snapshot<Element>
    /// The index of each key of `snapshot`, built when first needed.
    private var positions: [RowKey: Int]?

    /// The cursor at the copy's current version: the query run once.
    init(_ query: HistoryQuery<Element>, in db: Database) throws {
        self.query = query
        snapshot = try query.fetch(db)
    }

    /// Moves to the next version, whose redo made `changes` to the copy. Returns `false` when the
    /// result certainly stands, `true` when `snapshot` was updated or read again (it may be equal).
    ///
    /// - Complexity: skip and patch: O(c) row lookups for c changed rows; merge: O(c log n) two-row
    ///   queries and O(n) to build the result of n rows; re-run: the query's own cost.
    mutating func advance(over changes: RedoLog.Changes, in db: Database) throws -> Bool {
        guard changes.count > 0 else { return false }
        if let rows = query.rows, let keys = changes.keys, keys.count <= Self.rowCheckLimit {
            switch try follow(rows, Array(keys), in: db) {
            case .unchanged: return false
            case .updated: return true
            case .reread: break
            }
        }
        snapshot = try query.fetch(db)
        positions = nil
        return true
    }

    private enum Outcome {
        /// The result stands; it was updated from the changed rows; the query must run again.
        case unchanged, updated, reread
    }

    /// Beyond this many changed rows, re-running the query is cheaper than following each.
    private static var rowCheckLimit: Int { 256 }

    /// Beyond this many changed rows that match now, the merge's binary searches cost more than a re-run.
    private static var mergeLimit: Int { 32 }

    private mutating func follow(_ rows: HistoryQuery<Element>.RowPrecision, _ keys: [RowKey], in db: Database) throws -> Outcome {
        let positions = keyPositions()
        let inResult = keys.compactMap { positions[$0] }
        guard let fetchRows = rows.fetchRows, let firstOfTwo = rows.firstOfTwoSQL else {
            // Unordered: table order, which changed rows may change anywhere; only the skip.
            if inResult.isEmpty, try !rows.rowCheck.anyMatches(keys, in: db) { return .unchanged }
            return .reread
        }
        let now = try fetchRows(db, keys)
        if inResult.isEmpty && now.items.isEmpty { return .unchanged }
        guard now.columnNames == snapshot.columnNames else { return .reread }
        if patch(with: now, inResult: inResult.count, orderColumns: rows.orderColumns, positions: positions) { return .updated }
        guard now.items.count <= Self.mergeLimit else { return .reread }
        return try merge(now, leaving: Set(inResult), limit: rows.limit, firstOfTwo: firstOfTwo, in: db)
    }

    private mutating func keyPositions() -> [RowKey: Int] {
        if let positions { return positions }
        var built: [RowKey: Int] = [:]
        built.reserveCapacity(snapshot.items.count)
        for (position, item) in snapshot.items.enumerated() where built[item.key] == nil { built[item.key] = position }
        positions = built
        return built
    }

    /// Replaces the changed rows of the result in place when the rows of `now` are exactly them
    /// (`inResult` of them were in the result) and their ordering columns did not change.
    private mutating func patch(with now: Snapshot<Element>, inResult: Int, orderColumns: [Int],
                                positions: [RowKey: Int]) -> Bool {
        guard now.items.count == inResult else { return false }
        let width = snapshot.columnNames.count
        var targets: [Int] = []
        targets.reserveCapacity(now.items.count)
        for row in now.items.indices {
            guard let position = positions[now.items[row].key] else { return false }
            for column in orderColumns
            where snapshot.columnHashes[position * width + column] != now.columnHashes[row * width + column] {
                return false
            }
            targets.append(position)
        }
        for (row, position) in targets.enumerated() { snapshot.replace(position, with: row, of: now) }
        return true
    }

    /// A row of the merged result: of the old result, or of the changed rows that match now.
    private enum Source: Equatable {
        case old(Int)
        case new(Int)

        var isNew: Bool {
            if case .new = self { return true }
            return false
        }
    }

    /// Takes the rows at `leaving` out of the result and puts the rows of `now` in by the query's
    /// order, cut to `limit`. `.reread` when rows beyond a full window could have come in;
    /// `.unchanged` when the rows of `now` all fall beyond a full window and none left it.
    private mutating func merge(_ now: Snapshot<Element>, leaving: Set<Int>, limit: Int?, firstOfTwo: String,
                                in db: Database) throws -> Outcome {
        let old = snapshot
        var order: [Source] = old.items.indices.filter { !leaving.contains($0) }.map(Source.old)
        // Every row beyond a full window comes after the old window's last row, so after its
        // last unchanged row.
        let full = limit.map { old.items.count >= $0 } ?? false
        let threshold = order.last
        if full && threshold == nil { return .reread }
        let statement = try db.cachedStatement(firstOfTwo)
        func keyOf(_ source: Source) -> RowKey {
            switch source {
            case .old(let index): old.items[index].key
            case .new(let index): now.items[index].key
            }
        }
        for row in now.items.indices {
            let key = now.items[row].key
            // Most rows that match land beyond a window: one comparison with the last row says so.
            var low = 0, high = order.count
            if let last = order.last {
                guard let first = try Self.first(of: key, keyOf(last), statement) else { return .reread }
                if first { high -= 1 } else { low = high }
            }
            while low < high {
                let middle = (low + high) / 2
                guard let first = try Self.first(of: key, keyOf(order[middle]), statement) else { return .reread }
                if first { high = middle } else { low = middle + 1 }
            }
            order.insert(.new(row), at: low)
        }
        if let limit {
            if full, let threshold {
                guard let at = order.lastIndex(of: threshold), at >= limit - 1 else { return .reread }
            }
            if order.count > limit { order.removeSubrange(limit...) }
        }
        if leaving.isEmpty && order.count == old.items.count && !order.contains(where: \.isNew) { return .unchanged }
        let width = old.columnNames.count
        var merged = Snapshot<Element>()
        merged.columnNames = old.columnNames
        merged.sortWidth = old.sortWidth
        merged.elements.reserveCapacity(order.count)
        merged.items.reserveCapacity(order.count)
        merged.columnHashes.reserveCapacity(order.count * width)
        for source in order {
            switch source {
            case .old(let index): merged.append(index, of: old)
            case .new(let index): merged.append(index, of: now)
            }
        }
        snapshot = merged
        positions = nil
        return .updated
    }

    /// Whether the row of `key` comes before the row of `other` in the query's order; `nil` when
    /// the two-row query finds neither (they are rows of the copy: it does not happen).
    private static func first(of key: RowKey, _ other: RowKey, _ statement: Statement) throws -> Bool? {
        defer { statement.reset() }
        let bound = try key.bind(to: statement, at: 1)
        guard try other.bind(to: statement, at: 1 + bound) + bound == Int32(statement.parameterCount),
              try statement.step() else { return nil }
        return RowKey(column: 0, of: statement.handle) == key
    }
}

