/// The decision "which observers can this commit affect", as a value: the registered observers
/// (by identity), what each is interested in, what each was told and has not read yet, and the
/// recent commits. Pure: no SQLite, no threads, no observer objects — ``ObservationCenter`` holds
/// it under a lock and performs what it decides. Tested on its own (`CommitRouterTests`);
/// ``checkInvariants()`` runs after every change in debug builds.
///
/// Two kinds of observers:
/// - **row-precise** (one collection query over one table, its filter evaluated on each commit's
///   changed rows): told of a commit only when a changed row matches its filter, is held in its
///   result, or could not be evaluated — or of every commit to its table while it is *busy*
///   (registered while a commit whose evaluation did not include its filter may still commit);
/// - **by table**: told of every commit to the tables it reads (of every commit while those are
///   not known yet).
///
/// Every observer is told of a commit of unknown extent (``ChangeLog/everyTable``).
struct CommitRouter {
    typealias ObserverID = ObservationCenter.ObserverID
    typealias ToldCommit = ObservationCenter.ToldCommit

    /// A registered observer, as commits are routed to it.
    private struct Registered {
        /// A row-precise observer's table.
        let rowTable: String?
        /// Not row-precise: the tables it reads, once known.
        var tables: Set<String>?
        /// Not row-precise: the version of the last commit of unknown extent (a schema change, a
        /// write made without Ripple) routed to it, which may have changed which tables it reads:
        /// it hears every commit until it learns its tables from a read that saw that version.
        var unknownSince: Int64 = 0
        /// Row-precise: the keys of its result when it last became idle.
        var heldKeys: [RowKey] = []
        /// Row-precise: the version of the commit evaluated last when it registered. That commit
        /// may commit after the observer's first read without having evaluated its filter: the
        /// observer hears every commit until it has read at least that version.
        var registeredDuring: Int64 = 0
        /// Row-precise: the commits it was told of and has not read yet (see ``told(_:through:after:holding:)``).
        var told: [ToldCommit] = []
        /// Row-precise: past ``toldLimit`` commits, the list is dropped: what it told is unknown up
        /// to this version (0: nothing lost).
        var lostThrough: Int64 = 0
    }

    /// At most this many told commits are kept per observer; past it, it reads the change log.
    static var toldLimit: Int { 256 }

    private var observers: [ObserverID: Registered] = [:]
    /// Observers that are not row-precise, by the tables they read (told of every commit to them).
    private var byTable: [String: Set<ObserverID>] = [:]
    /// Observers whose tables are not known yet (told of every commit).
    private var untabled: Set<ObserverID> = []
    /// Row-precise observers, by table.
    private var rowPrecise: [String: Set<ObserverID>] = [:]
    /// Row-precise observers whose first read may not see a commit that was evaluated before
    /// their filter was registered (see ``Registered/registeredDuring``): told of every commit to
    /// their table until they read past it.
    private var busy: Set<ObserverID> = []
    /// The last commits routed row by row: what an observer checks the rows that entered its
    /// result against (see ``RecentCommits``).
    private var recent = RecentCommits()
    /// Per table, the row-precise observers whose result holds each key (as of when they last
    /// became idle): told of every commit that changes the row.
    private var holders: [String: [RowKey: [ObserverID]]] = [:]
    /// Every commit with a version up to this one was routed (routing happens in version order).
    private(set) var routedThrough: Int64 = 0
    /// How many times a row-precise observer of a changed table was not told of a commit (for
    /// tests of invalidation).
    private(set) var skipped = 0

    /// The number of registered observers.
    var count: Int { observers.count }

    /// Whether `id` is registered.
    func contains(_ id: ObserverID) -> Bool { observers[id] != nil }

    // MARK: Registering

    /// Registers a row-precise observer of `table`; `registeredDuring` is the version of the
    /// commit whose filters were evaluated last when its filter was added.
    mutating func registerRowPrecise(_ id: ObserverID, table: String, registeredDuring: Int64) {
        observers[id] = Registered(rowTable: table, tables: nil, registeredDuring: registeredDuring)
        rowPrecise[table, default: []].insert(id)
        busy.insert(id)
        checkInvariantsInDebug()
    }

    /// Registers an observer told of every commit to the tables it reads (of every commit until
    /// it says which, see ``observer(_:reads:)``).
    mutating func registerByTable(_ id: ObserverID) {
        observers[id] = Registered(rowTable: nil, tables: nil)
        untabled.insert(id)
        checkInvariantsInDebug()
    }

    /// Forgets `id`; returns whether it was row-precise.
    @discardableResult
    mutating func unregister(_ id: ObserverID) -> Bool {
        guard let observer = observers.removeValue(forKey: id) else { return false }
        if let table = observer.rowTable {
            rowPrecise[table]?.remove(id)
            busy.remove(id)
            release(observer.heldKeys, of: id, in: table)
        } else if let tables = observer.tables {
            for table in tables { byTable[table]?.remove(id) }
        } else {
            untabled.remove(id)
        }
        checkInvariantsInDebug()
        return observer.rowTable != nil
    }

