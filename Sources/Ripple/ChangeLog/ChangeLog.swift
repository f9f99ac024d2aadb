import Foundation
import RippleSQLite

/// A committed change to one table, as the change log records it: every row of `table` that
/// `operation` touched in the write transaction that committed `version`.
public struct ChangeLogEntry: Hashable, Sendable {
    /// What happened to a row.
    public enum Operation: String, Hashable, Sendable {
        case insert, update, delete
    }

    /// The version of the write transaction.
    public var version: Int64
    /// The table changed.
    public var table: String
    /// The operation.
    public var operation: Operation
    /// The primary keys of the rows, as text (see ``Store/changes(after:upTo:)``); empty for a
    /// change whose rows are not known: a virtual table's (its module wrote its shadow tables),
    /// a schema change or a write made without Ripple (table `"*"`).
    public var rowKeys: [String]
    /// Where the version's commit came from; `nil` for a version committed before Ripple
    /// recorded origins.
    public var origin: CommitOrigin? = nil
    /// The tag its caller gave the version's commit (see ``Store/write(tag:_:)``), if any.
    public var tag: String? = nil
}

/// How long the change log keeps entries.
public enum ChangeLogRetention: Hashable, Sendable {
    /// Keep every version.
    case unlimited
    /// Keep the changes of the newest `n` versions.
    case versions(Int)
    /// Keep the changes of the versions committed in the last `seconds` (by the clock of the
    /// process that committed them); history reaches back to the last version committed before.
    case duration(TimeInterval)
}

/// What one commit changed, as live queries need to hear it.
struct CommitSummary: Sendable {
    /// The version the commit took.
    var version: Int64
    /// When the summary also stands for other connections' commits taken in with it (or noticed
    /// together), the oldest version it covers; `nil`: only `version`. A reader at a version
    /// inside the range sees part of what it tells.
    var coveredFrom: Int64? = nil
    /// The tables whose rows changed, including tables changed by other processes since the
    /// previous commit; ``ChangeLog/everyTable`` when that cannot be known.
    var tables: Set<String>
    /// When every changed row is known (no foreign commit, no schema change, not too many rows):
    /// the keys of the changed rows, per table, exactly as stored.
    var rowKeys: [String: Set<RowKey>]? = nil
    /// With ``rowKeys``: the tables where rows were inserted or deleted (not only updated).
    var insertedOrDeleted: Set<String> = []
    /// Where the commit came from; `nil` when the summary stands for other connections' commits
    /// (their origins are in the change log).
    var origin: CommitOrigin? = nil
    /// The tag its caller gave the commit.
    var tag: String? = nil
}

/// The writer's side of versioning: gives every committed write transaction that changed rows the
/// next version, and logs its changes in the same transaction, right before it commits.
///
/// It also notices commits made by other connections to the same file (other processes, other
/// `Store` instances): their versions show in `ripple_meta`, and `PRAGMA data_version` on the
/// writer changes only when *another* connection commits. A foreign write that took no version
/// (made without Ripple, e.g. in the `sqlite3` shell) is adopted under the next version with a
/// ``everyTable`` entry, since which rows it changed is unknown.
///
/// Lives on the writer connection and is only used under the writer's lock.
final class ChangeLog {
    /// The table name logged for a change of unknown extent: every query must re-read.
    static let everyTable = "*"

    let capture = ChangeCapture()
    private let retention: ChangeLogRetention
    /// The newest version this connection knows of (its own commits and foreign ones it noticed).
    private var knownVersion: Int64
    /// `PRAGMA data_version` when this connection last looked.
    private var dataVersion: Int64
    /// The count of Ripple commits that took no version (`ripple_meta` key `commits`) when this
    /// connection last looked: a foreign commit that changed neither it nor the version was made
    /// without Ripple.
    private var knownCommits: Int64
    /// The current transaction's version also stands for a foreign write that took none.
    private var adoptedForeignWrite = false
    /// The newest committed version this connection knows of, and when it committed
    /// (`ripple_versions.committed_at`; `nil` when the log keeps no row for it): the state the
    /// file must still continue (see ``checkLineage(_:current:)``).
    private var lineage: (version: Int64, committedAt: Double?) = (0, nil)
    /// The version and time the current write transaction took, once it commits.
    private var pendingLineage: (version: Int64, committedAt: Double?)?
    /// Set once the file was found holding another history: every later look and commit throws it.
    private var replacement: StoreError?
    /// Told once when the file is found holding another history (the store stops using it).
    var onReplaced: ((StoreError) -> Void)?

    /// This connection's name in `ripple_meta`'s `maintenance` while it runs statements outside a
    /// transaction (see ``beginMaintenance(_:)``): its process id, then a random part.
    private let maintenanceName = "\(getpid()):\(UUID().uuidString)"
    /// This connection's name is (or may still be) in `maintenance`: the next commit clears it.
    private var namedInMaintenance = false
    /// While named in `maintenance`: the connection's own count of commits when its statements
    /// began (they are its commits since).
    private var maintenanceCommitsBase: Int?
    /// Whether this connection wrote the mark of committed transactions (see ``writeMark(_:version:commits:)``)
    /// since it opened: its first commit does, so that the mark is always there to count from.
    private var markWritten = false
    /// The wal-index's count of committed transactions once the transaction that took the last
    /// version commits: read under the write lock, plus one (`nil`: none took one since).
    private var countIfCommitted: UInt32?
    /// ``countIfCommitted`` once that transaction committed (``didCommit()``); `nil` otherwise.
    /// Found in the header when the writer is released, it says no other connection committed
    /// in between. (A transaction that took a version and then rolled back — a deferred foreign
    /// key, say — leaves the count one short: another connection's commit would make it match.)
    private var countAfterCommit: UInt32?

