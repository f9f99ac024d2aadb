import Foundation

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
    /// The primary keys of the rows, as text (see ``Store/changes(after:upTo:)``).
    public var rowKeys: [String]
}

/// How long the change log keeps entries.
public enum ChangeLogRetention: Hashable, Sendable {
    /// Keep every version.
    case unlimited
    /// Keep the changes of the newest `n` versions.
    case versions(Int)
}

/// The writer's side of versioning: gives every committed write transaction that changed rows the
/// next version, and logs its changes in the same transaction, right before it commits.
///
/// Lives on the writer connection and is only used under the writer's lock.
final class ChangeLog {
    let capture = ChangeCapture()
    private let retention: ChangeLogRetention

    init(installingOn db: Database, retention: ChangeLogRetention) {
        self.retention = retention
        capture.install(on: db)
        db.changeCapture = capture
    }

    /// Called when a write transaction begins, before any of its statements.
    func begin(_ db: Database) throws {
        capture.reset()
        try capture.refreshSchemaIfNeeded(db)
    }

    /// Called inside the transaction after its work: when rows changed, takes the next version and
    /// writes the log. Returns the version, or `nil` when the transaction changed no row.
    func record(_ db: Database) throws -> Int64? {
        try capture.resolvePending(db)
        guard !capture.changes.isEmpty else { return nil }
        guard let version = try db.fetchValue(
            "UPDATE ripple_meta SET value = value + 1 WHERE key = 'version' RETURNING value", as: Int64.self) else {
            throw StoreError(.migration, "the store's schema has no version row (ripple_meta)")
        }
        // One log row per table and operation, keys in the order the rows changed. Changes come
        // in runs of one table and operation, so the current group is checked first.
        var entries: [(table: String, operation: ChangeCapture.Operation, keys: [String])] = []
        var current = -1
        for change in capture.changes {
            if current < 0 || entries[current].operation != change.operation || entries[current].table != change.table {
                if let index = entries.firstIndex(where: { $0.table == change.table && $0.operation == change.operation }) {
                    current = index
                } else {
                    entries.append((change.table, change.operation, []))
                    current = entries.count - 1
                }
            }
            entries[current].keys.append(change.key)
        }
        for entry in entries {
            try db.execute("INSERT INTO ripple_changes(version, table_name, operation, row_keys) VALUES (?, ?, ?, ?)",
                           [version, entry.table, entry.operation.rawValue, JSONText.array(entry.keys)])
        }
        if case .versions(let kept) = retention, version % 64 == 0 || kept < 64 {
            try prune(db, keepingAfter: version - Int64(max(kept, 0)))
        }
        capture.reset()
        return version
    }

    /// Deletes entries of versions up to `oldest` and remembers that history starts after it.
    private func prune(_ db: Database, keepingAfter oldest: Int64) throws {
        guard oldest > 0 else { return }
        try db.execute("DELETE FROM ripple_changes WHERE version <= ?", [oldest])
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
        try read { db in
            try db.fetchAll("""
                SELECT version, table_name, operation, row_keys FROM ripple_changes
                WHERE version > ? AND version <= ? ORDER BY version, table_name, operation
                """, [version, limit]).map { row in
                let keysText = try row.value("row_keys", as: String.self)
                guard let keys = try JSONSerialization.jsonObject(with: Data(keysText.utf8)) as? [String],
                      let operation = ChangeLogEntry.Operation(rawValue: try row.value("operation", as: String.self)) else {
                    throw StoreError(.decoding, "malformed change log entry \(row)")
                }
                return ChangeLogEntry(version: try row.value("version"), table: try row.value("table_name"),
                                      operation: operation, rowKeys: keys)
            }
        }
    }
}
