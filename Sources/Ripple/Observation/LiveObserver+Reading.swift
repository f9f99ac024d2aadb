import Foundation
import RippleDiff

/// Reading: what a refresh reads, and what the commits since the last one can have changed.
extension LiveObserver {
    /// Reads what changed since the last refresh, in one read transaction at one version.
    /// Returns the event to deliver, or `nil` when no result changed.
    ///
    /// A refresh that fails leaves the observer as the last one that succeeded left it (its
    /// version, schema version, and the snapshots it delivered), and the next one reads every
    /// result again: what the store told it of the commits it covered was taken by the failed
    /// one, so the retry of a failure that passes (a reader's temporary file that could not be
    /// opened, descriptors exhausted) still finds what changed, with no commit to wake it.
    func refresh(_ db: Database, seeing seen: ReadVersion? = nil) throws -> Event? {
        let (checked, schema) = (checkedVersion, schemaVersion)
        var replaced: [(index: Int, snapshot: Snapshot<Element>?)] = []
        do {
            let event = try readChanges(db, seeing: seen, replaced: &replaced)
            rereadsEverything = false
            return event
        } catch {
            (checkedVersion, schemaVersion) = (checked, schema)
            for (index, snapshot) in replaced.reversed() {
                snapshots[index] = snapshot
                keyIndexes[index] = nil
            }
            throw error
        }
    }

