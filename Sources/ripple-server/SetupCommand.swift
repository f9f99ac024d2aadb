#if Sync
import ArgumentParser
import Foundation
import Logging
import RippleServer

/// `ripple-server setup`: the SQL an administrator runs once so that a node can run as a role
/// that is not a superuser — printed, or applied with `--apply`.
struct SetupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup",
        abstract: "Print (or apply) the SQL that lets a node run as a role without superuser.",
        discussion: """
            Makes the node's role (LOGIN REPLICATION), the publication of the synced tables, the
            node's own tables and function, the grants (SELECT on the synced tables; INSERT,
            UPDATE, DELETE on those clients write), and, when run by a superuser, the event
            triggers that tell the node of schema changes at their commit. Idempotent: run it
            again after adding a table.

            Example:
              ripple-server setup --postgres postgres://admin@db.internal/app \\
                --role ripple_node --tables todos,tags --rules rules.json --apply
            """)

    @Option(help: "The database, as a role that owns the tables (a superuser, or the tables' owner). Needed with --apply.")
    var postgres: String?

    @Option(help: "The role the node logs in as.")
    var role = "ripple_node"

    @Option(help: ArgumentHelp("The synced tables of the public schema, comma-separated.", valueName: "names"))
    var tables: String

    @Option(help: ArgumentHelp("The synced tables clients write through the node, comma-separated (INSERT, UPDATE, DELETE granted).",
                               valueName: "names"))
    var writes: String?

    @Option(help: ArgumentHelp("The rules file: the tables it lets clients write are granted INSERT, UPDATE, DELETE.", valueName: "file"))
    var rules: String?

    @Option(help: "The publication's name (the node's --publication).")
    var publication = "ripple_sync"

    @Flag(help: "Apply the SQL (in one transaction) instead of printing it.")
    var apply = false

    func run() async throws {
        var written = commaSeparated(writes)
        if let rules {
            let parsed = try SyncRules(json: try Data(contentsOf: URL(fileURLWithPath: rules)))
            written += parsed.tables.filter { $0.value.write != nil }.map(\.key).sorted()
        }
        let synced = commaSeparated(tables)
        let setup = PostgresSetup(role: role, tables: synced, writes: Array(Set(written).intersection(synced)).sorted(),
                                  publication: publication)
        do { try setup.validate() } catch { throw ValidationError("\(error)") }
        guard apply else {
            print(setup.script, terminator: "")
            return
        }
        guard let postgres else { throw ValidationError("--apply needs --postgres URL") }
        let caveats = try await PostgresReadiness.withClient(url: postgres) { client in
            try await setup.apply(on: client, logger: Logger(label: "ripple-server"))
        }
        print("ripple-server setup: applied for role \(role) (tables \(synced.joined(separator: ", ")))"
              + (caveats.isEmpty ? "" : ", but:"))
        for caveat in caveats { print("* \(caveat)") }
        print("check with: ripple-server check --postgres URL-of-\(role) --tables \(synced.joined(separator: ","))")
    }
}

/// A list option's names: separated by commas, spaces around each trimmed, empty ones dropped.
func commaSeparated(_ list: String?) -> [String] {
    (list ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
}
#endif
