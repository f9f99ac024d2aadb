#if Sync
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// The `/sync` protocol end to end: a real cluster written by psql, a node, real WebSockets.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync protocol tests skipped"), .timeLimit(.minutes(15)))
struct SyncProtocolTests {
    static let rules = TodosFixture.rules

    static func prepare(_ postgres: ThrowawayPostgres) async throws { try await TodosFixture.prepare(postgres) }

    static let aliceOpen = TodosFixture.aliceOpen
    static let aliceOpenSQL = TodosFixture.aliceOpenSQL

    /// One Postgres transaction reaches a socket as one frame holding every subscription it
    /// changed, positions only grow, and the rows built from the frames equal Postgres's.
    @Test func eachTransactionIsOneFrameAndRowsEqualPostgres() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: nil))
                    try await socket.send(.subscribe(id: "tags", query: QueryDescription(table: "tags", order: [OrderDescription(column: "name")]),
                                                     resume: nil))
                    var open = ClientRows()
                    var tags = ClientRows()
                    var lastLSN = PGOutput.LSN(0)
                    func take(_ message: ServerMessage) throws -> (open: Bool, tags: Bool) {
                        if case .changes(let lsn, _, _) = message {
                            let position = try #require(PGOutput.LSN(lsn))
                            #expect(position >= lastLSN, "positions only grow")
                            lastLSN = position
                        }
                        return (try open.take(message, id: "open"), try tags.take(message, id: "tags"))
                    }
                    while open.columns.isEmpty || tags.columns.isEmpty {
                        _ = try take(try #require(try await socket.nextSkippingHeartbeats()))
                    }
                    #expect(open.rows.map(psqlText) == (try await postgres.rows(Self.aliceOpenSQL)))
                    // One transaction changing both subscriptions: one frame holding both.
                    try await postgres.psql("BEGIN; UPDATE todos SET rank = 0 WHERE id = 20; INSERT INTO tags VALUES (3, 'errands'); COMMIT;")
                    let both = try take(try #require(try await socket.nextSkippingHeartbeats()))
                    #expect(both.open && both.tags, "one frame for the transaction")
                    // A transaction of another user's rows only: nothing for alice; then one of hers (psql
                    // runs the statements of one -c in one transaction).
                    try await postgres.psql("UPDATE todos SET title = 'bob''s' WHERE id = 3")
                    try await postgres.psql("UPDATE todos SET done = true WHERE id = 4; UPDATE todos SET title = 'milk' WHERE id = 6")
                    let changed = try take(try #require(try await socket.nextSkippingHeartbeats()))
                    #expect(changed.open && !changed.tags)
                    #expect(open.rows.map(psqlText) == (try await postgres.rows(Self.aliceOpenSQL)))
                    try await postgres.psql("UPDATE todos SET rank = 3 WHERE id = 10")
                    #expect(try take(try #require(try await socket.nextSkippingHeartbeats())) == (true, false))
                    #expect(open.rows.map(psqlText) == (try await postgres.rows(Self.aliceOpenSQL)))
                    #expect(tags.rows.map(psqlText) == (try await postgres.rows("SELECT id, name FROM tags ORDER BY name, id")))
                }
            }
        }
    }

    /// A client that went away resumes by position: one changeset brings it up to date (not a
    /// snapshot), with nothing missed and nothing repeated; another basis gets a snapshot.
    @Test func resumingAfterADisconnectMissesNothingAndRepeatsNothing() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory) { node in
                var open = ClientRows()
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: nil))
                    try await open.readFirstResult(from: socket, id: "open")
                }
                // While away: many commits, a few touching the window.
                for n in 0..<30 {
                    try await postgres.psql(n % 10 == 0 ? "UPDATE todos SET rank = rank + 100 WHERE id = \(2 * (n / 10 + 1))"
                                                  : "UPDATE todos SET title = title || '.' WHERE id = \(2 * n + 1)")
                }
                try await postgres.psql("INSERT INTO todos VALUES (100, 'alice', 'new', 0, false)")
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: ResumePoint(basis: open.basis, lsn: open.lsn)))
                    let message = try #require(try await socket.nextSkippingHeartbeats())
                    guard case .changes(_, let snapshots, let changesets) = message else { Issue.record("not a changes frame: \(message)"); return }
                    #expect(snapshots.isEmpty, "a resume within the retained history is a changeset")
                    #expect(changesets["open"] != nil)
                    _ = try open.take(message, id: "open")
                    // The node may not have applied the last commits yet: they follow, as changesets.
                    while open.rows.map(psqlText) != (try await postgres.rows(Self.aliceOpenSQL)) {
                        let next = try #require(try await socket.nextSkippingHeartbeats())
                        if case .changes(_, let snapshots, _) = next { #expect(snapshots.isEmpty) }
                        _ = try open.take(next, id: "open")
                    }
                    // Later commits continue from there.
                    try await postgres.psql("UPDATE todos SET title = 'later' WHERE id = 100")
                    _ = try open.take(try #require(try await socket.nextSkippingHeartbeats()), id: "open")
                    #expect(open.rows.map(psqlText) == (try await postgres.rows(Self.aliceOpenSQL)))
                    // Another user presenting alice's basis: a snapshot of bob's rows, never alice's.
                    try await withSocket(node.url) { other in
                        _ = try await other.hello(try node.token("bob"))
                        try await other.send(.subscribe(id: "open", query: Self.aliceOpen, resume: ResumePoint(basis: open.basis, lsn: open.lsn)))
                        guard case .changes(_, let bobs, _)? = try await other.nextSkippingHeartbeats(), let snapshot = bobs["open"] else {
                            Issue.record("bob did not get a snapshot")
                            return
                        }
                        #expect(snapshot.rows.allSatisfy { $0[1] == .text("bob") })
                    }
                }
            }
        }
    }

    /// Every kind of bad input gets an error frame naming it, the socket goes on working, and
    /// other sockets never notice.
    @Test func badInputGetsAClearErrorAndLosesNothing() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory, adjust: {
                $0.maxSubscriptionsPerSocket = 3
                $0.maxMessageBytes = 4_096
            }) { node in
                try await withSocket(node.url) { bystander in
                    _ = try await bystander.hello(try node.token("bob"))
                    try await bystander.send(.subscribe(id: "all", query: QueryDescription(table: "todos", order: [OrderDescription(column: "id")]),
                                                        resume: nil))
                    var bystanderRows = ClientRows()
                    try await bystanderRows.readFirstResult(from: bystander, id: "all")

                    try await withSocket(node.url) { socket in
                        func expectError(_ json: String, _ code: SyncErrorCode, _ words: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
                            try await socket.send(json)
                            let message = try await socket.nextSkippingHeartbeats()
                            guard case .error(let got, let text, _)? = message else {
                                Issue.record("no error for \(json): \(String(describing: message))", sourceLocation: sourceLocation)
                                return
                            }
                            #expect(got == code, "\(json): \(text)", sourceLocation: sourceLocation)
                            #expect(text.localizedCaseInsensitiveContains(words), "\(json): \(text)", sourceLocation: sourceLocation)
                        }
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"todos"}}"#, .outOfOrder, "hello")
                        try await expectError(#"{"type":"ping"}"#, .outOfOrder, "hello")
                        try await expectError("not json", .malformed, "not JSON")
                        try await expectError("[1, 2]", .malformed, "object")
                        try await expectError(#"{"type":"launch"}"#, .unknownMessage, "launch")
                        try await expectError(#"{"type":"hello","protocol":1}"#, .malformed, "token")
                        _ = try await socket.hello(try node.token("alice"))
                        try await expectError(#"{"type":"hello","protocol":1,"token":"x"}"#, .outOfOrder, "already")
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"secrets"}}"#, .invalidQuery, "secrets")
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"todos","columns":["password"]}}"#, .invalidQuery, "password")
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"todos","filter":{"column":"title; DROP TABLE todos","op":"=","value":1}}}"#,
                                              .invalidQuery, "DROP")
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"todos","filter":{"column":"rank","op":"~","value":1}}}"#,
                                              .invalidQuery, "operator")
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"todos","filter":{"column":"rank","op":"=","value":"three"}}}"#,
                                              .invalidQuery, "rank")
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"todos","limit":-1}}"#, .invalidQuery, "limit")
                        try await expectError(#"{"type":"subscribe","id":"a","query":{"table":"todos","limit":"ten"}}"#, .invalidQuery, "limit")
                        try await expectError(#"{"type":"unsubscribe","id":"never"}"#, .unknownSubscription, "never")
                        try await expectError(#"{"type":"ping","padding":"\#(String(repeating: "x", count: 5_000))"}"#, .messageTooLarge, "4096")
                        // A value that looks like SQL is a value: it matches no row, and the table is intact.
                        try await socket.send(#"{"type":"subscribe","id":"sql","query":{"table":"todos","filter":{"column":"title","op":"=","value":"x'; DROP TABLE todos; --"}}}"#)
                        guard case .changes(_, let snapshots, _)? = try await socket.nextSkippingHeartbeats() else { Issue.record("no result"); return }
                        #expect(snapshots["sql"]?.rows == [])
                        try await expectError(#"{"type":"subscribe","id":"sql","query":{"table":"tags"}}"#, .duplicateSubscription, "sql")
                        try await socket.send(.subscribe(id: "b", query: QueryDescription(table: "tags"), resume: nil))
                        _ = try await socket.nextSkippingHeartbeats()
                        try await socket.send(.subscribe(id: "c", query: QueryDescription(table: "tags"), resume: nil))
                        _ = try await socket.nextSkippingHeartbeats()
                        try await expectError(#"{"type":"subscribe","id":"d","query":{"table":"tags"}}"#, .tooManySubscriptions, "3")
                        // The socket still works: alice's window arrives, and follows a write.
                        try await socket.send(.unsubscribe(id: "c"))
                        try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: nil))
                        var open = ClientRows()
                        try await open.readFirstResult(from: socket, id: "open")
                        #expect(open.rows.map(psqlText) == (try await postgres.rows(Self.aliceOpenSQL)))
                        #expect(try await postgres.psql("SELECT count(*) FROM todos").trimmingCharacters(in: .whitespacesAndNewlines) == "40")
                        // The bystander saw none of it, and still follows writes.
                        try await postgres.psql("UPDATE todos SET title = 'seen' WHERE id = 1")
                        _ = try bystanderRows.take(try #require(try await bystander.nextSkippingHeartbeats()), id: "all")
                        #expect(bystanderRows.rows.map(psqlText) == (try await postgres.rows("SELECT id, owner, title, rank, done FROM todos WHERE owner = 'bob' ORDER BY id")))
                    }
                }
            }
        }
    }

    /// A resume that waits for a position the node has not reached does not hold up the
    /// socket's other messages.
    @Test func aResumeThatWaitsDoesNotHoldOtherMessagesUp() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory, adjust: {
                $0.resumeCatchUpTimeout = .seconds(120)
            }) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    var open = ClientRows()
                    try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: nil))
                    try await open.readFirstResult(from: socket, id: "open")
                    // A position far ahead of the node: the resume waits for it.
                    try await socket.send(.subscribe(id: "later", query: Self.aliceOpen, resume: ResumePoint(basis: open.basis, lsn: "FF/0")))
                    try await socket.send(.ping)
                    guard case .pong? = try await socket.nextSkippingHeartbeats(within: 20) else { Issue.record("no pong"); return }
                    try await socket.send(.unsubscribe(id: "later"))
                    try await postgres.psql("UPDATE todos SET title = 'still live' WHERE id = 2")
                    let message = try #require(try await socket.nextSkippingHeartbeats(within: 20))
                    _ = try open.take(message, id: "open")
                    #expect(open.rows.map(psqlText) == (try await postgres.rows(Self.aliceOpenSQL)))
                }
            }
        }
    }

    /// A table whose columns change ends its subscriptions (they were compiled for the old
    /// columns) after the frame of that transaction; subscribing again gives the new columns.
    @Test func aTableWhoseColumnsChangeEndsItsSubscriptions() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: nil))
                    var open = ClientRows()
                    try await open.readFirstResult(from: socket, id: "open")
                    try await postgres.psql("ALTER TABLE todos ADD COLUMN note text NOT NULL DEFAULT 'n'")
                    var ended: String?
                    while ended == nil, let message = try await socket.nextSkippingHeartbeats() {
                        if case .error(.subscriptionEnded, let text, let id) = message, id == "open" { ended = text }
                    }
                    #expect(ended?.contains("todos") == true && ended?.contains("SELECT") == false, "\(ended ?? "")")
                    try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: nil))
                    open = ClientRows()
                    try await open.readFirstResult(from: socket, id: "open")
                    #expect(open.columns.last == "note")
                }
            }
        }
    }

    /// Tokens: forged, another protocol or expired at hello close the socket with the reason;
    /// a token that expires while the socket is open closes it then.
    @Test func tokensAreCheckedAtHelloAndOnOpenSockets() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos", "tags"], rules: Self.rules, directory: directory) { node in
                for (hello, code) in [(#"{"type":"hello","protocol":1,"token":"v1.forged.sig"}"#, SyncErrorCode.unauthorized),
                                      (#"{"type":"hello","protocol":2,"token":"x"}"#, .unsupportedProtocol),
                                      (#"{"type":"hello","protocol":1,"token":"\#(try node.token("alice", expires: Date().addingTimeInterval(-1)))"}"#,
                                       .tokenExpired)] {
                    try await withSocket(node.url) { socket in
                        try await socket.send(hello)
                        guard case .error(let got, _, _)? = try await socket.next() else { Issue.record("no error for \(hello)"); return }
                        #expect(got == code)
                        #expect(try await socket.nextText() == nil, "the socket closes")
                    }
                }
                // A token that expires a few seconds on. On a loaded machine (the whole suite in
                // parallel) it can expire before the node reads the hello: then a fresh one is tried.
                try await withSockets { sockets in
                    var opened: TestSocket?
                    for _ in 0..<5 {
                        let candidate = try await sockets.open(node.url)
                        try await candidate.send(.hello(protocol: 1, token: try node.token("alice", expires: Date().addingTimeInterval(10))))
                        if case .welcome? = try await candidate.nextSkippingHeartbeats() {
                            opened = candidate
                            break
                        }
                        await candidate.end()
                    }
                    let socket = try #require(opened, "no hello was read before its token expired")
                    try await socket.send(.subscribe(id: "open", query: Self.aliceOpen, resume: nil))
                    let sawExpiry = try await Wait.value("the socket to close at its token's expiry") {
                        var sawExpiry = false
                        while let message = try await socket.next() {
                            if case .error(.tokenExpired, _, _) = message { sawExpiry = true }
                        }
                        return sawExpiry
                    }
                    #expect(sawExpiry, "an open socket is closed when its token expires")
                }
            }
        }
    }
}
#endif
