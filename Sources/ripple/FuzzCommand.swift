import ArgumentParser
import Foundation
import Ripple
import RippleDiff
import RippleTesting

/// `ripple fuzz diff|query`: long seeded runs, by hand (not in CI), of the diff engine and the
/// query compiler. Each prints one line per failure (with the seed and iteration that reproduce
/// it) and a summary line; it exits non-zero when anything failed.
struct FuzzCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fuzz",
        abstract: "Long seeded runs of the diff engine and the query compiler.",
        subcommands: [DiffFuzz.self, QueryFuzz.self]
    )
}

/// Random collections (duplicates included) diffed; every output form applied and validated.
struct DiffFuzz: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Diff random collections with duplicates; apply every output form through the list-view model.")

    @Option(help: "The seed of the run.") var seed: UInt64 = 1
    @Option(help: "How many collection pairs.") var iterations = 100_000
    @Option(help: "The largest collection.") var maxCount = 64

    /// Identity `id`, content `version`.
    struct Element: Diffable, Hashable, CustomStringConvertible {
        var id: Int
        var version: Int
        var diffID: Int { id }
        func isContentEqual(to other: Element) -> Bool { version == other.version }
        var description: String { "\(id).\(version)" }
    }

    func run() throws {
        var random = SeededGenerator(seed: seed)
        var failures = 0
        var elements = 0
        let started = Date()
        for iteration in 0..<iterations {
            let count = Int.random(in: 0...maxCount, using: &random)
            // Few identities for many elements: duplicates are common.
            let identities = max(1, Int.random(in: 1...max(1, count * 2), using: &random))
            let old = (0..<count).map { _ in
                Element(id: Int.random(in: 0..<identities, using: &random), version: Int.random(in: 0...1, using: &random))
            }
            var new = old.filter { _ in Int.random(in: 0..<4, using: &random) != 0 }   // deletes
            new.shuffle(using: &random)
            if Bool.random(using: &random) { new.sort { $0.id < $1.id } }               // mostly ordered
            for index in new.indices where Int.random(in: 0..<5, using: &random) == 0 { new[index].version += 1 }
            for _ in 0..<Int.random(in: 0...(count / 3 + 1), using: &random) {
                new.insert(Element(id: Int.random(in: 0..<(identities + 3), using: &random), version: 0),
                           at: Int.random(in: 0...new.count, using: &random))
            }
            elements += old.count + new.count
            if let failure = check(old, new) {
                failures += 1
                print("FAIL seed=\(seed) iteration=\(iteration): \(failure)\n  old \(old)\n  new \(new)")
            }
        }
        let seconds = Date().timeIntervalSince(started)
        print("diff: seed=\(seed) iterations=\(iterations) elements=\(elements) failures=\(failures) seconds=\(String(format: "%.1f", seconds))")
        if failures > 0 { throw ExitCode.failure }
    }

    /// Every form of the changeset, applied to `old`, must give `new`; nil when all do.
    private func check(_ old: [Element], _ new: [Element]) -> String? {
        let changeset = Changeset(from: old, to: new)
        if changeset.apply(to: old, using: new) != new { return "apply(to:using:) differs" }
        if changeset.applySteps(to: old, using: new) != new { return "applySteps differs" }
        if changeset.moves.count > changeset.matchedCount { return "more moves than matched elements" }
        do {
            var staged = BatchUpdateListModel(items: old)
            try staged.apply(changeset, dataSource: new)
            var stepped = BatchUpdateListModel(items: old)
            try stepped.performSteps(changeset.steps, dataSource: new)
            try stepped.expect(new)
        } catch {
            return "list-view model: \(error)"
        }
        return nil
    }
}

