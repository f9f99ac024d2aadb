import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Misuse and bad input that must end in a short, precise error rather than a trap or a
/// description tens of kilobytes long.
@Suite(.timeLimit(.minutes(15))) struct MisuseErrorTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    /// `SELECT * FROM items WHERE missing = 0 OR missing = 1 OR …` with `terms` terms: tens of
    /// kilobytes of SQL naming a column the table does not have. With 2,000 terms SQLite refuses
    /// it first for its depth ("Expression tree is too large"): either way, it fails.
    static func hugeOr(terms: Int) -> String {
        "SELECT * FROM items WHERE " + (0..<terms).map { "missing = \($0)" }.joined(separator: " OR ")
    }

    // MARK: Migrator misuse (each of these was a precondition failure: the process trapped)

    @Test func registeringAMigrationNameTwiceThrowsNamingItAndItsDomain() throws {
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_create", sql: "CREATE TABLE a(x)")
        let twice = #expect(throws: StoreError.self) { try migrator.register(name: "0001_create", sql: "CREATE TABLE b(x)") }
        #expect(twice?.kind == .migration)
        #expect(twice?.message.contains("migration \"0001_create\" is registered twice in domain \"app\"") == true, "\(String(describing: twice))")
        let closure = #expect(throws: StoreError.self) { try migrator.register(name: "0001_create") { _ in } }
        #expect(closure?.kind == .migration)
        #expect(closure?.message.contains("\"0001_create\"") == true)
        #expect(migrator.migrations.map(\.name) == ["0001_create"], "a refused migration is not registered")
    }

    @Test func anEmptyMigrationNameThrows() throws {
        var migrator = try Migrator(domain: "app")
        let sql = #expect(throws: StoreError.self) { try migrator.register(name: "", sql: "CREATE TABLE a(x)") }
        #expect(sql?.kind == .migration)
        #expect(sql?.message.contains("empty") == true && sql?.message.contains("\"app\"") == true, "\(String(describing: sql))")
        let closure = #expect(throws: StoreError.self) { try migrator.register(name: "") { _ in } }
        #expect(closure?.kind == .migration)
        #expect(migrator.migrations.isEmpty)
    }

    @Test func theStoresReservedDomainIsRefused() throws {
        let error = #expect(throws: StoreError.self) { try Migrator(domain: "ripple") }
        #expect(error?.kind == .migration)
        #expect(error?.message.contains("\"ripple\" is reserved") == true, "\(String(describing: error))")
        let url = directory.url.appendingPathComponent("migrations")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let fromFiles = #expect(throws: StoreError.self) { try Migrator(domain: "ripple", directory: url) }
        #expect(fromFiles?.message == error?.message)
    }

    @Test func anEmptyDomainIsRefused() {
        let error = #expect(throws: StoreError.self) { try Migrator(domain: "") }
        #expect(error?.kind == .migration)
        #expect(error?.message.contains("domain") == true && error?.message.contains("empty") == true, "\(String(describing: error))")
    }

    /// A `BEGIN` without its `COMMIT` in `writeWithoutTransaction` would leave the writer inside a
    /// transaction, where every later write and migration would be folded: it is rolled back,
    /// with an error, and the store goes on.
    @Test func aTransactionLeftOpenIsRolledBackAndMigrationsStillApply() throws {
        let store = try Store(path: directory.path("open-transaction.sqlite"))
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_create", sql: "CREATE TABLE a(x)")
        let error = #expect(throws: StoreError.self) {
            try store.writeWithoutTransaction { db in
                try db.execute("BEGIN")
                try db.execute("CREATE TABLE left_open(x)")
            }
        }
        #expect(error?.message.contains("left a transaction open") == true, "\(String(describing: error))")
        #expect(try store.read { db in try db.fetchAll("SELECT name FROM sqlite_schema WHERE name = 'left_open'") }.isEmpty)
        try store.migrate(migrator)
        #expect(try migrator.appliedMigrations(in: store) == ["0001_create"])
    }

    // MARK: LiveQueryGroup misuse

    @Test func anEmptyLiveQueryGroupThrows() {
        let error = #expect(throws: StoreError.self) { try LiveQueryGroup<Row>([]) }
        #expect(error?.kind == .invalidQuery)
        #expect(error?.message.contains("at least one query") == true, "\(String(describing: error))")
    }

    @Test func aLiveQueryGroupOverTwoStoresThrows() throws {
        let first = try Store(path: directory.path("first.sqlite"))
        let second = try Store(path: directory.path("second.sqlite"))
        let query = "SELECT name FROM sqlite_schema"
        let queries = [first.liveQuery(sql: query, identity: "name"), first.liveQuery(sql: query, identity: "name"),
                       second.liveQuery(sql: query, identity: "name")]
        let error = #expect(throws: StoreError.self) { try LiveQueryGroup(queries) }
        #expect(error?.kind == .invalidQuery)
        let namesBoth = error?.message.contains("first.sqlite") == true && error?.message.contains("second.sqlite") == true
        #expect(namesBoth, "\(String(describing: error))")
        #expect(error?.message.contains("query 3") == true, "\(String(describing: error))")
        #expect(try LiveQueryGroup(Array(queries.prefix(2))).queries.count == 2)
    }

    // MARK: Descriptions

    @Test func aHugeFailingStatementHasAShortDescriptionAndKeepsItsWholeSQL() throws {
        let store = try Store(path: directory.path("huge.sqlite"))
        try store.write { try $0.execute("CREATE TABLE items(id INTEGER PRIMARY KEY)") }
        let sql = Self.hugeOr(terms: 2_000)
        #expect(sql.utf8.count > 20_000)
        let error = #expect(throws: DatabaseError.self) { try store.read { try $0.fetchAll(sql) } }
        let keepsTheSQL = error?.sql == sql
        #expect(keepsTheSQL)
        // (Booleans, not the description itself, in the expectations: a failure must not print it.)
        let description = error?.description ?? ""
        let length = description.utf8.count
        #expect(length < 1_024)
        let namesTheFailure = description.contains(error?.message ?? "?")
        let showsTheStart = description.contains("while executing `SELECT * FROM items WHERE missing = 0 OR missing = 1")
        let marksTheCut = description.contains("… (\(sql.count) characters)")
        #expect(namesTheFailure && showsTheStart && marksTheCut)
    }

    @Test func aHugeFailingMigrationHasAShortStoreErrorDescription() throws {
        let store = try Store(path: directory.path("huge-migration.sqlite"))
        try store.write { try $0.execute("CREATE TABLE items(id INTEGER PRIMARY KEY)") }
        let sql = "CREATE VIEW everything AS " + Self.hugeOr(terms: 2_000)
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_huge_view", sql: sql)
        let error = #expect(throws: StoreError.self) { try migrator.migrate(store) }
        #expect(error?.kind == .migration)
        let keepsTheSQL = error?.underlying?.sql == sql
        #expect(keepsTheSQL)
        let description = error?.description ?? ""
        let length = description.utf8.count
        #expect(length < 1_024)
        let namesTheMigration = description.contains("0001_huge_view")
        let namesTheFailure = description.contains(error?.underlying?.message ?? "?")
        #expect(namesTheMigration && namesTheFailure)
    }

    @Test func shortSQLIsDescribedWhole() {
        let sql = "INSERT INTO items(id) VALUES (1)"
        let error = DatabaseError(code: .constraint, message: "UNIQUE constraint failed: items.id", sql: sql)
        #expect(error.description.hasSuffix("while executing `\(sql)`"))
        #expect(!error.description.contains("characters)"))
    }

    @Test func theSQLIsCutBetweenCharactersNeverInsideOne() throws {
        // Decomposed "é" (e + U+0301) and a family emoji (several scalars joined) straddle the cut
        // wherever it falls near the start: a cut by bytes or scalars would split one of them.
        let sql = String(repeating: "e\u{301}👩‍👩‍👧", count: 400)
        let error = DatabaseError(code: .error, message: "syntax error", sql: sql)
        let description = error.description
        let shown = try #require(description.firstRange(of: "`").map { description[$0.upperBound...] })
        let cut = try #require(shown.firstRange(of: "… (")).lowerBound
        let prefix = shown[..<cut]
        #expect(!prefix.isEmpty)
        #expect(prefix.count < 400)
        let wholeCharacters = sql.starts(with: prefix)
        #expect(wholeCharacters, "the shown SQL is a prefix of the SQL's characters")
        #expect(prefix.unicodeScalars.last == "\u{301}" || prefix.unicodeScalars.last == "👧")
        let marksTheCut = description.hasSuffix("… (\(sql.count) characters)`")
        #expect(marksTheCut)
    }

    @Test func shownArgumentsAreCappedToo() {
        let arguments = (0..<2_000).map { SQLValue.integer(Int64($0)) }
        let error = DatabaseError(code: .error, message: "no such column: missing", sql: Self.hugeOr(terms: 2_000),
                                  arguments: arguments, showsArguments: true)
        let length = error.description.utf8.count
        #expect(length < 1_024)
        let showsTheFirst = error.description.contains("with arguments [0, 1, 2")
        let countsThemAll = error.description.contains("(2000 arguments)")
        #expect(showsTheFirst && countsThemAll)
        #expect(error.arguments.count == 2_000)
    }

    // MARK: ripple history

    /// Runs the built `ripple` executable with `arguments`: its exit status, standard output and
    /// standard error.
    func ripple(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        let executable = try #require(RippleExecutable.url(),
                                      "the `ripple` executable is not built: run `swift build --build-tests` first")
        let output = directory.path("stdout-\(UUID().uuidString).txt")
        let errors = directory.path("stderr-\(UUID().uuidString).txt")
        try #require(FileManager.default.createFile(atPath: output, contents: nil))
        try #require(FileManager.default.createFile(atPath: errors, contents: nil))
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        try Wait.run(process, "`ripple \(arguments.first ?? "")`") {}
        return (process.terminationStatus, try String(contentsOfFile: output, encoding: .utf8),
                try String(contentsOfFile: errors, encoding: .utf8))
    }

    // (The suite's limit: four runs of the `ripple` tool took two minutes in the whole suite on a
    // loaded machine, past a one-minute limit of its own.)
    @Test
    func historyTakesNegativeVersionsSpacedAsWellAsWithEquals() throws {
        let path = directory.path("history.sqlite")
        let current: Int64
        do {
            let store = try Store(path: path)
            try store.write { try $0.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT)") }
            for name in ["a", "b", "c"] {
                try store.write { try $0.execute("INSERT INTO items(name) VALUES (?)", [name]) }
            }
            current = try store.currentVersion()
        }
        let command = ["history", path, "--table", "items"]

        // Negative versions reach the store, which refuses them by name (they are older than any
        // change log), whichever way they are spelled; before, the parser took `-3` for an option
        // and answered "Missing value for '--from <from>'".
        let spaced = try ripple(command + ["--from", "-3", "--to", "-1"])
        let joined = try ripple(command + ["--from=-3", "--to=-1"])
        #expect(spaced.status == joined.status)
        #expect(spaced.output == joined.output)
        #expect(spaced.errors == joined.errors)
        #expect(spaced.status == 1)
        #expect(spaced.errors.contains("version -3 is older than the change log keeps"), "\(spaced.errors)")
        #expect(!spaced.errors.contains("Missing value"), "\(spaced.errors)")

        // Ordinary versions read the same either way, and succeed.
        let from = String(current - 2), to = String(current)
        let plain = try ripple(command + ["--from", from, "--to", to])
        let equals = try ripple(command + ["--from=\(from)", "--to=\(to)"])
        #expect(plain.status == 0, "\(plain.errors)")
        #expect(plain.output == equals.output && plain.status == equals.status)
        #expect(plain.output.hasPrefix("version \(from) (start): 1 rows"), "\(plain.output)")
        #expect(plain.output.contains("version \(to): 0 deleted, 1 inserted"), "\(plain.output)")
    }
}
