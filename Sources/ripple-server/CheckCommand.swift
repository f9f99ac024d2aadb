#if Sync
import ArgumentParser
import Foundation
import Logging
import RippleServer

/// `ripple-server check`: what a database lacks for a node, in plain words; exits with status 1
/// when something blocks the node.
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Say what a PostgreSQL database lacks for a node (exit status 1 when something blocks it).",
        discussion: """
            Checks wal_level, replication slots and their WAL retention, the role's REPLICATION
            attribute and grants, the synced tables' primary keys and replica identity, the
            publication, and the node's own tables and function. Each finding says what, why it
            matters, and the SQL or setting that fixes it.

            Example (as the node's role):
              ripple-server check --postgres postgres://ripple_node:PASSWORD@db.internal/app --tables todos,tags
            """)

    @Option(help: "The database, best as the node's role.")
    var postgres: String

    @Option(help: ArgumentHelp("The synced tables, comma-separated (default: those of the publication).", valueName: "names"))
    var tables: String?

    @Option(help: ArgumentHelp("The tables clients write through the node, comma-separated.", valueName: "names"))
    var writes: String?

    @Option(help: ArgumentHelp("The rules file: the tables it lets clients write are checked for INSERT, UPDATE, DELETE.",
                               valueName: "file"))
    var rules: String?

    @Option(help: "The node's role (default: the role connected).")
    var role: String?

    @Option(help: "The publication's name (the node's --publication).")
    var publication = "ripple_sync"

    @Option(help: "The node's replication slot (the node's --slot).")
    var slot = "ripple_node"

    func run() async throws {
        var written = commaSeparated(writes)
        if let rules {
            let parsed = try SyncRules(json: try Data(contentsOf: URL(fileURLWithPath: rules)))
            written += parsed.tables.filter { $0.value.write != nil }.map(\.key)
        }
        let (listed, writable, named, published, nodeSlot) = (commaSeparated(tables), written, self.role, self.publication, self.slot)
        let (checked, findings) = try await PostgresReadiness.withClient(url: postgres) { client in
            let checked = listed.isEmpty ? try await PostgresReadiness.publishedTables(on: client, publication: published) : listed
            return (checked, try await PostgresReadiness.findings(on: client, tables: checked, writes: writable, role: named,
                                                                  publication: published, slot: nodeSlot))
        }
        print("ripple-server check: tables \(checked.isEmpty ? "(none named, none published)" : checked.joined(separator: ", "))")
        for finding in findings {
            print("\n\(finding.severity.rawValue.uppercased()): \(finding.what)\n  why: \(finding.why)\n  fix: \(finding.fix)")
        }
        let blocking = findings.filter { $0.severity == .blocking }.count
        let warnings = findings.filter { $0.severity == .warning }.count
        print("\n\(blocking) blocking, \(warnings) warning\(warnings == 1 ? "" : "s")"
              + (blocking == 0 ? ": the node can run." : ": the node cannot run until they are fixed."))
        if blocking > 0 { throw ExitCode(1) }
    }
}
#endif
