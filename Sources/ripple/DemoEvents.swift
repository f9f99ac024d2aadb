import Foundation
import Ripple
import RippleDiff
import RippleTesting

/// Receives the demo subscription's events (on whatever thread delivers them), checks each one
/// against the list received before, and has it printed.
final class EventChecker: @unchecked Sendable {   // every stored property is guarded by `lock`
    private let lock = NSLock()
    private let printer: DemoPrinter
    private var list: [Todo] = []
    private var lastVersion: Int64?
    private var count = 0
    private var firstFailure: String?

    init(printer: DemoPrinter) {
        self.printer = printer
    }

    /// The snapshot of the last event received.
    var received: [Todo] { lock.withLock { list } }
    /// How many events were received.
    var eventCount: Int { lock.withLock { count } }
    /// The first problem found, if any.
    var failure: String? { lock.withLock { firstFailure } }

    /// Records a problem (the first one is kept).
    func fail(_ message: String) {
        lock.withLock { if firstFailure == nil { firstFailure = message } }
    }

    /// Checks `event` against the list received before, prints it, and keeps its snapshot.
    /// Throws (ending the subscription) when the event is inconsistent.
    func receive(_ event: LiveQueryEvent<Todo>) throws {
        let problem: String? = lock.withLock {
            count += 1
            let problem = Self.check(event, after: list, at: lastVersion)
            printer.event(event, previous: list)
            list = event.snapshot
            lastVersion = event.version
            if let problem, firstFailure == nil { firstFailure = problem }
            return problem
        }
        if let problem { throw DemoError(message: problem) }
    }

    /// What is wrong with `event` as the successor of `previous`, received at `version`.
    private static func check(_ event: LiveQueryEvent<Todo>, after previous: [Todo], at version: Int64?) -> String? {
        let changeset = event.changeset
        if event.previousVersion != version {
            return "event v\(event.version) says it follows v\(event.previousVersion.map(String.init) ?? "nil"), "
                + "the last one received was v\(version.map(String.init) ?? "nil")"
        }
        if let version, event.version <= version {
            return "version v\(event.version) does not follow v\(version)"
        }
        if event.updatedColumns.count != changeset.updates.count {
            return "v\(event.version): \(event.updatedColumns.count) sets of updated columns "
                + "for \(changeset.updates.count) updates"
        }
        guard changeset.oldCount == previous.count, changeset.newCount == event.snapshot.count else {
            return "v\(event.version): the changeset goes from \(changeset.oldCount) to \(changeset.newCount) "
                + "elements, the lists have \(previous.count) and \(event.snapshot.count)"
        }
        let applied = changeset.apply(to: previous, using: event.snapshot)
        if applied != event.snapshot {
            return "v\(event.version): the changeset applied to the previous list gives \(ids(applied)), "
                + "the snapshot is \(ids(event.snapshot))"
        }
        return nil
    }
}

/// A failed check, thrown from the subscription's handler.
struct DemoError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// Prints the demo: readable text, or one JSON object per event (labels then go to stderr).
struct DemoPrinter: Sendable {
    let json: Bool

    /// The lines that say what the demo shows and how to read it.
    func introduction(seeded: Int, done: Int) {
        let lines = [
            "Ripple demo: the live query \"open todos, by rank\" is watched while todos are written.",
            "\(seeded) todos are seeded, \(done) of them done. After each write the subscriber receives an event: the",
            "list as a list view would show it, and the changeset that turns the previous list into it.",
            "Legend: + inserted   ~ updated (the changed columns)   ↕ moved (from its old row)   − deleted   vN: store version",
        ]
        for line in lines { label(line) }
    }

    /// A step's title.
    func label(_ text: String) {
        if json { Console.note(text) } else { print(text) }
    }

    /// A remark under a step.
    func note(_ text: String) {
        if json { Console.note(text) } else { print(text) }
    }

    /// The closing line.
    func summary(_ text: String) {
        if json { Console.note(text) } else { print(text) }
    }

    /// Prints `event`, which follows the list `previous`.
    func event(_ event: LiveQueryEvent<Todo>, previous: [Todo]) {
        if json {
            printJSON(event)
        } else {
            print(Self.describe(event, previous: previous).joined(separator: "\n"))
        }
    }

    /// The event as a list view shows it: a summary line (`v4 (after v3): 1 updated, 1 moved`),
    /// then each row of the new list, marked, then the deleted rows.
    static func describe(_ event: LiveQueryEvent<Todo>, previous: [Todo]) -> [String] {
        let changeset = event.changeset
        var counts: [String] = []
        for (count, word) in [(changeset.inserts.count, "inserted"), (changeset.updates.count, "updated"),
                              (changeset.moves.count, "moved"), (changeset.deletes.count, "deleted")] where count > 0 {
            counts.append("\(count) \(word)")
        }
        let heading = event.previousVersion.map { "   v\(event.version) (after v\($0)): " } ?? "   v\(event.version), the first event: "
        var lines = [heading + (event.previousVersion == nil ? "\(event.snapshot.count) rows" : counts.joined(separator: ", "))]
        guard event.previousVersion != nil else {
            for (row, todo) in event.snapshot.enumerated() { lines.append(Self.row(" ", row, todo.title)) }
            return lines
        }
        let inserted = Set(changeset.inserts)
        let movedFrom = Dictionary(changeset.moves.map { ($0.new, $0.old) }, uniquingKeysWith: { first, _ in first })
        let updated = Dictionary(zip(changeset.updates.map(\.new), event.updatedColumns), uniquingKeysWith: { first, _ in first })
        for (row, todo) in event.snapshot.enumerated() {
            var notes: [String] = []
            var mark = " "
            if inserted.contains(row) { mark = "+" }
            if let columns = updated[row] {
                mark = "~"
                notes.append("changed: " + columns.sorted().joined(separator: ", "))
            }
            if let old = movedFrom[row] {
                mark = "↕"
                notes.append("from row \(old + 1)")
            }
            lines.append(Self.row(mark, row, todo.title, notes: notes))
        }
        for row in changeset.deletes {
            lines.append("    −      \(previous[row].title)  (was row \(row + 1))")
        }
        return lines
    }

    /// `  ~  3  Water the ferns  (changed: title)`: a mark, the 1-based row, the title, notes.
    private static func row(_ mark: String, _ row: Int, _ title: String, notes: [String] = []) -> String {
        let number = String(row + 1)
        let padded = String(repeating: " ", count: max(0, 3 - number.count)) + number
        return "    \(mark) \(padded)  \(title)" + (notes.isEmpty ? "" : "  (" + notes.joined(separator: "; ") + ")")
    }

    // MARK: JSON

    /// One line per event, in the transcripts' vocabulary (a ``Transcript/Step``, keys sorted):
    /// `{"changeset":{"deletes":[…],"inserts":[…],"moves":[…],"updates":[…]},"previousVersion":…,
    /// "snapshot":[…],"updatedColumns":[…],"version":…}`.
    private func printJSON(_ event: LiveQueryEvent<Todo>) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let step = try Transcript.Step(event, encoder: encoder)
            print(String(decoding: try encoder.encode(step), as: UTF8.self))
        } catch {
            Console.error("cannot encode the event of v\(event.version): \(error)")
        }
    }
}
