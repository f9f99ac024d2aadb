import Foundation
import Ripple
import RippleTesting
import Testing

/// `ripple watch`, run as another process on a store that this process and the `sqlite3` shell
/// write: every event read from its output as it comes (each awaited with a deadline, never a
/// fixed sleep), its signals, its recording, and the files it refuses and leaves untouched.
@Suite(.timeLimit(.minutes(15))) struct WatchCommandTests {
    // MARK: Events

    @Test func jsonLinesFollowEveryKindOfChangeMadeByOtherProcesses() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("todo.sqlite")
        let store = try Self.todoStore(at: path)
        let watch = try WatchedProcess(["watch", path, "--table", "todo", "--order-by", "rank", "--json"])
        defer { watch.stop() }

        let initial = try watch.nextStep()
        #expect(initial.previousVersion == nil)
        #expect(initial.changeset == Transcript.Lists(inserts: [0, 1, 2, 3]))
        #expect(Self.values("title", initial) == ["Milk", "Eggs", "Tea", "Soap"])
        #expect(initial.snapshot[0] == .object(["id": .int(1), "title": .string("Milk"), "rank": .int(10), "done": .int(0)]))

        // The sqlite3 shell: another process, writing without Ripple.
        try SQLiteShell.run("INSERT INTO todo VALUES (5, 'Jam', 25, 0)", on: path)
        let insert = try watch.nextStep()
        #expect(insert.previousVersion == initial.version && insert.version > initial.version)
        #expect(insert.changeset == Transcript.Lists(inserts: [2]))
        #expect(Self.values("title", insert) == ["Milk", "Eggs", "Jam", "Tea", "Soap"])

        try SQLiteShell.run("UPDATE todo SET title = 'Brown eggs' WHERE id = 2", on: path)
        let update = try watch.nextStep()
        #expect(update.changeset == Transcript.Lists(updates: [Transcript.Pair(old: 1, new: 1)]))
        #expect(update.updatedColumns == [["title"]])

        try SQLiteShell.run("DELETE FROM todo WHERE id = 1", on: path)
        let delete = try watch.nextStep()
        #expect(delete.changeset == Transcript.Lists(deletes: [0]))

        // A Store in this process: another process for the watch, writing through Ripple.
        try store.write { db in try db.execute("UPDATE todo SET rank = 5 WHERE id = 4") }
        let move = try watch.nextStep()
        #expect(move.changeset.moves == [Transcript.Pair(old: 3, new: 0)])
        #expect(move.changeset.updates == [Transcript.Pair(old: 3, new: 0)])
        #expect(move.updatedColumns == [["rank"]])
        #expect(Self.values("title", move) == ["Soap", "Brown eggs", "Jam", "Tea"])

        let steps = [initial, insert, update, delete, move]
        #expect(zip(steps, steps.dropFirst()).allSatisfy { $1.previousVersion == $0.version && $1.version > $0.version })
        try replay(Transcript(query: "watch", steps: steps))
        #expect(move.snapshot == (try Self.table(store, "SELECT * FROM todo ORDER BY rank, id")))
    }

    /// Regression: a store's writer took its bearings among other processes' commits at its first
    /// look (the poll's, the file watch's), not when it opened; a commit made right after the
    /// first event, before that look, was never delivered.
    @Test func aCommitRightAfterTheFirstEventIsHeard() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("todo.sqlite")
        let store = try Self.todoStore(at: path)
        let watch = try WatchedProcess(["watch", path, "--table", "todo", "--json"])
        defer { watch.stop() }

        _ = try watch.nextStep()
        try store.write { db in try db.execute("UPDATE todo SET title = 'Oat milk' WHERE id = 1") }
        #expect(try watch.nextStep().updatedColumns == [["title"]])
    }

    @Test func aWindowShowsOnlyTheRowsOfItsConditionOrderAndLimit() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("todo.sqlite")
        let store = try Self.todoStore(at: path)
        let watch = try WatchedProcess(["watch", path, "--table", "todo", "--where", "done = 0", "--order-by", "rank",
                                        "--limit", "2", "--json"])
        defer { watch.stop() }

        let initial = try watch.nextStep()
        #expect(Self.values("title", initial) == ["Milk", "Eggs"])
        // Milk is done: it leaves, Tea comes into the window.
        try store.write { db in try db.execute("UPDATE todo SET done = 1 WHERE id = 1") }
        let completed = try watch.nextStep()
        #expect(completed.changeset == Transcript.Lists(deletes: [0], inserts: [1]))
        #expect(Self.values("title", completed) == ["Eggs", "Tea"])
        // A new first row pushes Tea out.
        try SQLiteShell.run("INSERT INTO todo VALUES (5, 'Jam', 5, 0)", on: path)
        let pushed = try watch.nextStep()
        #expect(pushed.changeset == Transcript.Lists(deletes: [1], inserts: [0]))
        #expect(Self.values("title", pushed) == ["Jam", "Eggs"])
        // Rows outside the window change: no event. The next one is the title of Eggs alone.
        try store.write { db in try db.execute("UPDATE todo SET title = 'Black tea' WHERE id = 3") }
        try SQLiteShell.run("UPDATE todo SET rank = 99 WHERE id = 4", on: path)
        try store.write { db in try db.execute("UPDATE todo SET title = 'Brown eggs' WHERE id = 2") }
        let renamed = try watch.nextStep()
        #expect(renamed.previousVersion == pushed.version)
        #expect(renamed.changeset == Transcript.Lists(updates: [Transcript.Pair(old: 1, new: 1)]))
        #expect(renamed.updatedColumns == [["title"]])
        #expect(renamed.snapshot == (try Self.table(store, "SELECT * FROM todo WHERE done = 0 ORDER BY rank, id LIMIT 2")))
    }

    @Test func rawSQLIsFollowedByItsIdentityColumn() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("todo.sqlite")
        let store = try Self.todoStore(at: path)
        let sql = "SELECT done, count(*) AS n FROM todo GROUP BY done ORDER BY done"
        let watch = try WatchedProcess(["watch", path, "--sql", sql, "--identity", "done", "--json"])
        defer { watch.stop() }

        let initial = try watch.nextStep()
        #expect(initial.snapshot == [.object(["done": .int(0), "n": .int(3)]), .object(["done": .int(1), "n": .int(1)])])
        try SQLiteShell.run("UPDATE todo SET done = 1 WHERE id = 1", on: path)
        let counted = try watch.nextStep()
        #expect(counted.changeset == Transcript.Lists(updates: [Transcript.Pair(old: 0, new: 0), Transcript.Pair(old: 1, new: 1)]))
        #expect(counted.updatedColumns == [["n"], ["n"]])
        try store.write { db in try db.execute("UPDATE todo SET done = 1") }
        let allDone = try watch.nextStep()
        #expect(allDone.changeset.deletes == [0])
        #expect(allDone.snapshot == [.object(["done": .int(1), "n": .int(4)])])
    }

    @Test func tablesWithoutAOneColumnKeyAreFollowedByRowidOrTheirWholeKey() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("tags.sqlite")
        let store = try Store(path: path)
        try store.write { db in
            try db.execute("CREATE TABLE tag (name TEXT, weight INTEGER)")   // no key: the rowid
            try db.execute("INSERT INTO tag VALUES ('home', 2), ('work', 1)")
            try db.execute("CREATE TABLE pair (a TEXT, b INTEGER, note TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID")
            try db.execute("INSERT INTO pair VALUES ('x', 2, 'second'), ('x', 10, 'third'), ('a', 1, 'first')")
        }
        let tags = try WatchedProcess(["watch", path, "--table", "tag", "--order-by", "weight", "--json"])
        defer { tags.stop() }
        let pairs = try WatchedProcess(["watch", path, "--table", "pair", "--json"])
        defer { pairs.stop() }

        // The identity the command adds ("$key") is not shown; rows without an order come by key.
        #expect(try tags.nextStep().snapshot == [.object(["name": .string("work"), "weight": .int(1)]),
                                                 .object(["name": .string("home"), "weight": .int(2)])])
        #expect(Self.values("note", try pairs.nextStep()) == ["first", "second", "third"])
        try SQLiteShell.run("UPDATE tag SET weight = 0 WHERE name = 'home'; UPDATE pair SET note = '2nd' WHERE a = 'x' AND b = 2",
                            on: path)
        let tagMoved = try tags.nextStep()
        #expect(tagMoved.changeset.moves == [Transcript.Pair(old: 1, new: 0)])
        #expect(tagMoved.updatedColumns == [["weight"]])
        let pairUpdated = try pairs.nextStep()
        #expect(pairUpdated.changeset == Transcript.Lists(updates: [Transcript.Pair(old: 1, new: 1)]))
        #expect(pairUpdated.updatedColumns == [["note"]])
    }

    @Test func plainOutputMarksEachRowAndShowsTheVersions() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("todo.sqlite")
        let store = try Self.todoStore(at: path)
        let watch = try WatchedProcess(["watch", path, "--table", "todo", "--order-by", "rank"])
        defer { watch.stop() }

        #expect(try watch.line { $0.hasPrefix("query: SELECT * FROM \"todo\" ORDER BY \"rank\", \"id\"") } != nil)
        #expect(try watch.line { $0.hasPrefix("Legend: + inserted") } != nil)
        let first = try #require(try watch.line { $0.contains(", the first event: 4 rows") })
        let version = try #require(Int(first.drop { $0 != "v" }.dropFirst().prefix { $0.isNumber }))
        #expect(try watch.nextLine() == "           id  title  rank  done")
        #expect(try watch.nextLine() == "        1   1  Milk     10     0")

        try SQLiteShell.run("INSERT INTO todo VALUES (5, 'Jam', 25, 0)", on: path)
        #expect(try watch.line { $0.hasPrefix("   v") }?.hasSuffix(" (after v\(version)): 1 inserted") == true)
        #expect(try watch.line { $0.contains("Jam") } == "    +   3   5  Jam      25     0")
        try store.write { db in
            try db.execute("UPDATE todo SET title = 'Tea (green)' WHERE id = 3")
            try db.execute("UPDATE todo SET rank = 1 WHERE id = 4")
            try db.execute("DELETE FROM todo WHERE id = 1")
        }
        #expect(try watch.line { $0.hasPrefix("   v") }?.hasSuffix("2 updated, 1 moved, 1 deleted") == true)
        #expect(try watch.nextLine() == "           id  title        rank  done")
        #expect(try watch.nextLine() == "    ↕   1   4  Soap            1     1  (changed: rank; from row 5)")
        #expect(try watch.line { $0.contains("Tea") } == "    ~   4   3  Tea (green)    30     0  (changed: title)")
        #expect(try watch.nextLine() == "    −       1  Milk           10     0  (was row 1)")

        watch.signal(SIGINT)
        #expect(try watch.exitStatus() == 0)
        #expect(!watch.output.contains("\u{1B}"), "no escape codes when the output is not a terminal")
    }

    // MARK: Ending and recording

    @Test(arguments: [SIGINT, SIGTERM])
    func aSignalEndsTheWatchCleanlyWithACompleteRecording(_ signal: Int32) throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("todo.sqlite")
        let store = try Self.todoStore(at: path)
        let record = directory.path("watch.json")
        let watch = try WatchedProcess(["watch", path, "--table", "todo", "--order-by", "rank", "--json", "--record", record])
        defer { watch.stop() }

        var seen = [try watch.nextStep()]
        try SQLiteShell.run("UPDATE todo SET rank = 50 WHERE id = 1", on: path)
        seen.append(try watch.nextStep())
        try store.write { db in try db.execute("DELETE FROM todo WHERE id = 2") }
        seen.append(try watch.nextStep())

        watch.signal(signal)
        #expect(try watch.exitStatus() == 0, "\(watch.errors)")
        #expect(watch.errors.contains("recorded 3 steps to \(record)"), "\(watch.errors)")
        let transcript = try Transcript.load(from: URL(fileURLWithPath: record))
        #expect(transcript.steps == seen)
        #expect(transcript.query.hasPrefix("SELECT * FROM \"todo\""))
        try replay(transcript)
    }

    // MARK: Files and queries it refuses

    @Test func aMissingFileIsRefusedAndNotCreated() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("missing.sqlite")
        let watch = try WatchedProcess(["watch", path, "--table", "todo"])
        #expect(try watch.exitStatus() == 1)
        #expect(watch.errors.contains("\(path) does not exist"), "\(watch.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).isEmpty)
    }

    @Test func aSQLiteFileThatIsNotAStoreIsLeftAsItIs() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("plain.sqlite")
        try SQLiteShell.run("CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO todo VALUES (1, 'Milk')", on: path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let watch = try WatchedProcess(["watch", path, "--table", "todo"])
        #expect(try watch.exitStatus() == 1)
        #expect(watch.errors.contains("\(path) is a SQLite database but not a Ripple store"), "\(watch.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == ["plain.sqlite"])
    }

    @Test func aFileThatIsNotSQLiteIsRefused() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("garbage.sqlite")
        let garbage = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) })
        try garbage.write(to: URL(fileURLWithPath: path))
        let watch = try WatchedProcess(["watch", path, "--table", "todo"])
        #expect(try watch.exitStatus() == 1)
        #expect(watch.errors.contains("\(path) is not a SQLite database"), "\(watch.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage)
    }

    @Test func unknownTablesColumnsAndMalformedSQLAreNamed() throws {
        let directory = try TemporaryDirectory(prefix: "ripple-watch")
        let path = directory.path("todo.sqlite")
        _ = try Self.todoStore(at: path)
        let cases: [(arguments: [String], message: String)] = [
            (["--table", "chores"], "no table chores in \(path)"),
            (["--table", "todo", "--order-by", "priority"], "no such column: priority"),
            (["--table", "todo", "--where", "done = = 1"], "syntax error"),
            (["--sql", "SELECT title FROM todo", "--identity", "id"], "no column id in the result of --sql (its columns: title)"),
            (["--sql", "DELETE FROM todo", "--identity", "id"], "must be a query that reads rows"),
            (["--sql", "SELECT * FROM todo", "--identity", "id", "--limit", "3"], "--where, --order-by and --limit go with --table"),
        ]
        for (arguments, message) in cases {
            let watch = try WatchedProcess(["watch", path] + arguments)
            #expect(try watch.exitStatus() != 0, "\(arguments)")
            #expect(watch.errors.contains(message), "\(arguments): \(watch.errors)")
            #expect(watch.output.isEmpty, "\(arguments)")
        }
    }

    // MARK: Helpers

    /// A store at `path` with a table `todo` of four rows, ranked 10 to 40; Soap is done.
    static func todoStore(at path: String) throws -> Store {
        let store = try Store(path: path)
        try store.write { db in
            try db.execute("CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT NOT NULL, rank INTEGER NOT NULL, "
                           + "done INTEGER NOT NULL)")
            try db.execute("INSERT INTO todo VALUES (1, 'Milk', 10, 0), (2, 'Eggs', 20, 0), (3, 'Tea', 30, 0), (4, 'Soap', 40, 1)")
        }
        return store
    }

    /// The values of column `name` in the step's snapshot, as strings.
    static func values(_ name: String, _ step: Transcript.Step) -> [String] {
        step.snapshot.map { record in
            guard case .object(let object) = record, case .string(let text)? = object[name] else { return "?" }
            return text
        }
    }

    /// The rows `sql` reads now, as the watch's records (integers and text).
    static func table(_ store: Store, _ sql: String) throws -> [JSONValue] {
        try store.read { db in try db.fetchAll(sql) }.map { row in
            .object(Dictionary(uniqueKeysWithValues: zip(row.columnNames, row.values).map { name, value in
                switch value {
                case .integer(let integer): (name, JSONValue.int(integer))
                case .text(let text): (name, .string(text))
                default: (name, .null)
                }
            }))
        }
    }
}

