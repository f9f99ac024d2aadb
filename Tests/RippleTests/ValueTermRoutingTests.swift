import Foundation
@testable import Ripple
import RippleDiff
import RippleTesting
import Testing

/// Routed live queries whose condition takes values from a sub-query (``RowValueTerm``), on a
/// real store: a user's todos, those they own and those of the projects they are a member of,
/// are told of a commit to `todos` only when it changes a todo they own, one of their projects'
/// or one in their result — not of every commit to the table — and of a commit to `members`
/// only when it changes one of their memberships. Every event's snapshot is the query read
/// afresh at its version, and its changeset applies (each subscriber is a ``ListViewSubscriber``).
@Suite struct ValueTermRoutingTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("values.sqlite"))
        try store.write { db in
            try db.execute("CREATE TABLE todos (id INTEGER PRIMARY KEY, owner TEXT, project_id INTEGER, title TEXT)")
            try db.execute("CREATE TABLE members (id INTEGER PRIMARY KEY, project_id INTEGER, user_id TEXT)")
            try db.execute("CREATE INDEX members_by_user ON members (user_id)")
        }
    }

    static let select = "SELECT id, owner, project_id, title FROM todos"

    /// The two forms of a membership rule with a value term.
    enum Form: CaseIterable {
        /// `owner = ? OR project_id IN (SELECT project_id FROM members WHERE user_id = ?)`
        case ownedOrMember
        /// `project_id IN (SELECT project_id FROM members WHERE user_id = ?)`
        case member
    }

    /// A user's todos and how to route commits to it, its `project_id IN (…)` term indexed by
    /// the values its sub-query selects.
    struct MembershipQuery {
        let sql: String
        let arguments: [SQLValue]
        let routing: RowRouting

        init(user: String, form: Form) {
            let member = "project_id IN (SELECT project_id FROM members WHERE user_id = ?)"
            let condition: String
            let filter: Filter
            switch form {
            case .ownedOrMember:
                condition = "owner = ? OR " + member
                arguments = [.text(user), .text(user)]
                filter = Column("owner") == user
            case .member:
                condition = member
                arguments = [.text(user)]
                filter = .in(Column("project_id"), [])
            }
            sql = ValueTermRoutingTests.select + " WHERE (" + condition + ") ORDER BY id"
            routing = RowRouting(table: "todos", keyColumn: "id", filterSQL: condition, filterArguments: arguments, filter: filter,
                                 orderColumns: [0], isWindowed: false, selectSQL: ValueTermRoutingTests.select,
                                 dependencies: [RowDependency(table: "members", filterSQL: "user_id = ?",
                                                              filterArguments: [.text(user)], filter: Column("user_id") == user)],
                                 valueTerms: [RowValueTerm(column: "project_id", dependency: 0, selectedColumn: "project_id")])
        }
    }

    /// A subscribed membership query.
    struct Observed {
        let user: String
        let query: MembershipQuery
        let subscriber: ListViewSubscriber<Row>
        let subscription: Subscription
    }

    func observe(_ user: String, _ form: Form = .ownedOrMember) -> Observed {
        let query = MembershipQuery(user: user, form: form)
        let subscriber = ListViewSubscriber<Row>()
        let live = store.liveQuery(sql: query.sql, arguments: query.arguments, identity: "id", routing: query.routing)
        return Observed(user: user, query: query, subscriber: subscriber, subscription: subscriber.subscribe(to: live))
    }

    var skips: Int { store.observation.skipCount }
    var refreshes: Int { store.observation.diagnostics.withLock { $0.refreshes } }

    /// Every observer's last event is the query read afresh now, and each list applied every changeset.
    func expectCurrent(_ observers: [Observed], _ context: String = "",
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        for observed in observers {
            let expected = try store.read { db in try db.fetchAll(observed.query.sql, observed.query.arguments) }
            #expect(observed.subscriber.items == expected, "\(observed.user) \(context)", sourceLocation: sourceLocation)
            #expect(observed.subscriber.events.last?.snapshot == expected, "\(observed.user) \(context)",
                    sourceLocation: sourceLocation)
            #expect(observed.subscriber.failures.isEmpty, "\(observed.user) \(context): \(observed.subscriber.failures)",
                    sourceLocation: sourceLocation)
        }
        #expect(store.observation.routingInvariantViolations.isEmpty, sourceLocation: sourceLocation)
    }

    /// Todos 1...12 (owner `owner<id % 3>`, project `id % 4`); user0 is a member of project 1,
    /// user1 of projects 1 and 2.
    func seed() throws {
        try store.write { db in
            for id in 1...12 {
                try db.execute("INSERT INTO todos VALUES (?, ?, ?, ?)", [id, "owner\(id % 3)", id % 4, "todo \(id)"])
            }
            try db.execute("INSERT INTO members VALUES (1, 1, 'user0'), (2, 1, 'user1'), (3, 2, 'user1')")
        }
    }

    /// An edit of a todo of project 1 tells its two members' observers, whatever the number of
    /// other users (each a member of a project of their own), and every other observer skips it.
    @Test(arguments: Form.allCases, [10, 1_000])
    func aTodoEditTellsOnlyTheMembersOfItsProject(form: Form, others: Int) throws {
        try seed()
        try store.write { db in
            for user in 0..<others { try db.execute("INSERT INTO members (project_id, user_id) VALUES (?, ?)", [1_000 + user, "other\(user)"]) }
        }
        var observers = [observe("user0", form), observe("user1", form)]
        observers += (0..<others).map { observe("other\($0)", form) }
        defer { for observed in observers { observed.subscription.cancel() } }
        try expectCurrent(Array(observers.prefix(12)), "initial")

        // Todo 5 is of project 1, owned by owner2 (no observer's user).
        var (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("UPDATE todos SET title = 'edited' WHERE id = 5") }
        #expect(refreshes - refreshed == 2)
        #expect(skips - skipped == others)
        try expectCurrent(Array(observers.prefix(12)), "edited")
        // The index was built once, at the first commit to the table.
        let builds = store.observation.filterBuilds(of: "todos")
        #expect(builds == 1)

        // A todo inserted into project 2: user1's only.
        (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("INSERT INTO todos VALUES (100, 'nobody', 2, 'new')") }
        #expect(refreshes - refreshed == 1)
        #expect(skips - skipped == others + 1)
        #expect(observers[1].subscriber.items.contains { $0.values[0] == .integer(100) })
        try expectCurrent(Array(observers.prefix(12)), "inserted")

        // A membership granted (user0 joins project 2): user0's observer alone runs again, and
        // the index changes its entries in place, not rebuilt.
        (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("INSERT INTO members (project_id, user_id) VALUES (2, 'user0')") }
        #expect(refreshes - refreshed == 1)
        (skipped, refreshed) = (skips, refreshes)
        try store.write { db in try db.execute("UPDATE todos SET title = 'again' WHERE id = 100") }
        #expect(refreshes - refreshed == 2)
        #expect(skips - skipped == others)
        #expect(store.observation.filterBuilds(of: "todos") == builds)
        try expectCurrent(Array(observers.prefix(12)), "granted, then edited")
    }

    /// A membership granted, revoked, or moved, then a todo of that project edited — in
    /// consecutive commits and in one transaction: every observer stays equal to its query.
    @Test(arguments: Form.allCases)
    func grantsAndRevokesThenEdits(form: Form) throws {
        try seed()
        let observers = (0..<4).map { observe("user\($0)", form) }
        defer { for observed in observers { observed.subscription.cancel() } }
        try expectCurrent(observers, "initial")

        // Granted, then edited in the next commit: user2 now sees project 3's todos, edited.
        try store.write { db in try db.execute("INSERT INTO members VALUES (10, 3, 'user2')") }
        try expectCurrent(observers, "granted")
        var refreshed = refreshes
        try store.write { db in try db.execute("UPDATE todos SET title = 'after grant' WHERE id = 3") }
        #expect(refreshes - refreshed == 1)
        #expect(observers[2].subscriber.items.contains { $0.values[3] == .text("after grant") })
        try expectCurrent(observers, "granted, then edited")

        // Granted and edited in one transaction.
        try store.write { db in
            try db.execute("INSERT INTO members VALUES (11, 0, 'user3')")
            try db.execute("UPDATE todos SET title = 'with grant' WHERE id = 4")
        }
        #expect(observers[3].subscriber.items.contains { $0.values[3] == .text("with grant") })
        try expectCurrent(observers, "granted and edited together")

        // Revoked, then edited: user2 no longer sees project 3, nor hears of it.
        try store.write { db in try db.execute("DELETE FROM members WHERE id = 10") }
        try expectCurrent(observers, "revoked")
        refreshed = refreshes
        try store.write { db in try db.execute("UPDATE todos SET title = 'after revoke' WHERE id = 7") }
        #expect(refreshes - refreshed == 0)
        try expectCurrent(observers, "revoked, then edited")

        // Moved (user3's membership to project 1) and a todo moved into project 0 together.
        try store.write { db in
            try db.execute("UPDATE members SET project_id = 1 WHERE id = 11")
            try db.execute("UPDATE todos SET project_id = 0 WHERE id = 5")
        }
        try expectCurrent(observers, "moved")
        // A todo moved out of a project into another user's.
        try store.write { db in try db.execute("UPDATE todos SET project_id = 2 WHERE id = 9") }
        try expectCurrent(observers, "todo moved")
    }

    /// Seeded random commits to todos and members (several changes in one transaction at
    /// times): after every commit every observer's last snapshot is its query read afresh, and
    /// every changeset applied.
    @Test(arguments: [UInt64(1), 2, 3, 4])
    func randomCommitsKeepEveryObserverEqualToItsQuery(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        try self.seed()
        let users = (0..<5).map { "user\($0)" }
        let observers = users.map { observe($0, .ownedOrMember) } + users.prefix(3).map { observe($0, .member) }
        defer { for observed in observers { observed.subscription.cancel() } }
        try expectCurrent(observers, "initial")
        var nextTodo = 200, nextMember = 100
        let owners = users + ["nobody"]
        for step in 0..<120 {
            try store.write { db in
                // Rows picked by the seed (SQLite's random() is not seeded).
                func pick(_ table: String) throws -> SQLValue {
                    let ids = try db.fetchAll("SELECT id FROM \(table) ORDER BY id").map { $0.values[0] }
                    return ids.randomElement(using: &random) ?? .null
                }
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    switch Int.random(in: 0..<8, using: &random) {
                    case 0:
                        nextTodo += 1
                        try db.execute("INSERT INTO todos VALUES (?, ?, ?, ?)",
                                       [nextTodo, owners.randomElement(using: &random)!, Int.random(in: 0..<6, using: &random), "t\(step)"])
                    case 1:
                        try db.execute("UPDATE todos SET title = ? WHERE id = ?", ["e\(step)", try pick("todos")])
                    case 2:
                        try db.execute("UPDATE todos SET project_id = ? WHERE id = ?",
                                       [Int.random(in: 0..<6, using: &random), try pick("todos")])
                    case 3:
                        try db.execute("DELETE FROM todos WHERE id = ?", [try pick("todos")])
                    case 4, 5:
                        nextMember += 1
                        try db.execute("INSERT INTO members VALUES (?, ?, ?)",
                                       [nextMember, Int.random(in: 0..<6, using: &random), users.randomElement(using: &random)!])
                    case 6:
                        try db.execute("DELETE FROM members WHERE id = ?", [try pick("members")])
                    default:
                        try db.execute("UPDATE members SET project_id = ? WHERE id = ?",
                                       [Int.random(in: 0..<6, using: &random), try pick("members")])
                    }
                }
            }
            try expectCurrent(observers, "seed \(seed) step \(step)")
        }
    }

    /// Writers on three threads change memberships and todos (inserted, moved between projects,
    /// edited) while observers on queues of their own read and deliver: once the writers are
    /// done, every observer shows its query.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func concurrentCommitsLeaveEveryObserverEqualToItsQuery(seed: UInt64) throws {
        try self.seed()
        let users = ["u0", "u1", "u2"]
        func observeOnQueue(_ user: String, _ form: Form) -> Observed {
            let query = MembershipQuery(user: user, form: form)
            let subscriber = ListViewSubscriber<Row>()
            let live = store.liveQuery(sql: query.sql, arguments: query.arguments, identity: "id", routing: query.routing)
            let queue = DispatchQueue(label: "value-term-routing.\(user)")
            return Observed(user: user, query: query, subscriber: subscriber,
                            subscription: subscriber.subscribe(to: live, on: .queue(queue)))
        }
        let observers = users.flatMap { [observeOnQueue($0, .ownedOrMember), observeOnQueue($0, .member)] }
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
                        switch Int.random(in: 0..<7, using: &random) {
                        case 0: try db.execute("INSERT OR REPLACE INTO members VALUES (?, ?, ?)", [id, project, user])
                        case 1: try db.execute("DELETE FROM members WHERE id = ?", [id])
                        case 2: try db.execute("UPDATE members SET project_id = ? WHERE id = ?", [project, id])
                        case 3: try db.execute("INSERT OR REPLACE INTO todos VALUES (?, ?, ?, 'w')", [id, user, project])
                        case 4: try db.execute("UPDATE todos SET title = ? WHERE project_id = ?", ["s\(step)", project])
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
            let expected = try store.read { db in try db.fetchAll(observed.query.sql, observed.query.arguments) }
            #expect(observed.subscriber.waitFor(items: expected), "seed \(seed): \(observed.user) never showed its query")
            #expect(observed.subscriber.failures.isEmpty, "\(observed.subscriber.failures)")
        }
        #expect(store.observation.routingInvariantViolations.isEmpty)
    }

    /// A todo added to a project just granted (inserted, or moved in from another project) by
    /// another thread while the grant's rerun reads, at the grant's version: the index still holds
    /// the values from before the grant, and the row is not in the result read, so neither the
    /// index nor the result's keys tell the observer of it. It hears of it being busy from the
    /// grant until it has read past it (or, had it not been, from the change log when it
    /// registers its new values), and shows it.
    @Test(arguments: [false, true])
    func aTodoEnteringAGrantedProjectDuringTheGrantsRerunReachesTheObserver(movesOneIn: Bool) throws {
        try seed()
        let alice = observe("alice")
        let bob = observe("bob", .member)
        defer { for observed in [alice, bob] { observed.subscription.cancel() } }
        let armed = Locked(false)
        let store = self.store
        store.observation.readFault.withLock {
            $0 = {
                guard armed.withLock({ armed in defer { armed = false }; return armed }) else { return }
                // The writer waits for alice's delivery of its commit (she is told of it): the
                // read waits only until it is routed.
                let routed = store.observation.routedThrough + 1
                Thread.detachNewThread {
                    do {
                        try store.write { db in
                            try db.execute("INSERT INTO todos VALUES (50, 'nobody', 3, 'during')")
                            if movesOneIn {
                                try db.execute("UPDATE todos SET project_id = 3, title = 'moved in' WHERE id = 4")
                            }
                        }
                    } catch { Issue.record(error) }
                }
                try Wait.blockingUntil("another thread's edit of a todo of the granted project, during the read, to be routed") {
                    store.observation.routedThrough >= routed
                }
            }
        }
        defer { store.observation.readFault.withLock { $0 = nil } }
        armed.withLock { $0 = true }
        try store.write { db in try db.execute("INSERT INTO members VALUES (20, 3, 'alice')") }
        #expect(!armed.withLock { $0 }, "the read under way did not run the edit")
        let editedAt = try store.currentVersion()
        #expect(alice.subscriber.waitFor(version: editedAt))
        #expect(alice.subscriber.items.contains { $0.values[3] == .text("during") })
        if movesOneIn { #expect(alice.subscriber.items.contains { $0.values[3] == .text("moved in") }) }
        try expectCurrent([alice, bob])
        // Idle again, read past the edits: a later edit of another project does not tell alice.
        let refreshed = refreshes
        try store.write { db in try db.execute("UPDATE todos SET title = 'later' WHERE id = 8") }
        #expect(refreshes == refreshed)
        try store.write { db in try db.execute("UPDATE todos SET title = 'later' WHERE id = 7") }
        #expect(refreshes == refreshed + 1)
        try expectCurrent([alice, bob])
    }

    /// A rough count of the work 1,000 todo commits cost with 10 and with 1,000 other users'
    /// observers: the members' refreshes are the same, the others skip every commit.
    @Test func workOfAThousandTodoCommitsDoesNotGrowWithOtherUsers() throws {
        try seed()
        var counted: [Int: (refreshes: Int, skips: Int, seconds: Double)] = [:]
        for others in [10, 1_000] {
            try store.write { db in
                try db.execute("DELETE FROM members WHERE user_id LIKE 'other%'")
                for user in 0..<others {
                    try db.execute("INSERT INTO members (project_id, user_id) VALUES (?, ?)", [1_000 + user, "other\(user)"])
                }
            }
            var observers = [observe("user0"), observe("user1")]
            observers += (0..<others).map { observe("other\($0)") }
            let (skipped, refreshed) = (skips, refreshes)
            let start = Date()
            for step in 0..<1_000 {
                try store.write { db in try db.execute("UPDATE todos SET title = ? WHERE id = 5", ["step \(step)"]) }
            }
            counted[others] = (refreshes - refreshed, skips - skipped, Date().timeIntervalSince(start))
            try expectCurrent(Array(observers.prefix(2)), "\(others) others")
            for observed in observers { observed.subscription.cancel() }
        }
        #expect(counted[10]?.refreshes == 2_000)
        #expect(counted[1_000]?.refreshes == 2_000)
        #expect(counted[10]?.skips == 10 * 1_000)
        #expect(counted[1_000]?.skips == 1_000 * 1_000)
        print("1,000 todo commits: 10 others \(counted[10]!), 1,000 others \(counted[1_000]!)")
    }
}
