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
    /// oldest first, as ``history(of:from:to:_:)`` does. Only `table` is rewound; other tables
    /// the SQL reads are seen as they are now (``history(tables:sql:arguments:identity:from:to:_:)``
    /// rewinds several). Every version that changed `table` runs the query again.
    ///
    /// - Throws: as ``history(of:from:to:_:)``; ``StoreError/Kind/history`` also when the columns
    ///   of `table` take every name of the rowid (`rowid`, `oid`, `_rowid_`) without an INTEGER
    ///   PRIMARY KEY: the rows' table order, which the SQL may show, cannot be rebuilt; and when
    ///   `sql` names the table `main.table` (history rewinds a copy that the bare name reads).
    public func history(table: String, sql: String, arguments: [any SQLValueConvertible] = [], identity: String,
                        from: Int64, to: Int64, _ body: (HistoryStep<Row>) throws -> Void) throws {
        try history(tables: [table], sql: sql, arguments: arguments, identity: identity, from: from, to: to, body)
    }

    /// The history of a raw SQL query over rows of several tables — a join, an `IN (SELECT …)`
    /// or `EXISTS` sub-query over another table — handed to `body` one step at a time, oldest
    /// first, as ``history(of:from:to:_:)`` does.
    ///
    /// Every table named in `tables` is rewound, all together, version by version, in one read
    /// transaction: each step shows every one of them as it was right after that step's version
    /// committed. Name every table the SQL reads whose past matters; a table the SQL reads and
    /// `tables` does not name is seen as it is now. Every version that changed any of them runs
    /// the query again.
    ///
    /// ```swift
    /// // The todos of the projects a user was a member of, as of version 120.
    /// let sql = """
    ///     SELECT id, title FROM todos
    ///     WHERE project_id IN (SELECT project_id FROM members WHERE user_id = ?) ORDER BY id
    ///     """
    /// try store.history(tables: ["todos", "members"], sql: sql, arguments: [user], identity: "id",
    ///                   from: 120, to: 120) { step in print(step.snapshot) }
    /// ```
    ///
    /// - Complexity: as ``history(of:from:to:_:)`` for each table named — every one is copied
    ///   whole (a membership table too), and its changes in the range rewound and replayed —
    ///   plus a run of the query for each version that changed any of them.
    /// - Throws: ``StoreError`` of kind ``StoreError/Kind/history`` as ``snapshot(of:at:)`` does,
    ///   for `from` (or when `from > to`): a version older than the change log keeps, in the
    ///   future, or before a schema change or an untracked write — whichever of the tables it
    ///   touched; also when a table's rows' order cannot be rebuilt, or `sql` names one of the
    ///   tables `main.table` (as ``history(table:sql:arguments:identity:from:to:_:)``). Of kind
    ///   ``StoreError/Kind/invalidQuery`` when `tables` is empty or names no table of the store.
    ///   What `body` throws.
    public func history(tables: [String], sql: String, arguments: [any SQLValueConvertible] = [], identity: String,
                        from: Int64, to: Int64, _ body: (HistoryStep<Row>) throws -> Void) throws {
        guard !tables.isEmpty else {
            throw StoreError(.invalidQuery, "history needs the tables to rewind: name at least one table the query reads")
        }
        try streamHistory(rawSQLQuery(tables: tables, sql: sql, arguments: arguments.map(\.sqlValue), identity: identity),
                          from: from, to: to, body)
    }

    /// The history of a raw SQL query with every table it reads rewound (the tables SQLite reports
    /// while preparing it, in the history's own read transaction), as
    /// ``history(tables:sql:arguments:identity:from:to:_:)`` does for the tables it names.
    package func history(rewindingTablesReadBy sql: String, arguments: [SQLValue], identity: String,
                         from: Int64, to: Int64, _ body: (HistoryStep<Row>) throws -> Void) throws {
        try streamHistory(rawSQLQuery(tables: nil, sql: sql, arguments: arguments, identity: identity), from: from, to: to, body)
    }

    private func rawSQLQuery(tables: [String]?, sql: String, arguments: [SQLValue], identity: String) -> HistoryQuery<Row> {
        var query = HistoryQuery<Row>(tables: tables, unordered: "raw SQL", rows: nil) { db in
            let statement = try db.cachedStatement(sql)
            defer { statement.reset() }
            try statement.bind(arguments)
            return try SnapshotReader.rows(of: statement, identity: identity, sql: sql)
        }
        query.rawSQL = sql
        return query
    }

    /// Rewinds a copy of each of the query's tables to `from`, recording what the rewind does,
    /// then replays it forward version by version, handing `body` each step that changed the
    /// result.
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
            var tables = try query.tables ?? db.tablesRead(by: query.rawSQL ?? "").sorted()
            if tables.isEmpty {
                throw StoreError(.invalidQuery, "the query reads no table of the store: it has no history to rebuild")
            }
            if tables.count > 1 {
                // The same table named twice (as SQLite matches names) is copied once.
                var seen = Set<String>()
                tables = tables.filter { seen.insert(SQLIdentifier.folded($0)).inserted }
            }
            var rewinders: [TableRewinder] = []
            var redos: [RedoLog?] = []
            defer {
                for index in redos.indices { redos[index]?.close() }
                // The first copy turned the connection's query_only off, if it was on: closed
                // last, it turns it on again once every copy is dropped.
                for index in rewinders.indices.reversed() { rewinders[index].close() }
            }
            for table in tables { rewinders.append(try TableRewinder(db, table: table, back: from, to: to)) }
            if let unordered = query.unordered {
                for rewinder in rewinders { try rewinder.shape.requireRowOrder(for: unordered) }
            }
            // Each copy is `temp`'s table of that name, which the table's bare name now finds;
            // SQL that names `main.` would read today's rows at every version.
            if let sql = query.rawSQL {
                for table in tables where try db.readsMainTable(table, sql: sql) {
                    throw StoreError(.history, "the query reads main.\(table): history rewinds a copy of \(table) "
                                     + "in temp, which the query reads when it names the table without main.")
                }
            }
            // Newest first: back to `to`, then to `from`, recording what each version's undo does.
            let range = from + 1...max(to, from + 1)
            var changedBy: [[Int64]] = []
            for index in rewinders.indices {
                try rewinders[index].rewind(after: to)
                changedBy.append(rewinders[index].versions(in: range).filter { $0 <= to })
            }
            // The versions that changed any of the tables, oldest first.
            let versions = changedBy.count == 1 ? changedBy[0] : Array(Set(changedBy.joined())).sorted()
            // Which versions changed each table (a single table: every one of `versions`).
            let changing = changedBy.count == 1 ? [] : changedBy.map(Set.init)
            func changed(_ index: Int, at version: Int64) -> Bool { changing.isEmpty || changing[index].contains(version) }
            for index in rewinders.indices {
                redos.append(changedBy[index].isEmpty ? nil : try RedoLog(db, shape: rewinders[index].shape, slot: index))
            }
            for version in versions.reversed() {
                for index in rewinders.indices where changed(index, at: version) {
                    try redos[index]!.record(version) { try rewinders[index].undo(version) }
                }
            }
            for index in redos.indices { try redos[index]?.stopRecording() }
            // Oldest first: the result as of `from`, then forward one version at a time. Row by
            // row only over one table (``HistoryQuery/rows``).
            let keyColumn = rewinders.count == 1 ? query.rows.flatMap { rewinders[0].shape.columns.firstIndex(of: $0.keyColumn) } : nil
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
                var changes: RedoLog.Changes
                if redos.count == 1 {
                    changes = try redos[0]!.redo(version, keyColumn: keyColumn)
                } else {
                    // Over several tables the query runs again: only the count matters.
                    changes = RedoLog.Changes()
                    for index in redos.indices where changed(index, at: version) {
                        changes.count += try redos[index]!.redo(version, keyColumn: nil).count
                    }
                }
                guard try cursor.advance(over: changes, in: db) else { continue }
                let items = cursor.snapshot.items
                if items == previous { continue }
                try deliver(version, changeset: Changeset(from: previous, to: items))
                previous = items
            }
        }
    }
}
