import RippleDiff

extension Store {
    /// The history of `query` over `[from, to]`, handed to `body` one step at a time, oldest
    /// first, as it is rebuilt: the result as of `from`, then a step for each later version whose
    /// commit changed the result, with the changeset from the step before — the same steps as
    /// ``history(of:from:to:)`` returns, without holding them all.
    ///
    /// ```swift
    /// try store.history(of: todos.filter(Column("done") == false).order(by: Column("rank")).limit(20),
    ///                    from: 100, to: 1_100) { step in
    ///     print(step.version, step.changeset)
    /// }
    /// ```
    ///
    /// Everything runs in one read transaction, on a copy of the query's table in the
    /// connection's `temp` schema: `body` runs inside it, so store calls made in `body` throw
    /// ``StoreError/Kind/nesting`` (keep what you need; use the store once `history` returns). An
    /// error thrown by `body` ends the history and is rethrown.
    ///
    /// The copy is rewound to `from` with the change log's before-images, then moved forward
    /// one version at a time by replaying what the rewind did, reversed. A version's changed
    /// rows decide what is read: for a collection query without offset, a version whose changed
    /// rows neither are in the result nor match the filter is skipped unread; rows of the result
    /// updated in place are patched; for an ordered query, changed rows are merged in by the
    /// query's order; otherwise (and for raw SQL) the query runs again.
    ///
    /// - Complexity: memory: the copy of the table (in SQLite's temporary storage), the change
    ///   log's entries in the range, and two snapshots of the result — not one per version.
    ///   Time: O(n) to copy the table's n rows, O(c log n) to rewind and replay c changed rows,
    ///   plus per version that changed the table: nothing or O(c) row lookups when it skips or
    ///   patches, O(c log r) two-row queries and O(r) for a result of r rows when it merges, a
    ///   run of the query when it cannot; O(r) to diff each step.
    /// - Throws: ``StoreError`` of kind ``StoreError/Kind/history`` as ``snapshot(of:at:)``
    ///   does, for `from` (or when `from > to`); what `body` throws.
    public func history<Record>(of query: RecordQuery<Record>, from: Int64, to: Int64,
                                _ body: (HistoryStep<Record>) throws -> Void) throws {
        try streamHistory(try query.historyQuery(), from: from, to: to, body)
    }

    /// The history of a raw SQL query over rows of `table` (see
    /// ``history(table:sql:arguments:identity:from:to:)``), handed to `body` one step at a time,
    /// oldest first, as ``history(of:from:to:_:)`` does. Every version that changed `table` runs
    /// the query again.
    ///
    /// - Throws: as ``history(of:from:to:_:)``; ``StoreError/Kind/history`` also when the columns
    ///   of `table` take every name of the rowid (`rowid`, `oid`, `_rowid_`) without an INTEGER
    ///   PRIMARY KEY: the rows' table order, which the SQL may show, cannot be rebuilt; and when
    ///   `sql` names the table `main.table` (history rewinds a copy that the bare name reads).
    public func history(table: String, sql: String, arguments: [any SQLValueConvertible] = [], identity: String,
                        from: Int64, to: Int64, _ body: (HistoryStep<Row>) throws -> Void) throws {
        let arguments = arguments.map(\.sqlValue)
        var query = HistoryQuery<Row>(table: table, unordered: "raw SQL", rows: nil) { db in
            let statement = try db.cachedStatement(sql)
            defer { statement.reset() }
            try statement.bind(arguments)
            return try SnapshotReader.rows(of: statement, identity: identity, sql: sql)
        }
        query.rawSQL = sql
        try streamHistory(query, from: from, to: to, body)
    }

    /// Rewinds a copy of the query's table to `from`, recording what the rewind does, then
    /// replays it forward version by version, handing `body` each step that changed the result.
    private func streamHistory<Element: Sendable>(_ query: HistoryQuery<Element>, from: Int64, to: Int64,
                                                  _ body: (HistoryStep<Element>) throws -> Void) throws {
        if let access = pool.currentAccess {
            throw StoreError(.nesting, "history was asked for inside a \(access.isWrite ? "write" : "read"): it reads committed "
                             + "versions in a read of its own, and notices other writers first. Ask outside")
        }
        // A write made without Ripple and not noticed yet is not in the log: adopt it first (a
        // "*" entry, which history refuses to cross) rather than answer wrongly. A read-only
        // store cannot adopt; it relies on writers that log.
        try noticeExternalWrites()
        try read { db in
            var rewinder = try TableRewinder(db, table: query.table, back: from, to: to)
            var redo: RedoLog?
            defer {
                redo?.close()
                rewinder.close()
            }
            if let unordered = query.unordered { try rewinder.shape.requireRowOrder(for: unordered) }
            // The copy is `temp`'s table of that name, which the table's bare name now finds; SQL
            // that names `main.` would read today's rows at every version.
            if let sql = query.rawSQL, try db.readsMainTable(query.table, sql: sql) {
                throw StoreError(.history, "the query reads main.\(query.table): history rewinds a copy of \(query.table) "
                                 + "in temp, which the query reads when it names the table without main.")
            }
            // Newest first: back to `to`, then to `from`, recording what each version's undo does.
            try rewinder.rewind(after: to)
            let versions = rewinder.versions(in: from + 1...max(to, from + 1)).filter { $0 <= to }
            if !versions.isEmpty {
                redo = try RedoLog(db, shape: rewinder.shape)
                for version in versions.reversed() {
                    try redo!.record(version) { try rewinder.undo(version) }
                }
                try redo!.stopRecording()
            }
            // Oldest first: the result as of `from`, then forward one version at a time.
            let keyColumn = query.rows.flatMap { rewinder.shape.columns.firstIndex(of: $0.keyColumn) }
            var cursor = try HistoryCursor(query, in: db)
            var previous = cursor.snapshot.items
            let reason = "a store call was made inside a history handler: history's read shows a rewound copy of the "
                + "table, not the store. Keep what the handler needs, and call the store once history returns"
            func deliver(_ version: Int64, changeset: Changeset) throws {
                let step = HistoryStep(version: version, snapshot: cursor.snapshot.elements, changeset: changeset)
                try pool.withAccess(.callingBack(db, reason: reason)) { try body(step) }
            }
            try deliver(from, changeset: Changeset(from: [], to: previous))
            for version in versions {
                guard try cursor.advance(over: try redo!.redo(version, keyColumn: keyColumn), in: db) else { continue }
                let items = cursor.snapshot.items
                if items == previous { continue }
                try deliver(version, changeset: Changeset(from: previous, to: items))
                previous = items
            }
        }
    }
}
