import RippleDiff
import RippleDiffTesting
import Testing

/// Random old/new pairs of the shapes lists go through, from a seed.
struct PairGenerator {
    var random: SeededGenerator
    private var nextFreshID = 1_000_000

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    mutating func fresh() -> Item {
        nextFreshID += 1
        return Item(id: nextFreshID)
    }

    /// A list of up to `maxCount` items; ids drawn from `alphabet` values when given (duplicates likely).
    mutating func list(maxCount: Int, alphabet: Int?) -> [Item] {
        let count = Int.random(in: 0...maxCount, using: &random)
        return (0..<count).map { _ in
            if let alphabet { return Item(id: Int.random(in: 0..<alphabet, using: &random)) }
            return fresh()
        }
    }

    /// A mutation of `old`: deletes, inserts (fresh or repeated ids), moves and content updates.
    mutating func edit(_ old: [Item], alphabet: Int?) -> [Item] {
        var new = old
        let edits = Int.random(in: 0...Swift.max(1, old.count / 2), using: &random)
        for _ in 0..<edits {
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !new.isEmpty:
                new.remove(at: Int.random(in: 0..<new.count, using: &random))
            case 1:
                let item = alphabet.map { Item(id: Int.random(in: 0..<$0, using: &random)) } ?? fresh()
                new.insert(item, at: Int.random(in: 0...new.count, using: &random))
            case 2 where !new.isEmpty:
                let item = new.remove(at: Int.random(in: 0..<new.count, using: &random))
                new.insert(item, at: Int.random(in: 0...new.count, using: &random))
            case 3 where !new.isEmpty:
                new[Int.random(in: 0..<new.count, using: &random)].version += 1
            default:
                break
            }
        }
        return new
    }

    /// One pair of the given shape.
    mutating func pair(shape: Int) -> (old: [Item], new: [Item]) {
        switch shape {
        case 0: // random edits, unique ids
            let old = list(maxCount: 40, alphabet: nil)
            return (old, edit(old, alphabet: nil))
        case 1: // random edits, many duplicates
            let old = list(maxCount: 30, alphabet: 6)
            return (old, edit(old, alphabet: 6))
        case 2: // two unrelated lists over a small alphabet
            return (list(maxCount: 20, alphabet: 5), list(maxCount: 20, alphabet: 5))
        case 3: // from empty / to empty / all new
            let old = list(maxCount: 20, alphabet: nil)
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return ([], old)
            case 1: return (old, [])
            default: return (old, list(maxCount: 20, alphabet: nil))
            }
        case 4: // reversed, maybe with edits
            let old = list(maxCount: 40, alphabet: Bool.random(using: &random) ? nil : 8)
            let reversed = Array(old.reversed())
            return (old, Bool.random(using: &random) ? reversed : edit(reversed, alphabet: nil))
        case 5: // rotation
            let old = list(maxCount: 40, alphabet: nil)
            guard !old.isEmpty else { return (old, old) }
            let by = Int.random(in: 0..<old.count, using: &random)
            return (old, Array(old[by...] + old[..<by]))
        default: // a single element jumping across the list
            let old = list(maxCount: 60, alphabet: nil)
            guard old.count > 1 else { return (old, old) }
            var new = old
            let item = new.remove(at: Int.random(in: 0..<new.count, using: &random))
            new.insert(item, at: Bool.random(using: &random) ? 0 : new.count)
            return (old, new)
        }
    }
}

/// Length of a longest strictly increasing subsequence, by the quadratic textbook method
/// (an oracle independent of the engine's patience sort).
func quadraticLISLength(_ values: [Int]) -> Int {
    var best = [Int](repeating: 1, count: values.count)
    for i in values.indices {
        for j in 0..<i where values[j] < values[i] { best[i] = max(best[i], best[j] + 1) }
    }
    return best.max() ?? 0
}