/// A running `ripple` process whose standard output is read line by line as it comes, each line
/// awaited with a deadline; killed when stopped, if still running.
private final class WatchedProcess: @unchecked Sendable {   // every var is used only holding `condition`
    private let process = Process()
    private let condition = NSCondition()
    /// Lines of output not yet taken, and the start of the next one.
    private var pending: [String] = []
    private var partial = Data()
    private var received = Data()
    private var errorBytes = Data()
    private var openStreams = 2
    private var status: Int32?
    /// How long to wait for a line or for the end, in seconds.
    let deadline: TimeInterval = Wait.limit.timeInterval

    init(_ arguments: [String]) throws {
        let executable = try #require(RippleExecutable.url(), "the ripple executable is not built")
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.terminationHandler = { [self] process in
            condition.withLock {
                status = process.terminationStatus
                condition.broadcast()
            }
        }
        try ProcessLaunch.run(process)
        read(output.fileHandleForReading, isOutput: true)
        read(errors.fileHandleForReading, isOutput: false)
    }

    /// Everything written to standard output so far.
    var output: String { condition.withLock { String(decoding: received, as: UTF8.self) } }
    /// Everything written to standard error so far.
    var errors: String { condition.withLock { String(decoding: errorBytes, as: UTF8.self) } }

    /// Reads `handle` on a thread of its own until the process closes it.
    private func read(_ handle: FileHandle, isOutput: Bool) {
        Thread { [self] in
            while true {
                let data = handle.availableData
                condition.withLock {
                    if data.isEmpty {
                        openStreams -= 1
                    } else if isOutput {
                        received.append(data)
                        partial.append(data)
                        while let end = partial.firstIndex(of: UInt8(ascii: "\n")) {
                            pending.append(String(decoding: partial[..<end], as: UTF8.self))
                            partial = Data(partial[(end + 1)...])
                        }
                    } else {
                        errorBytes.append(data)
                    }
                    condition.broadcast()
                }
                if data.isEmpty { return }
            }
        }.start()
    }

