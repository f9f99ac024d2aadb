import Dispatch
import Foundation
import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Recorded transcripts: recorded from a live query on a real store, saved, loaded, replayed;
/// tampered ones refused naming the step; fresh runs compared with recorded ones.
@Suite struct TranscriptTests {
    // MARK: Recording a real run

    @Test func aRecordedRunSavesLoadsAndReplays() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let transcript = try recordChores(in: directory)
        #expect(transcript.steps.count == 7)
        #expect(transcript.steps[0].previousVersion == nil)
        #expect(transcript.query.contains("chores"))

        let file = directory.url.appendingPathComponent("chores.json")
        try transcript.save(to: file)
        let loaded = try Transcript.load(from: file)
        #expect(loaded == transcript)
        let final = try replay(loaded)
        #expect(final.items == transcript.steps.last?.snapshot)
        #expect(compare(recorded: transcript, fresh: loaded) == nil)

        // Readable: sorted keys, one record per line, an explicit null for the first step.
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(text.hasPrefix("{\n  \"format\": 1,\n  \"query\": "))
        #expect(text.contains("\"previousVersion\": null"))
        #expect(text.contains("{\"done\": false, \"id\": 1, \"rank\": 10, \"title\": \"Sweep\"}"))
        #expect(text.contains("\"updatedColumns\": [[\"title\"]]"))
    }

    @Test func aRecorderOnAQueueRecordsAValidTranscript() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let store = try Store(path: directory.path("chores.sqlite"))
        let chores = try store.collection("chores", of: Chore.self)
        let query = chores.order(by: Column("rank"))
        let recorder = TranscriptRecorder(try query.live(), on: .queue(DispatchQueue(label: "transcript-tests")))
        for id in 1...20 {
            try chores.insert(Chore(id: id, title: "Chore \(id)", rank: (id * 37) % 101, done: false))
        }
        let expected = try JSONValue.array(encoding: query.fetchAll())
        #expect(recorder.wait { $0.steps.last?.snapshot == expected })
        let transcript = recorder.stop()
        #expect(recorder.error == nil)
        #expect(transcript.steps.last?.snapshot == expected)
        try replay(transcript)
    }

    // MARK: Tampered transcripts

    @Test func aChangedIndexIsRefusedNamingTheStep() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let transcript = try recordChores(in: directory)

        var deleted = transcript   // step 3 deletes #2, at index 1: claim index 0
        #expect(deleted.steps[3].changeset.deletes == [1])
        deleted.steps[3].changeset.deletes = [0]
        expectRefused(deleted, atStep: 3, mentioning: "does not give the snapshot")

        var moved = transcript     // step 4 moves #5 to the top: claim it came from elsewhere
        #expect(moved.steps[4].changeset.moves.count == 1)
        moved.steps[4].changeset.moves[0].old -= 1
        expectRefused(moved, atStep: 4, mentioning: "step 4 (v\(transcript.steps[4].version))")

        var outOfRange = transcript
        outOfRange.steps[2].changeset.updates[0].new = 99
        expectRefused(outOfRange, atStep: 2, mentioning: "invalid changeset")
    }

    @Test func swappedSnapshotElementsAreRefusedNamingTheStep() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        var transcript = try recordChores(in: directory)
        #expect(transcript.steps[2].changeset.inserts.isEmpty)
        transcript.steps[2].snapshot.swapAt(1, 2)
        expectRefused(transcript, atStep: 2, mentioning: "item 1 shows")
    }

    @Test func aMissingStepIsRefusedNamingTheStep() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        var transcript = try recordChores(in: directory)
        transcript.steps.remove(at: 2)
        expectRefused(transcript, atStep: 2, mentioning: "a step is missing")

        var headless = try recordChores(in: directory, file: "again.sqlite")
        headless.steps.removeFirst()
        expectRefused(headless, atStep: 0, mentioning: "initial snapshot")
    }

    /// The README's recipe saves a test's first recording into `Transcripts/`, which does not
    /// exist yet: it failed with "The file doesn't exist".
    @Test func savingCreatesTheFolder() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let transcript = try recordChores(in: directory)
        let file = directory.url.appendingPathComponent("Transcripts/nested/chores.json")
        try transcript.save(to: file)
        #expect(try Transcript.load(from: file) == transcript)
    }

    @Test func anotherFormatIsRefused() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        var transcript = try recordChores(in: directory)
        transcript.format = 2
        let file = directory.url.appendingPathComponent("future.json")
        try transcript.save(to: file)
        #expect(throws: TranscriptError.self) { try Transcript.load(from: file) }
        do {
            _ = try Transcript.load(from: file)
        } catch {
            #expect(error.description.contains("unsupported transcript format 2"), "\(error)")
        }
        #expect(throws: (any Error).self) { try JSONDecoder().decode(Transcript.self, from: Data(contentsOf: file)) }
        expectRefused(transcript, atStep: nil, mentioning: "unsupported transcript format 2")
    }

    @Test func otherInconsistenciesAreRefused() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let transcript = try recordChores(in: directory)

        var columns = transcript
        columns.steps[2].updatedColumns = []
        expectRefused(columns, atStep: 2, mentioning: "0 sets of updated columns for 1 updates")

        var backwards = transcript
        backwards.steps[5].version = backwards.steps[4].version
        backwards.steps[6].previousVersion = backwards.steps[5].version
        expectRefused(backwards, atStep: 5, mentioning: "does not increase")

        var stale = transcript   // an update left out: the list keeps the old title
        stale.steps[2].changeset.updates = []
        stale.steps[2].updatedColumns = []
        expectRefused(stale, atStep: 2, mentioning: "Sweep the hall")

        expectRefused(Transcript(query: "nothing"), atStep: nil, mentioning: "no steps")
    }

    // MARK: Comparing runs

    @Test func twoEqualRunsCompareEqualAndDifferentOnesNameTheFirstDifferingStep() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let first = try recordChores(in: directory, file: "first.sqlite")
        let second = try recordChores(in: directory, file: "second.sqlite")
        #expect(compare(recorded: first, fresh: second) == nil)
        try expectTranscript(second, matches: first)

        let renamed = try recordChores(in: directory, file: "third.sqlite", renameTo: "Sweep the stairs")
        let difference = try #require(compare(recorded: first, fresh: renamed))
        #expect(difference.hasPrefix("step 2 (v\(first.steps[2].version)): snapshot[0] differs: recorded "), "\(difference)")
        #expect(difference.contains("Sweep the hall") && difference.contains("Sweep the stairs"), "\(difference)")
        #expect(throws: TranscriptError.self) { try expectTranscript(renamed, matches: first) }

        var shorter = first
        shorter.steps.removeLast()
        let missing = try #require(compare(recorded: first, fresh: shorter))
        #expect(missing.contains("step 6 (v\(first.steps[6].version)) is only in the recorded transcript"), "\(missing)")

        var shifted = second
        for index in shifted.steps.indices {
            shifted.steps[index].version += 100
            shifted.steps[index].previousVersion = shifted.steps[index].previousVersion.map { $0 + 100 }
        }
        #expect(compare(recorded: first, fresh: shifted)?.hasPrefix("step 0 (v\(first.steps[0].version)): version differs") == true)
        #expect(compare(recorded: first, fresh: shifted, versions: false) == nil)
    }

    /// A transcript recorded before the store named its tables with their schema (`FROM
    /// "todos"`) compares equal to a fresh run of the same query (`FROM "main"."todos"`); a query
    /// over another table still differs.
    @Test func aTranscriptRecordedWithoutTheSchemaNameComparesEqualToAFreshRun() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let fresh = try recordChores(in: directory, file: "fresh.sqlite")
        #expect(fresh.query.contains(#""main"."#), "\(fresh.query)")
        var older = fresh
        older.query = fresh.query.replacingOccurrences(of: #""main"."#, with: "")
        #expect(compare(recorded: older, fresh: fresh) == nil)
        var other = fresh
        other.query = fresh.query.replacingOccurrences(of: #""main"."#, with: #""aux"."#)
        #expect(compare(recorded: other, fresh: fresh)?.hasPrefix("query differs") == true)
    }

    // MARK: The README's example

    /// The README's "Testing with recorded history" example (the transcript lives in a temporary
    /// directory here rather than beside the test).
    @Test func readmeRecordedHistoryExample() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-transcripts")
        let store = try Store(path: directory.path("todos.sqlite"))
        let todos = try store.collection("todos", of: Chore.self)
        let open = try todos.filter(Column("done") == false).order(by: Column("rank")).live()

        let recorder = TranscriptRecorder(open)   // .immediate: every event recorded before `insert` returns
        try todos.insert(Chore(id: 1, title: "Buy milk", rank: 10, done: false))
        try todos.insert(Chore(id: 2, title: "Pay rent", rank: 20, done: false))
        try todos.update(Chore(id: 1, title: "Buy milk", rank: 30, done: false))
        try todos.update(Chore(id: 2, title: "Pay rent", rank: 20, done: true))
        let fresh = recorder.stop()

        let file = directory.url.appendingPathComponent("open-todos.json")
        if !FileManager.default.fileExists(atPath: file.path) {
            try fresh.save(to: file)   // the first run records; commit the file
        }
        let recorded = try Transcript.load(from: file)
        try replay(recorded)                           // every step valid for a UIKit-style list
        try expectTranscript(fresh, matches: recorded) // and today's code delivers the same events
        #expect(recorded.steps.map { $0.snapshot.count } == [0, 1, 2, 2, 1])
    }

    // MARK: Building blocks

    @Test func changesetsRoundTripThroughTheirLists() throws {
        var generator = SeededGenerator(seed: 7)
        /// Up to 12 elements of distinct identities (0...20), each with a content (0...2).
        func list() -> [(id: Int, content: Int)] {
            var seen = Set<Int>()
            return (0..<Int.random(in: 0...12, using: &generator))
                .map { _ in (id: Int.random(in: 0...20, using: &generator), content: Int.random(in: 0...2, using: &generator)) }
                .filter { seen.insert($0.id).inserted }
        }
        for _ in 0..<500 {
            let old = list()
            let new = list()
            let changeset = Changeset(from: old, to: new, identifiedBy: \.id, contentEqual: { $0.content == $1.content })
            let rebuilt = try Changeset(oldCount: changeset.oldCount, newCount: changeset.newCount,
                                        deletes: changeset.deletes, inserts: changeset.inserts,
                                        updates: changeset.updates, moves: changeset.moves)
            #expect(rebuilt == changeset)
        }
    }

    @Test func inconsistentListsAreRefused() {
        func refused(_ oldCount: Int, _ newCount: Int, deletes: [Int] = [], inserts: [Int] = [],
                     updates: [Changeset.IndexPair] = [], moves: [Changeset.IndexPair] = [],
                     _ phrase: String, sourceLocation: SourceLocation = #_sourceLocation) {
            do {
                let changeset = try Changeset(oldCount: oldCount, newCount: newCount, deletes: deletes,
                                              inserts: inserts, updates: updates, moves: moves)
                Issue.record("accepted \(changeset)", sourceLocation: sourceLocation)
            } catch {
                #expect(error.description.contains(phrase), "\(error)", sourceLocation: sourceLocation)
            }
        }
        refused(3, 3, deletes: [3], inserts: [0], "out of range")
        refused(3, 3, deletes: [1, 1], inserts: [0, 1], "not strictly ascending")
        refused(3, 4, deletes: [0], "do not add up")
        refused(3, 3, deletes: [0], inserts: [0], moves: [.init(old: 0, new: 1)], "deleted index")
        refused(3, 3, deletes: [0], inserts: [0], moves: [.init(old: 1, new: 0)], "inserted index")
        refused(3, 3, moves: [.init(old: 2, new: 0), .init(old: 2, new: 1)], "moves twice")
        refused(3, 3, updates: [.init(old: 0, new: 1)], "does not pair matching elements")
        refused(3, 3, moves: [.init(old: 1, new: 0), .init(old: 0, new: 1)], "not minimal")
        refused(2, 2, moves: [.init(old: 0, new: 0)], "not minimal")
    }

    @Test func jsonValuesRoundTripThroughTheirText() throws {
        let value = JSONValue.object([
            "text": .string("quote \" backslash \\ newline \n tab \t bell \u{7} é 🌊"),
            "numbers": .array([.int(-3), .int(Int64.max), .double(0.1), .double(-2.5e-8), .double(1)]),
            "nested": .array([.object(["a": .null, "b": .bool(true)]), .array([]), .object([:])]),
            "long": .array((0..<40).map { .object(["index": .int(Int64($0)), "tags": .array([.string("x")])]) }),
        ])
        let text = value.prettyText()
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(decoded == value)
        #expect(JSONValue.int(1) == .double(1))
        #expect(try JSONValue(encoding: Chore(id: 1, title: "A", rank: 2, done: true)).decode(Chore.self)
                == Chore(id: 1, title: "A", rank: 2, done: true))
    }

    @Test func aManualClockMovesOnlyWhenTold() {
        let clock = ManualClock()
        let start = clock.now
        clock.advance(by: 90)
        #expect(clock.now.timeIntervalSince(start) == 90)
        #expect(start == Date(timeIntervalSinceReferenceDate: 0))
    }

    // MARK: Helpers

    /// Seven events: the initial snapshot, an insert, a rename, a delete, a move, one transaction
    /// of four changes, and a chore leaving the open list.
    private func recordChores(in directory: TemporaryDirectory, file: String = "chores.sqlite",
                              renameTo newTitle: String = "Sweep the hall") throws -> Transcript {
        let store = try Store(path: directory.path(file))
        let chores = try store.collection("chores", of: Chore.self)
        try chores.insert(contentsOf: ["Sweep", "Dust", "Iron", "Cook", "Shop"].enumerated().map { index, title in
            Chore(id: index + 1, title: title, rank: (index + 1) * 10, done: false)
        })
        let recorder = TranscriptRecorder(try chores.filter(Column("done") == false).order(by: Column("rank")).live())
        defer { recorder.stop() }
        func modify(_ id: Int, in db: Database? = nil, _ change: (inout Chore) -> Void) throws {
            func run(_ db: Database) throws {
                var chore = try #require(try chores.fetch(id: id, in: db))
                change(&chore)
                try chores.update(chore, in: db)
            }
            if let db { try run(db) } else { try store.write(run) }
        }
        try chores.insert(Chore(id: 6, title: "Mop", rank: 25, done: false))   // step 1: insert at 2
        try modify(1) { $0.title = newTitle }                                   // step 2: update
        _ = try chores.delete(id: 2)                                            // step 3: delete index 1
        try modify(5) { $0.rank = 5 }                                           // step 4: move to the top
        try store.write { db in                                                 // step 5: all at once
            try chores.insert(Chore(id: 7, title: "Bake", rank: 35, done: false), in: db)
            _ = try chores.delete(id: 4, in: db)
            try modify(3, in: db) { $0.title = "Iron shirts" }
            try modify(6, in: db) { $0.rank = 100 }
        }
        try modify(3) { $0.done = true }                                        // step 6: leaves
        #expect(recorder.error == nil)
        return recorder.stop()
    }

    private func expectRefused(_ transcript: Transcript, atStep step: Int?, mentioning phrase: String,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            try replay(transcript)
            Issue.record("replayed a tampered transcript", sourceLocation: sourceLocation)
        } catch {
            #expect(error.step == step, "\(error)", sourceLocation: sourceLocation)
            if let step {
                let version = transcript.steps[step].version
                #expect(error.description.hasPrefix("step \(step) (v\(version)): "), "\(error)",
                        sourceLocation: sourceLocation)
            }
            #expect(error.description.contains(phrase), "\(error)", sourceLocation: sourceLocation)
        }
    }
}

/// The record these tests store.
private struct Chore: Codable, Sendable, Identifiable, Equatable {
    var id: Int
    var title: String
    var rank: Int
    var done: Bool
}
