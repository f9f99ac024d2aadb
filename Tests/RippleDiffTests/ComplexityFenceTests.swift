import RippleDiff
import RippleDiffTesting
import Synchronization
import Testing

/// Counts how often the engine hashes and compares identities and compares content.
final class CallCounter: Sendable {
    let hashes = Atomic<Int>(0)
    let identityComparisons = Atomic<Int>(0)
    let contentComparisons = Atomic<Int>(0)
}

/// An element whose identity counts its hash and equality calls.
struct CountedElement: Diffable {
    struct ID: Hashable {
        let value: Int
        let counter: CallCounter

        static func == (lhs: ID, rhs: ID) -> Bool {
            lhs.counter.identityComparisons.add(1, ordering: .relaxed)
            return lhs.value == rhs.value
        }

        func hash(into hasher: inout Hasher) {
            counter.hashes.add(1, ordering: .relaxed)
            hasher.combine(value)
        }
    }

    let diffID: ID
    let version: Int

    func isContentEqual(to other: CountedElement) -> Bool {
        diffID.counter.contentComparisons.add(1, ordering: .relaxed)
        return version == other.version
    }
}

/// The engine's work must grow linearly: a bounded number of hash and equality calls per element,
/// whatever the size, the order, or how often identities repeat.
@Suite struct ComplexityFenceTests {
    func measure(count: Int, alphabet: Int?, seed: UInt64) -> (elements: Int, counter: CallCounter) {
        let counter = CallCounter()
        var random = SeededGenerator(seed: seed)
        func element(_ value: Int) -> CountedElement {
            CountedElement(diffID: .init(value: value, counter: counter), version: Int.random(in: 0..<2, using: &random))
        }
        let old = (0..<count).map { element(alphabet.map { _ in Int.random(in: 0..<alphabet!, using: &random) } ?? $0) }
        var new = old.map { element($0.diffID.value) }
        new.removeSubrange(count / 5..<count / 4)
        new.insert(contentsOf: (0..<count / 10).map { element(count + $0) }, at: count / 3)
        new[0..<min(new.count, 2_000)].shuffle(using: &random)
        _ = Changeset(from: old, to: new)
        return (old.count + new.count, counter)
    }

    @Test(arguments: [1_000, 10_000, 100_000])
    func hashAndEqualityCallsStayLinearForUniqueIdentities(count: Int) {
        let (elements, counter) = measure(count: count, alphabet: nil, seed: 1)
        #expect(counter.hashes.load(ordering: .relaxed) <= elements, "one hash per element")
        #expect(counter.identityComparisons.load(ordering: .relaxed) <= 2 * elements)
        #expect(counter.contentComparisons.load(ordering: .relaxed) <= elements)
    }

    @Test(arguments: [1_000, 10_000, 100_000])
    func hashAndEqualityCallsStayLinearWhenIdentitiesRepeat(count: Int) {
        let (elements, counter) = measure(count: count, alphabet: 50, seed: 2)
        // Repeats cost one more hash per element (to report where each repeated identity occurs).
        #expect(counter.hashes.load(ordering: .relaxed) <= 2 * elements)
        #expect(counter.identityComparisons.load(ordering: .relaxed) <= 4 * elements)
        #expect(counter.contentComparisons.load(ordering: .relaxed) <= elements)
    }
}