    /// ``refresh(_:seeing:)``'s reading. In a group, the snapshots of the members read before
    /// one that fails are kept in `replaced` (as they were), for the refresh to put back.
    private func readChanges(_ db: Database, seeing seen: ReadVersion?,
                             replaced: inout [(index: Int, snapshot: Snapshot<Element>?)]) throws -> Event? {
        store.observation.diagnostics.withLock { $0.refreshes += 1 }
        let rereads = rereadsEverything
        // The version this read sees, and where the change log starts (read by the batch once
        // for all its refreshes).
        let seen = try seen ?? ReadVersion(db, recent: store.observation.recentOrigins)
        let (version, oldest) = (seen.version, seen.oldest)
        // Statements committing one by one without a version yet: this state is not the one
        // `version` names. Read again later (as after a reader that failed to open), when their
        // version is taken; a read of the version already delivered has nothing to tell.
        if seen.isBetweenVersions && version != checkedVersion { throw BetweenVersions() }
        // Each read begins after the last one ended: the version never goes back, unless another
        // program restored an older copy of the file (the writer's look may not have seen it yet).
        if let checkedVersion, version < checkedVersion {
            let error = StoreError(.fileReplaced, "the database file's version went back from \(checkedVersion) to "
                                   + "\(version) (an older copy of the file was restored over it, say): versions would "
                                   + "name two states, so the store writes and reads nothing more and its live queries "
                                   + "end. Open a new Store")
            store.fileWasReplaced(error)
            throw error
        }
        // What the store told this observer of the commits up to this version (taken either way:
        // what this read covers is done with).
        let told = isRowPrecise
            ? store.observation.told(observerID, through: version, after: checkedVersion,
                                     holding: storeHoldsKeys ? nil : snapshots[0]?.items.map(\.key),
                                     holdingDependencies: storeHoldsKeys || dependencyKeys.isEmpty ? nil : dependencyKeys)
            : nil
        storeHoldsKeys = false
        // Until a read succeeds, what was told is gone: a failure from here on leaves the next
        // read to read everything again.
        rereadsEverything = true
        let isInitial = checkedVersion == nil
        if !isInitial && version == checkedVersion && !rereads { return nil }
        // A schema change can change what the query reads and the columns of its result.
        let schemaChanged = !isInitial && seen.schemaVersion != schemaVersion
        schemaVersion = seen.schemaVersion
        if isInitial || schemaChanged {
            tables = try sources.map { try $0.tables(in: db) }
            logQueries = tables.map { ChangeLog.changedKeysSQL(of: $0, limit: Self.rowCheckLimit + 1) }
            if isRowPrecise, let dependencies = sources[0].rowCheck?.interest.dependencies, !dependencies.isEmpty {
                dependencyReads = try dependencies.map { try DependencyRead($0, in: db) }
            }
            if isRowPrecise, let interest = sources[0].rowCheck?.interest, !interest.valueTerms.isEmpty {
                valueTermReads = try interest.valueTerms.map { try ValueTermRead($0, of: interest) }
            }
        }
        // Until it knows its tables (first read, or after a commit of unknown extent), it hears
        // every commit; a read at or after that commit tells them.
        condition.lock()
        let learns = interest == nil && version >= interestUnknownSince
        let all = learns ? tables.reduce(into: Set<String>()) { $0.formUnion($1) } : []
        if learns { interest = all }
        condition.unlock()
        if learns { store.observation.observer(observerID, reads: all, at: version) }
        var impacts = Array(repeating: Impact.everything, count: sources.count)
        if let since = checkedVersion, !schemaChanged, !rereads {
            if oldest <= since {
                if let told {
                    impacts[0] = try impact(told: told, after: since, through: version, in: db)
                } else {
                    for index in sources.indices {
                        impacts[index] = try impact(on: index, after: since, through: version, in: db)
                    }
                }
            }
        }
        checkedVersion = version
        guard impacts.contains(where: { $0 != .none }) else { return nil }

        var members: [LiveQueryEvent<Element>] = []
        var changed = isInitial
        let previous = deliveredVersion
        for index in sources.indices {
            try store.observation.readFault.withLock { $0 }?()
            // A group's members read before one that fails are put back (a single source fails
            // before it changes its snapshot: saving it would only cost a copy when patched).
            if sources.count > 1 { replaced.append((index, snapshots[index])) }
            var member: LiveQueryEvent<Element>?
            if snapshots[index] != nil {
                switch impacts[index] {
                case .none:
                    let old = snapshots[index]!
                    member = LiveQueryEvent(version: version, previousVersion: previous, snapshot: old.elements,
                                            changeset: .unchanged(count: old.elements.count), updatedColumns: [],
                                            origin: seen.origin, tag: seen.tag)
                case .updated(let keys):
                    // (No copy of the result is held here: patching may change it in place.)
                    if let patched = try patch(index, keys: keys, in: db) {
                        member = LiveQueryEvent(version: version, previousVersion: previous, snapshot: patched.elements,
                                                changeset: patched.changeset, updatedColumns: patched.columns,
                                                origin: seen.origin, tag: seen.tag)
                    }
                case .everything:
                    break
                }
            }
            if member == nil {
                // Another live query of the same query may have read it at this version.
                let new: Snapshot<Element>
                if let shared = shares[index]?.snapshot(at: version) {
                    new = shared
                } else {
                    new = try sources[index].fetch(db)
                    store.observation.diagnostics.withLock { $0.fetches += 1 }
                    shares[index]?.keep(new, at: version)
                }
                if !dependencyReads.isEmpty {
                    // What the dependencies select at this version: held by the store from when
                    // this observer becomes idle, so that a commit changing one of those rows
                    // (a membership revoked) tells it. Only a run of the query changes them: a
                    // commit that changes what they select tells it, and it runs again.
                    var keys: [String: [RowKey]] = [:]
                    for read in dependencyReads {
                        let found = try read.keys(in: db)
                        if let known = keys[read.table] {
                            // Two dependencies on one table: each key once.
                            var seen = Set(known)
                            keys[read.table] = known + found.filter { seen.insert($0).inserted }
                        } else {
                            keys[read.table] = found
                        }
                    }
                    dependencyKeys = keys
                }
                if !valueTermReads.isEmpty {
                    // What the value terms select at this version: registered in the filter
                    // index when this observer becomes idle (see ``RowValueTerm``).
                    termValues = try valueTermReads.map { try $0.values(in: db) }
                }
                let changeset: Changeset
                var columns: [Set<String>] = []
                if let old = snapshots[index], old.columnNames != new.columnNames {
                    // The result's columns changed (renamed, added, dropped): every row kept is
                    // updated, with every column.
                    let renamed = old.items.map { SnapshotItem(key: $0.key, content: ~$0.content) }
                    changeset = Changeset(from: renamed, to: new.items)
                    columns = changeset.updates.map { _ in Set(new.columnNames) }
                } else if let old = snapshots[index] {
                    changeset = Changeset(from: old.items, to: new.items)
                    columns = changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) }
                } else {
                    changeset = .initial(count: new.elements.count)
                }
                snapshots[index] = new
                keyIndexes[index] = nil
                // A schema change re-runs the query: the order is read again with it.
                if !sources[index].orderTerms.isEmpty, let table = sources[index].rowCheck?.table {
                    orders[index] = RowOrder(terms: sources[index].orderTerms, table: table, in: db)
                }
                member = LiveQueryEvent(version: version, previousVersion: previous, snapshot: new.elements,
                                        changeset: changeset, updatedColumns: columns, origin: seen.origin, tag: seen.tag)
            }
            guard let member else { continue }
            changed = changed || !member.changeset.isEmpty
            members.append(member)
        }
        guard changed else { return nil }
        deliveredVersion = version
        return makeEvent(members)
    }

    /// The index of each key in source `index`'s snapshot (built once per fetched snapshot:
    /// patching in place keeps keys where they are).
    private func keyIndex(_ index: Int) -> [RowKey: Int] {
        if let built = keyIndexes[index] { return built }
        var built: [RowKey: Int] = [:]
        if let snapshot = snapshots[index] {
            built.reserveCapacity(snapshot.items.count)
            for (position, item) in snapshot.items.enumerated() where built[item.key] == nil { built[item.key] = position }
        }
        keyIndexes[index] = built
        return built
    }

    /// The positions of `keys` in source `index`'s snapshot (those it holds): from its key index
    /// when built, else by one pass over the snapshot — a few changed rows do not pay for
    /// indexing every row, which patching would then make stale.
    func positions(of keys: Set<RowKey>, in index: Int) -> [RowKey: Int] {
        if let built = keyIndexes[index] { return built }
        if keys.count > Self.scanLimit { return keyIndex(index) }
        var found: [RowKey: Int] = [:]
        guard let items = snapshots[index]?.items else { return found }
        for (position, item) in items.enumerated() where keys.contains(item.key) && found[item.key] == nil {
            found[item.key] = position
            if found.count == keys.count { break }
        }
        return found
    }

    /// Up to this many changed keys are looked for by a pass over the snapshot.
    private static var scanLimit: Int { 8 }

    /// How logged changes may affect a source's result.
    enum Impact: Equatable {
        /// They cannot: the result stands.
        case none
        /// Only the rows with these keys changed: they are read again and replaced, removed or
        /// placed in the result (see ``patch(_:keys:in:)``).
        case updated(Set<RowKey>)
        /// Re-run the query.
        case everything
    }

    /// What the logged changes in `(after, through]` do to source `index`'s result.
    private func impact(on index: Int, after: Int64, through: Int64, in db: Database) throws -> Impact {
        guard let (keys, updatesOnly) = try loggedKeys(of: index, after: after, through: through, in: db) else {
            return .everything
        }
        return try impact(of: keys, updatesOnly: updatesOnly, on: index, in: db)
    }

    /// What the commits in `(after, through]` do to a row-precise observer's result, from what
    /// the store told it: the keys of the commits it was told of, and the change log for those
    /// not routed yet when this read began. The commits it was not told of cannot change its
    /// result (the store's filter index ruled them out), and are not read.
    private func impact(told: ObservationCenter.Told, after since: Int64, through version: Int64,
                        in db: Database) throws -> Impact {
        // Too many commits were told to keep: the change log says what they changed.
        if told.lostThrough > since { return try impact(on: 0, after: since, through: version, in: db) }
        var keys: [RowKey] = []
        var updatesOnly = true
        var matched = false
        for commit in told.commits where commit.version > since {
            // A dependency's rows changed: the query runs again.
            if commit.rerun { return .everything }
            // A commit whose changed rows were not told (another connection's, too many rows), or
            // one that stands for several, not all of them in this read.
            guard let changed = commit.keys, commit.version <= version else {
                return try impact(on: 0, after: since, through: version, in: db)
            }
            keys += changed
            updatesOnly = updatesOnly && commit.updatesOnly
            matched = matched || commit.matched
            if keys.count > Self.rowCheckLimit { return .everything }
        }
        let logged = max(since, min(told.routedThrough, version))
        if logged < version {
            guard let (more, moreUpdatesOnly) = try loggedKeys(of: 0, after: logged, through: version, in: db) else {
                return .everything
            }
            keys += more
            updatesOnly = updatesOnly && moreUpdatesOnly
        }
        return try impact(of: keys, updatesOnly: updatesOnly, knownToMatch: matched, on: 0, in: db)
    }

    /// The keys of the rows the change log says changed in `(after, through]` in source
    /// `index`'s tables, and whether they were all updates; `nil` when they cannot be known
    /// row by row (re-run the query).
    private func loggedKeys(of index: Int, after: Int64, through: Int64, in db: Database) throws
        -> (keys: [RowKey], updatesOnly: Bool)? {
        let entries = try db.fetchAll(logQueries[index], [after, through])
        guard !entries.isEmpty else { return ([], true) }
        guard let check = sources[index].rowCheck, snapshots[index] != nil, entries.count <= Self.rowCheckLimit else {
            return nil
        }
        var keys: [RowKey] = []
        var updatesOnly = true
        for entry in entries {
            // Keys exactly as stored; an entry without them (logged by an older Ripple, or a
            // change of unknown extent) re-runs the query.
            guard entry.values.count == 3, case .text(let table) = entry.values[0], SQLIdentifier.folded(table) == check.table,
                  case .text(let operation) = entry.values[1], case .blob(let list) = entry.values[2],
                  let parsed = RowKey.list(list) else { return nil }
            updatesOnly = updatesOnly && operation == ChangeLogEntry.Operation.update.rawValue
            keys += parsed
            if keys.count > Self.rowCheckLimit { return nil }
        }
        return (keys, updatesOnly)
    }

    /// What changes to the rows of `keys` do to source `index`'s result; `knownToMatch` when the
    /// commit found that one of them matched the filter (then the filter is not checked again).
    private func impact(of keys: [RowKey], updatesOnly: Bool, knownToMatch: Bool = false, on index: Int,
                        in db: Database) throws -> Impact {
        guard !keys.isEmpty else { return .none }
        guard let check = sources[index].rowCheck, snapshots[index] != nil else { return .everything }
        // Rows placed by the order: whatever the changes, the changed rows are read alone.
        if orders[index] != nil, sources[index].fetchRows != nil {
            let changed = Set(keys)
            if changed.count <= Self.patchLimit { return .updated(changed) }
        }
        let positions = keyIndex(index)
        let inResult = keys.filter { positions[$0] != nil }
        if updatesOnly, sources[index].fetchRows != nil, keys.count <= Self.patchLimit,
           !inResult.isEmpty, inResult.count == keys.count {
            return .updated(Set(keys))
        }
        if !inResult.isEmpty || knownToMatch { return .everything }
        return try check.anyMatches(keys, in: db) ? .everything : .none
    }

    /// Beyond this many changed rows, re-running the query is cheaper than checking each.
    private static var rowCheckLimit: Int { 256 }
}
