import ArgumentParser
import Foundation
import Ripple
import RippleTesting

/// `ripple demo`: a short tour of live queries. Opens a store in a temporary directory, seeds a
/// collection of todos, subscribes to "open todos ordered by rank", makes a series of labelled
/// writes and prints every event the subscription receives — checking each one as it arrives.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Watch a live query's events while a few todos are written.",
        discussion: """
            Every event is checked as it arrives: the changeset, applied to the list received \
            before, must give the new snapshot, which must equal the query's result read afresh. \
            Exits non-zero at the first mismatch.
            """
    )

    @Flag(help: "Print one JSON object per event on stdout, and nothing else (labels go to stderr).")
    var json = false

    @Option(name: .customLong("record"), help: ArgumentHelp(
        "Also write the live query's events to FILE as a transcript (check it with `ripple replay`).",
        valueName: "FILE"))
    var recordPath: String?

    @Option(name: .customLong("keep"), help: ArgumentHelp(
        "Leave the demo's store at PATH (a new file) to explore it afterwards, e.g. with `ripple history`.",
        valueName: "PATH"))
    var keepPath: String?

    func validate() throws {
        if let keepPath, FileManager.default.fileExists(atPath: keepPath) {
            throw ValidationError("\(keepPath) exists: --keep writes a new store, give a path that does not exist")
        }
    }

    func run() throws {
        if let keepPath {
            try runDemo(path: keepPath)
            Console.note("The demo's store is kept at \(keepPath). Explore it, e.g.:\n"
                         + "  swift run ripple info \(keepPath)\n"
                         + "  swift run ripple history \(keepPath) --table todos --where \"done = 0\" --order-by rank --from 2")
            return
        }
        let files = FileManager.default
        let directory = files.temporaryDirectory.appendingPathComponent("ripple-demo-\(UUID().uuidString)")
        try files.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? files.removeItem(at: directory) }
        // The store and its subscription are released when `runDemo` returns, before the files go.
        try runDemo(path: directory.appendingPathComponent("todos.sqlite").path)
    }

    private func runDemo(path: String) throws {
        let printer = DemoPrinter(json: json)
        let store = try Store(path: path)
        let todos = try store.collection("todos", of: Todo.self)
        try todos.insert(contentsOf: Todo.seed)
        let query = todos.filter(Column("done") == false).order(by: Column("rank"))
        let live = try query.live()

        // A second subscriber, so that the demo's own output stays the same.
        let recorder = recordPath.map { _ in TranscriptRecorder(live) }
        defer { recorder?.stop() }
        printer.introduction(seeded: Todo.seed.count, done: Todo.seed.filter(\.done).count)
        printer.label("")
        printer.label("Subscribed:")
        let checker = EventChecker(printer: printer)
        let subscription = live.subscribe(on: .immediate, onError: { error in
            checker.fail("the live query ended with an error: \(error)")
        }) { event in
            try checker.receive(event)
        }
        defer { subscription.cancel() }

        var step = 0
        /// Runs one labelled write, then checks what was delivered for it.
        func write(_ label: String, visible: Bool = true, _ body: () throws -> Void) throws {
            step += 1
            printer.label("")
            printer.label("\(step). \(label)")
            let before = checker.eventCount
            try body()
            let delivered = checker.eventCount - before
            if delivered == 0 { printer.note("   no event: the list did not change, so the subscriber hears nothing") }
            if visible && delivered != 1 {
                checker.fail("expected one event for this write, \(delivered) delivered")
            } else if !visible && delivered != 0 {
                checker.fail("expected no event for this write, \(delivered) delivered")
            }
            let fresh = try query.fetchAll()
            if fresh != checker.received {
                checker.fail("the list received (\(ids(checker.received))) is not the query's result "
                             + "read afresh (\(ids(fresh)))")
            }
            if let failure = checker.failure {
                Console.error(failure)
                throw ExitCode.failure
            }
        }

        if checker.eventCount != 1 { checker.fail("expected the initial event inside subscribe") }

        try write("Insert \"Call the plumber\" (rank 55)") {
            try todos.insert(Todo(id: 21, title: "Call the plumber", rank: 55, done: false))
        }
        try write("Rename \"Water plants\" to \"Water the ferns\"") {
            try retitle(4, "Water the ferns", in: todos)
        }
        try write("Delete \"Return library books\"") {
            try todos.delete(id: 7)
        }
        try write("Move \"Renew the car insurance\" to the top (its rank 150 becomes 5)") {
            try rerank(15, 5, in: todos)
        }
        try write("Complete \"Pay rent\" (it leaves the list of open todos)") {
            try complete(2, true, in: todos)
        }
        try write("In one transaction: insert \"Renew passport\", delete \"Clean the fridge\", rename \"Fix the bike\", "
                      + "move \"Mend the jacket\" up (rank 180 becomes 35)") {
            try store.write { db in
                try todos.insert(Todo(id: 22, title: "Renew passport", rank: 125, done: false), in: db)
                try todos.delete(id: 9, in: db)
                try retitle(12, "Fix the bike's brakes", in: todos, db: db)
                try rerank(18, 35, in: todos, db: db)
            }
        }
        try write("Rename \"Book the dentist\", which is done (not in the list)", visible: false) {
            try retitle(3, "Book the dentist (done)", in: todos)
        }
        try write("Rewrite \"Answer Ana's email\" with identical values", visible: false) {
            guard let five = try todos.fetch(id: 5) else { throw ValidationError("todo #5 is missing") }
            try todos.update(five)
        }
        try write("Reopen \"Call grandma\" (it comes back)") {
            try complete(8, false, in: todos)
        }
        try write("Swap the ranks of \"Back up the laptop\" and \"Order printer ink\" in one transaction") {
            try store.write { db in
                try rerank(10, 110, in: todos, db: db)
                try rerank(11, 100, in: todos, db: db)
            }
        }
        try write("Raw SQL: complete every todo ranked above 160") {
            try store.write { db in try db.execute("UPDATE todos SET done = 1 WHERE rank > ?", [160]) }
        }

        printer.summary("")
        printer.summary("ok: \(checker.eventCount) events. Each was checked as it arrived: its changeset, applied to the "
                        + "list received before, gave its list, and that list equals the query read afresh.")
        if let recorder, let recordPath {
            let transcript = recorder.stop()
            if let error = recorder.error {
                Console.error("recording the transcript failed: \(error)")
                throw ExitCode.failure
            }
            try transcript.save(to: URL(fileURLWithPath: recordPath))
            Console.note("recorded \(transcript.steps.count) steps to \(recordPath)")
        }
    }

    // MARK: Writes

    private func modify(_ id: Int, in todos: RecordCollection<Todo>, db: Database?,
                        _ change: (inout Todo) -> Void) throws {
        func run(_ db: Database) throws {
            guard var todo = try todos.fetch(id: id, in: db) else {
                throw ValidationError("todo #\(id) is missing")
            }
            change(&todo)
            try todos.update(todo, in: db)
        }
        if let db { try run(db) } else { try todos.store.write(run) }
    }

    private func retitle(_ id: Int, _ title: String, in todos: RecordCollection<Todo>, db: Database? = nil) throws {
        try modify(id, in: todos, db: db) { $0.title = title }
    }

    private func rerank(_ id: Int, _ rank: Int, in todos: RecordCollection<Todo>, db: Database? = nil) throws {
        try modify(id, in: todos, db: db) { $0.rank = rank }
    }

    private func complete(_ id: Int, _ done: Bool, in todos: RecordCollection<Todo>) throws {
        try modify(id, in: todos, db: nil) { $0.done = done }
    }
}

/// The demo's record: one row of the `todos` table.
struct Todo: Codable, Sendable, Identifiable, Equatable {
    var id: Int
    var title: String
    var rank: Int
    var done: Bool

    /// Twenty todos ranked 10, 20, … 200; #3, #8 and #13 are done.
    static let seed: [Todo] = [
        "Buy milk", "Pay rent", "Book the dentist", "Water plants", "Answer Ana's email",
        "Take out the bins", "Return library books", "Call grandma", "Clean the fridge",
        "Back up the laptop", "Order printer ink", "Fix the bike", "Plan the weekend",
        "Read chapter 3", "Renew the car insurance", "Bake bread", "Sort the photos",
        "Mend the jacket", "Write the report", "Go for a run",
    ].enumerated().map { index, title in
        let id = index + 1
        return Todo(id: id, title: title, rank: id * 10, done: [3, 8, 13].contains(id))
    }
}

/// The ids of `todos`, in order, for messages.
func ids(_ todos: [Todo]) -> String {
    todos.map { "#\($0.id)" }.joined(separator: " ")
}