    init(installingOn db: Database, retention: ChangeLogRetention) throws {
        self.retention = retention
        // One read transaction: the three describe the same state.
        (knownVersion, knownCommits, dataVersion, lineage) = try db.transaction(.deferred) {
            let version = try Self.version(db)
            return (version, try Self.commits(db), try Self.dataVersion(db), (version, try Self.committedAt(version, in: db)))
        }
        capture.install(on: db)
        db.changeCapture = capture
    }

    static func version(_ db: Database) throws -> Int64 {
        try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'version'", as: Int64.self) ?? 0
    }

    private static func commits(_ db: Database) throws -> Int64 {
        try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'commits'", as: Int64.self) ?? 0
    }

    /// When `version` committed, as the log keeps it (`nil`: no row, pruned or never written).
    private static func committedAt(_ version: Int64, in db: Database) throws -> Double? {
        try db.fetchValue("SELECT committed_at FROM ripple_versions WHERE version = ?", [version], as: Double.self)
    }

    /// Throws ``StoreError/Kind/fileReplaced`` when the file no longer continues the history this
    /// connection knows: its version is older than one already committed, or the version known
    /// names another commit (its time differs, or its row is gone while the log's history starts
    /// before it). That is what another program restoring an older copy of the file over it does
    /// (SQLite's backup API, `.restore` in the `sqlite3` shell), and what later commits to the
    /// copy cannot hide. Called in a transaction, where `current` was read, whenever another
    /// connection committed since this one last looked.
    private func checkLineage(_ db: Database, current: Int64) throws {
        if let replacement { throw replacement }
        var reason: String?
        if current < lineage.version {
            reason = "its version went back from \(lineage.version) to \(current)"
        } else if let known = lineage.committedAt {
            let now = try Self.committedAt(lineage.version, in: db)
            if now == nil {
                let oldest = try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'oldest_version'", as: Int64.self) ?? 0
                if oldest < lineage.version { reason = "its version \(lineage.version) is no longer in its change log" }
            } else if now != known {
                reason = "its version \(lineage.version) now names another commit than the one this store saw"
            }
        }
        guard let reason else { return }
        let error = StoreError(.fileReplaced, "the database file holds another history than the one this store followed: "
                               + "\(reason) (an older copy of the file was restored over it, say). Versions would name "
                               + "two states, so the store writes and reads nothing more and its live queries end. "
                               + "Open a new Store: its versions continue the file's history as it is now")
        replacement = error
        onReplaced?(error)
        throw error
    }

    /// Called inside a write transaction of this connection that is about to commit without
    /// taking a version (``record(_:)`` returned `nil`): SQLite may still write pages (a statement
    /// that failed, a savepoint rolled back), which other connections see in `PRAGMA
    /// data_version`. Counting the commit tells them it was Ripple's, not a write without Ripple.
    ///
    /// But a write without Ripple since this connection looked, that no Ripple commit took in
    /// (neither the version nor the count moved), is taken in here, as a versioned commit would:
    /// counted instead, it would pass for this Ripple commit, and nobody would re-read it. The
    /// commit then takes a version, logged as a change to every table, and its summary is
    /// returned, for the caller to route.
    func recordCommitWithoutVersion(_ db: Database) throws -> CommitSummary? {
        // Inside the write transaction: nobody else commits between these looks and the count.
        let data = try Self.dataVersion(db)
        var writesMark = namedInMaintenance || !markWritten
        if data != dataVersion {
            let version = try Self.version(db)
            try checkLineage(db, current: version)
            switch try othersCommits(db, version: version, commits: try Self.commits(db), versionMoved: version != knownVersion) {
            case .withoutRipple: return try adoptForeignWrite(db)
            case .unknown: writesMark = true
            case .maintenanceElsewhere: writesMark = false
            case .ripple: break
            }
        }
        guard let commits = try db.fetchValue(
            "UPDATE ripple_meta SET value = value + 1 WHERE key = 'commits' RETURNING value", as: Int64.self) else { return nil }
        if writesMark { try writeMark(db, version: try Self.version(db), commits: commits) }
        try endMaintenance(db)
        // When no other connection committed since this one looked, its own count stays exact.
        if data == dataVersion { knownCommits = commits }
        return nil
    }

    /// `PRAGMA data_version` (read after every commit while the file is watched: a cached
    /// statement, no row built).
    private static func dataVersion(_ db: Database) throws -> Int64 {
        let statement = try db.cachedStatement("PRAGMA data_version")
        defer { statement.reset() }
        return try statement.step() ? statement.integer(at: 0) : 0
    }

    /// `PRAGMA schema_version` when the current write transaction began.
    private var schemaVersionAtBegin: Int64 = 0
    /// The current write transaction's schema changes were declared history-preserving (see
    /// ``Database/declareHistoryPreservingSchemaChange()``): no ``everyTable`` entry is logged.
    var schemaChangeKeepsHistory = false

    /// Called when a write transaction begins, before any of its statements.
    func begin(_ db: Database) throws {
        (countIfCommitted, countAfterCommit, pendingLineage) = (nil, nil, nil)
        schemaChangeKeepsHistory = false
        capture.reset()
        try capture.refreshSchemaIfNeeded(db)
        schemaVersionAtBegin = capture.schemaVersion   // just read by the capture: no second PRAGMA
    }

    private static func schemaVersion(_ db: Database) throws -> Int64 {
        try db.fetchValue("PRAGMA schema_version", as: Int64.self) ?? 0
    }

