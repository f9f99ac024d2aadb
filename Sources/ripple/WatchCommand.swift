import ArgumentParser
import Foundation
import Ripple

/// `ripple watch DB --table T [--where COND] [--order-by COL] [--limit N]`, or
/// `ripple watch DB --sql SQL --identity COL`: a query's result, live, while other processes
/// write the store — redrawn in a terminal, printed frame after frame otherwise, or one JSON line
/// per event (`--json`); `--record FILE` also keeps the events as a transcript.
struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show a query's result live while other processes write the store.",
        discussion: """
            With --table the query is `SELECT * FROM T [WHERE COND] ORDER BY [COL,] KEY [LIMIT N]`, \
            its rows followed by the table's primary key (or its rowid when it declares none). COND \
            is your own SQL, used as written (its values are yours: it is not a place for untrusted \
            input). With --sql, give the query whole and name the result column that identifies a \
            row with --identity. Each commit that changes the result is an event: in a terminal the \
            list is redrawn with its inserted (+), updated (~, with the changed columns) and moved \
            (↕) rows marked, the deleted ones listed below; otherwise each event is printed after \
            the one before. --json prints one transcript step per line instead. Ends on Ctrl-C or \
            SIGTERM (status 0), or when the query fails (status 1). The file must be a Ripple store: \
            anything else is refused and left untouched.
            """
    )

    @Argument(help: ArgumentHelp("The store's database file.", valueName: "DB"))
    var database: String

    @Option(help: "The table to watch.")
    var table: String?

    @Option(name: .customLong("where"), help: ArgumentHelp("With --table: an SQL condition on its rows (used as written).",
                                                             valueName: "SQL-condition"))
    var condition: String?

    @Option(name: .customLong("order-by"), help: ArgumentHelp("With --table: a column to order the rows by (then by key).",
                                                             valueName: "column"))
    var orderBy: String?

    @Option(help: ArgumentHelp("With --table: show at most N rows.", valueName: "N"))
    var limit: Int?

    @Option(help: ArgumentHelp("A query to watch instead of a table (give --identity too).", valueName: "SQL"))
    var sql: String?

    @Option(help: ArgumentHelp("With --sql: the result column that identifies a row.", valueName: "column"))
    var identity: String?

    @Flag(help: "Print one JSON object per event (a transcript step), and nothing else, on stdout.")
    var json = false

    @Option(name: .customLong("record"), help: ArgumentHelp(
        "Also write the events to FILE as a transcript when the watch ends (check it with `ripple replay`).",
        valueName: "FILE"))
    var recordPath: String?

    func validate() throws {
        switch (table, sql) {
        case (nil, nil):
            throw ValidationError("say what to watch: --table T, or --sql SQL with --identity COL")
        case (.some, .some):
            throw ValidationError("give --table or --sql, not both")
        case (.some, nil):
            if identity != nil {
                throw ValidationError("--identity goes with --sql: a table's rows are followed by its primary key")
            }
        case (nil, .some):
            guard identity != nil else { throw ValidationError("--sql needs --identity: the result column that identifies a row") }
            if condition != nil || orderBy != nil || limit != nil {
                throw ValidationError("--where, --order-by and --limit go with --table: write them into the --sql query")
            }
        }
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
    }

    func run() throws {
        // Before any thread starts: the threads inherit the mask, so that SIGINT and SIGTERM wait
        // for the watch's signal sources instead of ending the process (see WatchSession).
        WatchSession.holdSignals()
        let status: Int32
        do {
            try StoreFileCheck.requireStore(at: database)
            // Commits by other processes are heard as they happen (the store watches its file).
            // Read-write, not read-only: a read-only store cannot adopt commits made without
            // Ripple (the sqlite3 shell).
            let store = try Store(path: database)
            let query = try store.read { db in try table.map { try tableQuery($0, db) } ?? sqlQuery(db) }
            let live = store.liveQuery(sql: query.sql, arguments: query.arguments, identity: query.identity)
            let mode: WatchDisplay.Mode = json ? .json : isatty(STDOUT_FILENO) == 1 ? .terminal : .plain
            let display = WatchDisplay(mode: mode, database: database, query: query)
            status = WatchSession(display: display, recordPath: recordPath).run(live)
        } catch {
            Console.error(Self.describe(error))
            throw ExitCode.failure
        }
        if status != 0 { throw ExitCode(status) }
    }

    /// The query of `--table`, checked: `SELECT * FROM T [WHERE (COND)] ORDER BY [COL,] KEY [LIMIT ?]`.
    private func tableQuery(_ table: String, _ db: Database) throws -> WatchQuery {
        let shape = try TableKey(table: table, in: db, database: database)
        // A one-column primary key identifies the rows itself, whatever its type; otherwise they
        // are followed as `ripple history` follows them, by an expression selected first as "$key".
        var select = "*"
        let identity: String
        let keyOrder: [String]
        if shape.key.count == 1 {
            identity = shape.key[0].name
            keyOrder = [quotedIdentifier(identity)]
        } else {
            let key = try shape.rowidOrKey()
            select = "\(key) AS \"$key\", *"
            identity = "$key"
            // A key's own columns order its rows better than their JSON array would.
            keyOrder = shape.rowidName.map { [$0] } ?? shape.key.map { quotedIdentifier($0.name) }
        }
        var sql = "SELECT \(select) FROM \(quotedIdentifier(table))"
        if let condition { sql += " WHERE (\(condition))" }
        sql += " ORDER BY " + ((orderBy.map { [quotedIdentifier($0)] } ?? []) + keyOrder).joined(separator: ", ")
        var arguments: [SQLValue] = []
        if let limit {
            sql += " LIMIT ?"
            arguments.append(.integer(Int64(limit)))
        }
        return try WatchQuery.checked(sql: sql, arguments: arguments, identity: identity, hidesFirstColumn: select != "*",
                                      in: db, what: "the query of --table \(table)")
    }

    /// The query of `--sql`, checked.
    private func sqlQuery(_ db: Database) throws -> WatchQuery {
        try WatchQuery.checked(sql: sql ?? "", arguments: [], identity: identity ?? "", hidesFirstColumn: false,
                               in: db, what: "--sql")
    }

    /// `error` as a sentence for the terminal: Ripple's and SQLite's errors by their message.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as ValidationError:
            return error.message
        case let error as StoreError:
            return error.message + (error.underlying.map { " (SQLite: \($0.message))" } ?? "")
        case let error as DatabaseError:
            return "SQLite: " + error.message + (error.sql.map { "\n  in: \($0)" } ?? "")
        default:
            return "\(error)"
        }
    }
}

