/// One batch update, as a list view performs it in one `performBatchUpdates` call:
///
/// * ``deletes`` and ``reloads`` are indices **before** the batch;
/// * ``inserts`` are indices **after** the batch;
/// * ``moves`` go from an index before to an index after the batch;
/// * every other element keeps its relative order and fills the remaining positions.
///
/// A reloaded element takes its content from the data source at its position after the batch.
public struct Batch: Hashable, Sendable {
    /// Indices before the batch of removed elements, ascending.
    public var deletes: [Int]
    /// Indices after the batch of added elements, ascending.
    public var inserts: [Int]
    /// Elements that move, from their index before to their index after the batch.
    public var moves: [Changeset.IndexPair]
    /// Indices before the batch of elements whose content is re-read from the data source.
    public var reloads: [Int]
    /// The number of elements before the batch.
    public var countBefore: Int

    /// Creates a batch.
    public init(deletes: [Int] = [], inserts: [Int] = [], moves: [Changeset.IndexPair] = [],
                reloads: [Int] = [], countBefore: Int) {
        self.deletes = deletes
        self.inserts = inserts
        self.moves = moves
        self.reloads = reloads
        self.countBefore = countBefore
    }

    /// The number of elements after the batch.
    public var countAfter: Int { countBefore - deletes.count + inserts.count }

    /// Whether the batch does nothing.
    public var isEmpty: Bool { deletes.isEmpty && inserts.isEmpty && moves.isEmpty && reloads.isEmpty }

    /// Performs the batch on `list`, taking inserted and reloaded elements from `dataSource`
    /// (the list as it is after the batch).
    ///
    /// The batch must be valid (see `BatchUpdateListModel` in RippleTesting, which checks every
    /// rule and explains what it finds); an invalid batch traps.
    ///
    /// - Complexity: O(n + m).
    public func apply<Element>(to list: [Element], using dataSource: [Element]) -> [Element] {
        precondition(list.count == countBefore && dataSource.count == countAfter,
                     "Batch.apply: the batch is \(countBefore)→\(countAfter) elements, "
                        + "the lists are \(list.count)→\(dataSource.count)")
        // Which old elements stay put, and what fills each new position.
        var leaves = [Bool](repeating: false, count: countBefore)
        for index in deletes { leaves[index] = true }
        for move in moves { leaves[move.old] = true }
        var source = [Int](repeating: -1, count: countAfter)   // old index, or -1: from the data source
        var filled = [Bool](repeating: false, count: countAfter)
        for index in inserts { filled[index] = true }
        for move in moves {
            source[move.new] = move.old
            filled[move.new] = true
        }
        var position = 0
        for index in 0..<countBefore where !leaves[index] {
            while filled[position] { position += 1 }
            source[position] = index
            filled[position] = true
            position += 1
        }
        var reloaded = [Bool](repeating: false, count: countBefore)
        for index in reloads { reloaded[index] = true }

        var result: [Element] = []
        result.reserveCapacity(countAfter)
        for index in 0..<countAfter {
            let old = source[index]
            result.append(old < 0 || reloaded[old] ? dataSource[index] : list[old])
        }
        return result
    }
}
