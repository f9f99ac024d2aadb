import Ripple

/// One term of a query's order: a column of the table, ascending or descending.
struct StressOrdering: Hashable, Sendable {
    var column: Int
    var descending: Bool
}

/// A query the stress test keeps live: a collection query (filter, order, window through
/// ``RecordQuery``) or a raw SQL query over any stress table (`store.liveQuery(sql:…)`), and
/// the reference evaluator's answer for it from the model's rows.
struct StressQuery: Hashable, Sendable {
    enum Form: Hashable, Sendable {
        /// `collection.filter(…).order(by: …).limit(…, offset: …).live()`.
        case collection
        /// `store.liveQuery(sql: "SELECT … ORDER BY <terms>, <key> LIMIT ? OFFSET ?", …)`.
        case rawSQL
    }

    var table: StressTable
    var form: Form
    var predicate: StressPredicate?
    var orderings: [StressOrdering]
    var limit: Int?
    var offset: Int

    /// Whether the order of the result is part of what is checked. A collection query without
    /// `order(by:)` reads "in table order", which the checker does not predict: its rows are
    /// compared as a set (such a query never has a window).
    var isOrdered: Bool { form == .rawSQL || !orderings.isEmpty }

    /// The raw query's SQL and arguments: every column with its `typeof`/`hex`, and a total
    /// order (the ordering terms, then the key columns).
    func sql() -> (sql: String, arguments: [SQLValue]) {
        var arguments: [SQLValue] = []
        var sql = "SELECT \(table.rawSelectList) FROM \"\(table.name)\""
        if let predicate { sql += " WHERE " + predicate.sql(for: table, arguments: &arguments) }
        let terms = orderings.map { "\"\(table.columns[$0.column].name)\"" + ($0.descending ? " DESC" : "") }
            + table.keyColumns.map { "\"\(table.columns[$0].name)\"" }
        sql += " ORDER BY " + terms.joined(separator: ", ")
        if limit != nil || offset != 0 {
            sql += " LIMIT ? OFFSET ?"
            arguments += [.integer(Int64(limit ?? -1)), .integer(Int64(offset))]
        }
        return (sql, arguments)
    }

    /// Readably: the table, the form, the filter, order and window with values inline.
    var description: String {
        var text = "\(table.name) [\(form == .collection ? "collection query" : "raw SQL")]"
        if let predicate { text += " WHERE " + predicate.describe(in: table) }
        if !orderings.isEmpty {
            text += " ORDER BY " + orderings.map { table.columns[$0.column].name + ($0.descending ? " DESC" : "") }
                .joined(separator: ", ")
        }
        if isOrdered { text += " (then by key)" } else { text += " (unordered: compared as a set)" }
        if let limit { text += " LIMIT \(limit)" }
        if offset != 0 { text += " OFFSET \(offset)" }
        return text
    }

    // MARK: The reference evaluator

    /// The query's result over `rows` (a table's rows, any order): the rows the predicate makes
    /// `true`, sorted by SQLite's order on the ordering terms with ties broken by the key
    /// ascending (for raw queries the SQL says so; for collection queries Ripple appends the
    /// key), then the window. An unordered collection query's rows come sorted by key.
    func expected(from rows: some Sequence<StressRow>) -> [StressRow] {
        var result = rows.filter { row in predicate.map { $0.evaluate(row, in: table) == true } ?? true }
        result.sort(by: inOrder)
        let start = min(offset, result.count)
        let end = limit.map { min(start + max($0, 0), result.count) } ?? result.count
        return Array(result[start..<end])
    }

    /// Whether `lhs` comes before `rhs` in the query's total order.
    func inOrder(_ lhs: StressRow, _ rhs: StressRow) -> Bool {
        for ordering in orderings {
            let order = StressValue.sqliteOrder(lhs.values[ordering.column], rhs.values[ordering.column])
            if order != 0 { return ordering.descending ? order > 0 : order < 0 }
        }
        return Self.keyOrder(lhs, rhs, in: table) < 0
    }

    /// SQLite's order of two rows' keys, column by column.
    static func keyOrder(_ lhs: StressRow, _ rhs: StressRow, in table: StressTable) -> Int {
        for column in table.keyColumns {
            let order = StressValue.sqliteOrder(lhs.values[column], rhs.values[column])
            if order != 0 { return order }
        }
        return 0
    }

    /// The model's result as a subscriber receives it: a collection query's rows are decoded
    /// into records, whose `String`s hold text that is not UTF-8 with replacement characters
    /// (what any Swift program reads); a raw query's rows carry `hex()`, so they stay exact.
    func asReceived(_ rows: [StressRow]) -> [StressRow] {
        guard form == .collection else { return rows }
        return rows.map { row in
            StressRow(row.values.map { value in
                guard case .text(let bytes) = value, StressValue.utf8String(bytes) == nil else { return value }
                return .string(String(decoding: bytes, as: UTF8.self))
            })
        }
    }

    /// The rows as the checker compares them with the model's: as delivered for an ordered
    /// query, sorted (by key, then every value) for an unordered one.
    func comparable(_ rows: [StressRow]) -> [StressRow] {
        guard !isOrdered else { return rows }
        return rows.sorted { lhs, rhs in
            for (left, right) in zip(lhs.values, rhs.values) {
                let order = StressValue.sqliteOrder(left, right)
                if order != 0 { return order < 0 }
            }
            return false
        }
    }

    /// Whether `delivered` is this query's result over `rows` when rows that tie on every
    /// ordering term are ordered some other way than by key: the same rows in each run of ties
    /// that the window keeps whole, as many rows of a run it cuts, in the terms' order.
    /// (Before Ripple made collection-query order total, SQLite's plan decided such ties.)
    func isTieVariant(_ delivered: [StressRow], of rows: some Sequence<StressRow>) -> Bool {
        guard form == .collection, !orderings.isEmpty else { return false }
        let sorted = rows.filter { row in predicate.map { $0.evaluate(row, in: table) == true } ?? true }.sorted(by: inOrder)
        let received = asReceived(sorted)
        // Runs of ties, by position in the total order.
        var runOf: [Int] = []
        for index in sorted.indices {
            let tied = index > 0 && orderings.allSatisfy {
                StressValue.sqliteOrder(sorted[index - 1].values[$0.column], sorted[index].values[$0.column]) == 0
            }
            runOf.append(index == 0 ? 0 : runOf[index - 1] + (tied ? 0 : 1))
        }
        let start = min(offset, sorted.count)
        let end = limit.map { min(start + max($0, 0), sorted.count) } ?? sorted.count
        var wanted: [Int: Int] = [:]
        for index in start..<end { wanted[runOf[index], default: 0] += 1 }
        guard delivered.count == end - start else { return false }
        // Each delivered row must be a distinct row of the result, in non-decreasing runs.
        var available: [StressRow: [Int]] = [:]
        for (index, row) in received.enumerated() { available[row, default: []].append(runOf[index]) }
        var lastRun = -1
        for row in delivered {
            guard var runs = available[row], !runs.isEmpty else { return false }
            let run = runs.removeFirst()
            available[row] = runs
            guard run >= lastRun, wanted[run, default: 0] > 0 else { return false }
            wanted[run]! -= 1
            lastRun = run
        }
        return true
    }
}
