/// The difference between an old and a new collection, in **batch-update convention** — the
/// convention of UIKit's `performBatchUpdates` and of every list toolkit built like it:
///
/// * ``deletes``: indices in the **old** collection, ascending;
/// * ``inserts``: indices in the **new** collection, ascending;
/// * ``moves``: `(old, new)` pairs of elements that changed position relative to the others,
///   ascending by new index. Moves are **minimal**: an element stays put iff it lies on a longest
///   increasing subsequence of the matched old indices, so `[A,B,C,D,E] → [E,A,B,C,D]` is one move;
/// * ``updates``: `(old, new)` pairs whose identity matched and whose content changed, ascending
///   by new index (an element can be both moved and updated: see ``stages`` for UIKit);
/// * the old↔new index map (``newIndex(forOld:)``, ``oldIndex(forNew:)``);
/// * ``duplicates``: identities that occur more than once, matched in order (k-th old occurrence
///   with the k-th new one), the surplus reported as deletes or inserts.
///
/// ```swift
/// let changeset = Changeset(from: ["a", "b", "c"], to: ["c", "a", "x"])
/// changeset.deletes   // [1]        "b"
/// changeset.inserts   // [2]        "x"
/// changeset.moves     // [(old: 2, new: 0)]   "c"
/// changeset.apply(to: ["a", "b", "c"], using: ["c", "a", "x"])  // ["c", "a", "x"]
/// ```
public struct Changeset: Hashable, Sendable {
    /// The number of elements in the old collection.
    public let oldCount: Int
    /// The number of elements in the new collection.
    public let newCount: Int
    /// Old indices of removed elements, ascending.
    public let deletes: [Int]
    /// New indices of added elements, ascending.
    public let inserts: [Int]
    /// Matched elements whose content changed, ascending by new index.
    public let updates: [IndexPair]
    /// Matched elements off the longest run of elements that kept their relative order,
    /// ascending by new index.
    public let moves: [IndexPair]
    /// Identities that occur more than once in the old or the new collection, in order of first
    /// occurrence. Empty in the usual case.
    public let duplicates: [Duplicate]

    @usableFromInline let oldToNew: [Int32]
    @usableFromInline let newToOld: [Int32]

    /// A pair of positions of one element: its index in the old and in the new collection.
    public struct IndexPair: Hashable, Sendable, CustomStringConvertible {
        /// The index in the old collection.
        public var old: Int
        /// The index in the new collection.
        public var new: Int

        /// Creates a pair.
        @inlinable
        public init(old: Int, new: Int) {
            self.old = old
            self.new = new
        }

        public var description: String { "\(old)→\(new)" }
    }

    /// An identity that occurs more than once, given by where it occurs (read the identity from
    /// either collection at one of these indices).
    public struct Duplicate: Hashable, Sendable {
        /// Where the identity occurs in the old collection, ascending.
        public var oldIndices: [Int]
        /// Where the identity occurs in the new collection, ascending.
        public var newIndices: [Int]

        /// Creates a duplicate record.
        @inlinable
        public init(oldIndices: [Int], newIndices: [Int]) {
            self.oldIndices = oldIndices
            self.newIndices = newIndices
        }
    }

    /// Whether old and new are the same list: nothing deleted, inserted, moved or updated.
    public var isEmpty: Bool { deletes.isEmpty && inserts.isEmpty && moves.isEmpty && updates.isEmpty }

    /// The number of elements present in both collections.
    public var matchedCount: Int { oldCount - deletes.count }

    /// The new index of the element at `oldIndex`, or `nil` if it was deleted.
    public func newIndex(forOld oldIndex: Int) -> Int? {
        let index = oldToNew[oldIndex]
        return index < 0 ? nil : Int(index)
    }

    /// The old index of the element at `newIndex`, or `nil` if it was inserted.
    public func oldIndex(forNew newIndex: Int) -> Int? {
        let index = newToOld[newIndex]
        return index < 0 ? nil : Int(index)
    }

    /// The changeset from an empty collection to one of `count` elements: all inserts.
    public static func initial(count: Int) -> Changeset {
        Changeset(matching: _Matching(oldToNew: [], newToOld: [Int32](repeating: -1, count: count),
                                      matchedCount: 0, duplicates: []),
                  updates: [])
    }