    /// An observer that is not row-precise learned which tables it reads: from now on it hears
    /// only of commits to them.
    /// `version` is the version of the read that found them: a read from before the last commit
    /// of unknown extent routed to the observer does not count (it hears every commit until a
    /// later read tells it its tables).
    mutating func observer(_ id: ObserverID, reads tables: Set<String>, at version: Int64) {
        guard var observer = observers[id], observer.rowTable == nil, observer.tables == nil,
              version >= observer.unknownSince else { return }
        observer.tables = tables
        observers[id] = observer
        untabled.remove(id)
        for table in tables { byTable[table, default: []].insert(id) }
        checkInvariantsInDebug()
    }

    // MARK: Routing

    /// Decides who a commit concerns: for a table whose changed rows are known and whose filters
    /// were evaluated (`matches`), the row-precise observers that matched, hold a changed row (as
    /// of when they last became idle), are busy, or could not be evaluated; every other observer
    /// of a changed table; every observer for ``ChangeLog/everyTable``. A row-precise observer
    /// told of it keeps its changed keys until it reads. Such a commit is kept among the recent
    /// ones (``RecentCommits``). Returns the observers told.
    ///
    /// Commits must be routed in version order (an observer then skips, unread, the commits it
    /// was not told of).
    ///
    /// - Complexity: O(changed rows + observers told), not O(observers).
    mutating func route(_ summary: CommitSummary, _ matches: FilterMatches) -> [ObserverID] {
        var told: Set<ObserverID>
        if summary.tables.contains(ChangeLog.everyTable) {
            told = Set(observers.keys)
            // The commit may have changed which tables a query reads (a view redefined, a table
            // dropped and created again): each hears every commit until it has read again.
            for (id, observer) in observers where observer.rowTable == nil {
                if let tables = observer.tables {
                    for table in tables { byTable[table]?.remove(id) }
                    untabled.insert(id)
                }
                observers[id]?.tables = nil
                observers[id]?.unknownSince = summary.version
            }
        } else {
            told = untabled
            for table in summary.tables {
                told.formUnion(byTable[table] ?? [])
                guard let precise = rowPrecise[table], !precise.isEmpty else { continue }
                guard let keys = summary.rowKeys?[table], matches.evaluatedTables.contains(table) else {
                    told.formUnion(precise)
                    continue
                }
                var concerned = matches.matching.union(matches.unevaluated)
                if let holders = holders[table] {
                    for key in keys { concerned.formUnion(holders[key] ?? []) }
                }
                concerned.formUnion(busy)
                if summary.version > 0 {
                    recent.append(ToldCommit(summary, table: table, keys: keys, matched: false), to: table)
                }
                concerned.formIntersection(precise)
                told.formUnion(concerned)
                skipped += precise.count - concerned.count
            }
        }
        for id in told {
            // In place: a copy of the record would share its told list, and the append below
            // would copy that.
            guard let slot = observers.index(forKey: id), let table = observers.values[slot].rowTable,
                  summary.version > 0 else { continue }
            let keys = matches.evaluatedTables.contains(table) ? summary.rowKeys?[table] : nil
            let commit = ToldCommit(summary, table: table, keys: keys, matched: keys != nil && matches.matching.contains(id))
            if observers.values[slot].told.count < Self.toldLimit {
                observers.values[slot].told.append(commit)
            } else {
                observers.values[slot].told = []
                observers.values[slot].lostThrough = summary.version
            }
        }
        routedThrough = max(routedThrough, summary.version)
        checkInvariantsInDebug()
        return Array(told)
    }

    // MARK: What an observer reads

    /// For a row-precise observer reading at `version`: the commits up to it that it was told of
    /// since it last read (those after stay for its next read), and how far routing went.
    ///
    /// A told commit that stands for several (other connections' commits taken in or noticed
    /// together) and that this read sees only part of is in both: this read must read what its
    /// part changed (from the change log), and the next one the rest. Routing went past this
    /// read's version, so left out, its part would count as routed and not concerning.
    ///
    /// `keys` is its result as of its last read, at `since`, when it has not become idle with it
    /// (it is reading again at once): the commits after `since` that changed a row that entered
    /// it then were not routed to it, and are told now (from the recent commits; when they are
    /// older than what is kept, the whole range is lost: read from the change log).
    mutating func told(_ id: ObserverID, through version: Int64, after since: Int64? = nil,
                       holding keys: [RowKey]? = nil) -> ObservationCenter.Told {
        guard let slot = observers.index(forKey: id) else {
            return ObservationCenter.Told(commits: [], routedThrough: 0, lostThrough: 0)
        }
        var commits = observers.values[slot].told.filter { $0.coveredFrom <= version }
        observers.values[slot].told.removeAll { $0.version <= version }
        var lost = observers.values[slot].lostThrough
        if version >= lost { observers.values[slot].lostThrough = 0 }   // this read covers what was lost
        if let since, let keys, let table = observers.values[slot].rowTable, recent.newestVersion > since {
            let held = Set(observers.values[slot].heldKeys)
            let entered = Set(keys.filter { !held.contains($0) })
            if !entered.isEmpty {
                if let missed = recent.commits(to: table, after: since, changingAnyOf: entered, besides: commits) {
                    commits += missed.filter { $0.coveredFrom <= version }
                } else {
                    lost = max(lost, version)
                }
            }
        }
        return ObservationCenter.Told(commits: commits.sorted { $0.version < $1.version }, routedThrough: routedThrough,
                                      lostThrough: lost)
    }

