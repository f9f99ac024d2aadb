import Foundation
import RippleSQLite

/// One SQLite connection, handed to the closures of ``Store/write(tag:_:)`` and ``Store/read(_:)``.
/// Use it only inside that closure (it is not `Sendable`).
///
/// ```swift
/// try store.write { db in
///     try db.execute("INSERT INTO notes(body) VALUES (?)", ["Buy milk"])
///     let rows = try db.fetchAll("SELECT body FROM notes WHERE body LIKE ?", ["%milk%"])
/// }
/// ```
public final class Database {
    let handle: OpaquePointer
    let configuration: Store.Configuration
    /// Prepared statements by their SQL, exactly (see ``ExactText``): the most recently used
    /// ``Store/Configuration/statementCacheCapacity``.
    private var statementCache: LeastRecentlyUsed<ExactText, Statement>
    /// The store's own transaction-control statements, apart from the statements users run: a
    /// handful of texts (`BEGIN`, `COMMIT`, `ROLLBACK`, and a savepoint statement per level of
    /// nesting reached), so kept without a bound.
    private var controlStatements: [String: Statement] = [:]
    private var savepointDepth = 0
    /// A transaction begun by ``transaction(_:_:)`` is open (SQLite ending it by itself is then
    /// noticed, see ``transactionEndedBySQLite``).
    private var ownsTransaction = false
    /// SQLite rolled back the transaction of ``transaction(_:_:)`` by itself (a conflict clause
    /// such as `OR ROLLBACK`, a trigger's `RAISE(ROLLBACK, …)`) and the closure went on: until the
    /// transaction's closure ends, every statement that would commit on its own is refused (the
    /// commit hook turns its commit into a rollback), and so is the closure's end.
    private(set) var transactionEndedBySQLite = false
    /// Where the change capture stood when the transaction of ``transaction(_:_:)`` began: what
    /// it captured before (earlier transactions of a migration, say) survives its rollback.
    private var captureMarkAtBegin: ChangeCapture.Mark?
    /// What SQLite's authorizer lets through now (see ``authorize(_:)``).
    private var control = Control()
    /// While true, the authorizer collects the tables statements being prepared read (see
    /// ``tablesRead(by:)``) into `tablesReadByStatement`.
    var collectsTablesRead = false
    var tablesReadByStatement: Set<String> = []
    /// The tables of other schemas than `main` (`temp`, attached databases) such statements
    /// read, as `schema.table`.
    var tablesReadOutsideMain: Set<String> = []
    /// The tables such statements read that the authorizer reported in `main` by name. (It
    /// reports some reads without a schema — a sub-query over a rowid key inside another —
    /// which count as reads, but not as reads of `main`: they are of the table the name finds.)
    var tablesReadInMain: Set<String> = []
    /// The writer's change capture: told when a savepoint or transaction rolls back.
    var changeCapture: ChangeCapture?
    /// The writer's change log, once installed.
    var changeLog: ChangeLog?
    /// Whether the file's text is in UTF-8 (read once: the encoding is fixed from its first table
    /// on, and a store's file has its tables before anything asks).
    private var knownUTF8: Bool?

    /// Whether the file's text is in UTF-8 (`PRAGMA encoding`; UTF-16 files compare text by
    /// their UTF-16 bytes).
    var isUTF8: Bool {
        if let knownUTF8 { return knownUTF8 }
        let found = (try? fetchValue("PRAGMA encoding", as: String.self)) == "UTF-8"
        knownUTF8 = found
        return found
    }

