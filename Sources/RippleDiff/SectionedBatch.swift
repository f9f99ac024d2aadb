/// One batch update of a sectioned list, as a list view performs it in one
/// `performBatchUpdates` call. Indices and paths "before" refer to the list before the batch,
/// "after" to the list after it:
///
/// * section deletes and reloads, item deletes and reloads: before;
/// * section inserts, item inserts: after;
/// * section and item moves: from before to after;
/// * every other section and item keeps its relative order.
///
/// A reloaded section or item takes its content from the data source at its position after the batch.
public struct SectionedBatch: Hashable, Sendable {
    /// Sections removed (with their items), by index before.
    public var sectionDeletes: [Int] = []
    /// Sections added (with their items), by index after.
    public var sectionInserts: [Int] = []
    /// Sections moved (with their items), before → after.
    public var sectionMoves: [Changeset.IndexPair] = []
    /// Sections re-read from the data source (model and items), by index before.
    public var sectionReloads: [Int] = []
    /// Items removed, by path before.
    public var itemDeletes: [ItemPath] = []
    /// Items added, by path after.
    public var itemInserts: [ItemPath] = []
    /// Items moved, path before → path after.
    public var itemMoves: [SectionedChangeset.PathPair] = []
    /// Items re-read from the data source, by path before.
    public var itemReloads: [ItemPath] = []

    /// An empty batch; fill in what it does.
    public init() {}

    /// Whether the batch does nothing.
    public var isEmpty: Bool {
        sectionDeletes.isEmpty && sectionInserts.isEmpty && sectionMoves.isEmpty && sectionReloads.isEmpty
            && itemDeletes.isEmpty && itemInserts.isEmpty && itemMoves.isEmpty && itemReloads.isEmpty
    }

    /// Performs the batch on `list`, taking inserted and reloaded content from `dataSource`
    /// (the list as it is after the batch). The batch must be valid (`SectionedListModel` in
    /// RippleTesting checks every rule first); an invalid batch traps.
    ///
    /// - Complexity: O(S + N) for S sections and N items.
    public func apply<Model, Item>(to list: [ListSection<Model, Item>],
                                   using dataSource: [ListSection<Model, Item>]) -> [ListSection<Model, Item>] {
        // Sections: where each section after the batch comes from (an index before, or -1).
        var sectionLeaves = [Bool](repeating: false, count: list.count)
        for index in sectionDeletes { sectionLeaves[index] = true }
        for move in sectionMoves { sectionLeaves[move.old] = true }
        var sectionSource = [Int](repeating: -1, count: dataSource.count)
        var sectionPlaced = [Bool](repeating: false, count: dataSource.count)
        for index in sectionInserts { sectionPlaced[index] = true }
        for move in sectionMoves {
            sectionSource[move.new] = move.old
            sectionPlaced[move.new] = true
        }
        var next = 0
        for index in list.indices where !sectionLeaves[index] {
            while sectionPlaced[next] { next += 1 }
            sectionSource[next] = index
            sectionPlaced[next] = true
        }
        var sectionReloaded = [Bool](repeating: false, count: list.count)
        for index in sectionReloads { sectionReloaded[index] = true }

        // Items leaving each section before, and fixed item positions after.
        var itemLeaves = list.map { [Bool](repeating: false, count: $0.items.count) }
        for path in itemDeletes { itemLeaves[path.section][path.item] = true }
        for move in itemMoves { itemLeaves[move.old.section][move.old.item] = true }
        var itemReloaded = list.map { [Bool](repeating: false, count: $0.items.count) }
        for path in itemReloads { itemReloaded[path.section][path.item] = true }
        var fixed: [[Item?]] = dataSource.map { [Item?](repeating: nil, count: $0.items.count) }
        var fixedHere: [[Bool]] = dataSource.map { [Bool](repeating: false, count: $0.items.count) }
        for path in itemInserts {
            fixed[path.section][path.item] = dataSource[path.section].items[path.item]
            fixedHere[path.section][path.item] = true
        }
        for move in itemMoves {
            fixed[move.new.section][move.new.item] = list[move.old.section].items[move.old.item]
            fixedHere[move.new.section][move.new.item] = true
        }

        var result: [ListSection<Model, Item>] = []
        result.reserveCapacity(dataSource.count)
        for target in dataSource.indices {
            let source = sectionSource[target]
            if source < 0 || sectionReloaded[source] {
                result.append(dataSource[target])
                continue
            }
            var items: [Item] = []
            items.reserveCapacity(dataSource[target].items.count)
            var stayers = list[source].items.indices.lazy.filter { !itemLeaves[source][$0] }.makeIterator()
            for position in dataSource[target].items.indices {
                if fixedHere[target][position] {
                    items.append(fixed[target][position]!)
                } else {
                    let index = stayers.next()!
                    items.append(itemReloaded[source][index]
                                 ? dataSource[target].items[position] : list[source].items[index])
                }
            }
            result.append(ListSection(model: list[source].model, items: items))
        }
        return result
    }
}