    /// Called inside the transaction after its work: when rows changed, takes the next version and
    /// writes the log. Returns what the commit changed, or `nil` when the transaction changed no row.
    ///
    /// One log row per table and operation, keys in the order the rows changed, exactly
    /// (`exact_keys`, a list of ``RowKey`` encodings: each key written once; their text is made
    /// when read). Updates and deletes also log before-images, for
    /// time travel (`before_images`, see ``BeforeImage``): what each key held before the
    /// transaction — the columns an update changed, the whole row of a delete — with the key's
    /// first change in the transaction (a key first inserted did not exist before). Inserts log
    /// none.
    ///
    /// A virtual table whose module wrote its shadow tables logs one update with no keys.
    ///
    /// A transaction that changed the schema (a table created, altered or dropped) also takes a
    /// version, logged as a change to ``everyTable``: queries over the old schema must re-read.
    /// (One whose schema changes were declared history-preserving logs none: live queries still
    /// re-read, and history crosses it.)
    func record(_ db: Database, origin: CommitOrigin, tag: String?) throws -> CommitSummary? {
        try capture.resolvePending(db)
        let schemaChanged = try Self.schemaVersion(db) != schemaVersionAtBegin
        let count = capture.changeCount
        let virtualTables = capture.changedVirtualTables
        guard count > 0 || schemaChanged || !virtualTables.isEmpty else { return nil }
        // Statements run outside a transaction can drop the store's own tables: nothing to log
        // in then (the store installs its log again once they exist).
        if schemaChanged, try !Self.isInstalled(in: db) {
            capture.reset()
            db.changeLog = nil
            return nil
        }
        let version = try nextVersion(db, origin: origin, tag: tag)
        let tellsKeys = count <= Self.knownRowLimit
        let groups = capture.groups(keepingKeys: tellsKeys)
        for group in groups { try insertEntry(db, version: version, group) }
        for table in virtualTables {
            // Which rows changed is not known (the module wrote its shadow tables): no keys.
            try db.execute("INSERT INTO ripple_changes(version, table_name, operation) VALUES (?, ?, 'update')", [version, table])
        }
        // Tables are routed by their names folded as SQLite folds them (see ``SQLIdentifier/folded(_:)``).
        let changedTables = Set((groups.map(\.table) + virtualTables).map(SQLIdentifier.folded))
        // Other connections' commits this one had not noticed take versions before this one; their
        // rows are not among this commit's, so then the changed rows are not all known.
        let takesInOthers = knownVersion < version - 1
        let coveredFrom = takesInOthers ? knownVersion + 1 : nil
        var summary = try finishRecord(db, version: version, changedTables: changedTables, schemaChanged: schemaChanged)
        summary.coveredFrom = coveredFrom
        (summary.origin, summary.tag) = (origin, tag)
        if summary.tables == changedTables && tellsKeys && !takesInOthers {
            var rowKeys: [String: Set<RowKey>] = [:]
            for group in groups {
                let table = SQLIdentifier.folded(group.table)
                rowKeys[table, default: []].formUnion(group.rowKeys)
                if group.operation != .update { summary.insertedOrDeleted.insert(table) }
            }
            summary.rowKeys = rowKeys
        }
        capture.reset()
        return summary
    }

    /// Writes one log row. The keys' list and the before-images are bound where they lie, with
    /// no copy by SQLite (a key may be large).
    private func insertEntry(_ db: Database, version: Int64, _ group: ChangeCapture.Group) throws {
        let statement = try db.cachedStatement("""
            INSERT INTO ripple_changes(version, table_name, operation, exact_keys, before_images) VALUES (?, ?, ?, ?, ?)
            """)
        try group.keys.withUnsafeBytes { keys in
            try (group.beforeImages ?? []).withUnsafeBytes { images in
                // Reset (bindings cleared) before the bytes go out of scope.
                defer { statement.reset() }
                try statement.bindInteger(version, at: 1)
                try statement.bindTextValue(group.table, at: 2)
                try statement.bindTextValue(group.operation.rawValue, at: 3)
                try statement.bindRawBlob(keys, at: 4, copying: false)
                if group.beforeImages != nil {
                    try statement.bindRawBlob(images, at: 5, copying: false)
                } else {
                    try statement.bindNull(at: 5)
                }
                _ = try statement.step()
            }
        }
    }

    /// The end of ``record(_:)``: notes foreign commits since the last one and a schema change,
    /// and marks `version` known. The summary's tables hold ``everyTable`` when either happened.
    private func finishRecord(_ db: Database, version: Int64, changedTables: Set<String>,
                              schemaChanged: Bool) throws -> CommitSummary {
        var tables = changedTables
        tables.formUnion(try foreignTables(db, after: knownVersion, through: version - 1))
        if schemaChanged && !adoptedForeignWrite && !schemaChangeKeepsHistory {
            try db.execute("INSERT INTO ripple_changes(version, table_name, operation) VALUES (?, ?, 'update')",
                           [version, Self.everyTable])
        }
        if adoptedForeignWrite || schemaChanged { tables.insert(Self.everyTable) }
        adoptedForeignWrite = false
        schemaChangeKeepsHistory = false
        knownVersion = version
        return CommitSummary(version: version, tables: tables)
    }

    /// The transaction that took the last version committed (the commit pipeline says so once
    /// its COMMIT returned).
    func didCommit() {
        countAfterCommit = countIfCommitted
        if let pendingLineage { lineage = pendingLineage }
        pendingLineage = nil
        countIfCommitted = nil
    }

    /// Adds one to the store's version in `ripple_meta`, in the write transaction, and returns it.
    /// When the row still holds the version this connection knows of (no other connection took
    /// one since, the usual case), the new value is set, not read back (`RETURNING` costs an
    /// extra pass through SQLite's result machinery).
    private func takeVersion(_ db: Database) throws -> Int64 {
        let bump = try db.cachedStatement("UPDATE ripple_meta SET value = ?1 WHERE key = 'version' AND value = ?2")
        defer { bump.reset() }
        try bump.bindInteger(knownVersion + 1, at: 1)
        try bump.bindInteger(knownVersion, at: 2)
        _ = try bump.step()
        if db.changedRowCount == 1 { return knownVersion + 1 }
        guard let version = try db.fetchValue(
            "UPDATE ripple_meta SET value = value + 1 WHERE key = 'version' RETURNING value", as: Int64.self) else {
            throw StoreError(.migration, "the store's schema has no version row (ripple_meta)")
        }
        return version
    }

