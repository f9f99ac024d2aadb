#if Sync
import Foundation
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Old app versions through schema changes, end to end (a real cluster changed by psql, a node,
/// real WebSockets): a subscription that names its columns keeps its changesets, live and on
/// resume, through `ADD COLUMN`, a dropped column it does not name and a widened type; one that
/// names a dropped column ends with `column_dropped`; an old client's pushes keep writing.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: schema evolution tests skipped"),
       .timeLimit(.minutes(15)))
struct SchemaEvolutionTests {
    static let rules = #"{"tables": {"items": {"read": true, "write": true}}}"#

    static func prepare(_ postgres: ThrowawayPostgres) async throws {
        try await postgres.psql("""
            CREATE TABLE items(id int8 PRIMARY KEY, owner text NOT NULL DEFAULT 'o', title varchar(20) NOT NULL,
                               qty int4 NOT NULL, price numeric(8,2));
            INSERT INTO items SELECT n, 'owner ' || n, 'item ' || n, n * 10, n + 0.5 FROM generate_series(1, 12) AS n;
            """)
    }

    /// What an app built before the changes asks for: its columns, by name.
    static let named = QueryDescription(table: "items", order: [OrderDescription(column: "qty", descending: true)], limit: 8,
                                        columns: ["id", "title", "qty", "price"])
    static let namedSQL = "SELECT id, title, qty, price FROM items ORDER BY qty DESC, id LIMIT 8"

    /// The changes an old app lives through: each followed by a write to a column it names (so
    /// that a frame is due), or by none.
    static let compatibleChanges: [(ddl: String, write: String?)] = [
        ("ALTER TABLE items ADD COLUMN note text", nil),
        ("ALTER TABLE items ADD COLUMN flag bool NOT NULL DEFAULT true", "UPDATE items SET title = 'after flag' WHERE id = 12"),
        ("ALTER TABLE items DROP COLUMN owner", "UPDATE items SET qty = 500 WHERE id = 3"),
        ("ALTER TABLE items ALTER COLUMN qty TYPE int8", "UPDATE items SET qty = 9007199254740993 WHERE id = 4"),
        ("ALTER TABLE items ALTER COLUMN title TYPE varchar(50)", "UPDATE items SET title = 'a title longer than twenty' WHERE id = 5"),
        ("ALTER TABLE items ALTER COLUMN title TYPE text", "INSERT INTO items(id, title, qty, price) VALUES (13, 'new', 700, 1)"),
        ("ALTER TABLE items ALTER COLUMN price TYPE numeric(12,3)", "UPDATE items SET price = 12345.678 WHERE id = 12"),
        ("ALTER TABLE items ADD COLUMN later text NOT NULL DEFAULT 'x'", "DELETE FROM items WHERE id = 13"),
    ]

    /// Waits until the node's schema of `items` has (or has not) `column`: the change was
    /// detected.
    static func waitForSchema(_ node: TestNode, column: String, present: Bool) async throws {
        try await Wait.until("the node to see column \(column) \(present ? "added to" : "dropped from") items") {
            let schema = await node.server.schema(of: "items")
            return schema?.columns.contains { $0.name == column } == present
        }
    }

    /// Reads frames until `rows` equals Postgres's rows of `sql`, failing on a snapshot for `id`.
    static func readUntilEqual(_ rows: inout ClientRows, id: String, socket: TestSocket, postgres: ThrowawayPostgres,
                               sql: String, what: String) async throws {
        let expected = try await postgres.rows(sql)
        while rows.rows.map(psqlText) != expected {
            let message = try #require(try await socket.nextSkippingHeartbeats(what: what))
            if case .changes(_, let snapshots, let changesets) = message {
                #expect(snapshots[id] == nil, "no snapshot for \(id) after \(what)")
                // A row whose columns did not change (a default filled in, a widened type) is
                // no update.
                for update in changesets[id]?.updates ?? [] {
                    #expect(!update.columns.isEmpty, "an update of no column for \(id) after \(what)")
                }
            }
            if case .error(let code, let text, let errorID) = message { Issue.record("\(code) for \(errorID ?? "-"): \(text) after \(what)") }
            _ = try rows.take(message, id: id)
        }
    }

