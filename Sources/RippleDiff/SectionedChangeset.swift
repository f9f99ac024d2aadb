/// The difference between two sectioned lists, in batch-update convention.
///
/// * ``sections``: the changeset of the sections themselves — deletes, inserts, moves by section
///   index, and updates where a section's model changed content;
/// * item changes as ``ItemPath``s: ``itemDeletes`` (old paths), ``itemInserts`` (new paths),
///   ``itemMoves`` and ``itemUpdates`` (old → new). Items can move across sections.
///
/// Items of a deleted section go with it and items of an inserted section come with it: they are
/// not listed as item deletes or inserts (a list view would refuse them). Within a section that
/// stays, an item is stationary iff it lies on a longest increasing subsequence of the old
/// positions of the items that stayed in that section; an item that changes section always moves.
///
/// ```swift
/// let changeset = SectionedChangeset(from: oldSections, to: newSections)
/// for batch in changeset.stages { /* one performBatchUpdates per batch */ }
/// ```
public struct SectionedChangeset: Hashable, Sendable {
    /// Changes to the sections themselves, by section index.
    public let sections: Changeset
    /// Old paths of removed items (in sections that stay), ascending.
    public let itemDeletes: [ItemPath]
    /// New paths of added items (in sections that stay), ascending.
    public let itemInserts: [ItemPath]
    /// Items that moved, within or across sections, ascending by new path.
    public let itemMoves: [PathPair]
    /// Items whose content changed, ascending by new path.
    public let itemUpdates: [PathPair]
    /// Item identities that occur more than once across the sections that stay.
    public let itemDuplicates: [DuplicatePaths]
    /// The number of items in each old section.
    public let oldItemCounts: [Int]
    /// The number of items in each new section.
    public let newItemCounts: [Int]

    /// The old and the new path of one item.
    public struct PathPair: Hashable, Sendable, CustomStringConvertible {
        /// The path in the old list.
        public var old: ItemPath
        /// The path in the new list.
        public var new: ItemPath

        /// A pair of paths.
        public init(old: ItemPath, new: ItemPath) {
            self.old = old
            self.new = new
        }

        public var description: String { "\(old)→\(new)" }
    }

    /// Where a repeated item identity occurs.
    public struct DuplicatePaths: Hashable, Sendable {
        /// Its paths in the old list.
        public var oldPaths: [ItemPath]
        /// Its paths in the new list.
        public var newPaths: [ItemPath]
    }

    /// Whether nothing changed.
    public var isEmpty: Bool {
        sections.isEmpty && itemDeletes.isEmpty && itemInserts.isEmpty && itemMoves.isEmpty && itemUpdates.isEmpty
    }

    /// Diffs two sectioned lists.
    ///
    /// - Complexity: O(S + N) expected time and memory for S sections and N items, plus
    ///   O(N log N) for the minimal moves.
    public init<Model, Item>(from old: [ListSection<Model, Item>], to new: [ListSection<Model, Item>]) {
        let sections = Changeset(from: old.lazy.map(\.model), to: new.lazy.map(\.model))
        self.sections = sections
        self.oldItemCounts = old.map(\.items.count)
        self.newItemCounts = new.map(\.items.count)

        // Items of the sections present on both sides, flattened in section order.
        var oldItems: [Item] = []
        var oldPaths: [ItemPath] = []
        for (section, content) in old.enumerated() where sections.newIndex(forOld: section) != nil {
            oldItems.append(contentsOf: content.items)
            oldPaths.append(contentsOf: content.items.indices.map { ItemPath(section: section, item: $0) })
        }
        var newItems: [Item] = []
        var newPaths: [ItemPath] = []
        for (section, content) in new.enumerated() where sections.oldIndex(forNew: section) != nil {
            newItems.append(contentsOf: content.items)
            newPaths.append(contentsOf: content.items.indices.map { ItemPath(section: section, item: $0) })
        }
        let matching = oldItems.withUnsafeBufferPointer { oldBuffer in
            newItems.withUnsafeBufferPointer { newBuffer in
                _heckelMatch(oldBuffer, newBuffer, _DiffableStrategy<Item>())
            }
        }

        itemDeletes = matching.oldToNew.indices.filter { matching.oldToNew[$0] < 0 }.map { oldPaths[$0] }
        itemInserts = matching.newToOld.indices.filter { matching.newToOld[$0] < 0 }.map { newPaths[$0] }
        itemDuplicates = matching.duplicates.map {
            DuplicatePaths(oldPaths: $0.oldIndices.map { oldPaths[$0] }, newPaths: $0.newIndices.map { newPaths[$0] })
        }

        var moves: [PathPair] = []
        var updates: [PathPair] = []
        // Per new section: the old item index of each item that stayed in its section (else -1),
        // whose longest increasing subsequence is the set of stationary items.
        var start = 0
        while start < newPaths.count {
            let section = newPaths[start].section
            var end = start
            while end < newPaths.count && newPaths[end].section == section { end += 1 }
            let sourceSection = sections.oldIndex(forNew: section)
            let stayed: [Int32] = (start..<end).map { flat in
                let source = Int(matching.newToOld[flat])
                return source >= 0 && oldPaths[source].section == sourceSection ? Int32(oldPaths[source].item) : -1
            }
            let stationary = _longestIncreasingSubsequence(stayed)
            for flat in start..<end where matching.newToOld[flat] >= 0 {
                let source = Int(matching.newToOld[flat])
                let pair = PathPair(old: oldPaths[source], new: newPaths[flat])
                if !stationary[flat - start] { moves.append(pair) }
                if !oldItems[source].isContentEqual(to: newItems[flat]) { updates.append(pair) }
            }
            start = end
        }
        itemMoves = moves
        itemUpdates = updates
    }
}

extension SectionedChangeset: CustomStringConvertible {
    public var description: String {
        "SectionedChangeset(sections: \(sections), item deletes \(itemDeletes), inserts \(itemInserts), "
            + "moves \(itemMoves), updates \(itemUpdates))"
    }
}
