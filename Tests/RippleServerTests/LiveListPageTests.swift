#if Sync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RippleServer
import RippleSyncTesting
import RippleTesting
import Testing

/// The web page a node serves, in a real headless Chromium: its rows follow writes made
/// through psql, a changeset changes the DOM only where it says (a move moves one node, an
/// update rewrites cells), and it reconnects and resumes by itself across a node restart.
@Suite(.enabled(if: ThrowawayPostgres.testsRun && HeadlessChromium.testsRun,
                "PostgreSQL 15 or Chromium is not installed: the live-list page test skipped"),
        .timeLimit(.minutes(15)))
struct LiveListPageTests {
    static let rules = #"{"tables": {"todos": {"read": {"column": "owner", "op": "=", "value": {"user": true}}}}}"#
    /// What the page is asked to show, and the same on Postgres (the read rule ANDed in).
    static let filter = #"{"column": "done", "op": "=", "value": false}"#
    static let expectedSQL = """
        SELECT coalesce(json_agg(json_build_array(id::text, title, owner, done::text, rank::text) ORDER BY rank, id), '[]')
        FROM (SELECT * FROM todos WHERE owner = 'alice' AND NOT done ORDER BY rank, id LIMIT 8) AS shown
        """

    /// Where the tests leave their screenshots: `.build/test-artifacts/<name>` in the package.
    static func artifactPath(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/test-artifacts/\(name)").path
    }

    static var screenshotPath: String { artifactPath("live-list.png") }

