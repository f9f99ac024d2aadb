import ArgumentParser
import Foundation
import Ripple
import RippleDiff

/// `ripple history DB --table T [--where COND] [--order-by COL] --from V1 [--to V2]`: prints how a
/// query's result changed over a range of versions, rebuilt from the store's change log.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Print the changesets of a query over a range of versions (time travel).",
        discussion: """
            The query is `SELECT * FROM T [WHERE COND] [ORDER BY COL]`. COND is your own SQL, \
            used as written (its values are yours: it is not a place for untrusted input). The \
            store is opened read-only. The first step is the result as of --from (every row an \
            insert); each later step is a version whose commit changed the result, with its \
            deletes (old positions), inserts, updates and moves (new positions). Steps are printed \
            as they are rebuilt, oldest first, in memory bounded whatever the range. Versions \
            outside the change log's retention, or before a schema change of the table, are an error.
            """
    )

    @Argument(help: ArgumentHelp("The store's database file.", valueName: "DB"))
    var database: String

    @Option(help: "The table to query.")
    var table: String

    @Option(name: .customLong("where"), help: ArgumentHelp("An SQL condition on the table's rows (used as written).",
                                                             valueName: "SQL-condition"))
    var condition: String?

    @Option(name: .customLong("order-by"), help: ArgumentHelp("A column to order the result by.", valueName: "column"))
    var orderBy: String?

    // `.unconditional`: the word after --from/--to is its value even when it starts with "-", so
    // that `--from -3` reaches the store (which refuses a version older than its change log by
    // name) as `--from=-3` does, instead of being taken for an option.
    @Option(parsing: .unconditional, help: ArgumentHelp("The first version: at least the one `ripple info DB` shows.",
                                                        valueName: "version"))
    var from: Int64

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "The last version: at most the store's current one, which it is by default (see `ripple info DB`).",
        valueName: "version"))
    var to: Int64?

    func run() throws {
        do {
            let store = try StoreFileCheck.openForReading(database)
            let quotedTable = quotedIdentifier(table)
            let key = try store.read { db in try TableKey(table: table, in: db, database: database).rowidOrKey() }
            var sql = "SELECT \(key) AS \"$key\", * FROM \(quotedTable)"
            if let condition { sql += " WHERE (\(condition))" }
            if let orderBy { sql += " ORDER BY \(quotedIdentifier(orderBy))" }
            // Each step is printed as it is rebuilt: memory stays bounded whatever the range.
            var previous: [Row] = []
            var initial = true
            try store.history(table: table, sql: sql, identity: "$key", from: from, to: try to ?? store.currentVersion()) { step in
                print(Self.heading(step, initial: initial))
                let changeset = step.changeset
                for old in changeset.deletes { print("  - [\(old)] \(Self.describe(previous[old]))") }
                for new in changeset.inserts { print("  + [\(new)] \(Self.describe(step.snapshot[new]))") }
                for pair in changeset.updates {
                    print("  ~ [\(pair.old)→\(pair.new)] \(Self.describe(previous[pair.old]))")
                    print("      now \(Self.describe(step.snapshot[pair.new]))")
                }
                for pair in changeset.moves { print("  ↕ [\(pair.old)→\(pair.new)] \(Self.describe(step.snapshot[pair.new]))") }
                previous = step.snapshot
                initial = false
            }
        } catch let error as ValidationError {
            Console.error(error.message)
            throw ExitCode.failure
        } catch {
            Console.error("\(error)")
            throw ExitCode.failure
        }
    }

    private static func heading(_ step: HistoryStep<Row>, initial: Bool) -> String {
        let changeset = step.changeset
        if initial { return "version \(step.version) (start): \(step.snapshot.count) rows" }
        return "version \(step.version): \(changeset.deletes.count) deleted, \(changeset.inserts.count) inserted, "
            + "\(changeset.updates.count) updated, \(changeset.moves.count) moved (\(step.snapshot.count) rows)"
    }

    /// The row's columns (without the identity column this command adds) as `name=value`.
    private static func describe(_ row: Row) -> String {
        zip(row.columnNames, row.values).dropFirst().map { name, value in "\(name)=\(format(value))" }
            .joined(separator: " ")
    }

    private static func format(_ value: SQLValue) -> String {
        switch value {
        case .null: "NULL"
        case .integer(let integer): String(integer)
        case .real(let real): String(real)
        case .text(let text): "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let blob): "x'" + blob.map { String(format: "%02x", $0) }.joined() + "'"
        }
    }
}
