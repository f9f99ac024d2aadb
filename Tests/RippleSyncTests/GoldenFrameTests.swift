import Foundation
import RippleSync
import Testing

/// The protocol's frames, kept stable by a golden file (`Golden/frames.jsonl`): each server
/// message writes exactly its line and reads back equal; each client message's line reads as
/// the message. A change to the wire shows here first, and must be a change to the protocol.
@Suite struct GoldenFrameTests {
    static let golden: [String: String] = {
        let url = Bundle.module.url(forResource: "frames", withExtension: "jsonl", subdirectory: "Golden")!
        let text = try! String(contentsOf: url, encoding: .utf8)
        return Dictionary(uniqueKeysWithValues: text.split(separator: "\n").map { line in
            let parts = line.split(separator: "\t", maxSplits: 1)
            return (String(parts[0]), String(parts[1]))
        })
    }()

    static let basis = "7350160375306405406-1.0a1b2c3d4e5f60718293a4b5"

    static let serverMessages: [(String, ServerMessage)] = [
        ("server.welcome", .welcome(.init(protocol: 1, user: "alice", lsn: "0/150A6F8", heartbeatMilliseconds: 5000,
                                          maxSubscriptions: 100, maxMessageBytes: 262_144))),
        ("server.changes", .changes(
            lsn: "16/B374D848",
            snapshots: ["open": WireSnapshot(basis: basis, columns: ["id", "title", "done", "big"], types: ["int8", "text", "bool", "int8"],
                                             key: [0], rows: [[.integer(1), .text("milk \"2%\"\n"), .bool(false), .text("9007199254740993")],
                                                              [.integer(2), .null, .bool(true), .null]])],
            changesets: ["tags": WireChangeset(deletes: [1], inserts: [.init(index: 0, row: [.integer(3), .text("errands")])],
                                               moves: [.init(old: 2, new: 1)],
                                               updates: [.init(old: 0, new: 2, columns: [1: .text("home"), 3: .real(-1.5)])])])),
        ("server.heartbeat", .heartbeat(lsn: "0/150A860")),
        ("server.pong", .pong(lsn: "0/0")),
        ("server.error", .error(code: .invalidQuery, message: "no column password in todos", id: "open")),
        ("server.error-socket", .error(code: .slowConsumer, message: "reconnect and resume", id: nil)),
        ("server.welcome-writes", .welcome(.init(protocol: 1, user: "alice", lsn: "0/150A6F8", heartbeatMilliseconds: 5000,
                                                 maxSubscriptions: 100, maxMessageBytes: 262_144,
                                                 client: "9b1f4c2e-53a4-4c3e-9c1d-2f6a7e8b9c0d", lastMutation: 41))),
        ("server.pushed", .pushed(results: [
            MutationResult(id: 42, status: .applied),
            MutationResult(id: 43, status: .rejected, code: "23505", constraint: "todos_title_key",
                           message: "a row with the same unique values exists (constraint todos_title_key)"),
        ])),
        ("server.pushed-lsn", .pushed(results: [
            MutationResult(id: 44, status: .applied, lsn: "0/16B3748"),
            MutationResult(id: 45, status: .rejected, code: "write_rule", message: "the rules do not let this user change that row of todos",
                           lsn: "0/16B3790"),
        ])),
        // Projects with their owners (to-one), their open todos (to-many), and the todos' assignees.
        ("server.changes-included", .changes(lsn: "0/1A2A", snapshots: ["boards": WireSnapshot(
            basis: basis, columns: ["id", "name", "owner_id"], types: ["int8", "text", "text"], key: [0],
            rows: [[.integer(3), .text("Launch"), .text("alice")], [.integer(7), .text("Garden"), .text("bob")]],
            included: [
                "owner": WireIncludedSnapshot(columns: ["id", "name"], types: ["text", "text"], key: [0],
                                              rows: [[.text("alice"), .text("Alice")], [.text("bob"), .text("Bob")]]),
                "todos": WireIncludedSnapshot(columns: ["id", "project_id", "title", "rank", "assignee_id"],
                                              types: ["int8", "int8", "text", "int8", "text"], key: [0],
                                              rows: [[.integer(10), .integer(3), .text("Write the post"), .integer(1), .text("bob")],
                                                     [.integer(11), .integer(3), .text("Ship"), .integer(2), .null],
                                                     [.integer(12), .integer(7), .text("Plant"), .integer(3), .text("alice")]],
                                              counts: [2, 1]),
                "todos.assignee": WireIncludedSnapshot(columns: ["id", "name"], types: ["text", "text"], key: [0],
                                                       rows: [[.text("alice"), .text("Alice")], [.text("bob"), .text("Bob")]]),
            ])], changesets: [:])),
        // Todo 10 moves to project 7, whose owner becomes Carol.
        ("server.changes-included-move", .changes(lsn: "0/1A2B", snapshots: [:], changesets: ["boards": WireChangeset(
            updates: [.init(old: 1, new: 1, columns: [2: .text("carol")])],
            included: [
                "owner": .keyed(WireKeyedChange(puts: [[0: .text("carol"), 1: .text("Carol")]], deletes: [[.text("bob")]])),
                "todos": .sectioned(WireSectionedChangeset(
                    moves: [.init(old: WirePath(section: 0, item: 0), new: WirePath(section: 1, item: 0))],
                    updates: [.init(old: WirePath(section: 0, item: 0), new: WirePath(section: 1, item: 0), columns: [1: .integer(7)])])),
            ])])),
        // The answer to an in-band token renewal (`auth`).
        ("server.authed", .authed(expires: 1_795_859_385)),
        ("server.error-token", .error(code: .tokenUnknownKey, message: "the token is not valid: the node has no key k9, even after fetching its JWKS",
                                      id: nil)),
    ]