    /// Saves `page`'s screenshot at `path` (printing where) and checks it is a PNG of some size.
    static func saveScreenshot(of page: HeadlessChromium.Page, at path: String) async throws {
        let png = try await page.screenshot()
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 10_000)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try png.write(to: URL(fileURLWithPath: path))
        print("live-list page screenshot: \(path)")
    }

    @Test func thePageFollowsPostgresChangingTheDOMOnlyWhereAChangesetSays() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE todos (id bigint PRIMARY KEY, title text NOT NULL, owner text NOT NULL,
                                    done boolean NOT NULL DEFAULT false, rank integer NOT NULL);
                INSERT INTO todos SELECT n, 'todo ' || n, 'alice', false, n FROM generate_series(1, 10) AS n;
                INSERT INTO todos SELECT n, 'bob''s ' || n, 'bob', false, n - 20 FROM generate_series(21, 25) AS n;
                """)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["todos"], rules: Self.rules, directory: directory) { node in
                let port = node.port
                try await HeadlessChromium.with { browser in
                    let fragment = "token=\(try node.token("alice"))&table=todos&order=rank&limit=8&filter="
                        + Self.filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    let page = try await browser.open("http://127.0.0.1:\(port)/#\(fragment)")

                    /// Waits until the page shows what Postgres returns now; returns those rows.
                    @discardableResult
                    func pageEqualsPostgres(_ step: String) async throws -> [[String?]] {
                        let expected = try await postgres.psql(Self.expectedSQL).trimmingCharacters(in: .whitespacesAndNewlines)
                        do {
                            try await page.evaluate("""
                                rippleList.until(() => rippleList.status() === "live"
                                    && JSON.stringify(rippleList.rows()) === JSON.stringify(\(expected)), 60000)
                                """)
                        } catch {
                            Issue.record("\(step): the page never showed Postgres's rows \(expected): \(error)")
                            throw error
                        }
                        let rows = try await page.evaluate("rippleList.rows()") as? [[Any]] ?? []
                        return rows.map { $0.map { $0 as? String } }
                    }

                    // The first result: the columns, and alice's open todos by rank (none of bob's).
                    let first = try await pageEqualsPostgres("the snapshot")
                    #expect(first.count == 8)
                    #expect(try await page.evaluate("rippleList.columns()") as? [String] == ["id", "title", "owner", "done", "rank"])

                    // Every later frame is watched at the DOM: which row nodes leave and arrive.
                    try await page.evaluate("""
                        (() => {
                          const body = document.querySelector("#list tbody");
                          window.seen = { added: [], removed: [], original: Array.from(body.rows) };
                          window.watcher = new MutationObserver((records) => window.noteMutations(records));
                          window.noteMutations = (records) => {
                            for (const r of records) {
                              for (const node of r.addedNodes) if (node.nodeName === "TR") seen.added.push(node);
                              for (const node of r.removedNodes) if (node.nodeName === "TR") seen.removed.push(node);
                            }
                          };
                          watcher.observe(body, { childList: true });
                          window.takeMutations = () => {
                            noteMutations(watcher.takeRecords());
                            const ids = (nodes) => nodes.map((tr) => tr.cells[0].textContent);
                            const result = { added: ids(seen.added), removed: ids(seen.removed),
                                             sameAdded: seen.added.filter((tr) => seen.original.includes(tr)).length,
                                             kept: seen.original.filter((tr) => body.contains(tr)).length };
                            seen.added = []; seen.removed = []; seen.original = Array.from(body.rows);
                            return result;
                          };
                          return true;
                        })()
                        """)
                    func mutations() async throws -> [String: Any] { try await page.evaluate("takeMutations()") as? [String: Any] ?? [:] }

                    // A move: todo 1 goes after todo 5 (rank 6 ties with todo 6; the key breaks it). One
                    // node moves, the same node, and its rank cell is rewritten and highlighted.
                    try await postgres.psql("UPDATE todos SET rank = 6 WHERE id = 1")
                    let moved = try await pageEqualsPostgres("a move")
                    #expect(moved.map { $0[0] } == ["2", "3", "4", "5", "1", "6", "7", "8"])
                    let move = try await mutations()
                    #expect(move["removed"] as? [String] == ["1"] && move["added"] as? [String] == ["1"], "\(move)")
                    #expect(move["sameAdded"] as? Int == 1 && move["kept"] as? Int == 8, "a move re-used the row's node: \(move)")
                    #expect(try await page.evaluate("""
                        document.querySelector("#list tbody").rows[4].cells[4].classList.contains("changed")
                        """) as? Bool == true)

                    // An update of a title: no node leaves or arrives; one cell is rewritten.
                    try await postgres.psql("UPDATE todos SET title = 'milk' WHERE id = 3")
                    try await pageEqualsPostgres("an update")
                    let update = try await mutations()
                    #expect((update["added"] as? [String])?.isEmpty == true && (update["removed"] as? [String])?.isEmpty == true, "\(update)")
                    #expect(try await page.evaluate("""
                        Array.from(document.querySelectorAll("#list td.changed"), (td) => td.textContent).includes("milk")
                        """) as? Bool == true)

                    // One transaction inserts at the top (pushing the last row out of the window), deletes a
                    // row (pulling the next one in), closes another and writes bob's rows the page never sees.
                    try await postgres.psql("""
                        BEGIN;
                        INSERT INTO todos VALUES (100, 'new', 'alice', false, 0);
                        DELETE FROM todos WHERE id = 4;
                        UPDATE todos SET done = true WHERE id = 5;
                        INSERT INTO todos VALUES (101, 'bob''s new', 'bob', false, -5);
                        UPDATE todos SET title = 'bob''s secret' WHERE owner = 'bob';
                        COMMIT;
                        """)
                    let mixed = try await pageEqualsPostgres("inserts and deletes")
                    #expect(!mixed.contains { $0[2] != "alice" })
                    let change = try await mutations()
                    #expect(mixed.map { $0[0] } == ["100", "2", "3", "1", "6", "7", "8", "9"])
                    #expect(Set(change["removed"] as? [String] ?? []) == ["4", "5"] && Set(change["added"] as? [String] ?? []) == ["100", "9"],
                            "only the rows that left or entered the window left or entered the DOM: \(change)")
                    #expect(change["kept"] as? Int == 6, "rows the transaction did not touch keep their nodes: \(change)")

                    // The screenshot shows the live list.
                    try await Self.saveScreenshot(of: page, at: Self.screenshotPath)

                    // The node stops; Postgres changes while it is away; a node on the same replica comes
                    // back on the same port. The page reconnects by itself and resumes with a changeset:
                    // rows the change did not touch keep their nodes (a snapshot would replace them all).
                    _ = try await mutations()
                    await node.stop()   // (the scope's stop then finds it stopped)
                    try await page.evaluate(#"rippleList.until(() => rippleList.status() !== "live", 60000)"#)
                    try await postgres.psql("UPDATE todos SET title = 'written while away' WHERE id = 2")
                    try await TestNode.with(postgres, tables: ["todos"], rules: Self.rules, directory: directory, adjust: { $0.port = port }) { _ in
                        let resumed = try await pageEqualsPostgres("after the node's restart")
                        #expect(resumed.contains { $0[1] == "written while away" })
                        let resume = try await mutations()
                        #expect((resume["kept"] as? Int) == 8 && (resume["added"] as? [String])?.isEmpty == true,
                                "the page resumed with a changeset, keeping its rows: \(resume)")
                        #expect(try await page.evaluate("rippleList.misfits()") as? Int == 0, "every changeset fitted the rows shown")
                    }
                }
            }
        }
    }

    /// A token the node refuses (here a JSON Web Token for another audience) stops the page:
    /// it says the refusal and what to do, and does not reconnect with the same token (the node
    /// counts one refusal).
    @Test func aRefusedTokenStopsThePageSayingWhatToDo() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("""
                CREATE TABLE todos (id bigint PRIMARY KEY, title text NOT NULL, owner text NOT NULL,
                                    done boolean NOT NULL DEFAULT false, rank integer NOT NULL);
                """)
            let directory = try TemporaryDirectory()
            let key = TestSigningKey.hs256()
            let adjust: (inout SyncServerConfiguration) -> Void = { configuration in
                var jwt = JWTConfiguration(keys: [key.source])
                jwt.audience = "ripple"
                configuration.jwt = jwt
            }
            try await TestNode.with(postgres, tables: ["todos"], rules: Self.rules, directory: directory, adjust: adjust) { node in
                try await HeadlessChromium.with { browser in
                    let token = try key.token(["sub": "alice", "aud": "another-app"])
                    let page = try await browser.open("http://127.0.0.1:\(node.port)/#token=\(token)&table=todos")
                    #expect(try await page.evaluate(#"document.getElementById("token").placeholder"#) as? String == "a node token or a JWT")
                    try await Wait.until("the page to stop", within: .seconds(60), pausingAtMost: .milliseconds(200)) {
                        try await page.evaluate("rippleList.status()") as? String == "stopped"
                    }
                    let status = try await page.evaluate(#"document.getElementById("status").textContent"#) as? String ?? ""
                    let problem = try await page.evaluate(#"document.getElementById("problem").textContent"#) as? String ?? ""
                    #expect(status == "stopped: the token was refused", "\(status)")
                    #expect(problem.contains("token_wrong_audience") && problem.contains("Give another token"), "\(problem)")
                    let metrics = await node.server.metricsText()
                    #expect(metrics.contains("ripple_refused_tokens_total{code=\"token_wrong_audience\"} 1\n"), "\(metrics)")
                }
            }
        }
    }

    /// The demo's page: the user switch (`#as=alice:…&as=bob:…`) shows the same query as each
    /// user under the membership rules (the shared project's todos in both lists), and a
    /// membership granted in Postgres brings its project's todos to the list.
    @Test func theUserSwitchShowsEachUsersTodosUnderTheMembershipRules() async throws {
        try await withThrowawayPostgres { postgres in
            try await TeamFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: TeamFixture.tables, rules: TeamFixture.rules, directory: directory) { node in
                try await HeadlessChromium.with { browser in
                    let users = try ["alice", "bob"].map { user in
                        "as=" + "\(user):\(try node.token(user))".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    }
                    let page = try await browser.open("http://127.0.0.1:\(node.port)/#table=todos&order=id&" + users.joined(separator: "&"))
                    /// Waits until the page shows the todos `user` reads on Postgres now.
                    func pageShowsTodos(of user: String, _ step: String) async throws {
                        let expected = try await postgres.psql("""
                            SELECT coalesce(json_agg(json_build_array(id::text, project_id::text, owner, title, done::text, rank::text) ORDER BY id), '[]')
                            FROM (\(TeamFixture.readableTodosSQL(user))) AS shown
                            """).trimmingCharacters(in: .whitespacesAndNewlines)
                        do {
                            try await page.evaluate("""
                                rippleList.until(() => rippleList.status() === "live"
                                    && JSON.stringify(rippleList.rows()) === JSON.stringify(\(expected)), 60000)
                                """)
                        } catch {
                            Issue.record("\(step): the page never showed \(user)'s todos \(expected): \(error)")
                            throw error
                        }
                    }
                    try await pageShowsTodos(of: "alice", "alice, the first user")
                    #expect(try await page.evaluate("rippleList.users()") as? [String] == ["alice", "bob"])
                    #expect(try await page.evaluate("rippleList.rows().map((row) => row[0])") as? [String] == ["1", "2", "3", "4", "5", "6", "7"])
                    try await page.evaluate(#"rippleList.switchUser("bob")"#)
                    try await pageShowsTodos(of: "bob", "bob, switched to")
                    #expect(try await page.evaluate("rippleList.rows().map((row) => row[0])") as? [String] == ["1", "2", "3", "4", "8", "9", "10"])
                    try await postgres.psql("INSERT INTO members(project_id, user_id) VALUES (2, 'bob')")
                    try await pageShowsTodos(of: "bob", "bob, made a member of Garden")
                    try await page.evaluate(#"rippleList.switchUser("alice")"#)
                    try await pageShowsTodos(of: "alice", "alice, switched back")
                }
            }
        }
    }

    /// The sectioned list as Postgres has it for `user` (the membership rules as SQL): the
    /// projects `user` reads by id, each with its owner's name and its todos by rank (the key
    /// breaking ties), in the form of `rippleList.sections()`.
    static func sectionsSQL(_ user: String) -> String {
        """
        SELECT coalesce(json_agg(json_build_object(
                   'row', json_build_array(p.id::text, p.name, p.owner),
                   'owner', u.name,
                   'items', (SELECT coalesce(json_agg(json_build_array(t.id::text, t.project_id::text, t.owner, t.title, t.done::text,
                                                                      t.rank::text) ORDER BY t.rank, t.id), '[]')
                             FROM (\(TeamFixture.readableTodosSQL(user))) AS t WHERE t.project_id = p.id))
                 ORDER BY p.id), '[]')
        FROM projects AS p JOIN users AS u ON u.id = p.owner
        WHERE p.id IN (SELECT project_id FROM members WHERE user_id = '\(user)')
        """
    }

    /// The sectioned list beside the flat one (projects → their todos, one subscription with a
    /// to-many include `todos` and a to-one `owner`): it shows each project's todos as Postgres
    /// has them; a todo moved to another project moves exactly one DOM node (the same node, its
    /// untouched text kept), a new todo is one node inserted, and a revoked membership removes
    /// the project's section with its todos in one frame.
    @Test func theSectionedListMovesOneNodeWhenATodoChangesProject() async throws {
        try await withThrowawayPostgres { postgres in
            try await TeamFixture.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: TeamFixture.tables, rules: TeamFixture.rules, directory: directory) { node in
                try await HeadlessChromium.with(width: 1200, height: 820) { browser in
                    let users = try ["alice", "bob"].map { user in
                        "as=" + "\(user):\(try node.token(user))".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    }
                    let page = try await browser.open("http://127.0.0.1:\(node.port)/#table=todos&order=id&" + users.joined(separator: "&"))
                    /// Waits until both lists show what `user` reads on Postgres now.
                    func pageEqualsPostgres(for user: String, _ step: String) async throws {
                        let sections = try await postgres.psql(Self.sectionsSQL(user)).trimmingCharacters(in: .whitespacesAndNewlines)
                        let rows = try await postgres.psql("""
                            SELECT coalesce(json_agg(json_build_array(id::text, project_id::text, owner, title, done::text, rank::text) ORDER BY id), '[]')
                            FROM (\(TeamFixture.readableTodosSQL(user))) AS shown
                            """).trimmingCharacters(in: .whitespacesAndNewlines)
                        do {
                            try await page.evaluate("""
                                rippleList.until(() => rippleList.status() === "live" && rippleList.sectionsLive()
                                    && JSON.stringify(rippleList.sections()) === JSON.stringify(\(sections))
                                    && JSON.stringify(rippleList.rows()) === JSON.stringify(\(rows)), 60000)
                                """)
                        } catch {
                            Issue.record("\(step): the page never showed \(user)'s projects and todos \(sections) and \(rows): \(error)")
                            throw error
                        }
                    }

                    // The first result: alice's projects (Launch, Garden) with their owners and todos.
                    try await pageEqualsPostgres(for: "alice", "alice's first result")
                    #expect(try await page.evaluate("rippleList.sections().map((s) => [s.row[1], s.owner, s.items.length])") as? [[AnyHashable]]
                            == [["Launch", "Alice", 4], ["Garden", "Alice", 3]])

                    // Every later frame is watched at the sections' DOM: nodes added and removed anywhere
                    // in it, and text rewritten, each record with the frame it came in.
                    try await page.evaluate("""
                        (() => {
                          const view = document.getElementById("sections");
                          window.todoNode = (id) => Array.from(view.querySelectorAll("li")).find((li) => li.firstChild.textContent === id);
                          window.sectionNode = (id) => Array.from(view.children).find((a) => a.firstChild.firstChild.textContent === id);
                          const describe = (node) => node.nodeName === "LI" ? `li ${node.firstChild.textContent}`
                            : node.nodeName === "ARTICLE" ? `section ${node.firstChild.firstChild.textContent}` : node.nodeName;
                          const place = (text) => {
                            const element = text.parentNode, owner = element.closest("li, article");
                            return `${describe(owner)}.${element.dataset.column || element.className.split(" ")[0]}`;
                          };
                          window.sectionsSeen = [];
                          window.noteSections = (records) => {
                            for (const record of records) sectionsSeen.push({ record, frame: rippleList.frames() });
                          };
                          window.sectionsWatcher = new MutationObserver((records) => noteSections(records));
                          sectionsWatcher.observe(view, { childList: true, subtree: true, characterData: true });
                          window.takeSectionMutations = () => {
                            noteSections(sectionsWatcher.takeRecords());
                            const records = sectionsSeen.splice(0);
                            const lists = records.filter(({ record }) => record.type === "childList");
                            window.added = lists.flatMap(({ record }) => Array.from(record.addedNodes));
                            window.removed = lists.flatMap(({ record }) => Array.from(record.removedNodes));
                            return {
                              added: added.map(describe), removed: removed.map(describe),
                              frames: new Set(records.map(({ frame }) => frame)).size,
                              texts: records.filter(({ record }) => record.type === "characterData").map(({ record }) => place(record.target)).sort(),
                            };
                          };
                          return true;
                        })()
                        """)
                    func mutations() async throws -> [String: Any] { try await page.evaluate("takeSectionMutations()") as? [String: Any] ?? [:] }

                    // A todo moves from Launch to the top of Garden: one node, the same, from one section's list
                    // to the other's; its title's text node is kept, its project and rank rewritten in place.
                    try await page.evaluate("""
                        (() => { window.moving = todoNode("2"); window.movingTitle = moving.querySelector('[data-column="title"]').firstChild;
                                 return true; })()
                        """)
                    try await postgres.psql("UPDATE todos SET project_id = 2, rank = 0 WHERE id = 2")
                    try await pageEqualsPostgres(for: "alice", "a todo moved to another project")
                    let move = try await mutations()
                    #expect(move["removed"] as? [String] == ["li 2"] && move["added"] as? [String] == ["li 2"], "one node moved: \(move)")
                    #expect(move["frames"] as? Int == 1, "in one frame: \(move)")
                    #expect(try await page.evaluate("""
                        added[0] === moving && removed[0] === moving && todoNode("2") === moving
                            && moving.parentNode === sectionNode("2").lastChild && moving.parentNode.firstChild === moving
                            && moving.querySelector('[data-column="title"]').firstChild === movingTitle
                        """) as? Bool == true, "the moved node is the todo's own, in Garden's list, its title's text node kept")
                    #expect(move["texts"] as? [String] == ["li 2.project_id", "li 2.rank", "section 1.count", "section 2.count"],
                            "only the changed cells and the counts were rewritten: \(move)")

                    // A new todo in Garden: one node inserted.
                    try await postgres.psql("INSERT INTO todos VALUES (100, 2, 'alice', 'Water the beans', false, 2)")
                    try await pageEqualsPostgres(for: "alice", "a new todo")
                    let insert = try await mutations()
                    #expect(insert["added"] as? [String] == ["li 100"] && (insert["removed"] as? [String])?.isEmpty == true, "\(insert)")
                    #expect(insert["texts"] as? [String] == ["section 2.count"], "\(insert)")

                    // The screenshot shows both lists.
                    try await Self.saveScreenshot(of: page, at: Self.artifactPath("live-list-sections.png"))

                    // alice leaves Launch: its section goes, with its todos, in one frame (alice's own todos of
                    // Launch stay in the flat list: she owns them; bob's leave it).
                    try await postgres.psql("DELETE FROM members WHERE project_id = 1 AND user_id = 'alice'")
                    try await pageEqualsPostgres(for: "alice", "alice's membership of Launch revoked")
                    let revoke = try await mutations()
                    #expect(revoke["removed"] as? [String] == ["section 1"] && (revoke["added"] as? [String])?.isEmpty == true, "\(revoke)")
                    #expect(revoke["frames"] as? Int == 1, "in one frame: \(revoke)")
                    #expect(try await page.evaluate("rippleList.rows().map((row) => row[0])") as? [String]
                            == ["1", "2", "3", "5", "6", "7", "100"], "alice's own todos of Launch and Garden's todos")

                    // Made a member again: the section comes back with its todos.
                    try await postgres.psql("INSERT INTO members(project_id, user_id) VALUES (1, 'alice')")
                    try await pageEqualsPostgres(for: "alice", "alice a member of Launch again")

                    // The user switch shows bob's projects (Launch and Band) in the sectioned list too.
                    try await page.evaluate(#"rippleList.switchUser("bob")"#)
                    try await pageEqualsPostgres(for: "bob", "bob, switched to")
                    #expect(try await page.evaluate("rippleList.sections().map((s) => s.row[1])") as? [String] == ["Launch", "Band"])
                    #expect(try await page.evaluate("rippleList.misfits()") as? Int == 0, "every changeset fitted the lists shown")
                }
            }
        }
    }
}
#endif