    /// The changeset of a collection of `count` elements that did not change: every element
    /// matched to itself, nothing deleted, inserted, updated or moved.
    ///
    /// - Complexity: O(n) for the index map.
    public static func unchanged(count: Int) -> Changeset {
        let identity = (0..<Int32(clamping: count)).map { $0 }
        return Changeset(matching: _Matching(oldToNew: identity, newToOld: identity, matchedCount: count, duplicates: []),
                         updates: [])
    }

    /// The changeset of a collection of `count` elements where only the elements at `indices`
    /// changed content, in place: each an update `(i, i)`, nothing deleted, inserted or moved.
    ///
    /// - Precondition: every index is in `0..<count`.
    /// - Complexity: O(n) for the index map, plus O(k log k) to sort the k indices.
    public static func updating(_ indices: some Sequence<Int>, count: Int) -> Changeset {
        let identity = (0..<Int32(clamping: count)).map { $0 }
        let updates = Set(indices).sorted().map { index in
            precondition(index >= 0 && index < count, "update index \(index) outside 0..<\(count)")
            return IndexPair(old: index, new: index)
        }
        return Changeset(matching: _Matching(oldToNew: identity, newToOld: identity, matchedCount: count, duplicates: []),
                         updates: updates)
    }

    /// The changeset of a known correspondence, without diffing: `newToOld[i]` is the old index
    /// of the element now at `i`, or `nil` when it was inserted; the old indices it leaves out
    /// were deleted. `updated` holds the new indices of matched elements whose content changed.
    /// Deletes, inserts and the minimal moves follow as for a diff: for a caller that changed a
    /// collection itself and knows where each element went.
    ///
    /// ```swift
    /// // ["a", "b", "c"] → ["c", "a", "x"], "a" changed: the same changeset as the diff's.
    /// let changeset = Changeset(oldCount: 3, newToOld: [2, 0, nil], updated: [1])
    /// ```
    ///
    /// - Precondition: every old index is in `0..<oldCount` and appears once at most; every
    ///   updated index holds a matched element.
    /// - Complexity: O(n log n) for the minimal moves, O(n) for the rest.
    public init(oldCount: Int, newToOld: [Int?], updated: some Sequence<Int>) {
        var oldToNew = [Int32](repeating: -1, count: oldCount)
        var map = [Int32](repeating: -1, count: newToOld.count)
        var matched = 0
        for (index, source) in newToOld.enumerated() {
            guard let source else { continue }
            precondition(source >= 0 && source < oldCount && oldToNew[source] < 0,
                         "old index \(source) outside 0..<\(oldCount), or matched twice")
            oldToNew[source] = Int32(index)
            map[index] = Int32(source)
            matched += 1
        }
        let updates = Set(updated).sorted().map { index in
            precondition(map.indices.contains(index) && map[index] >= 0, "updated index \(index) is not a matched element")
            return IndexPair(old: Int(map[index]), new: index)
        }
        self.init(matching: _Matching(oldToNew: oldToNew, newToOld: map, matchedCount: matched, duplicates: []),
                  updates: updates)
    }

    /// Builds the public lists from a matching: deletes, inserts, and the minimal moves.
    ///
    /// - Complexity: O(n log n) for the moves, O(n) for the rest.
    @usableFromInline
    init(matching: _Matching, updates: [IndexPair]) {
        let oldToNew = matching.oldToNew
        let newToOld = matching.newToOld
        self.oldCount = oldToNew.count
        self.newCount = newToOld.count
        self.oldToNew = oldToNew
        self.newToOld = newToOld
        self.updates = updates
        self.duplicates = matching.duplicates

        var deletes: [Int] = []
        deletes.reserveCapacity(oldToNew.count - matching.matchedCount)
        for (index, target) in oldToNew.enumerated() where target < 0 { deletes.append(index) }
        self.deletes = deletes

        var inserts: [Int] = []
        inserts.reserveCapacity(newToOld.count - matching.matchedCount)
        for (index, source) in newToOld.enumerated() where source < 0 { inserts.append(index) }
        self.inserts = inserts

        // Stationary elements: one longest increasing subsequence of matched old indices in new order.
        var moves: [IndexPair] = []
        if matching.matchedCount > 0 {
            let stationary = _longestIncreasingSubsequence(newToOld)
            for (index, source) in newToOld.enumerated() where source >= 0 && !stationary[index] {
                moves.append(IndexPair(old: Int(source), new: index))
            }
        }
        self.moves = moves
    }
}

extension Changeset: CustomStringConvertible {
    public var description: String {
        "Changeset(\(oldCount)→\(newCount): deletes \(deletes), inserts \(inserts), "
            + "moves \(moves), updates \(updates))"
    }
}
