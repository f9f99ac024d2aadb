import Foundation
import Ripple
import RippleSchema
import Synchronization
import Testing
import RippleTesting

@Suite struct MigrationTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    /// The store's own migrations, as `ripple_migrations` lists them once applied.
    static let storeSchema = ["ripple/0001_store_schema", "ripple/0002_history", "ripple/0003_exact_keys",
                              "ripple/0004_compact_before_images", "ripple/0005_commit_origin",
                              "ripple/0006_keys_written_once"]

    /// A fresh directory of migration files under the temporary directory.
    func migrationsDirectory(_ files: [String: String], named name: String = "migrations") throws -> URL {
        let url = directory.url.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        for (fileName, sql) in files {
            try sql.write(to: url.appendingPathComponent(fileName), atomically: true, encoding: .utf8)
        }
        return url
    }

    func tableExists(_ name: String, in store: Store) throws -> Bool {
        try store.read { db in
            try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", [name], as: Int.self)
        } == 1
    }

    func migrationRows(in store: Store) throws -> [String] {
        try store.read { db in
            try db.fetchAll("SELECT domain, name FROM ripple_migrations ORDER BY rowid").map {
                "\(try $0.value("domain", as: String.self))/\(try $0.value("name", as: String.self))"
            }
        }
    }

    // MARK: The store's own schema

    @Test func theStoreSchemaIsAppliedOnOpenAndOnlyOnce() throws {
        let path = directory.path("schema.sqlite")
        let firstAppliedAt: Double?
        do {
            let store = try Store(path: path)
            for table in ["ripple_meta", "ripple_changes", "ripple_collections", "ripple_migrations"] {
                #expect(try tableExists(table, in: store), "missing \(table)")
            }
            #expect(try store.read { try $0.fetchValue("SELECT value FROM ripple_meta WHERE key = 'version'", as: Int.self) } == 0)
            #expect(try migrationRows(in: store) == Self.storeSchema)
            firstAppliedAt = try store.read { try $0.fetchValue("SELECT applied_at FROM ripple_migrations", as: Double.self) }
        }
        // Reopening applies nothing again (a second CREATE TABLE would fail anyway).
        let reopened = try Store(path: path)
        #expect(try migrationRows(in: reopened) == Self.storeSchema)
        #expect(try reopened.read { try $0.fetchValue("SELECT applied_at FROM ripple_migrations", as: Double.self) } == firstAppliedAt)
    }

    @Test func storesOpeningOneNewFileAtOnceApplyTheSchemaOnce() throws {
        let path = directory.path("race.sqlite")
        do {
            // A file already in WAL mode (switching to WAL is not what this test races), without
            // the store's schema.
            let store = try Store(path: path)
            try store.writeWithoutTransaction { db in
                try db.executeScript("""
                    DROP TABLE ripple_meta; DROP TABLE ripple_changes; DROP TABLE ripple_collections;
                    DROP TABLE ripple_migrations; DROP TABLE ripple_versions
                    """)
            }
        }
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do { _ = try Store(path: path) } catch { failures.withLock { $0.append("\(error)") } }
        }
        #expect(failures.withLock { $0 } == [])
        #expect(try migrationRows(in: Store(path: path)) == Self.storeSchema)
    }

    @Test func inMemoryStoresGetTheSchemaToo() throws {
        let store = try Store.inMemory()
        #expect(try tableExists("ripple_changes", in: store))
    }

    @Test func everySchemaFileIsBundled() throws {
        // The bundle is what an installed binary reads; the Migrations folder is the source of
        // truth. A file missing from `resources:` in Package.swift shows up here.
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Migrations")
        let sources = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }.sorted()
        let bundled = try StoreSchema.migrationFiles().sorted { $0.name < $1.name }
        #expect(!sources.isEmpty)
        #expect(bundled.map(\.name) == sources)
        for file in bundled {
            #expect(file.sql == (try String(contentsOf: folder.appendingPathComponent(file.name), encoding: .utf8)))
        }
    }

    @Test func aReadOnlyStoreChecksTheSchemaInsteadOfMigrating() throws {
        let path = directory.path("readonly.sqlite")
        var readOnly = Store.Configuration()
        readOnly.readOnly = true
        do {
            let store = try Store(path: path)
            _ = try Store(path: path, configuration: readOnly)   // up to date: opens
            // Pretend the store's migration was never applied.
            try store.writeWithoutTransaction { try $0.execute("DELETE FROM ripple_migrations") }
        }
        let error = #expect(throws: StoreError.self) { try Store(path: path, configuration: readOnly) }
        #expect(error?.kind == .migration)
        #expect(error?.message.contains("0001_store_schema.sql") == true)
        #expect(error?.message.contains("read-only") == true)
    }

    // MARK: Application migrations

    @Test func directoryMigrationsApplyInNumericOrder() throws {
        let url = try migrationsDirectory([
            "0010_add_done.sql": "ALTER TABLE todos ADD COLUMN done INTEGER NOT NULL DEFAULT 0;",
            "2_seed.sql": "INSERT INTO todos(title) VALUES ('first'); INSERT INTO todos(title) VALUES ('second');",
            "0001_create_todos.sql": "CREATE TABLE todos(id INTEGER PRIMARY KEY, title TEXT NOT NULL);",
            "README.md": "not a migration",
        ])
        let store = try Store(path: directory.path("ordered.sqlite"))
        let migrator = try Migrator(domain: "app", directory: url)
        #expect(migrator.migrations.map(\.name) == ["0001_create_todos", "2_seed", "0010_add_done"])
        #expect(try migrator.pendingMigrations(in: store) == ["0001_create_todos", "2_seed", "0010_add_done"])
        try migrator.migrate(store)
        #expect(try migrator.appliedMigrations(in: store) == ["0001_create_todos", "2_seed", "0010_add_done"])
        #expect(try migrator.pendingMigrations(in: store).isEmpty)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM todos WHERE done = 0", as: Int.self) } == 2)
        // Migrating again applies nothing.
        try store.migrate(migrator)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM todos", as: Int.self) } == 2)
    }

    @Test func eachMigrationRunsInItsOwnTransaction() throws {
        let store = try Store(path: directory.path("transactions.sqlite"))
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_create", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY)")
        try migrator.register(name: "0002_check") { db in
            // Inside a transaction, and the previous migration is already there.
            guard db.isInTransaction else { throw StoreError(.migration, "not in a transaction") }
            try db.execute("INSERT INTO items(id) VALUES (1)")
        }
        try migrator.register(name: "0003_fails", sql: "INSERT INTO items(id) VALUES (2); INSERT INTO items(id) VALUES (1);")
        let error = #expect(throws: StoreError.self) { try migrator.migrate(store) }
        #expect(error?.message.contains("0003_fails") == true)
        #expect(error?.underlying?.code == .constraint)
        // The first two committed on their own; the third left no trace.
        #expect(try migrator.appliedMigrations(in: store) == ["0001_create", "0002_check"])
        #expect(try store.read { try $0.fetchAll("SELECT id FROM items").map { try $0.value("id", as: Int.self) } } == [1])
    }

    @Test func aFailingMigrationRollsBackEntirelyAndNamesTheFile() throws {
        let url = try migrationsDirectory([
            "0001_ok.sql": "CREATE TABLE ok(x);",
            "0002_bad.sql": "CREATE TABLE first(x);\nINSERT INTO missing VALUES (1);",
            "0003_later.sql": "CREATE TABLE later(x);",
        ])
        let store = try Store(path: directory.path("failing.sqlite"))
        let migrator = try Migrator(domain: "app", directory: url)
        let error = #expect(throws: StoreError.self) { try migrator.migrate(store) }
        #expect(error?.kind == .migration)
        #expect(error?.message.contains("0002_bad.sql") == true)
        #expect(error?.message.contains("no such table: missing") == true)
        #expect(error?.underlying?.message == "no such table: missing")
        #expect(try tableExists("ok", in: store))
        #expect(try !tableExists("first", in: store))
        #expect(try !tableExists("later", in: store))
        #expect(try migrator.appliedMigrations(in: store) == ["0001_ok"])

        // A failed migration was never recorded, so fixing its file is not an edit.
        try "CREATE TABLE first(x);".write(to: url.appendingPathComponent("0002_bad.sql"), atomically: true, encoding: .utf8)
        try Migrator(domain: "app", directory: url).migrate(store)
        #expect(try migrator.appliedMigrations(in: store) == ["0001_ok", "0002_bad", "0003_later"])
        #expect(try tableExists("later", in: store))
    }

    @Test func anEditedAppliedMigrationIsAnErrorAndChangesNothing() throws {
        let path = directory.path("edited.sqlite")
        let url = try migrationsDirectory(["0001_create_todos.sql": "CREATE TABLE todos(id INTEGER PRIMARY KEY);"])
        do {
            let store = try Store(path: path)
            try Migrator(domain: "app", directory: url).migrate(store)
        }
        // Someone edits the applied file and adds a new one.
        try "CREATE TABLE todos(id INTEGER PRIMARY KEY, title TEXT);"
            .write(to: url.appendingPathComponent("0001_create_todos.sql"), atomically: true, encoding: .utf8)
        try "CREATE TABLE tags(name TEXT);".write(to: url.appendingPathComponent("0002_create_tags.sql"), atomically: true, encoding: .utf8)

        let store = try Store(path: path)
        let migrator = try Migrator(domain: "app", directory: url)
        let error = #expect(throws: StoreError.self) { try migrator.migrate(store) }
        #expect(error?.kind == .migration)
        #expect(error?.message.contains("0001_create_todos.sql") == true)
        #expect(error?.message.contains("changed after it was applied") == true)
        #expect(try !tableExists("tags", in: store))
        #expect(try migrator.appliedMigrations(in: store) == ["0001_create_todos"])
    }

    @Test func rewrittenLineEndingsAreNotAnEdit() throws {
        let url = try migrationsDirectory(["0001_create.sql": "CREATE TABLE a(x);\nCREATE TABLE b(y);\n"])
        let store = try Store(path: directory.path("crlf.sqlite"))
        try Migrator(domain: "app", directory: url).migrate(store)
        try "CREATE TABLE a(x);\r\nCREATE TABLE b(y);\r\n"
            .write(to: url.appendingPathComponent("0001_create.sql"), atomically: true, encoding: .utf8)
        try Migrator(domain: "app", directory: url).migrate(store)
    }

    @Test func anAppliedMigrationNoLongerRegisteredIsAnError() throws {
        let store = try Store(path: directory.path("removed.sqlite"))
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_a", sql: "CREATE TABLE a(x)")
        try migrator.register(name: "0002_b", sql: "CREATE TABLE b(x)")
        try migrator.migrate(store)

        var shorter = try Migrator(domain: "app")
        try shorter.register(name: "0001_a", sql: "CREATE TABLE a(x)")
        try shorter.register(name: "0003_c", sql: "CREATE TABLE c(x)")
        let error = #expect(throws: StoreError.self) { try shorter.migrate(store) }
        #expect(error?.message.contains("0002_b") == true)
        #expect(error?.message.contains("not registered") == true)
        #expect(try !tableExists("c", in: store))
    }

    @Test(arguments: ["create_todos.sql", "0001-create.sql", "_create.sql", "0001_.sql", "01a_create.sql",
                      "0001_create todos.sql", "99999999999999999999999_x.sql"])
    func malformedFileNamesAreErrors(fileName: String) throws {
        let url = try migrationsDirectory(["0001_fine.sql": "SELECT 1", fileName: "SELECT 1"])
        let error = #expect(throws: StoreError.self) { try Migrator(domain: "app", directory: url) }
        #expect(error?.kind == .migration)
        #expect(error?.message.contains("malformed migration file name \"\(fileName)\"") == true)
    }

    @Test func duplicateNumbersAndMissingDirectoriesAreErrors() throws {
        let url = try migrationsDirectory(["0001_a.sql": "SELECT 1", "1_b.sql": "SELECT 2", "0002_c.sql": "SELECT 3"])
        let duplicate = #expect(throws: StoreError.self) { try Migrator(domain: "app", directory: url) }
        #expect(duplicate?.kind == .migration)
        #expect(duplicate?.message.contains("0001_a.sql and 1_b.sql") == true)

        let missing = directory.url.appendingPathComponent("no-such-directory")
        let error = #expect(throws: StoreError.self) { try Migrator(domain: "app", directory: missing) }
        #expect(error?.message.contains("no-such-directory") == true)
    }

    @Test func closureMigrationsMixWithSQLAndAreChecksummedByName() throws {
        let store = try Store(path: directory.path("closures.sqlite"))
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_create", sql: "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
        try migrator.register(name: "0002_seed") { db in
            for body in ["one", "two", "three"] { try db.execute("INSERT INTO notes(body) VALUES (?)", [body]) }
        }
        try migrator.migrate(store)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 3)
        #expect(migrator.migrations[1].checksum == SHA256.hexDigest("0002_seed"))
        #expect(try store.read { try $0.fetchValue("SELECT checksum FROM ripple_migrations WHERE name = '0002_seed'", as: String.self) }
                == SHA256.hexDigest("0002_seed"))

        // A closure that fails rolls back what it did, and the error says which migration.
        struct Refused: Error {}
        var more = migrator
        try more.register(name: "0003_refuse") { db in
            try db.execute("DELETE FROM notes")
            throw Refused()
        }
        let error = #expect(throws: StoreError.self) { try more.migrate(store) }
        #expect(error?.message.contains("0003_refuse") == true)
        #expect(try store.read { try $0.fetchValue("SELECT count(*) FROM notes", as: Int.self) } == 3)
    }

    @Test func aMigrationThatEndsItsTransactionIsAnError() throws {
        let store = try Store(path: directory.path("commit.sqlite"))
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_commits", sql: "CREATE TABLE a(x); COMMIT;")
        let error = #expect(throws: StoreError.self) { try migrator.migrate(store) }
        #expect(error?.underlying?.code == .authorization, "\(String(describing: error))")
        #expect(try migrator.appliedMigrations(in: store).isEmpty)
    }

    @Test func domainsAreTrackedApart() throws {
        let path = directory.path("domains.sqlite")
        var app = try Migrator(domain: "app")
        try app.register(name: "0001_init", sql: "CREATE TABLE app_items(x)")
        var plugin = try Migrator(domain: "plugin")
        try plugin.register(name: "0001_init", sql: "CREATE TABLE plugin_items(x)")
        do {
            let store = try Store(path: path)
            try store.migrate(app)
            #expect(try plugin.pendingMigrations(in: store) == ["0001_init"])
            try store.migrate(plugin)
        }
        // Each domain checks only its own migrations; the store's own schema is unaffected.
        let store = try Store(path: path)
        try store.migrate(app)
        try store.migrate(plugin)
        #expect(try migrationRows(in: store) == Self.storeSchema + ["app/0001_init", "plugin/0001_init"])
        #expect(try app.appliedMigrations(in: store) == ["0001_init"])
        #expect(try tableExists("app_items", in: store) && tableExists("plugin_items", in: store))
    }

    // MARK: Checksums

    @Test func sha256MatchesKnownVectors() {
        #expect(SHA256.hexDigest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hexDigest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // 56 bytes: the padding needs a second block.
        #expect(SHA256.hexDigest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hexDigest([UInt8](repeating: 0x61, count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
