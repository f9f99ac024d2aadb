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

    @Option(help: "A token: the node's own (ripple-server token, or the demo's) or a JSON Web Token from your identity provider.")
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
        say("subscribing to \(String(decoding: try encoder.encode(query), as: UTF8.self))")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-subscribe-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Store(path: directory + "/client.sqlite")
        let token = token
        let client = SyncClient(url: url, store: store) { token }
        try await client.start()
        let limit = events
        let refusal = Locked<TokenRefused?>(nil)
        // Until the limit of events, a signal, or a refusal of the token: the events are watched
        // (and printed) beside the query's results, and whichever ends first ends the other. The
        // watch has ended before the client stops, so that the client's own end is not said as
        // a disconnection it recovers from.
        try await untilSignalled {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                if query.hasIncludes {
                    try await client.subscribe("tree", query)
                    tasks.addTask { await Self.watch(client, tree: query, limit: limit, refusal: refusal) }
                } else {
                    let remote = await client.remoteQuery(query)
                    tasks.addTask { await Self.watch(client, tree: nil, limit: nil, refusal: refusal) }
                    tasks.addTask {
                        var count = 0
                        var previous: [[WireValue]] = []
                        for try await event in remote {
                            say(Self.describe(event, previous: previous))
                            previous = event.rows
                            count += 1
                            if let limit, count >= limit { return }
                        }
                    }
                }
                _ = try await tasks.next()
                tasks.cancelAll()
            }
        }
        await client.stop()
        if let refused = refusal.withLock({ $0 }) { throw refused }
    }

    /// The node refused the token (`unauthorized`, `token_expired` or another `token_…` code):
    /// a token given on the command line stays refused however often the client reconnects, so
    /// the command ends (status 1) saying so.
    struct TokenRefused: Error, CustomStringConvertible {
        let code: SyncErrorCode
        let message: String

        var description: String {
            code == .tokenExpired
                ? "the token expired (\(code.rawValue): \(message)); give a fresh one with --token"
                : "the node refused the token (\(code.rawValue): \(message)); give another with --token"
        }

        /// Whether `code` refuses the socket's token: no reconnect with the same token helps.
        static func refuses(_ code: SyncErrorCode) -> Bool {
            code == .unauthorized || code.rawValue.hasPrefix("token_")
        }
    }

    /// Prints `client`'s events until it is cancelled, or the node refuses the token (kept in
    /// `refusal`, not printed: the command's error says it) — and, for a query with includes
    /// (`tree`, subscribed as "tree"), its whole result after each frame that changes it, until
    /// `limit` such frames.
    static func watch(_ client: SyncClient, tree: QueryDescription?, limit: Int?, refusal: Locked<TokenRefused?>) async {
        var count = 0
        for await event in client.events {
            switch event {
            case .connected(let user, let lsn): say("connected as \(user) at \(lsn)")
            case .disconnected(let reason): say("disconnected (\(reason)); reconnecting…")
            case .serverError(let code, let message, nil) where TokenRefused.refuses(code):
                refusal.withLock { $0 = TokenRefused(code: code, message: message) }
                return
            case .serverError(let code, let message, _): say("error \(code.rawValue): \(message)")
            case .applied(let lsn, let subscriptions) where subscriptions.contains("tree"):
                guard let tree else { break }
                say(await Self.describeTree(tree, client: client, lsn: lsn))
                count += 1
                if let limit, count >= limit { return }
            default: break
            }
        }
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
