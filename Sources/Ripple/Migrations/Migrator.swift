import Foundation
import RippleSchema

/// An ordered list of schema migrations of one **domain**, applied to a store each in its own
/// transaction and recorded (name, checksum, time) in the table `ripple_migrations`.
///
/// The store applies its own schema (domain `"ripple"`) when it opens; applications register
/// theirs in a domain of their own, from a directory of numbered `.sql` files or in code:
///
/// ```swift
/// var migrator = try Migrator(domain: "app", directory: migrationsURL)  // 0001_create_todos.sql, …
/// try migrator.register(name: "0005_backfill_titles") { db in
///     try db.execute("UPDATE todos SET title = ? WHERE title IS NULL", ["Untitled"])
/// }
/// try migrator.migrate(store)   // or: try store.migrate(migrator)
/// ```
///
/// Rules, checked by ``migrate(_:)`` before it applies anything:
/// * an applied migration whose checksum changed (its file was edited) is an error;
/// * an applied migration that is no longer registered is an error;
/// * pending migrations are applied in registration order (numeric order for files), each
///   together with its bookkeeping row in one `BEGIN IMMEDIATE` transaction. A failing one is
///   rolled back entirely and stops the run; those before it stay applied.
///
/// A migration runs inside its transaction: transaction control and `ATTACH`/`DETACH` in it are
/// refused before they run (a ``DatabaseError`` with code ``DatabaseError/ResultCode/authorization``),
/// and statements that cannot run in a transaction (`VACUUM`, `PRAGMA journal_mode`) fail; either
/// way nothing of the migration is applied.
///
/// Misuse throws rather than traps, since domains and names often come from configuration or
/// files: an empty or reserved domain, an empty name, a name registered twice, migrating while
/// the writer connection is inside a transaction — each a ``StoreError`` of kind
/// ``StoreError/Kind/migration`` naming the domain and the migration.
public struct Migrator: Sendable {
    /// The domain the migrations are recorded under, apart from other domains' migrations.
    public let domain: String
    /// The registered migrations, in the order they apply.
    public private(set) var migrations: [Migration] = []

    /// The domain of the store's own schema, reserved.
    static let storeDomain = "ripple"

    /// An empty migrator for `domain`.
    ///
    /// Throws ``StoreError`` of kind ``StoreError/Kind/migration`` when `domain` is empty or is
    /// the store's reserved `"ripple"`.
    public init(domain: String) throws(StoreError) {
        guard !domain.isEmpty else {
            throw StoreError(.migration, "a migration domain must not be empty: name it after the application or module "
                             + "whose migrations it holds (\"app\")")
        }
        guard domain != Self.storeDomain else {
            throw StoreError(.migration, "the migration domain \"\(Self.storeDomain)\" is reserved for the store's own schema: "
                             + "register your migrations in a domain of your own (\"app\")")
        }
        self.domain = domain
    }

