import ArgumentParser
import Foundation
import RippleDiff
import RippleTesting

/// The names of the diff workloads, as given to `--workload`.
enum WorkloadName: String, CaseIterable, ExpressibleByArgument, Sendable {
    case w1 = "W1", w2 = "W2", w3 = "W3", w4 = "W4"

    /// Timed repetitions of `ripple` and `floor` unless `--reps` says otherwise.
    var defaultReps: Int {
        switch self {
        case .w1: 50
        case .w2, .w3: 10
        case .w4: 5
        }
    }

    /// Timed repetitions of the standard library's diff, or `nil` where it is not run
    /// (it is quadratic in the edit distance: W2 already takes seconds per run).
    var defaultStdlibReps: Int? {
        switch self {
        case .w1: 5
        case .w2: 3
        case .w3, .w4: nil
        }
    }
}

/// An element the benchmark can diff: its identity for the `floor` dictionary, and the
/// `Changeset` initializer Ripple's users would call for it.
protocol BenchElement: Hashable, Sendable {
    associatedtype Identity: Hashable
    /// What the `floor` impl hashes: the element's identity.
    var identity: Identity { get }
    /// Ripple's diff of two collections of this element.
    static func changeset(from old: [Self], to new: [Self]) -> Changeset
}

extension UUID: BenchElement {
    var identity: UUID { self }

    static func changeset(from old: [UUID], to new: [UUID]) -> Changeset {
        Changeset(from: old, to: new)
    }

    /// A version-4 UUID drawn from `generator`: the same UUID for the same generator state.
    init(using generator: inout some RandomNumberGenerator) {
        let bits = (generator.next(), generator.next())
        var uuid = withUnsafeBytes(of: bits) { $0.loadUnaligned(as: uuid_t.self) }
        uuid.6 = uuid.6 & 0x0F | 0x40   // version 4
        uuid.8 = uuid.8 & 0x3F | 0x80   // RFC 4122 variant
        self.init(uuid: uuid)
    }
}

/// A W3 element: identified by `id`; its content is `version`.
struct Versioned: Diffable, BenchElement {
    var id: UUID
    var version: Int

    var diffID: UUID { id }
    var identity: UUID { id }

    func isContentEqual(to other: Versioned) -> Bool { version == other.version }

    static func changeset(from old: [Versioned], to new: [Versioned]) -> Changeset {
        Changeset(from: old, to: new)
    }
}

/// What a correct diff of a workload reports.
struct Expectation: Sendable {
    var deletes: Int
    var inserts: Int
    var updates: Int
    /// Moves are minimal, so at most this many (the number of elements the workload displaced).
    var maxMoves: Int

    /// What differs between `changeset` and the expectation, in words (empty when it matches).
    func problems(with changeset: Changeset) -> [String] {
        var problems: [String] = []
        if changeset.deletes.count != deletes {
            problems.append("deletes: \(changeset.deletes.count), expected \(deletes)")
        }
        if changeset.inserts.count != inserts {
            problems.append("inserts: \(changeset.inserts.count), expected \(inserts)")
        }
        if changeset.updates.count != updates {
            problems.append("updates: \(changeset.updates.count), expected \(updates)")
        }
        if changeset.moves.count > maxMoves {
            problems.append("moves: \(changeset.moves.count), expected at most \(maxMoves)")
        }
        return problems
    }
}

/// An old and a new collection to diff, and what their diff must report.
struct Workload<Element: BenchElement>: Sendable {
    var name: WorkloadName
    var source: [Element]
    var target: [Element]
    var expected: Expectation
}

/// The workloads, each generated from the same fixed seed, so every run diffs the same data.
enum Workloads {
    static let seed: UInt64 = 0x5249_5050_4C45   // "RIPPLE"

    /// W1: 5,000 UUIDs; 1,000 removed, 1,000 inserted, the first 200 shuffled.
    static func w1() -> Workload<UUID> {
        removeInsertShuffle(.w1, count: 5_000, removing: 2_000..<3_000,
                            inserting: 1_000, at: 3_000, shufflingPrefix: 200)
    }

    /// W2: 100,000 UUIDs; 10,000 removed, 10,000 inserted, the first 2,000 shuffled.
    static func w2() -> Workload<UUID> {
        removeInsertShuffle(.w2, count: 100_000, removing: 20_000..<30_000,
                            inserting: 10_000, at: 30_000, shufflingPrefix: 2_000)
    }

    /// W3: 100,000 versioned items; 10,000 get a new version, then 1,000 random moves.
    static func w3() -> Workload<Versioned> {
        let count = 100_000, updated = 10_000, moves = 1_000
        var random = SeededGenerator(seed: seed)
        let source = (0..<count).map { _ in Versioned(id: UUID(using: &random), version: 0) }
        var target = source
        for index in Array(0..<count).shuffled(using: &random).prefix(updated) {
            target[index].version += 1
        }
        for _ in 0..<moves {
            let item = target.remove(at: Int.random(in: 0..<target.count, using: &random))
            target.insert(item, at: Int.random(in: 0...target.count, using: &random))
        }
        return Workload(name: .w3, source: source, target: target,
                        // Each random move displaces one item; the issue allows 10% slack.
                        expected: Expectation(deletes: 0, inserts: 0, updates: updated, maxMoves: 1_100))
    }

    /// W4: 1,000,000 UUIDs; 10,000 removed, 10,000 inserted elsewhere, the first 2,000 shuffled.
    static func w4() -> Workload<UUID> {
        removeInsertShuffle(.w4, count: 1_000_000, removing: 200_000..<210_000,
                            inserting: 10_000, at: 300_000, shufflingPrefix: 2_000)
    }

    /// `count` random UUIDs; the target removes `removed`, then inserts `inserted` new UUIDs at
    /// `insertionIndex`, then shuffles its first `shuffled` elements.
    private static func removeInsertShuffle(
        _ name: WorkloadName, count: Int, removing removed: Range<Int>,
        inserting inserted: Int, at insertionIndex: Int, shufflingPrefix shuffled: Int
    ) -> Workload<UUID> {
        var random = SeededGenerator(seed: seed)
        let source = (0..<count).map { _ in UUID(using: &random) }
        var target = source
        target.removeSubrange(removed)
        target.insert(contentsOf: (0..<inserted).map { _ in UUID(using: &random) }, at: insertionIndex)
        target[0..<shuffled].shuffle(using: &random)
        return Workload(name: name, source: source, target: target,
                        expected: Expectation(deletes: removed.count, inserts: inserted, updates: 0,
                                              maxMoves: shuffled))
    }
}