    /// The wal-index's count of committed transactions now (see
    /// ``WALIndexHeader/transactionCount``); `nil` when there is no wal-index (in memory, not in
    /// WAL mode). The mapping is asked for each time (it goes when the journal mode changes).
    private func walTransactionCount(_ db: Database) -> UInt32? {
        guard let index = ripple_wal_index(db.handle) else { return nil }
        return WALIndexHeader(index: UnsafeRawPointer(index))?.transactionCount
    }

    /// The mark the commits of other connections are counted from (see ``othersCommits(_:version:commits:versionMoved:)``):
    /// the wal-index's count of committed transactions as a Ripple commit began, and the version
    /// and Ripple's count of commits without a version right after it.
    private struct WALMark {
        var transactions: UInt32
        var version: Int64
        var commits: Int64
    }

    /// Writes the mark, in a Ripple write transaction about to commit (under the write lock, so
    /// the count is exact): this commit makes the count one more. `version` and `commits` are
    /// as this commit leaves them. Without a wal-index (in memory), the mark is cleared.
    private func writeMark(_ db: Database, version: Int64, commits: Int64) throws {
        let statement = try db.cachedStatement("""
            UPDATE ripple_meta SET value = CASE key WHEN 'wal_mark' THEN ?1 WHEN 'wal_mark_version' THEN ?2 ELSE ?3 END
            WHERE key IN ('wal_mark', 'wal_mark_version', 'wal_mark_commits')
            """)
        defer { statement.reset() }
        if let count = walTransactionCount(db) {
            try statement.bindInteger(Int64(count), at: 1)
            try statement.bindInteger(version, at: 2)
            try statement.bindInteger(commits, at: 3)
        } else {
            for index in Int32(1)...3 { try statement.bindNull(at: index) }
        }
        _ = try statement.step()
        markWritten = true
    }

    private func readMark(_ db: Database) throws -> WALMark? {
        let statement = try db.cachedStatement("""
            SELECT (SELECT value FROM ripple_meta WHERE key = 'wal_mark'), (SELECT value FROM ripple_meta WHERE key = 'wal_mark_version'),
                   (SELECT value FROM ripple_meta WHERE key = 'wal_mark_commits')
            """)
        defer { statement.reset() }
        guard try statement.step(), !statement.isNull(at: 0), !statement.isNull(at: 1), !statement.isNull(at: 2) else { return nil }
        return WALMark(transactions: UInt32(truncatingIfNeeded: statement.integer(at: 0)), version: statement.integer(at: 1),
                       commits: statement.integer(at: 2))
    }

    /// What the commits of other connections since this one last looked were.
    private enum OthersCommits {
        /// Ripple's only (and this connection's own statements outside a transaction).
        case ripple
        /// At least one was made without Ripple.
        case withoutRipple
        /// Another live Ripple connection runs statements outside a transaction: commits without
        /// a version may be its own (they take one when it records them).
        case maintenanceElsewhere
        /// Cannot be told (no mark, a wal-index rebuilt since it was written): only a commit of
        /// nothing but a write made without Ripple is recognized, by Ripple's counters.
        case unknown
    }

    /// Tells the commits of other connections since this one last looked (`data_version` moved),
    /// given the version and Ripple's count of commits without one as they are now (before this
    /// commit's own), and whether Ripple's version moved since this connection last looked.
    ///
    /// `data_version` alone cannot tell a write made without Ripple among other Ripple
    /// connections' commits. The wal-index counts every committed transaction; every Ripple
    /// commit moves exactly one of Ripple's two counters; so the commits since the mark beyond
    /// the marked one, Ripple's, and this connection's own statements (while it runs some outside
    /// a transaction) were made without Ripple. Exact under the write lock; in a read
    /// transaction, commits after its snapshot count too (the look under the lock decides).
    private func othersCommits(_ db: Database, version: Int64, commits: Int64, versionMoved: Bool) throws -> OthersCommits {
        let counted = try countedCommits(db, version: version, commits: commits, versionMoved: versionMoved)
        // Only commits that cannot be accounted for may be another connection's statements.
        if counted == .ripple { return .ripple }
        return try maintenanceElsewhere(db) ? .maintenanceElsewhere : counted
    }

    /// ``othersCommits(_:version:commits:versionMoved:)`` by the counts alone.
    private func countedCommits(_ db: Database, version: Int64, commits: Int64, versionMoved: Bool) throws -> OthersCommits {
        if !versionMoved && commits == knownCommits { return .withoutRipple }
        guard let now = walTransactionCount(db), let mark = try readMark(db) else { return .unknown }
        let since = Int64(now &- mark.transactions)
        guard since >= 1, since < 1 << 31 else { return .unknown }
        let ripple = (version - mark.version) + (commits - mark.commits)
        let own = maintenanceCommitsBase.map { Int64(db.commitCount - $0) } ?? 0
        let foreign = since - 1 - ripple - own
        guard foreign >= 0 else { return .unknown }
        return foreign > 0 ? .withoutRipple : .ripple
    }