    /// Opens a connection. `path` is a file path, or `:memory:`. (Package access: the stress
    /// checker opens one to write as a program that is not Ripple would.)
    package init(path: String, readOnly: Bool, configuration: Store.Configuration) throws(DatabaseError) {
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let error = DatabaseError.fromConnection(handle, code: code, sql: nil)
            sqlite3_close_v2(handle)
            throw DatabaseError(code: error.code, extendedCode: error.extendedCode,
                                message: "cannot open \(path): \(error.message)")
        }
        self.handle = handle
        self.configuration = configuration
        let capacity = min(max(0, configuration.statementCacheCapacity), LeastRecentlyUsed<ExactText, Statement>.largestCapacity)
        self.statementCache = LeastRecentlyUsed(capacity: capacity)
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, Int32(clamping: Int(configuration.busyTimeout * 1000)))
        // A double-quoted name is a name, never a string literal: a misspelt column is an error.
        ripple_db_config_flag(handle, SQLITE_DBCONFIG_DQS_DML, 0)
        ripple_db_config_flag(handle, SQLITE_DBCONFIG_DQS_DDL, 0)
        sqlite3_set_authorizer(handle, { context, action, first, _, database, _ in
            guard let context else { return SQLITE_OK }
            let db = Unmanaged<Database>.fromOpaque(context).takeUnretainedValue()
            if action == SQLITE_READ, db.collectsTablesRead, let first {
                let table = String(cString: first)
                if let database, strcmp(database, "main") != 0 {
                    db.tablesReadOutsideMain.insert(String(cString: database) + "." + table)
                } else {
                    if database != nil { db.tablesReadInMain.insert(table) }
                    db.tablesReadByStatement.insert(table)
                }
            }
            return db.authorize(action)
        }, Unmanaged.passUnretained(self).toOpaque())
        // SQLite can end a transaction by itself; a statement run after that would commit alone.
        sqlite3_rollback_hook(handle, { context in
            guard let context else { return }
            Unmanaged<Database>.fromOpaque(context).takeUnretainedValue().transactionRolledBack()
        }, Unmanaged.passUnretained(self).toOpaque())
        // The last guard: no statement commits on its own while Ripple's transaction is meant to
        // be open (a statement the checks of `step` and `executeScript` would not see).
        sqlite3_commit_hook(handle, { context in
            guard let context else { return 0 }
            return Unmanaged<Database>.fromOpaque(context).takeUnretainedValue().commitRequested()
        }, Unmanaged.passUnretained(self).toOpaque())
        defineOriginFunction()
    }

    /// The origin of the commit this connection is making for the store (see
    /// ``Store/commit(_:origin:tag:_:)``); `nil` between commits. SQL reads it as
    /// `ripple_origin()`.
    var commitOrigin: CommitOrigin?

    /// Defines `ripple_origin()` on this connection: the name of the origin of the commit being
    /// made (`'write'`, `'sync'`, …), NULL outside one. Triggers can tell who writes with it, and
    /// a trigger that calls it makes its table unwritable by connections that are not Ripple's
    /// (the `sqlite3` shell has no such function: its statement fails).
    private func defineOriginFunction() {
        sqlite3_create_function_v2(handle, "ripple_origin", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS,
                                   Unmanaged.passUnretained(self).toOpaque(), { context, _, _ in
            guard let context, let data = sqlite3_user_data(context) else { return }
            let db = Unmanaged<Database>.fromOpaque(data).takeUnretainedValue()
            guard let origin = db.commitOrigin else { return sqlite3_result_null(context) }
            sqlite3_result_text(context, origin.rawValue, -1, sqliteTransient)
        }, nil, nil, nil)
    }

    /// How many transactions this connection committed (its own statements' autocommits
    /// included): the change log tells its own commits from other connections' with it.
    private(set) var commitCount = 0

    /// SQLite's commit hook: refuses a commit while Ripple's transaction is meant to be open
    /// (see ``transactionEndedBySQLite``), counts the others.
    private func commitRequested() -> Int32 {
        if transactionEndedBySQLite { return 1 }
        commitCount += 1
        return 0
    }

    /// SQLite's rollback hook: a rollback that Ripple did not ask for, inside its transaction,
    /// was SQLite's own (see ``transactionEndedBySQLite``). What the transaction captured is gone.
    private func transactionRolledBack() {
        guard ownsTransaction, !control.isOwn else { return }
        transactionEndedBySQLite = true
        if let captureMarkAtBegin { changeCapture?.rollback(to: captureMarkAtBegin) }
    }

    /// The error for a statement refused because SQLite rolled back the transaction it belongs to.
    func endedTransactionError(sql: String?) -> DatabaseError {
        DatabaseError(code: .abort, extendedCode: .init(rawValue: 516 /* SQLITE_ABORT_ROLLBACK */),
                      message: "SQLite rolled back this transaction by itself (a conflict clause such as OR ROLLBACK, "
                        + "or a trigger's RAISE(ROLLBACK, …)) and the error it raised was caught: nothing of the "
                        + "transaction is committed, and no change commits until it ends (this one did not)",
                      sql: sql)
    }

    deinit {
        statementCache.removeAll()
        controlStatements.removeAll()
        sqlite3_close_v2(handle)
    }

    // MARK: Statements

    /// A prepared statement for `sql`, reused across calls on this connection.
    ///
    /// The connection keeps the statements of the texts it ran most recently (see
    /// ``Store/Configuration/statementCacheCapacity``). A statement that is being stepped (a
    /// call inside the loop of another running the same text) is not handed out again: the call
    /// gets a statement of its own, so that neither resets the other's rows. Reset the statement
    /// when done (``Statement/reset()``), as the `fetch` and `execute` methods do.
    public func cachedStatement(_ sql: String) throws(DatabaseError) -> Statement {
        if let statement = statementCache.value(for: ExactText(sql)) {
            if sqlite3_stmt_busy(statement.handle) == 0 { return statement }
            return try makeStatement(sql)
        }
        control.allowedMaintenance = false
        let statement = try Statement(database: self, sql: sql, persistent: true)
        // Allowed only where it was prepared (writeWithoutTransaction): never reused elsewhere.
        if control.allowedMaintenance { return statement }
        // The statement forgotten to make room is only let go of: a caller still stepping it
        // keeps it, and it is finalized once that caller lets go too.
        statementCache.insert(statement, for: ExactText(sql))
        return statement
    }

    /// How many statements the cache holds.
    var cachedStatementCount: Int { statementCache.count }

    /// The bytes of memory SQLite holds for this connection's prepared statements.
    var statementMemory: Int {
        var current: Int32 = 0, highest: Int32 = 0
        sqlite3_db_status(handle, SQLITE_DBSTATUS_STMT_USED, &current, &highest, 0)
        return Int(current)
    }

    /// A new prepared statement for `sql`, not cached.
    public func makeStatement(_ sql: String) throws(DatabaseError) -> Statement {
        try Statement(database: self, sql: sql, persistent: false)
    }

    /// Runs one SQL statement with bound arguments (values are never spliced into the SQL).
    public func execute(_ sql: String, _ arguments: [any SQLValueConvertible] = []) throws(DatabaseError) {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        while try statement.step() {}
    }

    /// Runs several `;`-separated SQL statements without arguments (a migration, a schema), one
    /// after the other, until one fails: the statements before it keep their changes.
    public func executeScript(_ sql: String) throws(DatabaseError) {
        if transactionEndedBySQLite { throw endedTransactionError(sql: sql) }
        // Each statement is prepared when the previous one is done (it may create what the next names).
        let code: Int32 = sql.withCString { text in
            var next: UnsafePointer<CChar>? = text
            while let start = next, start.pointee != 0 {
                var statement: OpaquePointer?
                var code = sqlite3_prepare_v2(handle, start, -1, &statement, &next)
                guard code == SQLITE_OK else { return code }
                guard let statement else { continue }   // only a comment or white space
                repeat { code = step(statement) } while code == SQLITE_ROW
                sqlite3_finalize(statement)
                guard code == SQLITE_DONE else { return code }
            }
            return SQLITE_OK
        }
        if code != SQLITE_OK {
            if code == SQLITE_AUTH, let refusal = refusal(sql: sql) { throw refusal }
            throw DatabaseError.fromConnection(handle, code: code, sql: sql)
        }
    }

    /// All rows of a query.
    public func fetchAll(_ sql: String, _ arguments: [any SQLValueConvertible] = []) throws(DatabaseError) -> [Row] {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        // The columns as of the first step: SQLite prepares the statement again there after a
        // schema change (before it, a renamed column would show its old name).
        var columns: Row.Columns?
        var rows: [Row] = []
        while try statement.step() {
            let known = columns ?? Row.Columns((0..<statement.columnCount).map(statement.columnName))
            columns = known
            rows.append(Row(columns: known, values: (0..<Int32(known.names.count)).map(statement.value(at:))))
        }
        return rows
    }

    /// The first row of a query, or `nil`.
    public func fetchOne(_ sql: String, _ arguments: [any SQLValueConvertible] = []) throws(DatabaseError) -> Row? {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        guard try statement.step() else { return nil }
        let columns = Row.Columns((0..<statement.columnCount).map(statement.columnName))
        return Row(columns: columns, values: (0..<Int32(columns.names.count)).map(statement.value(at:)))
    }

    /// The first column of the first row, converted, or `nil` when there is no row or it is NULL.
    public func fetchValue<Value: SQLValueConvertible>(_ sql: String, _ arguments: [any SQLValueConvertible] = [],
                                                       as type: Value.Type = Value.self) throws(DatabaseError) -> Value? {
        guard let row = try fetchOne(sql, arguments), let value = row.values.first else { return nil }
        if case .null = value { return nil }
        guard let converted = Value(sqlValue: value) else {
            throw DatabaseError(code: .mismatch, message: "cannot read \(value.typeName) \(value) as \(Value.self)", sql: sql)
        }
        return converted
    }

    /// Steps a statement of this connection. On the writer, when the statement fails inside a
    /// transaction, the change capture keeps what SQLite kept of it (see ``statementStopped(_:)``).
    @inline(__always)
    func step(_ statement: OpaquePointer) -> Int32 {
        guard let capture = changeCapture, sqlite3_stmt_busy(statement) == 0 else { return sqlite3_step(statement) }
        let start = capture.statementStart
        let code = sqlite3_step(statement)
        if code != SQLITE_ROW && code != SQLITE_DONE { statementStopped(start) }
        return code
    }

    /// A statement failed. When SQLite ended the transaction, its rollback hook forgot what the
    /// transaction captured; outside a transaction there is nothing to mend. Inside one, SQLite
    /// either undid the statement (`ABORT`, the default: a constraint, an upsert, a trigger's
    /// `RAISE(ABORT, …)`, a full disk) or kept its changes up to the failure (`FAIL`,
    /// `RAISE(FAIL, …)`), and the capture keeps them only then.
    ///
    /// Which of the two: when a statement ends, SQLite sets `sqlite3_changes` to the rows it
    /// inserted, updated or deleted itself if it kept them, and to 0 if it undid them (the
    /// count of all changes, triggers' included, is no guide: it grows as the triggers run). So
    /// when the statement wrote rows itself (see ``ChangeCapture/statementWrites``), that count
    /// tells. When only its triggers or `REPLACE` changed rows, or it deleted them, the rows
    /// themselves tell (see ``ChangeCapture/statementKept(since:in:)``); when they cannot, the
    /// changes are kept (a live query then reads again for nothing, rather than miss a change).
    private func statementStopped(_ start: ChangeCapture.StatementStart) {
        guard let capture = changeCapture, isInTransaction, !transactionEndedBySQLite,
              capture.hasChanges(since: start.mark) else { return }
        let kept = capture.statementWrites != start.statementWrites
            ? sqlite3_changes64(handle) > 0
            : capture.statementKept(since: start.mark, in: self) != false
        if !kept { capture.rollback(to: start.mark) }
    }

    /// The rowid of the last inserted row on this connection.
    public var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the last statement.
    public var changedRowCount: Int { Int(sqlite3_changes(handle)) }

    /// Rows changed since the connection opened.
    var totalChangedRowCount: Int { Int(sqlite3_total_changes(handle)) }

    /// Whether a transaction is open on this connection.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: Transactions

    /// How a transaction takes its locks.
    public enum TransactionKind: String, Sendable {
        /// Locks are taken on first read or write.
        case deferred = "DEFERRED"
        /// The write lock is taken at once (the writer uses this).
        case immediate = "IMMEDIATE"
    }

    /// Runs `body` in a transaction: committed when `body` returns, rolled back when it throws.
    /// Inside a transaction, opens a savepoint instead, so transactions nest.
    public func transaction<T>(_ kind: TransactionKind = .deferred, _ body: () throws -> T) throws -> T {
        if isInTransaction || transactionEndedBySQLite { return try savepoint(body) }
        try run(control: "BEGIN \(kind.rawValue) TRANSACTION")
        ownsTransaction = true
        captureMarkAtBegin = changeCapture?.mark
        defer { (ownsTransaction, transactionEndedBySQLite, captureMarkAtBegin) = (false, false, nil) }
        do {
            let result = try body()
            // SQLite ended the transaction and the closure swallowed every error since.
            if transactionEndedBySQLite { throw endedTransactionError(sql: nil) }
            try run(control: "COMMIT TRANSACTION")
            return result
        } catch {
            if isInTransaction { try? run(control: "ROLLBACK TRANSACTION") }
            if let captureMarkAtBegin { changeCapture?.rollback(to: captureMarkAtBegin) }
            throw error
        }
    }

    /// Runs `body` in a savepoint: released when it returns, rolled back (and released) when it
    /// throws, leaving the enclosing transaction as it was before the savepoint.
    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        savepointDepth += 1
        let name = "ripple_savepoint_\(savepointDepth)"
        defer { savepointDepth -= 1 }
        try run(control: "SAVEPOINT \(name)")
        let mark = changeCapture?.mark
        do {
            let result = try body()
            try run(control: "RELEASE SAVEPOINT \(name)")
            return result
        } catch {
            try? run(control: "ROLLBACK TO SAVEPOINT \(name)")
            try? run(control: "RELEASE SAVEPOINT \(name)")
            if let mark { changeCapture?.rollback(to: mark) }
            throw error
        }
    }

    // MARK: What the store allows

    /// What the authorizer lets through: transaction control, `ATTACH` and `DETACH` only from the
    /// store itself and inside ``Store/writeWithoutTransaction(tag:_:)`` (where `VACUUM`, which runs
    /// them internally, belongs).
    private struct Control {
        /// The store is running one of its own transaction-control statements.
        var isOwn = false
        /// Inside `writeWithoutTransaction`: everything is allowed.
        var allowsMaintenance = false
        /// The last statement prepared needed `allowsMaintenance`.
        var allowedMaintenance = false
        /// The last action refused.
        var refused: Int32?
    }

    /// SQLite's authorizer: asked for each action of each statement as it is prepared.
    private func authorize(_ action: Int32) -> Int32 {
        switch action {
        case SQLITE_TRANSACTION, SQLITE_SAVEPOINT, SQLITE_ATTACH, SQLITE_DETACH:
            if control.isOwn { return SQLITE_OK }
            if control.allowsMaintenance {
                control.allowedMaintenance = true
                return SQLITE_OK
            }
            control.refused = action
            return SQLITE_DENY
        default:
            return SQLITE_OK
        }
    }

    /// The error for a statement the authorizer refused, saying what the store allows instead.
    func refusal(sql: String) -> DatabaseError? {
        guard let action = control.refused else { return nil }
        control.refused = nil
        let message: String
        if action == SQLITE_ATTACH || action == SQLITE_DETACH {
            message = "Ripple refuses ATTACH and DETACH in write and read closures and migrations: run them in "
                + "Store.writeWithoutTransaction, outside any transaction"
        } else {
            message = "Ripple runs the transactions itself, so BEGIN, COMMIT, ROLLBACK, END, SAVEPOINT and RELEASE are refused "
                + "in write and read closures and migrations: a write commits when its closure returns and rolls back when "
                + "it throws; nest with Database.transaction or Database.savepoint"
        }
        return DatabaseError(code: .authorization, message: message, sql: sql)
    }

    /// Runs one of the store's own transaction-control statements (prepared once, kept apart
    /// from the users' statements, and let through by the authorizer, also when SQLite prepares
    /// it again).
    private func run(control sql: String) throws(DatabaseError) {
        control.isOwn = true
        defer { control.isOwn = false }
        let statement: Statement
        if let cached = controlStatements[sql] {
            statement = cached
        } else {
            statement = try Statement(database: self, sql: sql, persistent: true)
            controlStatements[sql] = statement
        }
        defer { statement.reset() }
        while try statement.step() {}
    }

    /// Runs `body` with transaction control, `ATTACH` and `DETACH` allowed
    /// (``Store/writeWithoutTransaction(tag:_:)``).
    func allowingMaintenance<T>(_ body: () throws -> T) rethrows -> T {
        control.allowsMaintenance = true
        defer { control.allowsMaintenance = false }
        return try body()
    }

    /// Runs `body` with the connection refusing to write (a read nested in a write).
    func readingOnly<T>(_ body: () throws -> T) throws -> T {
        try execute("PRAGMA query_only = ON")
        defer { try? execute("PRAGMA query_only = OFF") }
        return try body()
    }
}