/// Random filter trees with hostile strings and values: the SQL is valid, every value bound, and
/// the result equals the same filter evaluated in Swift on the same records.
struct QueryFuzz: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Random filter trees with hostile values; results checked against a Swift evaluation.")

    @Option(help: "The seed of the run.") var seed: UInt64 = 1
    @Option(help: "How many filters.") var iterations = 20_000
    @Option(help: "How many records in the collection.") var records = 300

    struct Record: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var name: String
        var rank: Int
        var score: Double?
        var note: String?

        /// The declared types of the collection's columns: TEXT for strings, numbers otherwise.
        static func affinity(_ column: String) -> FilterOracle.Affinity {
            column == "name" || column == "note" ? .text : .numeric
        }

        func value(_ column: String) -> SQLValue {
            switch column {
            case "id": .integer(Int64(id))
            case "name": .text(name)
            case "rank": .integer(Int64(rank))
            case "score": score.map { .real($0) } ?? .null
            default: note.map { .text($0) } ?? .null
            }
        }
    }

    /// Pieces of text that break naive SQL building, plus wildcard and case mixes.
    static let hostile = ["'", "\"", ";", "--", "'); DROP TABLE records; --", "%", "_", "\\", "a", "B", "é", "🎉",
                          "\u{0}", " OR 1=1", "`", "?", "$1", ":name", "\n"]

    func run() throws {
        var random = SeededGenerator(seed: seed)
        func text() -> String {
            (0..<Int.random(in: 0...3, using: &random)).map { _ in Self.hostile.randomElement(using: &random)! }.joined()
        }
        let items = (0..<records).map { id in
            Record(id: id, name: text(), rank: Int.random(in: -3...12, using: &random),
                   score: Bool.random(using: &random) ? nil : Double(Int.random(in: -4...8, using: &random)) / 2,
                   note: Bool.random(using: &random) ? nil : text())
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-fuzz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try Store(path: directory.appendingPathComponent("fuzz.sqlite").path)
        let collection = try store.collection("records", of: Record.self)
        try collection.insert(contentsOf: items)
        let schemaBefore = try store.read { try $0.fetchAll("SELECT name, sql FROM sqlite_schema ORDER BY name") }

        func value(for column: String) -> SQLValue {
            switch Int.random(in: 0..<8, using: &random) {
            case 0: return .null
            case 1: return .text(text())
            case 2: return .real(Double(Int.random(in: -8...24, using: &random)) / 2)
            default:
                return column == "name" || column == "note" ? .text(text()) : .integer(Int64(Int.random(in: -4...14, using: &random)))
            }
        }
        func filter(depth: Int) -> Filter {
            let column = Column(["id", "name", "rank", "score", "note"].randomElement(using: &random)!)
            switch Int.random(in: 0..<(depth > 0 ? 12 : 9), using: &random) {
            case 0: return column == value(for: column.name)
            case 1: return column != value(for: column.name)
            case 2: return column < value(for: column.name)
            case 3: return column <= value(for: column.name)
            case 4: return column > value(for: column.name)
            case 5: return column >= value(for: column.name)
            case 6: return column.in((0..<Int.random(in: 0...4, using: &random)).map { _ in value(for: column.name) })
            case 7:
                let escape: Character? = Bool.random(using: &random) ? "\\" : nil
                return Column(["name", "note"].randomElement(using: &random)!).like(text() + "%" + text(), escape: escape)
            case 8: return Bool.random(using: &random) ? column.isNull : column.isNotNull
            case 9: return filter(depth: depth - 1) && filter(depth: depth - 1)
            case 10: return filter(depth: depth - 1) || filter(depth: depth - 1)
            default: return !filter(depth: depth - 1)
            }
        }

        var failures = 0
        let started = Date()
        try store.read { db in
            for iteration in 0..<iterations {
                let tree = filter(depth: 3)
                let compiled = try collection.filter(tree).compiled()
                // Every value is a parameter: none of the hostile text reaches the SQL.
                let spliced = Self.hostile.filter { $0.count > 1 && compiled.sql.contains($0) }
                let expected = items.filter { FilterOracle.evaluate(tree, $0.value, affinity: Record.affinity) == true }.map(\.id)
                do {
                    let found = try collection.filter(tree).fetchAll(in: db).map(\.id).sorted()
                    if found != expected || !spliced.isEmpty {
                        failures += 1
                        print("FAIL seed=\(seed) iteration=\(iteration): \(tree)\n  \(compiled)\n  expected \(expected)\n  found \(found)")
                    }
                } catch {
                    failures += 1
                    print("FAIL seed=\(seed) iteration=\(iteration): \(tree) threw \(error)")
                }
            }
        }
        let schemaAfter = try store.read { try $0.fetchAll("SELECT name, sql FROM sqlite_schema ORDER BY name") }
        let countAfter = try collection.count()
        if schemaAfter != schemaBefore || countAfter != items.count {
            failures += 1
            print("FAIL seed=\(seed): the schema or the data changed")
        }
        let seconds = Date().timeIntervalSince(started)
        print("query: seed=\(seed) iterations=\(iterations) records=\(records) failures=\(failures) seconds=\(String(format: "%.1f", seconds))")
        if failures > 0 { throw ExitCode.failure }
    }
}
