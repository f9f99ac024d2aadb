#if Sync
import Foundation
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

    /// Where the test leaves its screenshot: `.build/test-artifacts/live-list.png` in the package.
    static var screenshotPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/test-artifacts/live-list.png").path
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
                    let png = try await page.screenshot()
                    #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 10_000)
                    try FileManager.default.createDirectory(atPath: (Self.screenshotPath as NSString).deletingLastPathComponent,
                                                            withIntermediateDirectories: true)
                    try png.write(to: URL(fileURLWithPath: Self.screenshotPath))
                    print("live-list page screenshot: \(Self.screenshotPath)")

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
                    }
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
}
#endif