    /// Called before statements run outside a transaction on this connection (a
    /// ``Store/writeWithoutTransaction(tag:_:)``, migrations), in a write transaction of its own:
    /// names this connection in `ripple_meta`'s `maintenance` (cleared by ``record(_:origin:tag:)``
    /// of their version, or ``endMaintenance(_:)``). Their commits have no version until then;
    /// other connections that see the name do not adopt them as writes made without Ripple.
    /// Counted as a Ripple commit without a version (which may adopt an earlier write made
    /// without Ripple: its summary, for the caller to route).
    func beginMaintenance(_ db: Database) throws -> CommitSummary? {
        let adopted = try recordCommitWithoutVersion(db)
        try db.execute("UPDATE ripple_meta SET value = ? WHERE key = 'maintenance'", [maintenanceName])
        namedInMaintenance = true
        // Its statements are counted from this commit: the mark, and this connection's count.
        try writeMark(db, version: try Self.version(db), commits: try Self.commits(db))
        maintenanceCommitsBase = db.commitCount + 1
        return adopted
    }

    /// Clears this connection's name from `ripple_meta`'s `maintenance` (see
    /// ``beginMaintenance(_:)``), inside a write transaction of this connection: the one that
    /// records the statements, or the next one when that failed.
    private func endMaintenance(_ db: Database) throws {
        guard namedInMaintenance else { return }
        try db.execute("UPDATE ripple_meta SET value = NULL WHERE key = 'maintenance' AND value = ?", [maintenanceName])
        namedInMaintenance = false
        maintenanceCommitsBase = nil
    }

    /// Whether another Ripple connection, in a process that is alive, runs statements outside a
    /// transaction (see ``beginMaintenance(_:)``): a commit without a version may be theirs,
    /// about to take one.
    private func maintenanceElsewhere(_ db: Database) throws -> Bool {
        let statement = try db.cachedStatement("SELECT value FROM ripple_meta WHERE key = 'maintenance'")
        defer { statement.reset() }
        guard try statement.step(), !statement.isNull(at: 0) else { return false }
        let name = statement.text(at: 0)
        return name != maintenanceName && Self.isRunning(maintenance: name)
    }

