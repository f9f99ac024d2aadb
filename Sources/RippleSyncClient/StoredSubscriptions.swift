#if Sync
import Foundation
import Ripple
import RippleSync

/// A client's local subscriptions as its store keeps them across launches: each one's query, its
/// result as the server last sent it (includes and all, in the query's order: what a changeset
/// applies to) and its position, written in the same local transaction as the rows a frame
/// changes — so the store never holds rows of one position and a resume point of another.
///
/// A snapshot is the one exception, for its size: the transaction of its rows keeps the
/// subscription's query and position and lets go of its old result (``keepPosition(_:query:lsn:in:)``),
/// and the new result follows in the next transaction (``keepBase(_:query:tree:lsn:frame:in:)``),
/// once the rows are visible — a 100,000-row snapshot's frame is 6 MB that the rows need not
/// wait for. Between the two, or if the second never comes (the app killed), the subscription is
/// kept without a result: the next launch subscribes it afresh (a snapshot replaces its rows),
/// and a changeset that comes first keeps the whole result (``keepChangeset(_:_:tree:lsn:in:)``).
///
/// * `ripple_sync_subscriptions`: one row per subscription — its id, its query (as JSON with
///   sorted keys: an app declaring the same query again finds it equal), the position its rows
///   stand at, and the sizes of its stored frames (a snapshot of 0 bytes: no result kept).
/// * `ripple_sync_subscription_frames`: its result as `changes` frames, in order — number 0 a
///   snapshot (the frame as the node sent it, when it held that snapshot alone), then each
///   changeset applied since. Reading them back and applying them in order
///   gives the result at the stored position. Once the changesets outweigh the snapshot they are
///   folded into a new snapshot, so each frame costs what it changed, not the whole result.
enum StoredSubscriptions {
    /// The id a stored frame names its subscription by (the frames belong to one subscription).
    private static let frameID = "s"
    /// Changesets are folded into a new snapshot once they outweigh it and this many bytes (a
    /// small result is not encoded again every few frames).
    static let foldThreshold = 4 * 1024

    /// Creates the tables when missing.
    static func prepare(_ db: Database) throws {
        try db.executeScript("""
            CREATE TABLE IF NOT EXISTS ripple_sync_subscriptions(
                id TEXT PRIMARY KEY, query TEXT NOT NULL, lsn TEXT NOT NULL,
                snapshot_bytes INTEGER NOT NULL, changeset_bytes INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ripple_sync_subscription_frames(
                subscription TEXT NOT NULL, number INTEGER NOT NULL, frame TEXT NOT NULL,
                PRIMARY KEY (subscription, number));
            """)
    }

    /// A subscription as the store keeps it.
    struct Stored: Sendable {
        var id: String
        /// The query's stored JSON (see ``queryText(_:)``).
        var query: String
        var tree: WireTree
        var lsn: String
    }

