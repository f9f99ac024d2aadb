/// The last commits the store routed row by row, each with the keys of one table's changed
/// rows, newest last: what an observer checks the rows that entered its result against, when
/// it becomes idle (``CommitRouter/observerBecameIdle(_:keys:dependencyKeys:valuesChangedDuring:version:)``) or reads again
/// at once (``CommitRouter/told(_:through:after:holding:holdingDependencies:)``). Until then, those rows were
/// not known to be its own, and a commit that changed one of them was not routed to it.
///
/// Bounded: the oldest commits give way past ``limit``, and a commit that changed more than
/// ``keyLimit`` rows of a table is kept without its keys (it then concerns every row).
struct RecentCommits {
    private struct Entry {
        let table: String
        let commit: ObservationCenter.ToldCommit
    }

    /// A ring: `entries[head]` is the oldest once it is full.
    private var entries: [Entry] = []
    private var head = 0
    /// Every commit routed row by row after this version is kept (0: none was dropped).
    private var keptAfter: Int64 = 0
    /// The newest version kept (0: none).
    private(set) var newestVersion: Int64 = 0

    static let limit = 1024
    static let keyLimit = 64

    /// Keeps `commit`, routed row by row for `table` (commits come in version order).
    ///
    /// - Complexity: O(1).
    mutating func append(_ commit: ObservationCenter.ToldCommit, to table: String) {
        var commit = commit
        if let keys = commit.keys, keys.count > Self.keyLimit { commit.keys = nil }
        let entry = Entry(table: table, commit: commit)
        if entries.count < Self.limit {
            entries.append(entry)
        } else {
            keptAfter = max(keptAfter, entries[head].commit.version)
            entries[head] = entry
            head = (head + 1) % Self.limit
        }
        newestVersion = max(newestVersion, commit.version)
    }

    /// The commits to `table` after `version` that changed a row of `keys` (or rows not kept
    /// one by one), oldest first, but for those of `told` (already known to the observer);
    /// `nil` when some commits after `version` were dropped.
    ///
    /// - Complexity: O(commits after `version` × their changed keys + told).
    func commits(to table: String, after version: Int64, changingAnyOf keys: Set<RowKey>,
                 besides told: [ObservationCenter.ToldCommit]) -> [ObservationCenter.ToldCommit]? {
        guard version >= keptAfter else { return nil }
        var found: [ObservationCenter.ToldCommit] = []
        let count = entries.count
        for offset in 0..<count {
            let entry = entries[(head + count - 1 - offset) % count]
            guard entry.commit.version > version else { break }
            guard entry.table == table else { continue }
            if let changed = entry.commit.keys, changed.isDisjoint(with: keys) { continue }
            found.append(entry.commit)
        }
        guard !found.isEmpty else { return [] }
        let known = Set(told.map(\.version))
        return found.reversed().filter { !known.contains($0.version) }
    }
}
