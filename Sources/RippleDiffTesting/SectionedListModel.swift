import RippleDiff

/// A sectioned list that accepts batch updates the way a UIKit-style list view does, and refuses
/// what would crash one. The sectioned counterpart of ``BatchUpdateListModel``.
///
/// Rules checked for each batch, beyond those of the flat list:
/// * a section index before is deleted, moved or reloaded at most once; a section index after is
///   inserted or a move destination at most once;
/// * items are not deleted, reloaded or moved out of a section that is deleted or reloaded, and
///   not inserted or moved into a section that is inserted or reloaded;
/// * each section that stays ends with its count before − deletes − moves out + inserts + moves in,
///   which must equal the data source's count for it.
public struct SectionedListModel<Model: Diffable, Item: Diffable> {
    /// What the list shows now.
    public private(set) var sections: [ListSection<Model, Item>]

    /// A list showing `sections`.
    public init(sections: [ListSection<Model, Item>]) {
        self.sections = sections
    }

    /// Performs one batch update after checking every rule; on error the list is unchanged.
    public mutating func performBatchUpdates(_ batch: SectionedBatch,
                                             dataSource: [ListSection<Model, Item>]) throws(BatchUpdateError) {
        let before = sections.count
        let after = dataSource.count
        var sectionUseBefore = [String?](repeating: nil, count: before)
        var sectionUseAfter = [String?](repeating: nil, count: after)
        func claim(_ uses: inout [String?], _ index: Int, _ use: String, _ when: String) throws(BatchUpdateError) {
            guard index >= 0 && index < uses.count else {
                throw BatchUpdateError("\(use) of section \(index), out of range \(when) the batch (\(uses.count) sections)")
            }
            if let previous = uses[index] {
                throw BatchUpdateError("section \(index) \(when) the batch is used twice: \(previous) and \(use)")
            }
            uses[index] = use
        }
        for index in batch.sectionDeletes { try claim(&sectionUseBefore, index, "delete", "before") }
        for move in batch.sectionMoves { try claim(&sectionUseBefore, move.old, "move from", "before") }
        for index in batch.sectionReloads { try claim(&sectionUseBefore, index, "reload", "before") }
        for index in batch.sectionInserts { try claim(&sectionUseAfter, index, "insert", "after") }
        for move in batch.sectionMoves { try claim(&sectionUseAfter, move.new, "move to", "after") }
        guard before - batch.sectionDeletes.count + batch.sectionInserts.count == after else {
            throw BatchUpdateError("invalid number of sections: \(after) after the batch, but \(before) before "
                                   + "− \(batch.sectionDeletes.count) + \(batch.sectionInserts.count)")
        }

        // Where each section after the batch comes from (an index before, or -1 when inserted).
        var sectionSource = [Int](repeating: -1, count: after)
        for move in batch.sectionMoves { sectionSource[move.new] = move.old }
        var next = 0
        for index in 0..<before where sectionUseBefore[index] == nil || sectionUseBefore[index] == "reload" {
            while sectionUseAfter[next] != nil { next += 1 }
            sectionSource[next] = index
            next += 1
        }
        var reloadedAfter = [Bool](repeating: false, count: after)
        for target in 0..<after where sectionSource[target] >= 0 && sectionUseBefore[sectionSource[target]] == "reload" {
            reloadedAfter[target] = true
        }

        // Items: every path before used at most once, in a section that stays and is not reloaded.
        var itemUseBefore: [ItemPath: String] = [:]
        var itemUseAfter: [ItemPath: String] = [:]
        func claimItemBefore(_ path: ItemPath, _ use: String) throws(BatchUpdateError) {
            guard path.section >= 0 && path.section < before,
                  path.item >= 0 && path.item < sections[path.section].items.count else {
                throw BatchUpdateError("\(use) of item \(path), out of range before the batch")
            }
            if let sectionUse = sectionUseBefore[path.section], sectionUse != "move from" {
                throw BatchUpdateError("\(use) of item \(path) in a section that is \(sectionUse == "delete" ? "deleted" : "reloaded")")
            }
            if let previous = itemUseBefore[path] {
                throw BatchUpdateError("item \(path) before the batch is used twice: \(previous) and \(use)")
            }
            itemUseBefore[path] = use
        }
        func claimItemAfter(_ path: ItemPath, _ use: String) throws(BatchUpdateError) {
            guard path.section >= 0 && path.section < after,
                  path.item >= 0 && path.item < dataSource[path.section].items.count else {
                throw BatchUpdateError("\(use) at item \(path), out of range after the batch")
            }
            if sectionSource[path.section] < 0 {
                throw BatchUpdateError("\(use) at item \(path) in a section that is inserted")
            }
            if reloadedAfter[path.section] {
                throw BatchUpdateError("\(use) at item \(path) in a section that is reloaded")
            }
            if let previous = itemUseAfter[path] {
                throw BatchUpdateError("item \(path) after the batch is used twice: \(previous) and \(use)")
            }
            itemUseAfter[path] = use
        }
        for path in batch.itemDeletes { try claimItemBefore(path, "delete") }
        for move in batch.itemMoves { try claimItemBefore(move.old, "move from") }
        for path in batch.itemReloads {
            if itemUseBefore[path] == "move from" {
                throw BatchUpdateError("item \(path) is both moved and reloaded in one batch")
            }
            try claimItemBefore(path, "reload")
        }
        for path in batch.itemInserts { try claimItemAfter(path, "insert") }
        for move in batch.itemMoves { try claimItemAfter(move.new, "move to") }

        // Counts of the sections that stay.
        var leaving = [Int](repeating: 0, count: before)
        var arriving = [Int](repeating: 0, count: after)
        for path in batch.itemDeletes { leaving[path.section] += 1 }
        for move in batch.itemMoves {
            leaving[move.old.section] += 1
            arriving[move.new.section] += 1
        }
        for path in batch.itemInserts { arriving[path.section] += 1 }
        for target in 0..<after where sectionSource[target] >= 0 && !reloadedAfter[target] {
            let source = sectionSource[target]
            let expected = sections[source].items.count - leaving[source] + arriving[target]
            guard expected == dataSource[target].items.count else {
                throw BatchUpdateError("invalid number of items in section \(target): \(dataSource[target].items.count) "
                                       + "after the batch, but \(sections[source].items.count) before "
                                       + "− \(leaving[source]) + \(arriving[target]) = \(expected)")
            }
        }
        sections = batch.apply(to: sections, using: dataSource)
    }

    /// Performs each of `changeset`'s stages as one batch.
    public mutating func performStages(of changeset: SectionedChangeset,
                                       dataSource: [ListSection<Model, Item>]) throws(BatchUpdateError) {
        for batch in changeset.stages {
            try performBatchUpdates(batch, dataSource: dataSource)
        }
    }
}

extension SectionedListModel where Model: Equatable, Item: Equatable {
    /// Performs each stage of `changeset`, then checks that the list shows exactly `dataSource`.
    public mutating func apply(_ changeset: SectionedChangeset,
                               dataSource: [ListSection<Model, Item>]) throws(BatchUpdateError) {
        try performStages(of: changeset, dataSource: dataSource)
        guard sections.count == dataSource.count else {
            throw BatchUpdateError("the list shows \(sections.count) sections, expected \(dataSource.count)")
        }
        for (index, section) in sections.enumerated() where section != dataSource[index] {
            throw BatchUpdateError("section \(index) shows \(section.model): \(section.items), "
                                   + "expected \(dataSource[index].model): \(dataSource[index].items)")
        }
    }
}