    /// `query` as stored: JSON with sorted keys, so that the same query always reads the same.
    static func queryText(_ query: QueryDescription) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(query), as: UTF8.self)
    }

    /// The stored queries, by subscription id.
    static func queries(in db: Database) throws -> [String: QueryDescription] {
        guard try exists(db) else { return [:] }
        var queries: [String: QueryDescription] = [:]
        for row in try db.fetchAll("SELECT id, query FROM ripple_sync_subscriptions") {
            let id = try row.value("id", as: String.self)
            queries[id] = try JSONDecoder().decode(QueryDescription.self, from: Data(try row.value("query", as: String.self).utf8))
        }
        return queries
    }

    /// Subscription `id` as stored (`nil`: none, or kept without its result): its result
    /// rebuilt from its frames.
    static func load(_ id: String, in db: Database) throws -> Stored? {
        guard try exists(db),
              let row = try db.fetchOne("SELECT query, lsn, snapshot_bytes FROM ripple_sync_subscriptions WHERE id = ?", [id]),
              try row.value("snapshot_bytes", as: Int.self) > 0 else { return nil }
        var tree: WireTree?
        for frame in try db.fetchAll("SELECT frame FROM ripple_sync_subscription_frames WHERE subscription = ? ORDER BY number", [id]) {
            let text = try frame.value("frame", as: String.self)
            let message: ServerMessage
            do { message = try ServerMessage(json: text.utf8) } catch {
                throw SyncClientError("a stored frame of subscription \(id) cannot be read: \(error)")
            }
            guard case .changes(_, let snapshots, let changesets) = message else {
                throw SyncClientError("a stored frame of subscription \(id) is not a changes frame")
            }
            // Each frame holds one snapshot or one changeset: this subscription's (under the id
            // the node or the store gave it).
            if snapshots.count == 1, changesets.isEmpty, let snapshot = snapshots.first?.value {
                tree = WireTree(snapshot)
            } else if changesets.count == 1, snapshots.isEmpty, let changeset = changesets.first?.value, tree != nil {
                do { try tree!.apply(changeset) } catch {
                    throw SyncClientError("a stored changeset of subscription \(id) does not fit its rows: \(error)")
                }
            } else {
                throw SyncClientError("the stored frames of subscription \(id) do not start with a snapshot")
            }
        }
        guard let tree else { throw SyncClientError("subscription \(id) is stored without its rows") }
        return Stored(id: id, query: try row.value("query", as: String.self), tree: tree, lsn: try row.value("lsn", as: String.self))
    }

    /// Keeps `tree`, at `lsn`, as subscription `id`'s result, replacing what was stored for it;
    /// `frame`: the `changes` frame holding that snapshot alone, if at hand (otherwise it is
    /// encoded from `tree`).
    static func keepSnapshot(_ id: String, query: String, tree: WireTree, lsn: String, frame: String? = nil, in db: Database) throws {
        let frame = frame ?? snapshotFrame(tree, lsn: lsn)
        try db.execute("DELETE FROM ripple_sync_subscription_frames WHERE subscription = ?", [id])
        try db.execute("INSERT INTO ripple_sync_subscription_frames VALUES (?, 0, ?)", [id, frame])
        try db.execute("INSERT OR REPLACE INTO ripple_sync_subscriptions VALUES (?, ?, ?, ?, 0)", [id, query, lsn, frame.utf8.count])
    }

    /// A snapshot's first half, in the transaction of its rows: subscription `id` is kept with
    /// `query` at `lsn`, without a result (its old one let go) until ``keepBase(_:query:tree:lsn:frame:in:)``.
    static func keepPosition(_ id: String, query: String, lsn: String, in db: Database) throws {
        try db.execute("DELETE FROM ripple_sync_subscription_frames WHERE subscription = ?", [id])
        try db.execute("INSERT OR REPLACE INTO ripple_sync_subscriptions VALUES (?, ?, ?, 0, 0)", [id, query, lsn])
    }

    /// A snapshot's second half, in the next transaction: `tree` becomes subscription `id`'s
    /// result, if the subscription is still kept as ``keepPosition(_:query:lsn:in:)`` left it
    /// (not removed, subscribed again, or moved on meanwhile).
    static func keepBase(_ id: String, query: String, tree: WireTree, lsn: String, frame: String?, in db: Database) throws {
        let waiting = try db.fetchValue("""
            SELECT 1 FROM ripple_sync_subscriptions WHERE id = ? AND query = ? AND lsn = ? AND snapshot_bytes = 0
            """, [id, query, lsn], as: Int.self)
        guard waiting != nil else { return }
        try keepSnapshot(id, query: query, tree: tree, lsn: lsn, frame: frame, in: db)
    }

    /// Keeps `changeset`, which moved subscription `id`'s result to `tree` at `lsn`: appended to
    /// its frames, or, once the changesets outweigh the snapshot, folded with them into a new
    /// snapshot of `tree`.
    static func keepChangeset(_ id: String, _ changeset: WireChangeset, tree: WireTree, lsn: String, in db: Database) throws {
        guard let row = try db.fetchOne("SELECT query, snapshot_bytes, changeset_bytes FROM ripple_sync_subscriptions WHERE id = ?", [id]) else {
            throw SyncClientError("a changeset of subscription \(id), which the store does not hold")
        }
        var json = JSONBytes(reservingCapacity: 256)
        json.raw(#"{"type":"changes","lsn":"#); json.string(lsn)
        json.raw(#","changesets":{"#); json.string(frameID); json.raw(":"); json.changeset(changeset); json.raw("}}")
        let frame = String(decoding: json.bytes, as: UTF8.self)
        let total = try row.value("changeset_bytes", as: Int.self) + frame.utf8.count
        let snapshotBytes = try row.value("snapshot_bytes", as: Int.self)
        // Without a result (its snapshot's second half did not come): the whole result.
        if snapshotBytes == 0 || total > max(snapshotBytes, foldThreshold) {
            try keepSnapshot(id, query: try row.value("query", as: String.self), tree: tree, lsn: lsn, in: db)
            return
        }
        try db.execute("""
            INSERT INTO ripple_sync_subscription_frames
            SELECT ?, coalesce(max(number), 0) + 1, ? FROM ripple_sync_subscription_frames WHERE subscription = ?
            """, [id, frame, id])
        try db.execute("UPDATE ripple_sync_subscriptions SET lsn = ?, changeset_bytes = ? WHERE id = ?", [lsn, total, id])
    }

    /// Moves the stored position of subscriptions `ids` to `lsn` (a frame or heartbeat said their
    /// rows did not change up to it).
    static func advance(_ ids: [String], to lsn: String, in db: Database) throws {
        guard !ids.isEmpty else { return }
        try db.execute("UPDATE ripple_sync_subscriptions SET lsn = ? WHERE id IN (SELECT value FROM json_each(?))",
                       [lsn, Outbox.jsonArray(ids)])
    }

    /// Forgets subscription `id` (its rows are the caller's to keep or release).
    static func remove(_ id: String, in db: Database) throws {
        guard try exists(db) else { return }
        try db.execute("DELETE FROM ripple_sync_subscription_frames WHERE subscription = ?", [id])
        try db.execute("DELETE FROM ripple_sync_subscriptions WHERE id = ?", [id])
    }

    /// `tree` at `lsn` as a `changes` frame holding its snapshot.
    static func snapshotFrame(_ tree: WireTree, lsn: String) -> String {
        let snapshot = WireSnapshot(basis: tree.basis, columns: tree.columns, types: tree.types, key: tree.key, rows: tree.rows,
                                    included: tree.included.isEmpty ? nil : tree.included.mapValues(\.snapshot))
        var json = JSONBytes(reservingCapacity: 1024)
        json.raw(#"{"type":"changes","lsn":"#); json.string(lsn)
        json.raw(#","snapshots":{"#); json.string(frameID); json.raw(":"); json.snapshot(snapshot); json.raw("}}")
        return String(decoding: json.bytes, as: UTF8.self)
    }

    private static func exists(_ db: Database) throws -> Bool {
        try db.fetchValue("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'ripple_sync_subscriptions'", as: Int.self) != nil
    }
}
#endif
