extension Changeset {
    /// The changeset as a short list of batches, each valid on its own as one
    /// `performBatchUpdates` of a UIKit-style list, applied one after the other:
    ///
    /// 1. every delete, insert and move, and the reloads (by old index) of updated elements that
    ///    do not move;
    /// 2. only if needed: the reloads of elements that both moved and changed — a list view cannot
    ///    move and reload one element in the same batch — at their new index, which is their index
    ///    before this second batch.
    ///
    /// An empty changeset has no stages.
    ///
    /// ```swift
    /// for batch in changeset.stages {
    ///     collectionView.performBatchUpdates { apply(batch) }
    /// }
    /// ```
    ///
    /// - Complexity: O(n + m).
    public var stages: [Batch] {
        if isEmpty { return [] }
        var moved = [Bool](repeating: false, count: oldCount)
        for move in moves { moved[move.old] = true }
        let stayingUpdates = updates.filter { !moved[$0.old] }.map(\.old).sorted()
        let movingUpdates = updates.filter { moved[$0.old] }.map(\.new)
        var stages: [Batch] = []
        let first = Batch(deletes: deletes, inserts: inserts, moves: moves, reloads: stayingUpdates,
                          countBefore: oldCount)
        if !first.isEmpty { stages.append(first) }
        if !movingUpdates.isEmpty {
            stages.append(Batch(reloads: movingUpdates, countBefore: newCount))
        }
        return stages
    }
}
