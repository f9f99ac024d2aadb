import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Routed live queries with sub-queries (``RowDependency``) on a real store: a query of a user's
/// todos, those they own and those of the projects they are a member of, is told of a commit to
/// `members` only when it changes a membership of that user — granted, revoked, or moved to or
/// from them — and then runs again; every event's snapshot is the query read afresh at its
/// version, and its changeset applies (each subscriber is a ``ListViewSubscriber``).
@Suite struct DependencyRoutingTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("relations.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE todos (id INTEGER PRIMARY KEY, owner TEXT, project_id INTEGER, title TEXT)")
            try db.execute("CREATE TABLE members (id INTEGER PRIMARY KEY, project_id INTEGER, user_id TEXT)")
            try db.execute("CREATE INDEX members_by_user ON members (user_id)")
        }
    }

    static let select = "SELECT id, owner, project_id, title FROM todos"

    /// The two forms a membership rule compiles to.
    enum Form: CaseIterable {
        /// `project_id IN (SELECT project_id FROM members WHERE user_id = ?)`
        case inSubquery
        /// A correlated `EXISTS`, whose dependency condition is only its uncorrelated part.
        case exists
    }

    /// A user's todos (owned, or of a project they are a member of) and how to route commits to it.
    struct MembershipQuery {
        let sql: String
        let arguments: [SQLValue]
        let routing: RowRouting

        init(user: String, form: Form) {
            let condition = switch form {
            case .inSubquery: "owner = ? OR project_id IN (SELECT project_id FROM members WHERE user_id = ?)"
            case .exists: "owner = ? OR EXISTS (SELECT 1 FROM members WHERE members.project_id = todos.project_id AND members.user_id = ?)"
            }
            arguments = [.text(user), .text(user)]
            sql = DependencyRoutingTests.select + " WHERE (" + condition + ") ORDER BY id"
            // The primary table's term with a sub-query is approximated by every row (filter nil).
            routing = RowRouting(table: "todos", keyColumn: "id", filterSQL: condition, filterArguments: arguments, filter: nil,
                                 orderColumns: [0], isWindowed: false, selectSQL: DependencyRoutingTests.select,
                                 dependencies: [RowDependency(table: "members", filterSQL: "user_id = ?",
                                                              filterArguments: [.text(user)], filter: Column("user_id") == user)])
        }
    }

    /// A subscribed membership query.
    struct Observed {
        let user: String
        let query: MembershipQuery
        let subscriber: ListViewSubscriber<Row>
        let subscription: Subscription
    }

    func observe(_ user: String, _ form: Form = .inSubquery) -> Observed {
        let query = MembershipQuery(user: user, form: form)
        let subscriber = ListViewSubscriber<Row>()
        let live = store.liveQuery(sql: query.sql, arguments: query.arguments, identity: "id", routing: query.routing)
        return Observed(user: user, query: query, subscriber: subscriber, subscription: subscriber.subscribe(to: live))
    }

    func fresh(_ observed: Observed) throws -> [Row] {
        try store.read { db in try db.fetchAll(observed.query.sql, observed.query.arguments) }
    }

    var skips: Int { store.observation.skipCount }
    var refreshes: Int { store.observation.diagnostics.withLock { $0.refreshes } }

    /// Every observer's last event is the query read afresh now, and each list applied every changeset.
    func expectCurrent(_ observers: [Observed], _ context: String = "",
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        for observed in observers {
            let expected = try fresh(observed)
            #expect(observed.subscriber.items == expected, "\(observed.user) \(context)", sourceLocation: sourceLocation)
            #expect(observed.subscriber.events.last?.snapshot == expected, "\(observed.user) \(context)",
                    sourceLocation: sourceLocation)
            #expect(observed.subscriber.failures.isEmpty, "\(observed.user) \(context): \(observed.subscriber.failures)",
                    sourceLocation: sourceLocation)
        }
    }

    func seedTodos() throws {
        try store.write { db in
            for id in 1...12 {
                try db.execute("INSERT INTO todos VALUES (?, ?, ?, ?)", [id, "owner\(id % 3)", id % 4, "todo \(id)"])
            }
        }
    }

    @Test func aMembershipChangeWakesOnlyItsUsersObservers() throws {
        try seedTodos()
        let users = (0..<6).map { "user\($0)" }
        var observers = users.map { observe($0) }
        observers.append(observe("user0", .exists))
        defer { for observed in observers { observed.subscription.cancel() } }
        let others = observers.count - 2

        // Granted: only user0's two observers run again, and show the project's todos.
        var (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("INSERT INTO members VALUES (1, 1, 'user0')") }
        #expect(skips - skipped == others)
        #expect(refreshes - refreshed == 2)
        let granted = try store.currentVersion()
        for observed in observers where observed.user == "user0" {
            #expect(observed.subscriber.version == granted)
            #expect(observed.subscriber.items.contains { $0.values[2] == .integer(1) })
        }
        try expectCurrent(observers, "granted")

        // Moved to another project (an update of the selected row).
        (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("UPDATE members SET project_id = 2 WHERE id = 1") }
        #expect(skips - skipped == others)
        #expect(refreshes - refreshed == 2)
        try expectCurrent(observers, "moved to project 2")

        // Another user's membership: user0's observers are not told.
        (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("INSERT INTO members VALUES (2, 3, 'user4')") }
        #expect(skips - skipped == observers.count - 1)
        #expect(refreshes - refreshed == 1)
        try expectCurrent(observers, "user4 granted")

        // Revoked (the row deleted: gone when the commit's filters are evaluated, held by the router).
        (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("DELETE FROM members WHERE id = 1") }
        #expect(skips - skipped == others)
        #expect(refreshes - refreshed == 2)
        for observed in observers where observed.user == "user0" {
            #expect(observed.subscriber.version == (try store.currentVersion()))
            #expect(!observed.subscriber.items.contains { $0.values[2] == .integer(2) && $0.values[1] != .text("user0") })
        }
        try expectCurrent(observers, "revoked")
        #expect(store.observation.routingInvariantViolations.isEmpty)
    }

    @Test func grantingRevokingAndMovingAMembershipEachGiveOneEventAtTheCommitsVersion() throws {
        try seedTodos()
        let alice = observe("alice")
        let aliceExists = observe("alice", .exists)
        let bob = observe("bob")
        let observers = [alice, aliceExists, bob]
        defer { for observed in observers { observed.subscription.cancel() } }
        #expect(alice.subscriber.items.isEmpty && bob.subscriber.items.isEmpty)

        func projectTodos(_ project: Int64) throws -> [Row] {
            try store.read { db in try db.fetchAll(Self.select + " WHERE project_id = ? ORDER BY id", [project]) }
        }

        // Granted.
        try store.write { db in try db.execute("INSERT INTO members VALUES (1, 1, 'alice')") }
        var version = try store.currentVersion()
        for observed in [alice, aliceExists] {
            #expect(observed.subscriber.events.count == 2)
            #expect(observed.subscriber.version == version)
            #expect(observed.subscriber.items == (try projectTodos(1)))
            #expect(observed.subscriber.events.last?.changeset.inserts.count == 3)
        }
        #expect(bob.subscriber.events.count == 1)

        // Moved to bob (the selected row's user_id changed): alice loses, bob gains, one event each.
        try store.write { db in try db.execute("UPDATE members SET user_id = 'bob' WHERE id = 1") }
        version = try store.currentVersion()
        for observed in [alice, aliceExists] {
            #expect(observed.subscriber.events.count == 3)
            #expect(observed.subscriber.version == version)
            #expect(observed.subscriber.items.isEmpty)
        }
        #expect(bob.subscriber.events.count == 2)
        #expect(bob.subscriber.version == version)
        #expect(bob.subscriber.items == (try projectTodos(1)))

        // Revoked.
        try store.write { db in try db.execute("DELETE FROM members WHERE id = 1") }
        version = try store.currentVersion()
        #expect(bob.subscriber.events.count == 3)
        #expect(bob.subscriber.version == version)
        #expect(bob.subscriber.items.isEmpty)
        #expect(alice.subscriber.events.count == 3)

        // Granted with a new todo of the project, in one transaction: one event with both.
        try store.write { db in
            try db.execute("INSERT INTO members VALUES (2, 2, 'alice')")
            try db.execute("INSERT INTO todos VALUES (100, 'carol', 2, 'new in project 2')")
        }
        version = try store.currentVersion()
        for observed in [alice, aliceExists] {
            #expect(observed.subscriber.events.count == 4)
            #expect(observed.subscriber.version == version)
            #expect(observed.subscriber.items == (try projectTodos(2)))
            #expect(observed.subscriber.items.contains { $0.values[0] == .integer(100) })
        }
        #expect(bob.subscriber.events.count == 3)
        try expectCurrent(observers)
    }

    /// The race the held keys must survive: a read sees a membership granted at version V, and
    /// before its observer becomes idle another thread revokes it (V + 1, routed while the
    /// store does not hold that row for the observer yet, and matching no filter: the row is
    /// gone). Becoming idle, the observer learns of it and runs again: it ends without the project.
    @Test func aMembershipRevokedWhileItsGrantIsReadStillReachesTheObserver() throws {
        try seedTodos()
        let alice = observe("alice")
        defer { alice.subscription.cancel() }
        let armed = Locked(false)
        let store = self.store
        store.observation.readFault.withLock {
            $0 = {
                guard armed.withLock({ armed in defer { armed = false }; return armed }) else { return }
                let revoked = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    do { try store.write { db in try db.execute("DELETE FROM members WHERE id = 1") } } catch { Issue.record(error) }
                    revoked.signal()
                }
                try Wait.for(revoked, "another thread to revoke the membership during the read")
            }
        }
        defer { store.observation.readFault.withLock { $0 = nil } }
        armed.withLock { $0 = true }
        try store.write { db in try db.execute("INSERT INTO members VALUES (1, 1, 'alice')") }
        #expect(!armed.withLock { $0 }, "the read under way did not run the revocation")
        let revokedAt = try store.currentVersion()
        #expect(alice.subscriber.waitFor(version: revokedAt))
        #expect(alice.subscriber.items.isEmpty)
        #expect(alice.subscriber.events.count == 3, "initial, granted, revoked")
        try expectCurrent([alice])
    }

    /// A schema change to a dependency's table, and a write to it made without Ripple (another
    /// process: which rows it changed is unknown), still reach the observer, which then shows its
    /// query (the dependency's table is among the tables it knows it reads).
    @Test func aSchemaChangeAndAForeignWriteToADependencyReachTheObserver() throws {
        try seedTodos()
        let alice = observe("alice")
        let bob = observe("bob")
        defer { for observed in [alice, bob] { observed.subscription.cancel() } }
        try store.write { db in try db.execute("INSERT INTO members VALUES (1, 1, 'alice')") }
        try store.write { db in try db.execute("ALTER TABLE members ADD COLUMN role TEXT") }
        try expectCurrent([alice, bob], "after the schema change")
        // Routed row by row again after it: revoked, then bob's grant tells only bob's.
        try store.write { db in try db.execute("DELETE FROM members WHERE id = 1") }
        #expect(alice.subscriber.items.isEmpty)
        let skipped = skips
        try store.write { db in try db.execute("INSERT INTO members VALUES (2, 2, 'bob', 'owner')") }
        #expect(skips - skipped == 1)
        try expectCurrent([alice, bob], "after the schema change, routed")
        // Another process grants alice a membership.
        let (status, errors) = try SQLiteShell.run("INSERT INTO members VALUES (3, 3, 'alice', NULL)",
                                                   on: directory.path("relations.sqlite"))
        #expect(status == 0, "\(errors)")
        try store.noticeExternalWrites()
        #expect(!alice.subscriber.items.isEmpty)
        try expectCurrent([alice, bob], "after a foreign write")
        #expect(store.observation.routingInvariantViolations.isEmpty)
    }

    /// A composite key (`PRIMARY KEY (project_id, user_id)`, as a replica of Postgres has it):
    /// the store names its rows as the change log does, and a revoked membership still tells.
    @Test func aDependencyTableWithACompositeKeyIsRoutedRowByRow() throws {
        try store.write { db in
            try db.execute("CREATE TABLE shares (project_id INTEGER, user_id TEXT, PRIMARY KEY (project_id, user_id))")
        }
        try seedTodos()
        func observeShares(_ user: String) -> Observed {
            let condition = "project_id IN (SELECT project_id FROM shares WHERE user_id = ?)"
            let routing = RowRouting(table: "todos", keyColumn: "id", filterSQL: condition, filterArguments: [.text(user)],
                                     filter: nil, orderColumns: [0], isWindowed: false, selectSQL: Self.select,
                                     dependencies: [RowDependency(table: "shares", filterSQL: "user_id = ?",
                                                                  filterArguments: [.text(user)], filter: Column("user_id") == user)])
            let shared = MembershipQuery(sql: Self.select + " WHERE (" + condition + ") ORDER BY id", arguments: [.text(user)],
                                         routing: routing)
            let subscriber = ListViewSubscriber<Row>()
            let live = store.liveQuery(sql: shared.sql, arguments: shared.arguments, identity: "id", routing: routing)
            return Observed(user: user, query: shared, subscriber: subscriber, subscription: subscriber.subscribe(to: live))
        }
        let observers = ["alice", "bob", "carol"].map(observeShares)
        defer { for observed in observers { observed.subscription.cancel() } }
        var skipped = skips
        try store.write { db in try db.execute("INSERT INTO shares VALUES (1, 'alice')") }
        #expect(skips - skipped == 2)
        try expectCurrent(observers, "granted")
        #expect(!observers[0].subscriber.items.isEmpty)
        skipped = skips
        try store.write { db in try db.execute("DELETE FROM shares WHERE project_id = 1 AND user_id = 'alice'") }
        #expect(skips - skipped == 2)
        #expect(observers[0].subscriber.items.isEmpty)
        try expectCurrent(observers, "revoked")
    }

    /// Seeded random commits over todos and members; after each, every observer shows its query
    /// read afresh, and a commit that changes only other users' memberships tells none of a
    /// user's observers (the skips grow by exactly those).
    @Test(arguments: 1...8)
    func randomCommitsKeepEveryObserverEqualToItsQuery(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let users = ["u0", "u1", "u2", "u3"]
        try store.write { db in
            for id in 1...10 {
                try db.execute("INSERT INTO todos VALUES (?, ?, ?, ?)",
                               [id, users.randomElement(using: &random)!, Int.random(in: 0..<4, using: &random), "t\(id)"])
            }
            for id in 1...6 {
                try db.execute("INSERT INTO members VALUES (?, ?, ?)",
                               [id, Int.random(in: 0..<4, using: &random), users.randomElement(using: &random)!])
            }
        }
        var observers: [Observed] = []
        for user in users {
            observers.append(observe(user, .inSubquery))
            observers.append(observe(user, .exists))
        }
        defer { for observed in observers { observed.subscription.cancel() } }
        try expectCurrent(observers, "initial")
        var nextID = 100
        for step in 0..<60 {
            // The members rows' users before the commit (the router's "before").
            let before = try store.read { db in
                try db.fetchAll("SELECT id, user_id FROM members").reduce(into: [Int64: String]()) {
                    if case .integer(let id) = $1.values[0], case .text(let user) = $1.values[1] { $0[id] = user }
                }
            }
            var touchedUsers: Set<String> = []
            var touchesTodos = false
            var changedMembers: Set<Int64> = []
            let statements = Int.random(in: 1...3, using: &random)
            let (skipped, _) = (skips, refreshes)
            try store.write { db in
                for _ in 0..<statements {
                    nextID += 1
                    let user = users.randomElement(using: &random)!
                    let project = Int.random(in: 0..<4, using: &random)
                    let memberIDs = Array(before.keys).sorted()
                    switch Int.random(in: 0..<9, using: &random) {
                    case 0:
                        touchesTodos = true
                        try db.execute("INSERT INTO todos VALUES (?, ?, ?, ?)", [nextID, user, project, "t\(nextID)"])
                    case 1:
                        touchesTodos = true
                        try db.execute("DELETE FROM todos WHERE id = (SELECT id FROM todos ORDER BY random() LIMIT 1)")
                    case 2:
                        touchesTodos = true
                        try db.execute("UPDATE todos SET project_id = ?, title = title || '.' WHERE id = ?",
                                       [project, Int.random(in: 1...nextID, using: &random)])
                    case 3:
                        touchesTodos = true
                        try db.execute("UPDATE todos SET owner = ? WHERE id = ?", [user, Int.random(in: 1...nextID, using: &random)])
                    case 4, 5:
                        try db.execute("INSERT INTO members VALUES (?, ?, ?)", [nextID, project, user])
                        touchedUsers.insert(user)
                        changedMembers.insert(Int64(nextID))
                    default:
                        guard let id = memberIDs.randomElement(using: &random) else { continue }
                        let current = try db.fetchAll("SELECT user_id FROM members WHERE id = ?", [id]).first?.values[0]
                        guard case .text(let owner)? = current else { continue }
                        touchedUsers.insert(owner)
                        changedMembers.insert(id)
                        switch Int.random(in: 0..<3, using: &random) {
                        case 0: try db.execute("DELETE FROM members WHERE id = ?", [id])
                        case 1: try db.execute("UPDATE members SET project_id = ? WHERE id = ?", [project, id])
                        default:
                            try db.execute("UPDATE members SET user_id = ? WHERE id = ?", [user, id])
                            touchedUsers.insert(user)
                        }
                    }
                }
            }
            for id in changedMembers { if let user = before[id] { touchedUsers.insert(user) } }
            try expectCurrent(observers, "seed \(seed) step \(step)")
            if !touchesTodos && !changedMembers.isEmpty {
                // Only the observers of the users whose rows changed (before or after) were told.
                let untouched = observers.filter { !touchedUsers.contains($0.user) }.count
                #expect(skips - skipped == untouched, "seed \(seed) step \(step): touched \(touchedUsers.sorted())")
            }
        }
        #expect(store.observation.routingInvariantViolations.isEmpty)
    }

    /// Writers on several threads change memberships and todos while observers delivered on
    /// queues read (a membership row selected by a read under way, changed before its observer
    /// becomes idle, must still tell it): at quiescence, every observer shows its query.
    @Test(arguments: 1...3)
    func concurrentCommitsLeaveEveryObserverEqualToItsQuery(seed: UInt64) throws {
        try seedTodos()
        let users = ["u0", "u1", "u2"]
        func observeOnQueue(_ user: String, _ form: Form) -> Observed {
            let query = MembershipQuery(user: user, form: form)
            let subscriber = ListViewSubscriber<Row>()
            let live = store.liveQuery(sql: query.sql, arguments: query.arguments, identity: "id", routing: query.routing)
            let queue = DispatchQueue(label: "dependency-routing.\(user)")
            return Observed(user: user, query: query, subscriber: subscriber,
                            subscription: subscriber.subscribe(to: live, on: .queue(queue)))
        }
        let observers = users.flatMap { [observeOnQueue($0, .inSubquery), observeOnQueue($0, .exists)] }
        defer { for observed in observers { observed.subscription.cancel() } }
        let writer = store
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            var random = SeededGenerator(seed: seed &* 31 &+ UInt64(worker))
            for step in 0..<40 {
                let id = worker * 1_000 + step % 6
                let user = users.randomElement(using: &random)!
                let project = Int.random(in: 0..<4, using: &random)
                do {
                    try writer.write { db in
                        switch Int.random(in: 0..<5, using: &random) {
                        case 0: try db.execute("INSERT OR REPLACE INTO members VALUES (?, ?, ?)", [id, project, user])
                        case 1: try db.execute("DELETE FROM members WHERE id = ?", [id])
                        case 2: try db.execute("UPDATE members SET user_id = ? WHERE id = ?", [user, id])
                        case 3: try db.execute("UPDATE members SET project_id = ? WHERE id = ?", [project, id])
                        default: try db.execute("UPDATE todos SET project_id = ? WHERE id = ?", [project, 1 + step % 12])
                        }
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker) step \(step): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        for observed in observers {
            let expected = try fresh(observed)
            #expect(observed.subscriber.waitFor(items: expected), "seed \(seed): \(observed.user) never showed its query")
            #expect(observed.subscriber.failures.isEmpty, "\(observed.subscriber.failures)")
        }
        #expect(store.observation.routingInvariantViolations.isEmpty)
    }

    /// The work of one user's membership change does not grow with the number of other users'
    /// membership-ruled queries: with 10 or 1,000 others, the commit tells exactly that user's
    /// observers (counted: the refreshes it starts, the observers skipped), and the filter
    /// index holds one filter per user.
    @Test(arguments: [10, 1_000])
    func oneUsersMembershipChangeTellsOnlyThatUserWhateverTheOthers(others: Int) throws {
        try seedTodos()
        var observers = [observe("alice"), observe("alice", .exists)]
        for index in 0..<others { observers.append(observe("other\(index)")) }
        defer { for observed in observers { observed.subscription.cancel() } }
        #expect(store.observation.filterGroups(of: "members") == others + 1)
        for (step, statement) in ["INSERT INTO members VALUES (1, 1, 'alice')", "UPDATE members SET project_id = 2 WHERE id = 1",
                                  "DELETE FROM members WHERE id = 1"].enumerated() {
            let (skipped, refreshed) = (skips, refreshes)
            try store.write { db in try db.execute(statement) }
            #expect(refreshes - refreshed == 2, "step \(step)")
            #expect(skips - skipped == others, "step \(step)")
            try expectCurrent(Array(observers.prefix(2)), "step \(step)")
        }
    }
}

extension DependencyRoutingTests.MembershipQuery {
    init(sql: String, arguments: [SQLValue], routing: RowRouting) {
        self.sql = sql
        self.arguments = arguments
        self.routing = routing
    }
}