/// The query `ripple watch` runs, prepared once to check it before anything is shown.
struct WatchQuery {
    /// The SQL, with `?` for the arguments.
    let sql: String
    let arguments: [SQLValue]
    /// The result column that identifies a row.
    let identity: String
    /// The result's columns, in order.
    let columns: [String]
    /// Whether the first column is the identity the command added (a table's rowid or key as
    /// `"$key"`): not a column of the table, so not shown.
    let hidesFirstColumn: Bool

    /// The query, once SQLite prepared it: a single read-only statement, with a column named
    /// `identity` and no parameter but `arguments`. `what` names it in messages.
    static func checked(sql: String, arguments: [SQLValue], identity: String, hidesFirstColumn: Bool,
                        in db: Database, what: String) throws -> WatchQuery {
        let statement: Statement
        do {
            statement = try db.makeStatement(sql)
        } catch {
            // (Not `catch where`: with the typed error left to rethrow, Swift 6.3.1 crashes compiling it.)
            if error.code == .misuse { throw ValidationError("\(what) must be one SQL statement: \(sql)") }
            throw error
        }
        guard statement.isReadOnly, statement.columnCount > 0 else {
            throw ValidationError("\(what) must be a query that reads rows (a SELECT), not: \(sql)")
        }
        guard statement.parameterCount == arguments.count else {
            throw ValidationError("\(what) has parameters (?, :name…), which ripple watch cannot bind: write the values in")
        }
        let columns = (0..<statement.columnCount).map(statement.columnName)
        guard columns.contains(identity) else {
            throw ValidationError("no column \(identity) in the result of \(what) (its columns: \(columns.joined(separator: ", ")))")
        }
        return WatchQuery(sql: sql, arguments: arguments, identity: identity, columns: columns,
                          hidesFirstColumn: hidesFirstColumn)
    }
}