    /// A row-precise observer became idle with a result of `keys` as of `version`: from now on
    /// it hears only of commits that change one of them or a row matching its filter. Returns
    /// whether it must read again.
    ///
    /// While it read and delivered, it was told only of the commits that change a row it held
    /// before, or a row matching its filter; a commit after `version` may also have changed a
    /// row that entered its result in this read. It is told of those now (from the recent
    /// commits; of everything since `version`, when they are older than what is kept), and must
    /// read again.
    ///
    /// - Complexity: O(keys) (the keys that left or joined its result are re-indexed), plus
    ///   O(changed keys) of the commits routed since `version`.
    mutating func observerBecameIdle(_ id: ObserverID, keys: [RowKey], version: Int64) -> Bool {
        defer { checkInvariantsInDebug() }
        // In place (a copy of the record would share its lists, and changing them would copy them).
        guard let slot = observers.index(forKey: id), let table = observers.values[slot].rowTable else { return false }
        let held = observers.values[slot].heldKeys
        var entered: Set<RowKey> = []
        if held != keys {
            let kept = Set(keys)
            let old = Set(held)
            release(held.filter { !kept.contains($0) }, of: id, in: table)
            for key in keys where !old.contains(key) {
                holders[table, default: [:]][key, default: []].append(id)
                entered.insert(key)
            }
            observers.values[slot].heldKeys = keys
        }
        if version >= observers.values[slot].registeredDuring { busy.remove(id) }
        // The keys it held before were routed by; only those that entered need a look.
        guard !entered.isEmpty, recent.newestVersion > version else { return false }
        guard let missed = recent.commits(to: table, after: version, changingAnyOf: entered,
                                          besides: observers.values[slot].told) else {
            observers.values[slot].lostThrough = max(observers.values[slot].lostThrough, routedThrough)
            return true
        }
        observers.values[slot].told += missed
        return !missed.isEmpty
    }

    private mutating func release(_ keys: [RowKey], of id: ObserverID, in table: String) {
        for key in keys {
            guard var list = holders[table]?[key] else { continue }
            list.removeAll { $0 == id }
            holders[table]![key] = list.isEmpty ? nil : list
        }
    }

    // MARK: Invariants

    /// Checks that the indexes agree with the observers' records; returns what does not (empty:
    /// all is well). The stress checker and the tests call it; debug builds after every change
    /// (below a size where it would be slow).
    func invariantViolations() -> [String] {
        var found: [String] = []
        for (id, observer) in observers {
            if let table = observer.rowTable {
                if rowPrecise[table]?.contains(id) != true { found.append("row-precise \(id) missing from its table's set") }
                for key in observer.heldKeys where holders[table]?[key]?.contains(id) != true {
                    found.append("row-precise \(id) holds a key that no holder list names")
                }
                if observer.told.count > Self.toldLimit { found.append("row-precise \(id): more told commits than kept") }
                if let newest = observer.told.last, newest.version > routedThrough {
                    found.append("row-precise \(id): told a commit past the routed version")
                }
            } else if let tables = observer.tables {
                for table in tables where byTable[table]?.contains(id) != true {
                    found.append("observer \(id) missing from the set of a table it reads")
                }
                if untabled.contains(id) { found.append("observer \(id) both by table and untabled") }
            } else if !untabled.contains(id) {
                found.append("observer \(id) without tables is not untabled")
            }
        }
        for (table, ids) in rowPrecise {
            for id in ids where observers[id]?.rowTable != table { found.append("\(table)'s row-precise set names \(id)") }
        }
        for (table, ids) in byTable {
            for id in ids where observers[id]?.tables?.contains(table) != true { found.append("\(table)'s set names \(id)") }
        }
        for id in untabled where observers[id] == nil || observers[id]?.rowTable != nil || observers[id]?.tables != nil {
            found.append("untabled names \(id)")
        }
        for id in busy where observers[id]?.rowTable == nil { found.append("busy names \(id), not row-precise") }
        for (table, keys) in holders {
            for (key, ids) in keys {
                if ids.isEmpty { found.append("an empty holder list in \(table)") }
                for id in ids where observers[id]?.rowTable != table || observers[id]?.heldKeys.contains(key) != true {
                    found.append("a holder list of \(table) names \(id), which does not hold the key")
                }
            }
        }
        return found
    }

    /// In debug builds, traps with the violations found, while the router is small enough for
    /// the check to be cheap (its cost grows with every key held).
    private func checkInvariantsInDebug() {
        #if DEBUG
        guard observers.count <= 16, holders.count <= 4, holders.values.allSatisfy({ $0.count <= 256 }) else { return }
        let violations = invariantViolations()
        precondition(violations.isEmpty, "CommitRouter invariants broken: \(violations.joined(separator: "; "))")
        #endif
    }
}
