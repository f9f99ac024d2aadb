extension Changeset {
    /// One change to a list, valid at the moment it is applied (see ``Changeset/steps``).
    public enum Step: Hashable, Sendable, CustomStringConvertible {
        /// Remove the element at this index.
        case delete(Int)
        /// Insert the new collection's element at this index (its final index).
        case insert(Int)
        /// Remove the element at `from` and insert it at `to` (both indices at that moment).
        case move(from: Int, to: Int)
        /// Replace the element at this index (its final index) with the new collection's element.
        case update(Int)

        /// `delete 3`, `insert 0`, `move 1→0`, `update 2`.
        public var description: String {
            switch self {
            case .delete(let index): "delete \(index)"
            case .insert(let index): "insert \(index)"
            case .move(let from, let to): "move \(from)→\(to)"
            case .update(let index): "update \(index)"
            }
        }
    }

    /// The changeset as **sequential steps**, for lists that apply one change at a time
    /// (terminal and web lists, animations, replays). Each index is valid at the moment its step
    /// is applied:
    ///
    /// 1. deletes, from the highest index to the lowest;
    /// 2. moves, one per element of ``moves`` (no stationary element is ever moved), in order of
    ///    new index: each element goes right after the element that precedes it in the new list;
    /// 3. inserts, in ascending index;
    /// 4. updates, at final indices.
    ///
    /// ```swift
    /// var list = old
    /// for step in changeset.steps {
    ///     switch step {
    ///     case .delete(let i): list.remove(at: i)
    ///     case .insert(let i): list.insert(new[i], at: i)
    ///     case .move(let from, let to): list.insert(list.remove(at: from), at: to)
    ///     case .update(let i): list[i] = new[i]
    ///     }
    /// }
    /// ```
    ///
    /// - Complexity: O(n + m + k log n) for k moves.
    public var steps: [Step] {
        var steps: [Step] = []
        steps.reserveCapacity(deletes.count + moves.count + inserts.count + updates.count)
        for index in deletes.reversed() { steps.append(.delete(index)) }

        if !moves.isEmpty {
            // After the deletes the list holds the matched elements in old order; survivor `x` is the
            // x-th of them. Positions are counted in a Fenwick tree over slots:
            //   slot 0          — elements placed before every survivor,
            //   slot 1 + 2x     — survivor x where it started,
            //   slot 2 + 2x     — elements placed right after survivor x.
            // A moved element leaves its starting slot and joins the slot after the element that
            // precedes it in the new list, behind anything already placed there.
            var survivorIndex = [Int32](repeating: -1, count: oldCount)
            var survivors = 0
            for (index, target) in oldToNew.enumerated() where target >= 0 {
                survivorIndex[index] = Int32(survivors)
                survivors += 1
            }
            var isMove = [Bool](repeating: false, count: newCount)
            for move in moves { isMove[move.new] = true }
            var counts = _FenwickTree(count: 2 * survivors + 2) { slot in slot % 2 == 1 ? 1 : 0 }

            var anchor = 0   // the slot that holds the element placed last in new order
            for index in 0..<newCount {
                let source = Int(newToOld[index])
                if source < 0 { continue }
                let survivor = Int(survivorIndex[source])
                if !isMove[index] {
                    anchor = 2 + 2 * survivor
                    continue
                }
                let start = 1 + 2 * survivor
                let from = counts.prefixSum(upTo: start)
                counts.add(-1, at: start)
                let to = counts.prefixSum(upTo: anchor + 1)
                counts.add(1, at: anchor)
                steps.append(.move(from: from, to: to))
            }
        }

        for index in inserts { steps.append(.insert(index)) }
        for update in updates { steps.append(.update(update.new)) }
        return steps
    }

    /// Applies ``steps`` one at a time to `old`, taking inserted and updated elements from `new`.
    ///
    /// - Complexity: O(s · n) for s steps (each insert or removal shifts the array).
    public func applySteps<Element>(to old: [Element], using new: [Element]) -> [Element] {
        var list = old
        for step in steps {
            switch step {
            case .delete(let index): list.remove(at: index)
            case .insert(let index): list.insert(new[index], at: index)
            case .move(let from, let to): list.insert(list.remove(at: from), at: to)
            case .update(let index): list[index] = new[index]
            }
        }
        return list
    }
}

/// Prefix sums with point updates (a binary indexed tree).
internal struct _FenwickTree {
    private var tree: [Int]

    /// A tree of `count` slots, slot `i` starting at `initial(i)`. O(n) construction.
    init(count: Int, initial: (Int) -> Int) {
        tree = [Int](repeating: 0, count: count + 1)
        for slot in 0..<count { tree[slot + 1] = initial(slot) }
        var node = 1
        while node <= count {
            let parent = node + (node & -node)
            if parent <= count { tree[parent] += tree[node] }
            node += 1
        }
    }

    /// The sum of slots `0..<end`.
    func prefixSum(upTo end: Int) -> Int {
        var sum = 0
        var node = end
        while node > 0 {
            sum += tree[node]
            node -= node & -node
        }
        return sum
    }

    /// Adds `delta` to `slot`.
    mutating func add(_ delta: Int, at slot: Int) {
        var node = slot + 1
        while node < tree.count {
            tree[node] += delta
            node += node & -node
        }
    }
}
