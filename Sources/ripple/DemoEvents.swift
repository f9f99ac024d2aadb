import Foundation
import Ripple
import RippleDiff

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
            print("   " + Self.describe(event, previous: previous))
            print("   open (\(event.snapshot.count)): " + event.snapshot.map { String($0.id) }.joined(separator: " "))
        }
    }

    /// `v3 ← v2: deletes [3 #7] · inserts [5 #21] · updates [2→2 #4 {title}] · moves [13→0 #15]`
    static func describe(_ event: LiveQueryEvent<Todo>, previous: [Todo]) -> String {
        let changeset = event.changeset
        guard let previousVersion = event.previousVersion else {
            return "v\(event.version) (initial snapshot): \(changeset.inserts.count) inserts"
        }
        var parts: [String] = []
        if !changeset.deletes.isEmpty {
            parts.append("deletes [" + changeset.deletes.map { "\($0) #\(previous[$0].id)" }.joined(separator: ", ") + "]")
        }
        if !changeset.inserts.isEmpty {
            parts.append("inserts [" + changeset.inserts.map { "\($0) #\(event.snapshot[$0].id)" }.joined(separator: ", ") + "]")
        }
        if !changeset.updates.isEmpty {
            let updates = zip(changeset.updates, event.updatedColumns).map { pair, columns in
                "\(pair) #\(event.snapshot[pair.new].id) {\(columns.sorted().joined(separator: ", "))}"
            }
            parts.append("updates [" + updates.joined(separator: ", ") + "]")
        }
        if !changeset.moves.isEmpty {
            parts.append("moves [" + changeset.moves.map { "\($0) #\(event.snapshot[$0.new].id)" }.joined(separator: ", ") + "]")
        }
        return "v\(event.version) ← v\(previousVersion): "
            + (parts.isEmpty ? "no change" : parts.joined(separator: " · "))
    }

    // MARK: JSON

    /// One line: `{"version":…,"previousVersion":…,"deletes":[…],"inserts":[…],"updates":[…],
    /// "moves":[…],"snapshot":[…]}`, keys in that order.
    private func printJSON(_ event: LiveQueryEvent<Todo>) {
        let changeset = event.changeset
        let object = JSONValue.object([
            ("version", .int(event.version)),
            ("previousVersion", event.previousVersion.map(JSONValue.int) ?? .null),
            ("deletes", .array(changeset.deletes.map { .int(Int64($0)) })),
            ("inserts", .array(changeset.inserts.map { .int(Int64($0)) })),
            ("updates", .array(zip(changeset.updates, event.updatedColumns).map { pair, columns in
                .object([("old", .int(Int64(pair.old))), ("new", .int(Int64(pair.new))),
                         ("columns", .array(columns.sorted().map(JSONValue.string)))])
            })),
            ("moves", .array(changeset.moves.map { pair in
                .object([("old", .int(Int64(pair.old))), ("new", .int(Int64(pair.new)))])
            })),
            ("snapshot", .array(event.snapshot.map { todo in
                .object([("id", .int(Int64(todo.id))), ("title", .string(todo.title)),
                         ("rank", .int(Int64(todo.rank))), ("done", .bool(todo.done))])
            })),
        ])
        print(object.text)
    }
}

/// A JSON value whose objects keep their keys in the order given (so that every line reads
/// the same way).
enum JSONValue {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// The value as compact JSON text.
    var text: String {
        switch self {
        case .null: "null"
        case .bool(let value): value ? "true" : "false"
        case .int(let value): String(value)
        case .string(let value): Self.quoted(value)
        case .array(let values): "[" + values.map(\.text).joined(separator: ",") + "]"
        case .object(let members): "{" + members.map { Self.quoted($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    /// `string` as a JSON string literal, escaped by `JSONEncoder`.
    private static func quoted(_ string: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        // Encoding a String cannot fail.
        let data = (try? encoder.encode(string)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