    /// A live subscription naming its columns gets changesets only, through every compatible
    /// change, its rows equal to Postgres's; a client resuming with a position from before them
    /// all gets one changeset that brings its rows to Postgres's.
    @Test func aSubscriptionNamingItsColumnsKeepsChangesetsLiveAndOnResume() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory) { node in
                var before = ClientRows()
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "named", query: Self.named, resume: nil))
                    try await before.readFirstResult(from: socket, id: "named")
                }
                #expect(before.rows.map(psqlText) == (try await postgres.rows(Self.namedSQL)))
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "named", query: Self.named, resume: nil))
                    var live = ClientRows()
                    try await live.readFirstResult(from: socket, id: "named")
                    let types = try #require(try await Self.snapshotTypes(node))
                    for (ddl, write) in Self.compatibleChanges {
                        try await postgres.psql(ddl)
                        if let write {
                            try await postgres.psql(write)
                            try await Self.readUntilEqual(&live, id: "named", socket: socket, postgres: postgres, sql: Self.namedSQL,
                                                          what: ddl)
                        } else if let added = ddl.split(separator: " ").dropFirst(5).first {
                            // No later write: the change arrives once detected.
                            try await Self.waitForSchema(node, column: String(added), present: true)
                        }
                    }
                    #expect(live.rows.map(psqlText) == (try await postgres.rows(Self.namedSQL)))
                    #expect(live.columns == ["id", "title", "qty", "price"])
                    // A subscription made now has the new types; the live one kept its own.
                    #expect(types == ["int8", "varchar", "int4", "numeric"])
                    #expect(try await Self.snapshotTypes(node) == ["int8", "text", "int8", "numeric"])
                }
                // A client from before every change resumes: one changeset, no snapshot.
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "named", query: Self.named,
                                                     resume: ResumePoint(basis: before.basis, lsn: before.lsn)))
                    var resumed = before
                    var answered = false
                    while !answered {
                        let message = try #require(try await socket.nextSkippingHeartbeats(what: "the resume's first frame"))
                        if case .changes(_, let snapshots, let changesets) = message {
                            #expect(snapshots["named"] == nil, "a resume across the changes is a changeset")
                            answered = snapshots["named"] != nil || changesets["named"] != nil
                        }
                        _ = try resumed.take(message, id: "named")
                    }
                    #expect(resumed.rows.map(psqlText) == (try await postgres.rows(Self.namedSQL)))
                }
            }
        }
    }

    /// The wire types a fresh subscription to ``named`` gets.
    static func snapshotTypes(_ node: TestNode) async throws -> [String]? {
        try await withSocket(node.url) { socket in
            _ = try await socket.hello(try node.token("alice"))
            try await socket.send(.subscribe(id: "fresh", query: Self.named, resume: nil))
            while let message = try await socket.nextSkippingHeartbeats(what: "a fresh snapshot") {
                if case .changes(_, let snapshots, _) = message, let snapshot = snapshots["fresh"] { return snapshot.types }
            }
            return nil
        }
    }

    /// Subscriptions naming a column that is dropped — selected, or compared in the filter —
    /// end with `column_dropped`, naming the column and the table; a sibling on the socket that
    /// does not name it goes on with changesets.
    @Test func aSubscriptionNamingADroppedColumnEndsWithATypedError() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    let priced = QueryDescription(table: "items", filter: .compare(column: "price", op: .greater, value: .integer(3)),
                                                  columns: ["id", "title"])
                    let titled = QueryDescription(table: "items", order: [OrderDescription(column: "id")], columns: ["id", "title"])
                    try await socket.send(.subscribe(id: "priced", query: priced, resume: nil))
                    try await socket.send(.subscribe(id: "named", query: Self.named, resume: nil))
                    try await socket.send(.subscribe(id: "titles", query: titled, resume: nil))
                    var titles = ClientRows()
                    var first: Set<String> = []
                    while first.count < 3 {
                        let message = try #require(try await socket.nextSkippingHeartbeats(what: "the first results"))
                        if case .changes(_, let snapshots, _) = message { first.formUnion(snapshots.keys) }
                        _ = try titles.take(message, id: "titles")
                    }
                    try await postgres.psql("ALTER TABLE items DROP COLUMN price")
                    var ended: [String: (code: SyncErrorCode, text: String)] = [:]
                    while ended.count < 2, let message = try await socket.nextSkippingHeartbeats(what: "the ends of the subscriptions") {
                        if case .error(let code, let text, let id?) = message { ended[id] = (code, text) }
                        if case .changes(_, let snapshots, _) = message { #expect(snapshots.isEmpty, "no snapshot after the drop") }
                        _ = try titles.take(message, id: "titles")
                    }
                    #expect(Set(ended.keys) == ["priced", "named"])
                    for (id, end) in ended {
                        #expect(end.code == .columnDropped, "\(id)")
                        #expect(end.text.contains("column price of items was dropped"), "\(id): \(end.text)")
                    }
                    try await postgres.psql("UPDATE items SET title = 'still synced' WHERE id = 1")
                    try await Self.readUntilEqual(&titles, id: "titles", socket: socket, postgres: postgres,
                                                  sql: "SELECT id, title FROM items ORDER BY id", what: "a write after the drop")
                }
            }
        }
    }

    /// A subscription with no column list follows the table: a widened type leaves it going;
    /// an added column ends it with `subscription_ended`, and a resume from before the change
    /// gets a snapshot with the new columns (its compiled query changed).
    @Test func aSubscriptionOfEveryColumnFollowsTheTable() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory) { node in
                let every = QueryDescription(table: "items", order: [OrderDescription(column: "id")])
                let everySQL = "SELECT id, owner, title, qty, price FROM items ORDER BY id"
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    try await socket.send(.subscribe(id: "every", query: every, resume: nil))
                    var rows = ClientRows()
                    try await rows.readFirstResult(from: socket, id: "every")
                    let before = rows
                    try await postgres.psql("ALTER TABLE items ALTER COLUMN qty TYPE int8")
                    try await postgres.psql("UPDATE items SET qty = 1 WHERE id = 1")
                    try await Self.readUntilEqual(&rows, id: "every", socket: socket, postgres: postgres, sql: everySQL,
                                                  what: "a widened type")
                    try await postgres.psql("ALTER TABLE items ADD COLUMN note text NOT NULL DEFAULT 'n'")
                    var ended: SyncErrorCode?
                    while ended == nil, let message = try await socket.nextSkippingHeartbeats(what: "the end of every") {
                        if case .error(let code, _, "every") = message { ended = code }
                    }
                    #expect(ended == .subscriptionEnded)
                    try await socket.send(.subscribe(id: "again", query: every, resume: ResumePoint(basis: before.basis, lsn: before.lsn)))
                    var again = before
                    var snapshot = false
                    while !snapshot, let message = try await socket.nextSkippingHeartbeats(what: "the resume's first frame") {
                        if case .changes(_, let snapshots, let changesets) = message {
                            #expect(changesets["again"] == nil, "a resume of every column across an added column is a snapshot")
                            snapshot = snapshots["again"] != nil
                        }
                        _ = try again.take(message, id: "again")
                    }
                    #expect(again.columns == ["id", "owner", "title", "qty", "price", "note"])
                    #expect(again.rows.map(psqlText) == (try await postgres.rows("SELECT id, owner, title, qty, price, note FROM items ORDER BY id")))
                }
            }
        }
    }

    /// A subscription of every column ends once the replica's table has an added column: a
    /// client that subscribes again the moment it hears the end (here, in the same instant,
    /// over ten added columns and a dropped one) gets a snapshot with the table's columns
    /// as they are now — never `invalid_query`, the replica asked for a column it does not
    /// have yet. (The table is large enough that the replica's commit of each change takes a
    /// while: a subscription compiled for the new columns before that commit would fail.)
    @Test func subscribingAgainAtOnceAfterAColumnChangeGetsTheNewColumns() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE todos(id int8 PRIMARY KEY, title text NOT NULL, rank int4 NOT NULL);
                INSERT INTO todos SELECT n, 'todo ' || n, n FROM generate_series(1, 5000) AS n;
                """)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos"], rules: #"{"tables": {"todos": {"read": true}}}"#,
                                    directory: directory) { node in
                try await withSocket(node.url) { socket in
                    _ = try await socket.hello(try node.token("alice"))
                    let every = QueryDescription(table: "todos", order: [OrderDescription(column: "rank")], limit: 20)
                    var columns = ["id", "title", "rank"]
                    var id = "every0"
                    try await socket.send(.subscribe(id: id, query: every, resume: nil))
                    var first = ClientRows()
                    try await first.readFirstResult(from: socket, id: id)
                    #expect(first.columns == columns)
                    let changes = (1...10).map { ("ALTER TABLE todos ADD COLUMN tag\($0) text DEFAULT 'x'", "tag\($0)", true) }
                        + [("ALTER TABLE todos DROP COLUMN tag3", "tag3", false)]
                    for (round, (ddl, column, added)) in changes.enumerated() {
                        try await postgres.psql(ddl)
                        columns = added ? columns + [column] : columns.filter { $0 != column }
                        var ended = false
                        while !ended, let message = try await socket.nextSkippingHeartbeats(what: "the end of \(id) after \(ddl)") {
                            if case .error(let code, let text, let errorID?) = message, errorID == id {
                                #expect(code == .subscriptionEnded, "\(id) after \(ddl): \(text)")
                                ended = true
                            }
                        }
                        // At once, as a quick client (or another one subscribing just then) does.
                        id = "every\(round + 1)"
                        try await socket.send(.subscribe(id: id, query: every, resume: nil))
                        var again = ClientRows()
                        while again.columns.isEmpty, let message = try await socket.nextSkippingHeartbeats(what: "\(id)'s snapshot") {
                            if case .error(let code, let text, let errorID?) = message, errorID == id {
                                Issue.record("\(code.rawValue) for \(id) after \(ddl): \(text)")
                                return
                            }
                            _ = try again.take(message, id: id)
                        }
                        #expect(again.columns == columns, "after \(ddl)")
                        #expect(again.rows.count == 20 && again.rows.allSatisfy { $0.count == columns.count }, "after \(ddl)")
                    }
                }
            }
        }
    }

    /// The events a hub subscriber received.
    final class Events: @unchecked Sendable {   // `kinds` is guarded by `lock`
        private let lock = NSLock()
        private var kinds: [SubscriptionEvent.Kind] = []
        func append(_ event: SubscriptionEvent) { lock.withLock { kinds.append(event.kind) } }
        var all: [SubscriptionEvent.Kind] { lock.withLock { kinds } }
    }

    /// A subscription compiled for a table's schema from before a change the hub followed (its
    /// schema read just before the change was found, its subscribe just after the subscriptions
    /// over the table were told) ends at once as those did — every column after an added one,
    /// a dropped column it names, a table made again — and makes no live query; one that fits
    /// the replica's table goes on.
    @Test func aSubscriptionCompiledBeforeAFollowedChangeEndsAsTheOthersDid() async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(path: directory.path("replica.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE todos(id INTEGER PRIMARY KEY, title TEXT)")
            try db.execute("INSERT INTO todos VALUES (1, 'a'), (2, 'b')")
        }
        let hub = SubscriptionHub(store: store, rules: try SyncRules(json: Data(#"{"tables": {"todos": {"read": true}}}"#.utf8)))
        func schema(_ columns: [String]) -> SyncedTableSchema {
            SyncedTableSchema(name: "todos", columns: columns.map { .init(name: $0, typeOID: $0 == "id" ? PostgresTypes.OID.int8 : PostgresTypes.OID.text) },
                              key: [0])
        }
        let every = QueryDescription(table: "todos")
        let titles = QueryDescription(table: "todos", columns: ["id", "title"])
        let ids = QueryDescription(table: "todos", columns: ["id"])
        func first(_ query: QueryDescription, over columns: [String]) throws -> SubscriptionEvent.Kind? {
            let (compiled, basis) = try hub.compile(query, user: "alice", schema: schema(columns))
            let events = Events()
            let token = hub.subscribe(compiled, basis: basis, schema: schema(columns)) { events.append($0) }
            defer { token.cancel() }
            return events.all.first
        }
        func endCode(_ kind: SubscriptionEvent.Kind?) -> SyncErrorCode? {
            if case .ended(_, let code)? = kind { return code }
            return nil
        }
        // Column tag added (the replica's commit under way).
        hub.followSchemaChange(ReplicaSchemaChange(table: "todos", kind: .inPlace(addedColumns: ["tag"], droppedColumns: []),
                                                   schema: schema(["id", "title", "tag"])))
        #expect(endCode(try first(every, over: ["id", "title"])) == .subscriptionEnded)
        #expect(endCode(try first(titles, over: ["id", "title"])) == nil)
        #expect(hub.liveQueryCount == 0)
        try store.write { db in try db.execute("ALTER TABLE todos ADD COLUMN tag TEXT") }
        let (compiled, basis) = try hub.compile(every, user: "alice", schema: schema(["id", "title", "tag"]))
        let events = Events()
        let token = hub.subscribe(compiled, basis: basis, schema: schema(["id", "title", "tag"])) { events.append($0) }
        defer { token.cancel() }
        try await Wait.until("the snapshot of every column") { !events.all.isEmpty }
        guard case .snapshot(let snapshot)? = events.all.first else { Issue.record("no snapshot: \(events.all)"); return }
        #expect(snapshot.columns == ["id", "title", "tag"])
        // Column title dropped.
        hub.followSchemaChange(ReplicaSchemaChange(table: "todos", kind: .inPlace(addedColumns: [], droppedColumns: ["title"]),
                                                   schema: schema(["id", "tag"])))
        #expect(endCode(try first(titles, over: ["id", "title", "tag"])) == .columnDropped)
        #expect(endCode(try first(every, over: ["id", "title", "tag"])) == .subscriptionEnded)
        #expect(endCode(try first(ids, over: ["id", "title", "tag"])) == nil)
        // The table made again (a type the replica keeps another way).
        hub.followSchemaChange(ReplicaSchemaChange(table: "todos", kind: .remade, schema: schema(["id", "tag"])))
        #expect(endCode(try first(ids, over: ["id", "tag"])) == nil, "compiled for the schema it has now")
        var older = schema(["id", "tag"])
        older.columns[1].typeOID = PostgresTypes.OID.int8
        let (oldCompiled, oldBasis) = try hub.compile(ids, user: "alice", schema: older)
        let ended = Events()
        let oldToken = hub.subscribe(oldCompiled, basis: oldBasis, schema: older) { ended.append($0) }
        defer { oldToken.cancel() }
        #expect(endCode(ended.all.first) == .subscriptionEnded)
    }

    /// A node started again after a column was added while it was away — without event
    /// triggers; written since, or not — follows it (where the slot replays the write, or by its
    /// catalog check) instead of describing the table as Postgres has it now while its replica's
    /// table has the old columns: it starts, and a subscription of every column gets them all,
    /// its rows equal to Postgres's.
    @Test func columnsAddedWhileTheNodeWasAwayAreFollowed() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory) { node in
                try await node.untilReady()
            }
            let every = QueryDescription(table: "items", order: [OrderDescription(column: "id")])
            var columns = ["id", "owner", "title", "qty", "price"]
            for (ddl, column) in [("ALTER TABLE items ADD COLUMN note text NOT NULL DEFAULT 'n'; "
                                   + "INSERT INTO items(id, title, qty, note) VALUES (20, 'while away', 1, 'm')", "note"),
                                  ("ALTER TABLE items ADD COLUMN tag text", "tag")] {
                try await postgres.dropEventTriggers()
                try await postgres.psql(ddl)
                columns.append(column)
                try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory,
                                        adjust: { $0.catalogCheckInterval = .milliseconds(200) }) { node in
                    try await node.untilReady()
                    try await Self.waitForSchema(node, column: column, present: true)
                    try await withSocket(node.url) { socket in
                        _ = try await socket.hello(try node.token("alice"))
                        try await socket.send(.subscribe(id: "every", query: every, resume: nil))
                        var rows = ClientRows()
                        while rows.columns.isEmpty, let message = try await socket.nextSkippingHeartbeats(what: "every's snapshot") {
                            if case .error(let code, let text, _) = message {
                                Issue.record("\(code.rawValue) after \(ddl): \(text)")
                                return
                            }
                            _ = try rows.take(message, id: "every")
                        }
                        #expect(rows.columns == columns, "after \(ddl)")
                        #expect(rows.rows.map(psqlText) == (try await postgres.rows(
                            "SELECT \(columns.joined(separator: ", ")) FROM items ORDER BY id")), "after \(ddl)")
                    }
                }
            }
        }
    }

    /// An old client's put without a column added since its build keeps writing, the column's
    /// default applying; its patch of old columns leaves the new one alone; a push naming a
    /// dropped column is rejected, that mutation alone, naming the column.
    @Test func anOldClientsPushesKeepWriting() async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["items"], rules: Self.rules, directory: directory) { node in
                let socket = try await TestSocket(url: node.url)
                defer { socket.close() }
                _ = try await socket.hello(try node.token("alice"), client: "")
                let first = try await socket.push([
                    Mutation(id: 1, ops: [MutationOp(.put, table: "items", values: ["id": .integer(20), "owner": .text("a"),
                                                                                    "title": .text("before"), "qty": .integer(1),
                                                                                    "price": .text("2.50")])]),
                ])
                #expect(first.map(\.status) == [.applied])
                try await postgres.psql("ALTER TABLE items ADD COLUMN flag text NOT NULL DEFAULT 'fresh'; ALTER TABLE items DROP COLUMN owner")
                // The node has applied the change once it has the write after it.
                try await postgres.psql("UPDATE items SET flag = 'set' WHERE id = 20")
                try await Wait.until("the node to apply the write after the schema change") {
                    // (Before the change reaches the replica, it has no column flag.)
                    let flag = try? await node.server.store.asyncRead { db in
                        try db.fetchValue("SELECT flag FROM items WHERE id = 20", as: String.self)
                    }
                    return flag == "set"
                }
                let results = try await socket.push([
                    // The old app's whole row: no flag (added since), owner (dropped since) left out.
                    Mutation(id: 2, ops: [MutationOp(.put, table: "items", values: ["id": .integer(21), "title": .text("old app"),
                                                                                    "qty": .integer(2), "price": .text("1.00")])]),
                    Mutation(id: 3, ops: [MutationOp(.patch, table: "items", values: ["id": .integer(20), "title": .text("patched")])]),
                    // Naming the dropped column: that mutation alone is rejected.
                    Mutation(id: 4, ops: [MutationOp(.patch, table: "items", values: ["id": .integer(20), "owner": .text("b")])]),
                    Mutation(id: 5, ops: [MutationOp(.put, table: "items", values: ["id": .integer(20), "title": .text("put again"),
                                                                                    "qty": .integer(3), "price": .text("1.00")])]),
                ])
                #expect(results.map(\.status) == [.applied, .applied, .rejected, .applied])
                #expect(results[2].code == "column_dropped")
                #expect(results[2].message?.contains("owner") == true, "\(results[2].message ?? "")")
                #expect(try await postgres.rows("SELECT id, title, qty, flag FROM items WHERE id >= 20 ORDER BY id")
                        == ["20|put again|3|set", "21|old app|2|fresh"])
            }
        }
    }
}
#endif
