#if Sync
import Ripple

/// A compiled query's interest in another table (or its own, for a table related to itself) is
/// a `RowDependency`, the store's own routing type: one per sub-query — an `in` sub-query's or
/// an `exists`'s rows.
///
/// A change to a row of its `table` can change the query's result only when the row, before or
/// after the change, passes its `filterSQL` (the sub-query's own condition, with its read rule:
/// the parts that do not mention the outer row; an `exists`'s `on` pairs are left out). The
/// replica routes commits by it: a membership rule's sub-query for alice makes the query's
/// interest in `members` the rows `"user_id" = 'alice'`, so another user's membership change
/// does not run alice's subscriptions again.
extension RowDependency {
    /// `interests` with one per table, in the order each table first appears: the conditions of
    /// a table's sub-queries ORed (a row that matters to any of them matters), every row when
    /// any of them has no condition. For a router that keeps one interest per table.
    package static func perTable(_ interests: [RowDependency]) -> [RowDependency] {
        var merged: [RowDependency] = []
        for interest in interests {
            guard let index = merged.firstIndex(where: { $0.table == interest.table }) else {
                merged.append(interest)
                continue
            }
            let earlier = merged[index]
            if earlier.filterSQL.isEmpty || interest.filterSQL.isEmpty {
                merged[index] = RowDependency(table: interest.table, filterSQL: "", filterArguments: [], filter: nil)
                continue
            }
            let filter: Filter? = if let first = earlier.filter, let second = interest.filter {
                if case .or(let terms) = first { .or(terms + [second]) } else { .or([first, second]) }
            } else {
                nil
            }
            let sql = "(" + earlier.filterSQL + ") OR (" + interest.filterSQL + ")"
            merged[index] = RowDependency(table: interest.table, filterSQL: sql,
                                          filterArguments: earlier.filterArguments + interest.filterArguments, filter: filter)
        }
        return merged
    }
}
#endif