    /// Whether the connection named `name` in `maintenance` belongs to a process that is alive
    /// (a process that crashed while it ran its statements left its name: ignored).
    static func isRunning(maintenance name: String) -> Bool {
        guard let pid = name.split(separator: ":").first.flatMap({ pid_t($0) }) else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// Commits changing more rows than this do not tell observers their keys (they re-read).
    private static var knownRowLimit: Int { 256 }

    /// `PRAGMA data_version` now, and whether this connection noticed every other connection's
    /// commit up to it (no other committed since it last looked); `nil` when it cannot tell.
    ///
    /// `header` is the wal-index header read after the writer's last commit. When this
    /// connection's commit left the count of transactions it holds at what that commit expected
    /// (see ``countAfterCommit``), no other connection committed since this one looked: the
    /// answer is known without a read transaction (`PRAGMA data_version` outside one takes and
    /// drops a read lock: about 3 µs of each write while live queries watch the file).
    func foreignCommits(_ db: Database, header: WALIndexHeader?) -> (dataVersion: Int64, noticed: Bool)? {
        defer { countAfterCommit = nil }
        if let expected = countAfterCommit, header?.transactionCount == expected { return (dataVersion, true) }
        guard let current = try? Self.dataVersion(db) else { return nil }
        return (current, current == dataVersion)
    }

    /// Notices commits of other connections since this one last looked, outside a transaction of
    /// its own: a foreign write without a version is adopted (when `adopt`) under a new version.
    /// Returns what changed, or `nil` when nothing did.
    ///
    /// It reads first: a commit by Ripple took a version, which a read transaction sees. Only a
    /// write made without Ripple (neither the version nor the count of commits moved) needs the
    /// write lock, to be given a version; so looking does not compete with another process's
    /// writer for the lock while that process writes through Ripple.
    ///
    /// Statements that another Ripple connection runs outside a transaction (see
    /// ``beginMaintenance(_:)``) are not adopted: they take a version when it records them.
    ///
    /// `beforeLock` (for tests) runs when a foreign commit was seen, before the transaction begins.
    func noticeForeignCommits(_ db: Database, adopt: Bool, beforeLock: (() -> Void)? = nil) throws -> CommitSummary? {
        guard try Self.dataVersion(db) != dataVersion else { return nil }
        beforeLock?()
        switch try db.transaction(.deferred, { try look(db, adopting: false, mayAdopt: adopt) }) {
        case .noticed(let summary): return summary
        case .nothing: return nil
        case .madeWithoutRipple:
            let outcome = try db.transaction(.immediate) { try look(db, adopting: true, mayAdopt: true) }
            if case .noticed(let summary) = outcome { return summary }
            return nil
        }
    }

    /// What one look at the foreign commits found.
    private enum Look {
        case noticed(CommitSummary)
        /// Only Ripple commits that took no version (nothing changed), or nothing Ripple can tell.
        case nothing
        /// A write made without Ripple, to adopt in a write transaction (nothing was updated).
        case madeWithoutRipple
    }

    /// Looks, inside a transaction, at what other connections committed since this one last
    /// looked; `adopting` (in a write transaction) gives a write made without Ripple a version.
    private func look(_ db: Database, adopting: Bool, mayAdopt: Bool) throws -> Look {
        let current = try Self.version(db)
        try checkLineage(db, current: current)
        let commits = try Self.commits(db)
        // Read again inside the transaction: the look before it may predate commits made before
        // it began, which would later be mistaken for a write without a version.
        let data = try Self.dataVersion(db)
        // A write made without Ripple: nothing of Ripple's moved, or commits without a mark came
        // after the last Ripple commit (exact under the write lock; in a read transaction a
        // Ripple commit after this one's snapshot looks the same, and the look under the lock
        // decides).
        let withoutRipple = try mayAdopt
            && othersCommits(db, version: current, commits: commits, versionMoved: current != knownVersion) == .withoutRipple
        if withoutRipple && !adopting { return .madeWithoutRipple }
        var noticed: CommitSummary?
        if current > knownVersion {
            let tables = try foreignTables(db, after: knownVersion, through: current)
            noticed = CommitSummary(version: current, coveredFrom: knownVersion + 1, tables: tables)
        }
        if current > lineage.version { lineage = (current, try Self.committedAt(current, in: db)) }
        guard withoutRipple else {
            (knownVersion, knownCommits, dataVersion) = (max(knownVersion, current), commits, data)
            return noticed.map(Look.noticed) ?? .nothing
        }
        // Adopted under the next version (data_version is left as it was: the version sees it
        // moved, and logs the change to every table).
        (knownVersion, knownCommits) = (max(knownVersion, current), commits)
        var adopted = try adoptForeignWrite(db)
        adopted.coveredFrom = noticed?.coveredFrom
        return .noticed(adopted)
    }

    /// Gives a write made without Ripple, inside this connection's write transaction, a version
    /// of its own (nextVersion sees data_version moved and logs it as a change to every table),
    /// so that live queries re-read.
    private func adoptForeignWrite(_ db: Database) throws -> CommitSummary {
        let version = try nextVersion(db, origin: .foreign, tag: nil)
        adoptedForeignWrite = false
        knownVersion = version
        return CommitSummary(version: version, tables: [Self.everyTable], origin: .foreign)
    }

    /// Bumps the stored version. A foreign write without a version since this connection last
    /// looked (data_version moved, the version did not) is logged with it as a change to
    /// ``everyTable``. Runs inside a write transaction, so no other connection commits meanwhile.
    private func nextVersion(_ db: Database, origin: CommitOrigin, tag: String?) throws -> Int64 {
        let version = try takeVersion(db)
        // Under the write lock: the count this transaction leaves if it commits.
        countIfCommitted = walTransactionCount(db).map { $0 &+ 1 }
        let data = try Self.dataVersion(db)
        // The count can only have moved when another connection committed (data_version moved).
        let commits = data == dataVersion ? knownCommits : try Self.commits(db)
        // The first commit of the connection writes the mark; one that took in others' commits
        // without Ripple, or this connection's statements, writes it again.
        var writesMark = namedInMaintenance || !markWritten
        if data != dataVersion {
            try checkLineage(db, current: version - 1)
            switch try othersCommits(db, version: version - 1, commits: commits, versionMoved: version - 1 != knownVersion) {
            case .withoutRipple:
                try db.execute("INSERT INTO ripple_changes(version, table_name, operation) VALUES (?, ?, 'update')",
                               [version, Self.everyTable])
                adoptedForeignWrite = true
                writesMark = true
            case .unknown: writesMark = true
            case .maintenanceElsewhere: writesMark = false
            case .ripple: break
            }
        }
        if writesMark { try writeMark(db, version: version, commits: commits) }
        try endMaintenance(db)
        dataVersion = data
        knownCommits = commits
        let committedAt = Date().timeIntervalSince1970
        try db.execute("INSERT OR REPLACE INTO ripple_versions(version, committed_at, origin, tag) VALUES (?, ?, ?, ?)",
                       [version, committedAt, origin.rawValue, tag])
        pendingLineage = (version, committedAt)
        switch retention {
        case .versions(let kept) where version % 64 == 0 || kept < 64:
            try prune(db, keepingAfter: version - Int64(max(kept, 0)))
        case .duration(let seconds):
            // Cheap when nothing aged out: one look at the oldest version's time.
            let cutoff = Date().timeIntervalSince1970 - seconds
            if let oldest = try db.fetchValue("SELECT committed_at FROM ripple_versions ORDER BY version LIMIT 1",
                                              as: Double.self), oldest < cutoff,
               let first = try db.fetchValue(
                "SELECT version FROM ripple_versions WHERE committed_at >= ? ORDER BY version LIMIT 1", [cutoff],
                as: Int64.self) {
                try prune(db, keepingAfter: first - 1)
            }
        default:
            break
        }
        return version
    }

    /// The tables changed by versions in `(after, through]`, ``everyTable`` when the log no
    /// longer holds them all.
    private func foreignTables(_ db: Database, after: Int64, through: Int64) throws -> Set<String> {
        guard through > after else { return [] }
        let oldest = try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'oldest_version'", as: Int64.self) ?? 0
        if oldest > after { return [Self.everyTable] }
        var tables: Set<String> = []
        for row in try db.fetchAll("SELECT DISTINCT table_name FROM ripple_changes WHERE version > ? AND version <= ?",
                                   [after, through]) {
            if case .text(let table)? = row.values.first { tables.insert(SQLIdentifier.folded(table)) }
        }
        return tables
    }

    /// Deletes entries of versions up to `oldest` and remembers that history starts after it.
    private func prune(_ db: Database, keepingAfter oldest: Int64) throws {
        guard oldest > 0 else { return }
        try db.execute("DELETE FROM ripple_changes WHERE version <= ?", [oldest])
        try db.execute("DELETE FROM ripple_versions WHERE version <= ?", [oldest])
        try db.execute("UPDATE ripple_meta SET value = max(value, ?) WHERE key = 'oldest_version'", [oldest])
    }
}

extension Store {
    /// The version of the last committed write transaction that changed rows (0 for a new store).
    public func currentVersion() throws -> Int64 {
        try read { db in try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'version'", as: Int64.self) ?? 0 }
    }

    /// The logged changes of versions in `(version, upTo]`, in version order.
    ///
    /// Row keys are text: integer keys in decimal, text keys as they are, blobs in hex, a
    /// composite key as a JSON array of those; tables without a declared key use the rowid.
    /// Writes made outside Ripple's connections (another process, the `sqlite3` shell) are not
    /// in the log.
    public func changes(after version: Int64, upTo limit: Int64 = .max) throws -> [ChangeLogEntry] {
        try read { db in try ChangeLog.entries(in: db, after: version, through: limit) }
    }
}

extension Store {
    /// The retained versions after `version` whose commits carry a tag, with their tags, in
    /// version order: a cheap index of the commits a writer named (a replica's Postgres
    /// positions), without their row changes. Versions older than the change log's retention
    /// are not listed.
    public func taggedVersions(after version: Int64) throws -> [(version: Int64, tag: String)] {
        try read { db in try ChangeLog.taggedVersions(in: db, after: version) }
    }
}

extension ChangeLog {
    /// See ``Store/taggedVersions(after:)``.
    static func taggedVersions(in db: Database, after version: Int64) throws -> [(version: Int64, tag: String)] {
        try db.fetchAll("SELECT version, tag FROM ripple_versions WHERE version > ? AND tag IS NOT NULL ORDER BY version",
                        [version]).map { row in (try row.value("version", as: Int64.self), try row.value("tag", as: String.self)) }
    }
}

extension ChangeLog {
    /// The logged changes of versions in `(after, through]`, in version order, with their
    /// versions' origins and tags.
    static func entries(in db: Database, after: Int64, through: Int64) throws -> [ChangeLogEntry] {
        try db.fetchAll("""
            SELECT c.version, c.table_name, c.operation, c.row_keys, c.exact_keys, v.origin, v.tag
            FROM ripple_changes AS c LEFT JOIN ripple_versions AS v ON v.version = c.version
            WHERE c.version > ? AND c.version <= ? ORDER BY c.version, c.table_name, c.operation
            """, [after, through]).map { row in
            // The keys' text, made from the exact keys (entries written before those were the
            // only form, and entries of unknown extent, hold the text, or nothing).
            let keys: [String]? = switch (row["exact_keys"], row["row_keys"]) {
            case (.blob(let list)?, _): RowKey.list(list)?.map(\.text)
            case (_, .text(let text)?): JSONText.strings(text)
            default: []
            }
            guard let keys, let operation = ChangeLogEntry.Operation(rawValue: try row.value("operation", as: String.self)) else {
                throw StoreError(.decoding, "malformed change log entry \(row)")
            }
            return ChangeLogEntry(version: try row.value("version"), table: try row.value("table_name"),
                                  operation: operation, rowKeys: keys,
                                  origin: try row.value("origin", as: String?.self).map(CommitOrigin.init(rawValue:)),
                                  tag: try row.value("tag", as: String?.self))
        }
    }