/// Checks every property of a changeset against an independent reading of `old` and `new`.
func expectChangesetProperties(_ old: [Item], _ new: [Item], sourceLocation: SourceLocation = #_sourceLocation) {
    let changeset = Changeset(from: old, to: new)
    let context = "\(old) → \(new): \(changeset)"

    // Forms: batch, steps, stages through the list-view model.
    expectAllFormsApply(changeset, old, new, sourceLocation: sourceLocation)

    // Matched pairs: same identity; as many as possible per identity (min of the two counts).
    var oldCounts: [Int: Int] = [:]
    var newCounts: [Int: Int] = [:]
    for item in old { oldCounts[item.id, default: 0] += 1 }
    for item in new { newCounts[item.id, default: 0] += 1 }
    let possible = oldCounts.reduce(0) { $0 + min($1.value, newCounts[$1.key] ?? 0) }
    #expect(changeset.matchedCount == possible, "\(context)", sourceLocation: sourceLocation)
    var matchedOldInNewOrder: [Int] = []
    for newIndex in new.indices {
        guard let oldIndex = changeset.oldIndex(forNew: newIndex) else { continue }
        #expect(old[oldIndex].id == new[newIndex].id, "\(context)", sourceLocation: sourceLocation)
        #expect(changeset.newIndex(forOld: oldIndex) == newIndex, "\(context)", sourceLocation: sourceLocation)
        matchedOldInNewOrder.append(oldIndex)
    }

    // Minimal moves: matched − LIS, and the stationary elements keep their order.
    #expect(changeset.moves.count == matchedOldInNewOrder.count - quadraticLISLength(matchedOldInNewOrder),
            "\(context)", sourceLocation: sourceLocation)
    let moved = Set(changeset.moves.map(\.new))
    let stationary = new.indices.compactMap { moved.contains($0) ? nil : changeset.oldIndex(forNew: $0) }
    #expect(stationary == stationary.sorted(), "\(context)", sourceLocation: sourceLocation)

    // Batch-update convention: sorted, unique indices; updates are exactly the changed contents.
    #expect(changeset.deletes == changeset.deletes.sorted() && Set(changeset.deletes).count == changeset.deletes.count)
    #expect(changeset.inserts == changeset.inserts.sorted() && Set(changeset.inserts).count == changeset.inserts.count)
    let expectedUpdates = new.indices.compactMap { newIndex -> Changeset.IndexPair? in
        guard let oldIndex = changeset.oldIndex(forNew: newIndex),
              old[oldIndex].version != new[newIndex].version else { return nil }
        return .init(old: oldIndex, new: newIndex)
    }
    #expect(changeset.updates == expectedUpdates, "\(context)", sourceLocation: sourceLocation)

    // Duplicates: exactly the identities repeated on either side, with all their occurrences.
    let repeated = Set(oldCounts.filter { $0.value > 1 }.keys).union(newCounts.filter { $0.value > 1 }.keys)
    #expect(changeset.duplicates.count == repeated.count, "\(context)", sourceLocation: sourceLocation)
    for duplicate in changeset.duplicates {
        let id = duplicate.oldIndices.first.map { old[$0].id } ?? new[duplicate.newIndices[0]].id
        #expect(repeated.contains(id), sourceLocation: sourceLocation)
        #expect(duplicate.oldIndices == old.indices.filter { old[$0].id == id }, sourceLocation: sourceLocation)
        #expect(duplicate.newIndices == new.indices.filter { new[$0].id == id }, sourceLocation: sourceLocation)
    }
}

@Suite struct ChangesetPropertyTests {
    @Test(arguments: 0..<7)
    func everyFormAppliesOnSeededRandomPairs(shape: Int) {
        var generator = PairGenerator(seed: 0x5EED_0000 + UInt64(shape))
        for _ in 0..<1_500 {   // 7 shapes × 1,500 = 10,500 pairs
            let (old, new) = generator.pair(shape: shape)
            expectChangesetProperties(old, new)
        }
    }

    /// A changeset built from the correspondence (``Changeset/init(oldCount:newToOld:updated:)``)
    /// is the diff's, for unique identities: the same deletes, inserts, moves, updates and maps.
    @Test func aKnownCorrespondenceGivesTheDiffsChangeset() {
        var generator = PairGenerator(seed: 0xC0DE)
        for _ in 0..<3_000 {
            let (old, new) = generator.pair(shape: 0)
            let oldIndex = Dictionary(uniqueKeysWithValues: old.enumerated().map { ($1.id, $0) })
            let newToOld = new.map { oldIndex[$0.id] }
            let updated = new.indices.filter { index in newToOld[index].map { old[$0] != new[index] } ?? false }
            let built = Changeset(oldCount: old.count, newToOld: newToOld, updated: updated)
            #expect(built == Changeset(from: old, to: new), "\(old) → \(new)")
            #expect(built.apply(to: old, using: new) == new)
        }
    }

    @Test func largerListsWithDuplicatesAndEdits() {
        var generator = PairGenerator(seed: 0xB16)
        for round in 0..<40 {
            let old = generator.list(maxCount: 800, alphabet: round % 2 == 0 ? nil : 300)
            let new = generator.edit(old, alphabet: round % 2 == 0 ? nil : 300)
            expectChangesetProperties(old, new)
        }
    }
}