    /// The next line of output, waiting for it (throws when none comes before the deadline).
    func nextLine() throws -> String {
        let limit = Date().addingTimeInterval(deadline)
        return try condition.withLock {
            while pending.isEmpty {
                if openStreams == 0 || !condition.wait(until: limit) {
                    throw WatchTimeout(description: "no line of output within \(deadline) s; the output: "
                                       + String(decoding: received, as: UTF8.self) + "; stderr: "
                                       + String(decoding: errorBytes, as: UTF8.self))
                }
            }
            return pending.removeFirst()
        }
    }

    /// The next line of output that satisfies `condition`, skipping the others.
    func line(where condition: (String) -> Bool) throws -> String? {
        while true {
            let line = try nextLine()
            if condition(line) { return line }
        }
    }

    /// The next line, as a transcript step.
    func nextStep() throws -> Transcript.Step {
        try JSONDecoder().decode(Transcript.Step.self, from: Data(try nextLine().utf8))
    }

    /// Sends `number` to the process.
    func signal(_ number: Int32) {
        kill(process.processIdentifier, number)
    }

    /// Waits for the process to end and its output to be read; returns its exit status.
    func exitStatus() throws -> Int32 {
        let limit = Date().addingTimeInterval(deadline)
        return try condition.withLock {
            while status == nil || openStreams > 0 {
                if !condition.wait(until: limit) { throw WatchTimeout(description: "the process did not end within \(deadline) s") }
            }
            return status ?? -1
        }
    }

    /// Kills the process if it still runs.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        _ = try? exitStatus()
    }
}

/// Nothing came in time.
private struct WatchTimeout: Error, CustomStringConvertible {
    var description: String
}

/// The `sqlite3` shell (Debian package sqlite3): another process, not Ripple, writing to a file.
private enum SQLiteShell {
    /// Runs `sql` on the database file at `database`, waiting up to 5 s for locks; fails the test
    /// when the shell does.
    static func run(_ sql: String, on database: String) throws {
        let shell = "/usr/bin/sqlite3"
        try #require(FileManager.default.isExecutableFile(atPath: shell), "the sqlite3 shell (Debian package sqlite3) is needed")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = ["-cmd", ".timeout 5000", database, sql]
        let errors = Pipe()
        process.standardError = errors
        let message = try Wait.run(process, "the sqlite3 shell") {
            String(decoding: errors.fileHandleForReading.readToEndRetryingInterrupts(), as: UTF8.self)
        }
        #expect(process.terminationStatus == 0, "sqlite3: \(message)")
    }
}