    /// Up to `limit` committed versions after `version`, each with its changes, in one read
    /// transaction (``CommitFeed``); empty when none committed since.
    ///
    /// Throws ``StoreError/Kind/history`` when the log no longer holds the version after
    /// `version` (retention pruned it).
    static func commits(in db: Database, after version: Int64, limit: Int) throws -> [Commit] {
        let current = try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'version'", as: Int64.self) ?? 0
        guard current > version else { return [] }
        let oldest = try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'oldest_version'", as: Int64.self) ?? 0
        if oldest > version {
            throw StoreError(.history, "the change feed needs version \(version + 1), which the change log no longer keeps "
                             + "(it holds versions after \(oldest)): read the current state afresh and follow from "
                             + "Store.currentVersion()")
        }
        let through = min(current, version + Int64(limit))
        var commits: [Commit] = []
        commits.reserveCapacity(Int(through - version))
        var index: [Int64: Int] = [:]
        for next in (version + 1)...through {
            index[next] = commits.count
            commits.append(Commit(version: next, origin: nil, tag: nil, committedAt: nil, changes: []))
        }
        for row in try db.fetchAll("SELECT version, committed_at, origin, tag FROM ripple_versions WHERE version > ? AND version <= ?",
                                   [version, through]) {
            guard let slot = index[try row.value("version", as: Int64.self)] else { continue }
            commits[slot].committedAt = try row.value("committed_at", as: Double?.self).map(Date.init(timeIntervalSince1970:))
            commits[slot].origin = try row.value("origin", as: String?.self).map(CommitOrigin.init(rawValue:))
            commits[slot].tag = try row.value("tag", as: String?.self)
        }
        for entry in try entries(in: db, after: version, through: through) {
            if let slot = index[entry.version] { commits[slot].changes.append(entry) }
        }
        return commits
    }
}

extension ChangeLog {
    /// The change log's reads, for the store's other parts: this file is the only code that reads
    /// or writes the log's tables (`ripple_meta`, `ripple_changes`, `ripple_versions`).

    /// Whether the store's own schema (the log's tables) exists in `db`'s file.
    static func isInstalled(in db: Database) throws -> Bool {
        try db.fetchValue("SELECT count(*) FROM sqlite_schema WHERE name = 'ripple_meta'", as: Int.self) == 1
    }