    static let clientMessages: [(String, ClientMessage)] = [
        ("client.hello", .hello(protocol: 1, token: "v1.eyJleHAiOjE3OTU4NTU3ODUsInN1YiI6ImFsaWNlIn0.sig")),
        ("client.subscribe", .subscribe(
            id: "open",
            query: QueryDescription(table: "todos", filter: .and([.compare(column: "done", op: .equal, value: .bool(false)),
                                                                  .like(column: "title", pattern: "%milk%")]),
                                    order: [OrderDescription(column: "rank", descending: true, nullsFirst: false)],
                                    limit: 10, offset: 5, columns: ["id", "title"]),
            resume: ResumePoint(basis: basis, lsn: "16/B374D848"))),
        ("client.unsubscribe", .unsubscribe(id: "open")),
        ("client.ping", .ping),
        ("client.hello-client", .hello(protocol: 1, token: "v1.eyJleHAiOjE3OTU4NTU3ODUsInN1YiI6ImFsaWNlIn0.sig",
                                       client: "9b1f4c2e-53a4-4c3e-9c1d-2f6a7e8b9c0d")),
        ("client.push", .push(mutations: [
            Mutation(id: 42, ops: [MutationOp(.put, table: "todos", values: ["id": .integer(7), "title": .text("milk"), "done": .bool(false)]),
                                   MutationOp(.patch, table: "todos", values: ["id": .integer(3), "done": .bool(true)]),
                                   MutationOp(.delete, table: "todos", values: ["id": .integer(5)])]),
        ])),
        ("client.subscribe-include", .subscribe(
            id: "boards",
            query: QueryDescription(table: "projects", order: [OrderDescription(column: "name")])
                .including("owner", .row(of: "users", on: ["owner_id": "id"], columns: ["id", "name"]))
                .including("todos", IncludeDescription.rows(of: "todos", on: ["id": "project_id"],
                                                            where: .compare(column: "done", op: .equal, value: .bool(false)),
                                                            order: [OrderDescription(column: "rank")], limit: 50)
                    .including("assignee", .row(of: "users", on: ["assignee_id": "id"], columns: ["id", "name"]))),
            resume: nil)),
        ("client.auth", .auth(token: "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsyIn0.eyJleHAiOjE3OTU4NTkzODUsInN1YiI6ImFsaWNlIn0.sig")),
    ]

    @Test func serverMessagesWriteTheirGoldenLinesAndReadBack() throws {
        for (name, message) in Self.serverMessages {
            let golden = try #require(Self.golden[name], "no golden line \(name)")
            #expect(String(decoding: message.json, as: UTF8.self) == golden, "\(name)")
            #expect(try JSONDecoder().decode(ServerMessage.self, from: Data(golden.utf8)) == message, "\(name)")
        }
    }

    @Test func clientMessagesReadFromTheirGoldenLinesAndRoundTrip() throws {
        for (name, message) in Self.clientMessages {
            let golden = try #require(Self.golden[name], "no golden line \(name)")
            #expect(try JSONDecoder().decode(ClientMessage.self, from: Data(golden.utf8)) == message, "\(name)")
            let again = try JSONDecoder().decode(ClientMessage.self, from: try JSONEncoder().encode(message))
            #expect(again == message, "\(name)")
        }
        #expect(Set(Self.golden.keys) == Set(Self.serverMessages.map(\.0) + Self.clientMessages.map(\.0)), "every golden line is checked")
    }
}