/// A row read by ``Database/fetchAll(_:_:)``: values by column name or position.
public struct Row: Sendable, Hashable, CustomStringConvertible {
    /// Column names shared by every row of one query.
    final class Columns: Sendable, Hashable {
        let names: [String]
        let indexByName: [String: Int]
        init(_ names: [String]) {
            self.names = names
            var index: [String: Int] = [:]
            for (offset, name) in names.enumerated() where index[name] == nil { index[name] = offset }
            self.indexByName = index
        }
        static func == (lhs: Columns, rhs: Columns) -> Bool { lhs.names == rhs.names }
        func hash(into hasher: inout Hasher) { hasher.combine(names) }
    }

    let columns: Columns
    /// The values, in column order.
    public let values: [SQLValue]

    /// The column names, in order.
    public var columnNames: [String] { columns.names }

    /// The value of column `name`, or `nil` when the row has no such column.
    public subscript(_ name: String) -> SQLValue? {
        columns.indexByName[name].map { values[$0] }
    }

    /// The value of column `name` converted to `Value`; throws when the column is missing or the
    /// value does not convert.
    public func value<Value: SQLValueConvertible>(_ name: String, as type: Value.Type = Value.self) throws(StoreError) -> Value {
        guard let value = self[name] else {
            throw StoreError(.decoding, "no column \"\(name)\" in row \(columns.names)")
        }
        guard let converted = Value(sqlValue: value) else {
            throw StoreError(.decoding, "column \"\(name)\": cannot read \(value.typeName) \(value) as \(Value.self)")
        }
        return converted
    }

    public var description: String {
        "[" + zip(columns.names, values).map { "\($0): \($1)" }.joined(separator: ", ") + "]"
    }
}
