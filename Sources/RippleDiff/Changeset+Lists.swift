extension Changeset {
    /// Rebuilds a changeset from its lists — as stored in a file, or sent over a wire — after
    /// checking that they describe one consistent changeset.
    ///
    /// The old↔new index map is derived from the lists: an old index is matched unless deleted,
    /// a new index unless inserted; each move pairs its two indices, and the remaining matched
    /// elements (the stationary ones) pair up in order. Every update must then pair two indices
    /// of that map. ``duplicates`` is empty.
    ///
    /// ```swift
    /// let changeset = try Changeset(oldCount: 3, newCount: 3, deletes: [1], inserts: [2],
    ///                               updates: [], moves: [.init(old: 2, new: 0)])
    /// changeset == Changeset(from: ["a", "b", "c"], to: ["c", "a", "x"])   // true
    /// ```
    ///
    /// - Throws: ``ChangesetListsError`` naming the first inconsistency: a negative count, an index
    ///   out of range, a list out of ascending order or naming an index twice, counts that do not
    ///   add up (`oldCount − deletes = newCount − inserts`), a move from a deleted or to an inserted
    ///   index, an update that does not pair matching elements, or moves that are not minimal
    ///   (more than the elements off one longest run kept in order).
    /// - Complexity: O(n log n) for the minimality check, O(n) for the rest.
    public init(oldCount: Int, newCount: Int, deletes: [Int], inserts: [Int],
                updates: [IndexPair], moves: [IndexPair]) throws(ChangesetListsError) {
        func fail(_ message: String) -> ChangesetListsError { ChangesetListsError(message) }
        guard oldCount >= 0, newCount >= 0, oldCount <= Int(Int32.max), newCount <= Int(Int32.max) else {
            throw fail("invalid counts \(oldCount)→\(newCount)")
        }
        func checkAscending(_ indices: [Int], _ name: String, below limit: Int, side: String) throws(ChangesetListsError) {
            for (position, index) in indices.enumerated() {
                guard index >= 0 && index < limit else {
                    throw fail("\(name) index \(index) is out of range (\(limit) \(side) elements)")
                }
                if position > 0 && indices[position - 1] >= index {
                    throw fail("\(name) \(indices) are not strictly ascending")
                }
            }
        }
        try checkAscending(deletes, "delete", below: oldCount, side: "old")
        try checkAscending(inserts, "insert", below: newCount, side: "new")
        guard oldCount - deletes.count == newCount - inserts.count else {
            throw fail("the counts do not add up: \(oldCount) old − \(deletes.count) deleted = "
                       + "\(oldCount - deletes.count), \(newCount) new − \(inserts.count) inserted = "
                       + "\(newCount - inserts.count)")
        }

        var oldToNew = [Int32](repeating: -2, count: oldCount)   // -2: matched, not yet paired
        var newToOld = [Int32](repeating: -2, count: newCount)
        for index in deletes { oldToNew[index] = -1 }
        for index in inserts { newToOld[index] = -1 }
        for (position, move) in moves.enumerated() {
            guard move.old >= 0 && move.old < oldCount, move.new >= 0 && move.new < newCount else {
                throw fail("move \(move) is out of range (\(oldCount)→\(newCount) elements)")
            }
            if position > 0 && moves[position - 1].new >= move.new {
                throw fail("moves \(moves) are not strictly ascending by new index")
            }
            switch oldToNew[move.old] {
            case -1: throw fail("move \(move) starts from the deleted index \(move.old)")
            case -2: break
            default: throw fail("old index \(move.old) moves twice")
            }
            if newToOld[move.new] == -1 { throw fail("move \(move) ends at the inserted index \(move.new)") }
            oldToNew[move.old] = Int32(move.new)
            newToOld[move.new] = Int32(move.old)
        }
        // The stationary elements pair up in order.
        var next = 0
        for newIndex in 0..<newCount where newToOld[newIndex] == -2 {
            while oldToNew[next] != -2 { next += 1 }
            oldToNew[next] = Int32(newIndex)
            newToOld[newIndex] = Int32(next)
            next += 1
        }
        for (position, update) in updates.enumerated() {
            guard update.old >= 0 && update.old < oldCount, update.new >= 0 && update.new < newCount else {
                throw fail("update \(update) is out of range (\(oldCount)→\(newCount) elements)")
            }
            if position > 0 && updates[position - 1].new >= update.new {
                throw fail("updates \(updates) are not strictly ascending by new index")
            }
            guard newToOld[update.new] == Int32(update.old) else {
                let actual = newToOld[update.new]
                throw fail("update \(update) does not pair matching elements: new index \(update.new) "
                           + (actual < 0 ? "is inserted" : "comes from old index \(actual)"))
            }
        }
        let matchedCount = oldCount - deletes.count
        if !moves.isEmpty {
            let stationary = _longestIncreasingSubsequence(newToOld).lazy.filter { $0 }.count
            if moves.count > matchedCount - stationary {
                throw fail("the moves are not minimal: \(moves.count) given, "
                           + "\(matchedCount - stationary) suffice")
            }
        }

        self.oldCount = oldCount
        self.newCount = newCount
        self.deletes = deletes
        self.inserts = inserts
        self.updates = updates
        self.moves = moves
        self.duplicates = []
        self.oldToNew = oldToNew
        self.newToOld = newToOld
    }
}

/// Lists that do not describe one consistent ``Changeset``
/// (see ``Changeset/init(oldCount:newCount:deletes:inserts:updates:moves:)``).
public struct ChangesetListsError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What is inconsistent, in words.
    public let description: String

    /// An error with its description.
    public init(_ description: String) {
        self.description = description
    }
}
