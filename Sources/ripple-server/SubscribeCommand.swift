#if Sync
import ArgumentParser
import Foundation
import Ripple
import RippleDiff
import RippleServer
import RippleSync
import RippleSyncClient

/// `ripple-server subscribe`: a remote live query from the terminal, printing each changeset
/// as it arrives.
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe to a query on a node and print its rows, then each changeset as it arrives.")

    @Option(help: "The node's /sync address.")
    var url = "ws://127.0.0.1:8080/sync"

    @Option(help: "A signed token (ripple-server token, or the demo's).")
    var token: String

    @Option(help: "The synced table.")
    var table: String?

    @Option(help: "The whole query as JSON (instead of --table, --filter, --order and --limit), e.g. '{\"table\": \"todos\", \"order\": [{\"column\": \"rank\"}]}'.")
    var query: String?

    @Option(help: "A filter as JSON, e.g. '{\"column\": \"done\", \"op\": \"=\", \"value\": false}'.")
    var filter: String?

    @Option(help: "The order: columns, comma-separated, '-' before a column for descending (e.g. rank,-id).")
    var order: String?

    @Option(help: "At most this many rows.")
    var limit: Int?

    @Option(help: "Stop after this many events (default: run until interrupted).")
    var events: Int?

    func run() async throws {
        let query = try description()
        // What is subscribed to, as the wire has it: the node ANDs the token's user's read rules
        // into it (into each sub-query's table too).
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        print("subscribing to \(String(decoding: try encoder.encode(query), as: UTF8.self))")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-subscribe-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Store(path: directory + "/client.sqlite")
        let token = token
        let client = SyncClient(url: url, store: store) { token }
        try await client.start()
        let limit = events
        if query.hasIncludes {
            try await followTree(query, client: client, limit: limit)
            await client.stop()
            return
        }
        let remote = await client.remoteQuery(query)
        let watch = Task {
            for await event in client.events {
                switch event {
                case .connected(let user, let lsn): print("connected as \(user) at \(lsn)")
                case .disconnected(let reason): print("disconnected (\(reason)); reconnecting…")
                case .serverError(let code, let message, _): print("error \(code.rawValue): \(message)")
                default: break
                }
            }
        }
        defer { watch.cancel() }
        try await untilSignalled {
            var count = 0
            var previous: [[WireValue]] = []
            for try await event in remote {
                print(Self.describe(event, previous: previous))
                previous = event.rows
                count += 1
                if let limit, count >= limit { return }
            }
        }
        await client.stop()
    }

    /// The query the options describe.
    /// A query with includes: kept in the client's local store (as an app's would be), and
    /// printed whole — its rows, each to-many include's lists, each to-one include's rows —
    /// after each frame that changes it.
    func followTree(_ query: QueryDescription, client: SyncClient, limit: Int?) async throws {
        let watch = Task {
            var count = 0
            for await event in client.events {
                switch event {
                case .connected(let user, let lsn): print("connected as \(user) at \(lsn)")
                case .disconnected(let reason): print("disconnected (\(reason)); reconnecting…")
                case .serverError(let code, let message, _): print("error \(code.rawValue): \(message)")
                case .applied(let lsn, let subscriptions) where subscriptions.contains("tree"):
                    print(await Self.describeTree(query, client: client, lsn: lsn))
                    count += 1
                    if let limit, count >= limit { return }
                default: break
                }
            }
        }
        try await client.subscribe("tree", query)
        try await untilSignalled { await watch.value }
        watch.cancel()
    }

    static func describeTree(_ query: QueryDescription, client: SyncClient, lsn: String) async -> String {
        func text(_ row: [WireValue]) -> String { row.map(text(of:)).joined(separator: " | ") }
        let rows = await client.rows(of: "tree") ?? []
        var lines = ["@\(lsn): \(rows.count) rows"]
        var lists: [String: [[[WireValue]]]] = [:]
        for (path, _, _) in query.includePaths {
            guard let part = await client.includedRows(of: "tree", include: path) else { continue }
            if part.isSectioned { lists[path] = part.sections } else {
                lines.append("  \(path): \(part.rows.count) rows  (\(part.columns.joined(separator: " | ")))")
                lines += part.rows.map { "    \(text($0))" }
            }
        }
        for (index, row) in rows.enumerated() {
            lines.append("  [\(index)] \(text(row))")
            for (path, sections) in lists.sorted(by: { $0.key < $1.key }) where index < sections.count {
                lines += sections[index].enumerated().map { "      \(path)[\($0.offset)] \(text($0.element))" }
            }
        }
        return lines.joined(separator: "\n")
    }

    func description() throws -> QueryDescription {
        if let query {
            guard table == nil, filter == nil, order == nil, limit == nil else {
                throw ValidationError("--query is the whole query: give it without --table, --filter, --order or --limit")
            }
            do {
                return try JSONDecoder().decode(QueryDescription.self, from: Data(query.utf8))
            } catch {
                throw ValidationError("--query is not a query: \(error)")
            }
        }
        guard let table else { throw ValidationError("give --table (or the whole query with --query)") }
        var query = QueryDescription(table: table, limit: limit)
        if let filter {
            do {
                query.filter = try JSONDecoder().decode(FilterDescription.self, from: Data(filter.utf8))
            } catch {
                throw ValidationError("--filter is not a filter: \(error)")
            }
        }
        query.order = (order ?? "").split(separator: ",").map { term in
            term.hasPrefix("-") ? OrderDescription(column: String(term.dropFirst()), descending: true) : OrderDescription(column: String(term))
        }
        return query
    }

    /// An event in lines: the first as a table, later ones as their steps.
    static func describe(_ event: RemoteQueryEvent, previous: [[WireValue]]) -> String {
        func text(_ row: [WireValue]) -> String { row.map(text(of:)).joined(separator: " | ") }
        var lines: [String] = []
        if previous.isEmpty {
            lines.append("@\(event.lsn): \(event.rows.count) rows  (\(event.columns.joined(separator: " | ")))")
            lines += event.rows.enumerated().map { "  [\($0.offset)] \(text($0.element))" }
            return lines.joined(separator: "\n")
        }
        let changeset = event.changeset
        lines.append("@\(event.lsn): \(changeset.deletes.count) deleted, \(changeset.inserts.count) inserted, "
                     + "\(changeset.moves.count) moved, \(changeset.updates.count) updated")
        lines += changeset.deletes.map { "  - [\($0)] \(text(previous[$0]))" }
        lines += changeset.inserts.map { "  + [\($0)] \(text(event.rows[$0]))" }
        lines += changeset.moves.map { "  ↕ [\($0.old)→\($0.new)] \(text(event.rows[$0.new]))" }
        lines += changeset.updates.map { "  ~ [\($0.new)] \(text(event.rows[$0.new]))" }
        return lines.joined(separator: "\n")
    }

    static func text(of value: WireValue) -> String {
        switch value {
        case .null: "NULL"
        case .bool(let bool): String(bool)
        case .integer(let integer): String(integer)
        case .real(let real): String(real)
        case .text(let text): text
        }
    }
}

/// `ripple-server token`: signs a token for a user.
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "token", abstract: "Sign a token for a user.")

    @Option(help: "The user id the token carries.")
    var user: String

    @Option(help: "Seconds until it expires.")
    var expiresIn = 3600

    @Option(help: "A file holding the token secret; default: the RIPPLE_SYNC_SECRET variable.")
    var secretFile: String?

    func run() throws {
        print(try SyncToken.sign(user: user, expires: Date().addingTimeInterval(TimeInterval(expiresIn)), secret: readSecret(secretFile)))
    }
}
#endif