extension SectionedChangeset {
    /// The changeset as a short list of batches, each valid on its own for a UIKit-style list:
    ///
    /// 1. section deletes, inserts and moves; item deletes, inserts and moves; reloads (by old
    ///    path) of updated items that do not move;
    /// 2. only if needed: reloads of sections whose model changed, and of items that both moved
    ///    and changed (at their new paths, outside reloaded sections).
    ///
    /// - Complexity: O(S + N).
    public var stages: [SectionedBatch] {
        var first = SectionedBatch()
        first.sectionDeletes = sections.deletes
        first.sectionInserts = sections.inserts
        first.sectionMoves = sections.moves
        first.itemDeletes = itemDeletes
        first.itemInserts = itemInserts
        first.itemMoves = itemMoves
        let moved = Set(itemMoves.map(\.new))
        first.itemReloads = itemUpdates.filter { !moved.contains($0.new) }.map(\.old).sorted()

        var second = SectionedBatch()
        second.sectionReloads = sections.updates.map(\.new).sorted()
        let reloadedSections = Set(second.sectionReloads)
        second.itemReloads = itemUpdates.filter { moved.contains($0.new) && !reloadedSections.contains($0.new.section) }
            .map(\.new)
        return [first, second].filter { !$0.isEmpty }
    }

    /// Applies ``stages`` one after the other to `old`, taking inserted and updated content from
    /// `new`. For a changeset computed from `old` to `new`, the result equals `new`.
    ///
    /// - Complexity: O(S + N).
    public func apply<Model, Item>(to old: [ListSection<Model, Item>],
                                   using new: [ListSection<Model, Item>]) -> [ListSection<Model, Item>] {
        precondition(old.map(\.items.count) == oldItemCounts && new.map(\.items.count) == newItemCounts,
                     "SectionedChangeset.apply: the lists are not the ones the changeset was computed from")
        return stages.reduce(old) { list, batch in batch.apply(to: list, using: new) }
    }
}

/// One batch of ``SectionedChangeset/conservativeStages(from:to:)`` and the sections the list
/// shows after it (the data source to update to before performing the batch).
public struct SectionedStage<Model: Diffable, Item: Diffable> {
    /// The batch.
    public let batch: SectionedBatch
    /// The sections after the batch.
    public let sections: [ListSection<Model, Item>]
}

extension SectionedStage: Sendable where Model: Sendable, Item: Sendable {}

extension SectionedChangeset {
    /// The changeset as batches that never mix section changes with item changes, each with the
    /// sections the list shows after it:
    ///
    /// 1. items only, inside the sections that stay (in their old order): deletes, inserts,
    ///    moves (across those sections too), reloads of changed items that do not move;
    /// 2. sections only: deletes, inserts and moves (an inserted section comes with its items);
    /// 3. reloads: sections whose model changed, items that both moved and changed.
    ///
    /// ``stages`` is the default: two batches, each valid for UIKit as documented (section and
    /// item changes together in the first). Some UIKit versions have crashed on real devices on
    /// a few combinations of section moves with item moves in one batch, which this split never
    /// makes, at the cost of one more batch and intermediate data sources: take it when a list
    /// shows such crashes.
    ///
    /// - Complexity: O(S + N).
    public func conservativeStages<Model, Item>(from old: [ListSection<Model, Item>],
                                                to new: [ListSection<Model, Item>]) -> [SectionedStage<Model, Item>] {
        precondition(old.map(\.items.count) == oldItemCounts && new.map(\.items.count) == newItemCounts,
                     "SectionedChangeset.conservativeStages: the lists are not the ones the changeset was computed from")
        // 1. Every section that stays already holds its new items; sections keep their old place.
        var itemsMoved = old
        for (index, section) in old.enumerated() {
            if let target = sections.newIndex(forOld: index) { itemsMoved[index] = ListSection(model: section.model, items: new[target].items) }
        }
        func oldSection(_ path: ItemPath) -> ItemPath {
            ItemPath(section: sections.oldIndex(forNew: path.section)!, item: path.item)
        }
        let moved = Set(itemMoves.map(\.new))
        var items = SectionedBatch()
        items.itemDeletes = itemDeletes
        items.itemInserts = itemInserts.map(oldSection).sorted()
        items.itemMoves = itemMoves.map { PathPair(old: $0.old, new: oldSection($0.new)) }
        items.itemReloads = itemUpdates.filter { !moved.contains($0.new) }.map(\.old).sorted()

        // 2. The sections take their new places (models still old where they changed).
        var sectionsMoved = new
        for update in sections.updates { sectionsMoved[update.new].model = old[update.old].model }
        var sectionChanges = SectionedBatch()
        sectionChanges.sectionDeletes = sections.deletes
        sectionChanges.sectionInserts = sections.inserts
        sectionChanges.sectionMoves = sections.moves

        // 3. Reloads, at the new paths.
        var reloads = SectionedBatch()
        reloads.sectionReloads = sections.updates.map(\.new).sorted()
        let reloadedSections = Set(reloads.sectionReloads)
        reloads.itemReloads = itemUpdates.filter { moved.contains($0.new) && !reloadedSections.contains($0.new.section) }
            .map(\.new).sorted()

        return [SectionedStage(batch: items, sections: itemsMoved),
                SectionedStage(batch: sectionChanges, sections: sectionsMoved),
                SectionedStage(batch: reloads, sections: new)].filter { !$0.batch.isEmpty }
    }
}
