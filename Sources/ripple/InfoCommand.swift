import ArgumentParser
import Foundation
import Ripple

/// `ripple info DB`: what a store file holds — its versions and the range its change log keeps,
/// its tables with their row counts, and the size of the file, its WAL and its change log.
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show a store's versions, the range its change log keeps, its tables and sizes.",
        discussion: """
            Opens the file read-only. History (ripple history --from) can start at the version \
            shown and go up to the current one.
            """
    )

    @Argument(help: "The store's database file.")
    var database: String

    func run() throws {
        do {
            let store = try StoreFileCheck.openForReading(database)
            let report = try store.read { db in try Self.report(db) }
            print("\(database)")
            print("  version \(report.current); history from version \(report.historyStart) "
                  + "(ripple history --from \(report.historyStart) … --to \(report.current))")
            if report.historyStart > report.oldest {
                print("    (the change log keeps versions after \(report.oldest); version \(report.historyStart) changed the "
                      + "schema or was written without Ripple, which history cannot undo)")
            }
            print("  change log: \(report.logEntries) entries over \(report.loggedVersions) versions, "
                  + Self.bytes(report.logBytes))
            print("  file: " + Self.bytes(Self.size(database)) + ", WAL: " + Self.bytes(Self.size(database + "-wal")))
            print("  tables:")
            let width = report.tables.map(\.name.count).max() ?? 0
            for table in report.tables {
                let padding = String(repeating: " ", count: width - table.name.count)
                print("    \(table.name)\(padding)  \(table.rows) rows" + (table.strict ? "" : "  (not STRICT)"))
            }
        } catch {
            Console.error("\(error)")
            throw ExitCode.failure
        }
    }

    struct Report {
        var current: Int64
        var oldest: Int64
        /// The first version history can start from: after what the log prunes, and at or after
        /// the last change it cannot undo (a `*` entry).
        var historyStart: Int64
        var logEntries: Int
        var loggedVersions: Int
        var logBytes: Int64
        var tables: [(name: String, rows: Int, strict: Bool)]
    }

    static func report(_ db: Database) throws -> Report {
        func meta(_ key: String) throws -> Int64 {
            try db.fetchValue("SELECT value FROM ripple_meta WHERE key = ?", [key], as: Int64.self) ?? 0
        }
        // Every column of the log, whatever its schema version holds: the bytes of each value.
        let columns = try db.fetchAll("SELECT name FROM pragma_table_info('ripple_changes')")
            .map { try $0.value("name", as: String.self) }
        let lengths = columns.map { "coalesce(length(CAST(\(quotedIdentifier($0)) AS BLOB)), 0)" }.joined(separator: " + ")
        let log = try db.fetchOne("SELECT count(*) AS entries, count(DISTINCT version) AS versions, "
                                  + "coalesce(sum(\(lengths)), 0) AS bytes FROM ripple_changes")
        var tables: [(name: String, rows: Int, strict: Bool)] = []
        for row in try db.fetchAll("""
            SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND type = 'table'
            AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'ripple\\_%' ESCAPE '\\' ORDER BY name
            """) {
            let name = try row.value("name", as: String.self)
            let rows = try db.fetchValue("SELECT count(*) FROM \(quotedIdentifier(name))", as: Int.self) ?? 0
            tables.append((name, rows, try row.value("strict", as: Int.self) == 1))
        }
        let oldest = try meta("oldest_version")
        let barrier = try db.fetchValue("SELECT max(version) FROM ripple_changes WHERE table_name = '*'", as: Int64.self) ?? 0
        return Report(current: try meta("version"), oldest: oldest, historyStart: max(oldest, barrier),
                      logEntries: try log?.value("entries", as: Int.self) ?? 0,
                      loggedVersions: try log?.value("versions", as: Int.self) ?? 0,
                      logBytes: try log?.value("bytes", as: Int64.self) ?? 0,
                      tables: tables)
    }

    static func size(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// `12.3 MB`, `512 bytes`.
    static func bytes(_ count: Int64) -> String {
        if count < 1_000 { return "\(count) bytes" }
        let units = ["kB", "MB", "GB", "TB"]
        var value = Double(count) / 1_000
        var unit = 0
        while value >= 1_000 && unit < units.count - 1 {
            value /= 1_000
            unit += 1
        }
        return String(format: "%.1f %@", value, units[unit])
    }
}
