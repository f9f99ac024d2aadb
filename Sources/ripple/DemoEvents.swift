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
            EventText.legend,
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

    /// Prints `event`, which follows the list `previous`: as a list view shows it, each todo by its
    /// title, or as a JSON line.
    func event(_ event: LiveQueryEvent<Todo>, previous: [Todo]) {
        if json {
            printJSON(event)
        } else {
            print(EventText.lines(event, previous: previous, title: \.title).joined(separator: "\n"))
        }
    }

    // MARK: JSON

    /// One line per event, in the transcripts' vocabulary (a ``Transcript/Step``, keys sorted):
    /// `{"changeset":{"deletes":[…],"inserts":[…],"moves":[…],"updates":[…]},"previousVersion":…,
    /// "snapshot":[…],"updatedColumns":[…],"version":…}`.
    private func printJSON(_ event: LiveQueryEvent<Todo>) {
        do {
            print(try EventText.jsonLine(Transcript.Step(event, encoder: EventText.jsonEncoder)))
        } catch {
            Console.error("cannot encode the event of v\(event.version): \(error)")
        }
    }
}