    /// The newest version and the version the log's history starts after, in `db`'s transaction.
    static func bounds(in db: Database) throws -> (current: Int64, oldest: Int64) {
        (try version(db), try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'oldest_version'", as: Int64.self) ?? 0)
    }

    /// The first version in `(after, through]` logged as a change of unknown extent (a schema
    /// change, a write made without Ripple), which history cannot undo; `nil` when none.
    static func firstChangeOfUnknownExtent(in db: Database, after: Int64, through: Int64) throws -> Int64? {
        try db.fetchValue("SELECT min(version) FROM ripple_changes WHERE table_name = ? AND version > ? AND version <= ?",
                          [everyTable, after, through], as: Int64.self)
    }

    /// One logged change of one table, as history rewinds it (see ``entries(of:in:after:)``).
    struct TableEntry {
        var version: Int64
        var operation: String
        /// The keys as text (JSON), for entries logged before keys were kept exactly.
        var keys: String?
        /// Before-images logged before binary ones existed (JSON, see ``OldRowParser``).
        var oldRows: String?
        var exactKeys: [RowKey]?
        /// Before-images (binary, see ``BeforeImage``).
        var beforeImages: [UInt8]?
    }

    /// The logged changes of `table` after `version`, newest first.
    static func entries(of table: String, in db: Database, after version: Int64) throws -> [TableEntry] {
        try db.fetchAll("""
            SELECT version, operation, row_keys, old_rows, exact_keys, before_images FROM ripple_changes
            WHERE table_name = ? AND version > ? ORDER BY version DESC
            """, [table, version]).map { row in
            let oldRows: String? = if case .text(let text)? = row["old_rows"] { text } else { nil }
            let exactKeys: [RowKey]? = if case .blob(let list)? = row["exact_keys"] { RowKey.list(list) } else { nil }
            let images: [UInt8]? = if case .blob(let list)? = row["before_images"] { list } else { nil }
            return TableEntry(version: try row.value("version"), operation: try row.value("operation"),
                              keys: row["row_keys"]?.textValue, oldRows: oldRows, exactKeys: exactKeys, beforeImages: images)
        }
    }

    /// The SQL that reads, for versions in `(?, ?]`, the logged changes of `tables` (and the
    /// changes of unknown extent): table name, operation and exact keys, at most `limit` rows.
    /// Table names are quoted as SQL literals (they come from SQLite's own schema).
    static func changedKeysSQL(of tables: some Sequence<String>, limit: Int) -> String {
        let names = (Array(tables) + [everyTable]).map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }
        return "SELECT table_name, operation, exact_keys FROM ripple_changes WHERE version > ? AND version <= ? "
            + "AND table_name COLLATE NOCASE IN (\(names.joined(separator: ", "))) LIMIT \(limit)"
    }
}

/// The version a read transaction sees, where the change log starts then, and the origin and
/// tag of that version's commit.
struct ReadVersion: Sendable {
    let version: Int64
    let oldest: Int64
    let origin: CommitOrigin?
    let tag: String?
    /// `PRAGMA schema_version` in the same read.
    let schemaVersion: Int64
    /// A connection was running statements outside a transaction (a
    /// ``Store/writeWithoutTransaction(tag:_:)``, a migration: see
    /// ``ChangeLog/beginMaintenance(_:)``) when the read began: each of them commits on its own,
    /// and their version comes after the last: the read may see some of them, a state that
    /// ``version`` does not name, and no version names yet.
    let isBetweenVersions: Bool

    /// Reads them in `db`'s read transaction: one statement on `ripple_meta`, and a second one on
    /// `ripple_versions` for the origin and tag unless `recent` knows them (a version this
    /// process's store committed lately: the common case, which then reads no page of that
    /// table).
    init(_ db: Database, recent: RecentOrigins? = nil) throws {
        // (The schema version by its own cached PRAGMA statement: the table-valued
        // `pragma_schema_version` inside the SELECT prepares a PRAGMA statement each time it
        // runs, on every refresh of every live query.)
        let schema = try db.cachedStatement("PRAGMA schema_version")
        defer { schema.reset() }
        schemaVersion = try schema.step() ? schema.integer(at: 0) : 0
        let meta = try db.cachedStatement("""
            SELECT m.value, (SELECT value FROM ripple_meta WHERE key = 'oldest_version'),
                   (SELECT value FROM ripple_meta WHERE key = 'maintenance')
            FROM ripple_meta AS m WHERE m.key = 'version'
            """)
        defer { meta.reset() }
        guard try meta.step() else {
            (version, oldest, origin, tag, isBetweenVersions) = (0, 0, nil, nil, false)
            return
        }
        (version, oldest) = (meta.integer(at: 0), meta.integer(at: 1))
        isBetweenVersions = !meta.isNull(at: 2) && ChangeLog.isRunning(maintenance: meta.text(at: 2))
        if let known = recent?.origin(of: version) {
            (origin, tag) = known
            return
        }
        let row = try db.cachedStatement("SELECT origin, tag FROM ripple_versions WHERE version = ?")
        defer { row.reset() }
        try row.bindInteger(version, at: 1)
        if try row.step() {
            origin = row.isNull(at: 0) ? nil : CommitOrigin(rawValue: row.text(at: 0))
            tag = row.isNull(at: 1) ? nil : row.text(at: 1)
        } else {
            (origin, tag) = (nil, nil)
        }
    }
}

/// The origins and tags of the newest commits a store routed (a few), so that a live query
/// reading at one of those versions takes them from memory instead of the change log. Filled by
/// ``ObservationCenter/route(_:_:)`` right after each commit; a version not here is read from
/// `ripple_versions` (commits of other stores and processes, or older ones).
final class RecentOrigins: Sendable {
    private struct Entry {
        var version: Int64
        var origin: CommitOrigin
        var tag: String?
    }

    /// How many commits are kept.
    static let capacity = 16
    private let entries = Locked([Entry?](repeating: nil, count: RecentOrigins.capacity))

    /// Remembers that `version` was committed with `origin` and `tag`.
    func record(_ version: Int64, origin: CommitOrigin, tag: String?) {
        entries.withLock { $0[Int(version % Int64(Self.capacity))] = Entry(version: version, origin: origin, tag: tag) }
    }

    /// The origin and tag of `version`, or `nil` when it is not among the kept ones.
    func origin(of version: Int64) -> (CommitOrigin?, String?)? {
        guard version > 0 else { return nil }
        return entries.withLock { entries in
            guard let entry = entries[Int(version % Int64(Self.capacity))], entry.version == version else { return nil }
            return (entry.origin, entry.tag)
        }
    }
}