    /// A migrator for `domain` with the migrations of the `NNNN_name.sql` files in `directory`,
    /// in numeric order (`0002_…` before `0010_…`). Other files and sub-directories are ignored.
    ///
    /// Throws ``StoreError`` of kind ``StoreError/Kind/migration`` when `domain` is empty or
    /// reserved, the directory cannot be read, a `.sql` file's name is not `NNNN_name.sql`, or
    /// two files share a number.
    public init(domain: String, directory: URL) throws(StoreError) {
        try self.init(domain: domain)
        let urls: [URL]
        do {
            urls = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.isDirectoryKey])
        } catch {
            throw StoreError(.migration, "cannot read the migrations directory \(directory.path): \(error.localizedDescription)")
        }
        var files: [(name: String, sql: String)] = []
        for url in urls where url.pathExtension == "sql" && !url.lastPathComponent.hasPrefix(".") {
            if (try? url.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) == true { continue }
            do {
                files.append((url.lastPathComponent, try String(contentsOf: url, encoding: .utf8)))
            } catch {
                throw StoreError(.migration, "cannot read the migration file \(url.path): \(error.localizedDescription)")
            }
        }
        try register(files: files, from: directory.path)
    }

    /// The store's own migrator (domain `"ripple"`) over `files` (`NNNN_name.sql` names).
    init(storeSchemaFiles files: [(name: String, sql: String)]) throws(StoreError) {
        self.domain = Self.storeDomain
        try register(files: files, from: "the bundled store schema")
    }

    /// Registers SQL migration `name` (one or more `;`-separated statements), applied after those
    /// registered before it.
    ///
    /// Throws ``StoreError`` of kind ``StoreError/Kind/migration`` (and registers nothing) when
    /// `name` is empty or already registered in this domain.
    public mutating func register(name: String, sql: String) throws(StoreError) {
        try append(Migration(name: name, sql: sql))
    }

    /// Registers a migration written in Swift: `body` runs inside the migration's transaction.
    ///
    /// Its recorded checksum is that of its name only, so later edits to the closure are not
    /// detected: change a released migration by adding a new one.
    ///
    /// Throws as ``register(name:sql:)`` does.
    public mutating func register(name: String, body: @escaping @Sendable (Database) throws -> Void) throws(StoreError) {
        try append(Migration(name: name, body: body))
    }

    private mutating func append(_ migration: Migration) throws(StoreError) {
        guard !migration.name.isEmpty else {
            throw StoreError(.migration, "a migration name must not be empty (domain \"\(domain)\"): name it like "
                             + "0001_create_todos, unique in its domain")
        }
        guard !migrations.contains(where: { $0.name == migration.name }) else {
            throw StoreError(.migration, "migration \"\(migration.name)\" is registered twice in domain \"\(domain)\": "
                             + "names are recorded in the database, so give each migration a name of its own")
        }
        migrations.append(migration)
    }

    /// Registers `files` (`NNNN_name.sql`) in numeric order, checking names and numbers.
    private mutating func register(files: [(name: String, sql: String)], from source: String) throws(StoreError) {
        var numbered: [(number: Int, name: String, fileName: String, sql: String)] = []
        for file in files {
            guard let (number, name) = Self.parse(fileName: file.name) else {
                throw StoreError(.migration, "malformed migration file name \"\(file.name)\" in \(source): "
                                 + "expected NNNN_name.sql (digits, an underscore, then letters, digits, '_' or '-')")
            }
            if let other = numbered.first(where: { $0.number == number }) {
                let pair = [other.fileName, file.name].sorted()
                throw StoreError(.migration, "migration files \(pair[0]) and \(pair[1]) in \(source) share the number \(number)")
            }
            numbered.append((number, name, file.name, file.sql))
        }
        for file in numbered.sorted(by: { $0.number < $1.number }) {
            try append(Migration(name: file.name, fileName: file.fileName, sql: file.sql))
        }
    }

    /// The number and name (file name without `.sql`) of `NNNN_name.sql`, or `nil` when malformed.
    static func parse(fileName: String) -> (number: Int, name: String)? {
        guard fileName.hasSuffix(".sql") else { return nil }
        let name = String(fileName.dropLast(4))
        guard let underscore = name.firstIndex(of: "_") else { return nil }
        let digits = name[..<underscore], rest = name[name.index(after: underscore)...]
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(digits),
              !rest.isEmpty, rest.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
        else { return nil }
        return (number, name)
    }

    // MARK: Applying

    /// Applies the pending migrations to `store` (the same as ``Store/migrate(_:)``).
    ///
    /// Throws ``StoreError`` of kind ``StoreError/Kind/migration``: an applied migration was
    /// edited or is no longer registered (nothing is applied), or a migration failed (it is
    /// rolled back; the message names it and carries SQLite's message, and ``StoreError/underlying``
    /// the ``DatabaseError``).
    public func migrate(_ store: Store) throws(StoreError) {
        try store.migrate(self)
    }

    /// The names of this domain's migrations applied to `store`, in the order they were applied.
    public func appliedMigrations(in store: Store) throws(StoreError) -> [String] {
        try reading(store) { db throws(StoreError) in try applied(db).map(\.name) }
    }

    /// The names of the registered migrations not yet applied to `store`, in the order they
    /// would apply.
    public func pendingMigrations(in store: Store) throws(StoreError) -> [String] {
        try reading(store) { db throws(StoreError) in
            let applied = Set(try applied(db).map(\.name))
            return migrations.map(\.name).filter { !applied.contains($0) }
        }
    }

    private func reading<T>(_ store: Store, _ body: (Database) throws(StoreError) -> T) throws(StoreError) -> T {
        do {
            return try store.read { db in try body(db) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.migration, "cannot read the migrations of domain \"\(domain)\": \(error)", underlying: error as? DatabaseError)
        }
    }

    /// Verifies the applied migrations of this domain, then applies the pending ones, each in its
    /// own transaction. With `checkOnly`, pending migrations are an error instead (a read-only store).
    ///
    /// Throws when `db` is inside a transaction (one begun with `BEGIN` and left open): migrations
    /// are not applied inside another transaction.
    func migrate(_ db: Database, checkOnly: Bool = false) throws(StoreError) {
        guard !db.isInTransaction else {
            throw StoreError(.migration, "cannot apply the migrations of domain \"\(domain)\": the writer connection is inside "
                             + "a transaction (a BEGIN without its COMMIT or ROLLBACK?). Migrations run in transactions of "
                             + "their own, not inside a write or an open transaction: end it first, then migrate")
        }
        if !checkOnly { try createBookkeepingTable(db) }
        let applied = try applied(db)
        let registered = Dictionary(migrations.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for record in applied {
            guard let migration = registered[record.name] else {
                throw StoreError(.migration, "migration \(record.name) (domain \"\(domain)\") is applied to this database "
                                 + "but not registered: was it removed or renamed, or is the database from a newer version?")
            }
            try verify(migration, appliedChecksum: record.checksum)
        }
        let appliedNames = Set(applied.map(\.name))
        let pending = migrations.filter { !appliedNames.contains($0.name) }
        if checkOnly, let first = pending.first {
            throw StoreError(.migration, "migration \(first.displayName) (domain \"\(domain)\") is not applied to this "
                             + "read-only database: open it read-write once to bring its schema up to date")
        }
        for migration in pending { try apply(migration, to: db) }
    }

    private func verify(_ migration: Migration, appliedChecksum: String) throws(StoreError) {
        guard migration.checksum == appliedChecksum else {
            throw StoreError(.migration, "migration \(migration.displayName) (domain \"\(domain)\") changed after it was applied "
                             + "(checksum \(migration.checksum), applied as \(appliedChecksum)): restore it, and add a new "
                             + "migration for the change; nothing was migrated")
        }
    }

    /// Runs `migration` and records it, in one immediate transaction.
    private func apply(_ migration: Migration, to db: Database) throws(StoreError) {
        do {
            try db.transaction(.immediate) {
                // Another connection (another process) may have applied it since we looked.
                if let checksum = try db.fetchValue("SELECT checksum FROM ripple_migrations WHERE domain = ? AND name = ?",
                                                    [domain, migration.name], as: String.self) {
                    return try verify(migration, appliedChecksum: checksum)
                }
                do { try migration.run(db) } catch { throw failure(of: migration, error) }
                guard db.isInTransaction else {
                    throw StoreError(.migration, "migration \(migration.displayName) (domain \"\(domain)\") ended its own "
                                     + "transaction: a migration must not contain BEGIN, COMMIT or ROLLBACK")
                }
                try db.execute("INSERT INTO ripple_migrations (domain, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                               [domain, migration.name, migration.checksum, Date().timeIntervalSince1970])
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw failure(of: migration, error)
        }
    }

    /// The error for `migration` failing with `error`: names the migration, carries SQLite's message.
    private func failure(of migration: Migration, _ error: any Error) -> StoreError {
        let prefix = "migration \(migration.displayName) (domain \"\(domain)\") failed: "
        switch error {
        case let error as DatabaseError: return StoreError(.migration, prefix + error.message, underlying: error)
        case let error as StoreError: return StoreError(.migration, prefix + error.message, underlying: error.underlying)
        default: return StoreError(.migration, prefix + "\(error)")
        }
    }

    // MARK: Bookkeeping

    private func createBookkeepingTable(_ db: Database) throws(StoreError) {
        do {
            guard try !bookkeepingTableExists(db) else { return }
            try db.executeScript("""
                CREATE TABLE IF NOT EXISTS ripple_migrations (
                    domain TEXT NOT NULL,
                    name TEXT NOT NULL,
                    checksum TEXT NOT NULL,
                    applied_at REAL NOT NULL,
                    PRIMARY KEY (domain, name)
                )
                """)
        } catch {
            throw StoreError(.migration, "cannot create the table ripple_migrations: \(error.message)", underlying: error)
        }
    }

    private func bookkeepingTableExists(_ db: Database) throws(DatabaseError) -> Bool {
        try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'ripple_migrations'", as: Int.self) == 1
    }

    /// This domain's applied migrations, in the order they were applied (none when the
    /// bookkeeping table does not exist).
    private func applied(_ db: Database) throws(StoreError) -> [(name: String, checksum: String)] {
        do {
            guard try bookkeepingTableExists(db) else { return [] }
            return try db.fetchAll("SELECT name, checksum FROM ripple_migrations WHERE domain = ? ORDER BY rowid", [domain])
                .map { row in (String(sqlValue: row.values[0]) ?? "", String(sqlValue: row.values[1]) ?? "") }
        } catch {
            throw StoreError(.migration, "cannot read the applied migrations of domain \"\(domain)\": \(error.message)", underlying: error)
        }
    }
}

extension Migrator {
    /// The store's own schema (domain `"ripple"`), from the bundled `Migrations/*.sql` files.
    static func storeSchema() throws(StoreError) -> Migrator {
        try bundledStoreSchema.get()
    }

    private static let bundledStoreSchema = Result { () throws(StoreError) -> Migrator in
        let files: [(name: String, sql: String)]
        do {
            files = try StoreSchema.migrationFiles()
        } catch {
            throw StoreError(.migration, "cannot read the store's bundled schema: \(error.localizedDescription)")
        }
        return try Migrator(storeSchemaFiles: files)
    }
}
