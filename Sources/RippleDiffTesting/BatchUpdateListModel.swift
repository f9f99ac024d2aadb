import RippleDiff

/// A list that accepts changes the way a UIKit-style list view does, and refuses what would
/// crash one. Use it in tests to prove that changesets are safe to hand to a real list.
///
/// Rules checked for each batch (indices "before" refer to the list before the batch,
/// "after" to the list after it):
/// * deletes and reloads are indices before, inserts are indices after, moves go before → after;
/// * every index is in range, and no index is used twice: an index before is deleted, reloaded or
///   moved at most once in total; an index after is inserted or a move destination at most once;
/// * no element is both moved and reloaded in one batch;
/// * the count after equals the count before − deletes + inserts, and the data source's count.
///
/// Inserted and reloaded elements are read from the data source, as a cell is; a moved or
/// untouched element keeps the content the list already showed — which is why a missing reload
/// leaves stale content that ``apply(_:dataSource:)`` then reports.
///
/// ```swift
/// var list = BatchUpdateListModel(items: old)
/// try list.apply(Changeset(from: old, to: new), dataSource: new)   // throws if anything is off
/// ```
public struct BatchUpdateListModel<Element> {
    /// What the list shows now.
    public private(set) var items: [Element]
    /// How many batches the list has performed.
    public private(set) var batchesPerformed = 0

    /// A list showing `items`.
    public init(items: [Element]) {
        self.items = items
    }

    /// Performs one batch update, after checking every rule; on error the list is unchanged.
    ///
    /// - Parameter dataSource: the list as it is after the batch.
    public mutating func performBatchUpdates(_ batch: Batch, dataSource: [Element]) throws(BatchUpdateError) {
        let before = items.count
        let after = dataSource.count
        guard batch.countBefore == before else {
            throw BatchUpdateError("the batch was made for \(batch.countBefore) items, the list shows \(before)")
        }
        // Every use of an index before the batch, and of an index after it.
        var useBefore = [String?](repeating: nil, count: before)
        var useAfter = [String?](repeating: nil, count: after)
        func claimBefore(_ index: Int, _ use: String) throws(BatchUpdateError) {
            guard index >= 0 && index < before else {
                throw BatchUpdateError("\(use) of index \(index), out of range before the batch (\(before) items)")
            }
            if let previous = useBefore[index] {
                throw BatchUpdateError("index \(index) before the batch is used twice: \(previous) and \(use)")
            }
            useBefore[index] = use
        }
        func claimAfter(_ index: Int, _ use: String) throws(BatchUpdateError) {
            guard index >= 0 && index < after else {
                throw BatchUpdateError("\(use) at index \(index), out of range after the batch (\(after) items)")
            }
            if let previous = useAfter[index] {
                throw BatchUpdateError("index \(index) after the batch is used twice: \(previous) and \(use)")
            }
            useAfter[index] = use
        }
        for index in batch.deletes { try claimBefore(index, "delete") }
        for move in batch.moves { try claimBefore(move.old, "move from") }
        for index in batch.reloads {
            if index >= 0 && index < before, useBefore[index] == "move from" {
                throw BatchUpdateError("item \(index) is both moved and reloaded in one batch")
            }
            try claimBefore(index, "reload")
        }
        for index in batch.inserts { try claimAfter(index, "insert") }
        for move in batch.moves { try claimAfter(move.new, "move to") }
        guard before - batch.deletes.count + batch.inserts.count == after else {
            throw BatchUpdateError("invalid number of items: \(after) after the batch, but \(before) before "
                                   + "− \(batch.deletes.count) deleted + \(batch.inserts.count) inserted "
                                   + "= \(before - batch.deletes.count + batch.inserts.count)")
        }

        // Positions after the batch: inserts and move destinations are fixed; the items that
        // stay fill the remaining positions in their old order.
        var shown = [Element?](repeating: nil, count: after)
        var placed = [Bool](repeating: false, count: after)
        for index in batch.inserts {
            shown[index] = dataSource[index]
            placed[index] = true
        }
        for move in batch.moves {
            shown[move.new] = items[move.old]
            placed[move.new] = true
        }
        var next = 0
        for index in 0..<before where useBefore[index] == nil || useBefore[index] == "reload" {
            while placed[next] { next += 1 }
            shown[next] = useBefore[index] == "reload" ? dataSource[next] : items[index]
            placed[next] = true
        }
        items = shown.map { $0! }
        batchesPerformed += 1
    }

    /// Performs each of `changeset`'s `Changeset.stages` as one batch.
    ///
    /// Throws when a stage breaks a rule; when the elements are `Equatable`, prefer
    /// ``apply(_:dataSource:)-swift.method``, which also checks the final list.
    public mutating func performStages(of changeset: Changeset, dataSource: [Element]) throws(BatchUpdateError) {
        guard changeset.oldCount == items.count && changeset.newCount == dataSource.count else {
            throw BatchUpdateError("the changeset is \(changeset.oldCount)→\(changeset.newCount) items, "
                                   + "the list shows \(items.count) and the data source holds \(dataSource.count)")
        }
        for batch in changeset.stages {
            try performBatchUpdates(batch, dataSource: dataSource)
        }
    }

    /// Applies sequential steps one at a time, checking that each index is valid at that moment.
    public mutating func performSteps(_ steps: [Changeset.Step], dataSource: [Element]) throws(BatchUpdateError) {
        var list = items
        for (number, step) in steps.enumerated() {
            func check(_ index: Int, _ limit: Int) throws(BatchUpdateError) {
                guard index >= 0 && index < limit else {
                    throw BatchUpdateError("step \(number) (\(step)): index \(index) out of range (\(list.count) items)")
                }
            }
            switch step {
            case .delete(let index):
                try check(index, list.count)
                list.remove(at: index)
            case .insert(let index):
                try check(index, list.count + 1)
                try check(index, dataSource.count)
                list.insert(dataSource[index], at: index)
            case .move(let from, let to):
                try check(from, list.count)
                try check(to, list.count)
                list.insert(list.remove(at: from), at: to)
            case .update(let index):
                try check(index, list.count)
                try check(index, dataSource.count)
                list[index] = dataSource[index]
            }
        }
        items = list
    }
}

extension BatchUpdateListModel where Element: Equatable {
    /// Performs each stage of `changeset`, then checks that the list shows exactly `dataSource`.
    public mutating func apply(_ changeset: Changeset, dataSource: [Element]) throws(BatchUpdateError) {
        try performStages(of: changeset, dataSource: dataSource)
        try expect(dataSource)
    }

    /// Throws unless the list shows exactly `expected`, naming the first difference.
    public func expect(_ expected: [Element]) throws(BatchUpdateError) {
        guard items.count == expected.count else {
            throw BatchUpdateError("the list shows \(items.count) items, expected \(expected.count)")
        }
        if let index = items.indices.first(where: { items[$0] != expected[$0] }) {
            throw BatchUpdateError("item \(index) shows \(items[index]), expected \(expected[index])")
        }
    }
}

/// A batch update that a UIKit-style list would refuse (and crash on), or a list that does not
/// show what it should.
public struct BatchUpdateError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, in words.
    public let description: String

    /// An error with its description.
    public init(_ description: String) {
        self.description = description
    }
}
