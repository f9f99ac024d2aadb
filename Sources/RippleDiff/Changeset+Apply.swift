extension Changeset {
    /// Applies the changeset as one batch update, the way a list view does: removes ``deletes``,
    /// places ``moves`` at their new index, fills ``inserts`` from `new`, lets every other
    /// element keep its relative order, then takes the content of ``updates`` from `new`.
    ///
    /// For a changeset computed from `old` to `new`, the result equals `new`.
    ///
    /// - Parameters:
    ///   - old: the collection the changeset was computed from.
    ///   - new: the collection the changeset leads to (the source of inserted and updated elements).
    /// - Complexity: O(n + m).
    public func apply<Element>(to old: [Element], using new: [Element]) -> [Element] {
        precondition(old.count == oldCount && new.count == newCount,
                     "Changeset.apply: the changeset is \(oldCount)→\(newCount) elements, "
                        + "the collections are \(old.count)→\(new.count)")
        return batch.apply(to: old, using: new)
    }

    /// The whole changeset as one ``Batch``: every delete, insert and move, with every update
    /// as a reload at its old index. Valid as one batch for lists that can reload a moved
    /// element in the same batch; use ``stages`` for UIKit-style lists, which cannot.
    public var batch: Batch {
        Batch(deletes: deletes, inserts: inserts, moves: moves, reloads: updates.map(\.old),
              countBefore: oldCount)
    }
}
