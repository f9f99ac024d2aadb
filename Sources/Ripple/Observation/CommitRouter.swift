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
/// A row-precise observer may also read other tables in sub-queries (its *dependencies*, see
/// ``RowInterest/dependencies``): it is told of a commit that changes a row of a dependency's
/// table that matches the dependency's filter after the change (evaluated in the commit, as its
/// own filter is), or that the dependency selected at the observer's last full read (those
/// keys are held as its result's are, so a row deleted or moved out of the filter tells it too),
/// or that could not be evaluated, or while it is busy; then it runs its whole query again. A
/// commit that changes only rows of a dependency's table that neither match nor are held by it
/// does not tell it.
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
        /// Row-precise: the tables its dependencies read.
        var dependencyTables: Set<String> = []
        /// Row-precise: per dependency table, the keys of the rows its dependencies selected when
        /// it last became idle.
        var heldDependencyKeys: [String: [RowKey]] = [:]
        /// Row-precise: the version of the commit evaluated last when it registered. That commit
        /// may commit after the observer's first read without having evaluated its filter: the
        /// observer hears every commit until it has read at least that version. Raised for an
        /// observer with value terms when its values may be stale (see ``route(_:_:)``,
        /// ``observerBecameIdle(_:keys:dependencyKeys:valuesChangedDuring:version:)``).
        var registeredDuring: Int64 = 0
        /// Row-precise: whether some rows concern it by the values its dependencies select
        /// (``RowInterest/valueTerms``), which the filter index holds as of its last full run.
        var hasValueTerms = false
        /// Row-precise: the commits it was told of and has not read yet (see ``told(_:through:after:holding:holdingDependencies:)``).
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
    /// Row-precise observers with a dependency on a table, by table.
    private var dependents: [String: Set<ObserverID>] = [:]
    /// Per table, the row-precise observers whose dependencies selected each key (as of when
    /// they last became idle): told of every commit that changes the row, which may take it out
    /// of the dependency's filter (a deleted row is gone when filters are evaluated).
    private var dependencyHolders: [String: [RowKey: [ObserverID]]] = [:]
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

    /// Registers a row-precise observer of `table` whose dependencies read `dependencies`;
    /// `registeredDuring` is the version of the commit whose filters were evaluated last when its
    /// filters were added.
    /// `hasValueTerms` when some rows concern it by the values its dependencies select.
    mutating func registerRowPrecise(_ id: ObserverID, table: String, dependencies: Set<String> = [],
                                     hasValueTerms: Bool = false, registeredDuring: Int64) {
        observers[id] = Registered(rowTable: table, tables: nil, dependencyTables: dependencies,
                                   registeredDuring: registeredDuring, hasValueTerms: hasValueTerms)
        rowPrecise[table, default: []].insert(id)
        for dependency in dependencies { dependents[dependency, default: []].insert(id) }
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
            Self.release(observer.heldKeys, of: id, in: table, from: &holders)
            for dependency in observer.dependencyTables { dependents[dependency]?.remove(id) }
            for (dependency, keys) in observer.heldDependencyKeys {
                Self.release(keys, of: id, in: dependency, from: &dependencyHolders)
            }
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
    /// of when they last became idle), are busy, or could not be evaluated — of the table, or of
    /// a dependency on it (those run their query again); every other observer of a changed
    /// table; every observer for ``ChangeLog/everyTable``. A row-precise observer told of it
    /// keeps its changed keys until it reads. Such a commit is kept among the recent ones
    /// (``RecentCommits``). Returns the observers told.
    ///
    /// Commits must be routed in version order (an observer then skips, unread, the commits it
    /// was not told of).
    ///
    /// - Complexity: O(changed rows + observers told), not O(observers).
    mutating func route(_ summary: CommitSummary, _ matches: FilterMatches) -> [ObserverID] {
        var told: Set<ObserverID>
        // Row-precise observers told on account of a dependency: they run their query again.
        var reruns: Set<ObserverID> = []
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
                let precise = rowPrecise[table] ?? []
                let dependent = dependents[table] ?? []
                guard !precise.isEmpty || !dependent.isEmpty else { continue }
                guard let keys = summary.rowKeys?[table], matches.evaluatedTables.contains(table) else {
                    told.formUnion(precise)
                    told.formUnion(dependent)
                    reruns.formUnion(dependent)
                    continue
                }
                if summary.version > 0 {
                    recent.append(ToldCommit(summary, table: table, keys: keys, matched: false), to: table)
                }
                if !precise.isEmpty {
                    var concerned = matches.matching.union(matches.unevaluated).union(matches.valueMatching)
                    if let holders = holders[table] {
                        for key in keys { concerned.formUnion(holders[key] ?? []) }
                    }
                    concerned.formUnion(busy)
                    concerned.formIntersection(precise)
                    told.formUnion(concerned)
                    skipped += precise.count - concerned.count
                }
                if !dependent.isEmpty {
                    // A row that matches a dependency's filter now (inserted, or moved into it),
                    // or that the dependency selected (deleted, or moved out of it).
                    var concerned = matches.dependencyMatching.union(matches.dependencyUnevaluated)
                    if let holders = dependencyHolders[table] {
                        for key in keys { concerned.formUnion(holders[key] ?? []) }
                    }
                    concerned.formUnion(busy)
                    concerned.formIntersection(dependent)
                    told.formUnion(concerned)
                    reruns.formUnion(concerned)
                    skipped += dependent.count - concerned.count
                }
            }
        }
        for id in told {
            // In place: a copy of the record would share its told list, and the append below
            // would copy that.
            guard let slot = observers.index(forKey: id), let table = observers.values[slot].rowTable,
                  summary.version > 0 else { continue }
            let rerun = reruns.contains(id)
            let keys = !rerun && matches.evaluatedTables.contains(table) ? summary.rowKeys?[table] : nil
            if keys == nil && observers.values[slot].hasValueTerms {
                // What its dependencies select may have changed: the values the index holds for
                // it may be stale until it has read this commit (and registered them again).
                observers.values[slot].registeredDuring = max(observers.values[slot].registeredDuring, summary.version)
                busy.insert(id)
            }
            let commit = ToldCommit(summary, table: table, keys: keys, matched: keys != nil && matches.matching.contains(id),
                                    rerun: rerun)
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
    /// `dependencyKeys`, likewise, the rows its dependencies selected at that read, per table
    /// (a commit that changed one that entered is told as one to run the query again for).
    mutating func told(_ id: ObserverID, through version: Int64, after since: Int64? = nil,
                       holding keys: [RowKey]? = nil,
                       holdingDependencies dependencyKeys: [String: [RowKey]]? = nil) -> ObservationCenter.Told {
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
        if let since, let dependencyKeys, recent.newestVersion > since {
            for (table, keys) in dependencyKeys {
                let held = Set(observers.values[slot].heldDependencyKeys[table] ?? [])
                let entered = Set(keys.filter { !held.contains($0) })
                guard !entered.isEmpty else { continue }
                if let missed = recent.commits(to: table, after: since, changingAnyOf: entered, besides: []) {
                    Self.addReruns(missed.filter { $0.coveredFrom <= version }, to: &commits)
                } else {
                    lost = max(lost, version)
                }
            }
        }
        return ObservationCenter.Told(commits: commits.sorted { $0.version < $1.version }, routedThrough: routedThrough,
                                      lostThrough: lost)
    }

    /// A row-precise observer became idle with a result of `keys` as of `version`, its
    /// dependencies selecting the rows of `dependencyKeys` (per table): from now on it hears only
    /// of commits that change one of them or a row matching its filters. Returns whether it must
    /// read again.
    ///
    /// While it read and delivered, it was told only of the commits that change a row it held
    /// before, or a row matching its filter; a commit after `version` may also have changed a
    /// row that entered its result in this read. It is told of those now (from the recent
    /// commits; of everything since `version`, when they are older than what is kept), and must
    /// read again.
    ///
    /// - Complexity: O(keys) (the keys that left or joined its result are re-indexed), plus
    ///   O(changed keys) of the commits routed since `version`.
    ///
    /// `valuesChangedDuring`: its value terms' values changed with this read, and registering
    /// them in the filter index found this version evaluated last (see
    /// ``FilterRegistry/setValues(_:_:)``). Commits up to it may have been evaluated with the
    /// values that were: it hears every commit to its table until it has read past it, and those
    /// already routed since `version` while it heard only some are read from the change log.
    mutating func observerBecameIdle(_ id: ObserverID, keys: [RowKey], dependencyKeys: [String: [RowKey]] = [:],
                                     valuesChangedDuring: Int64? = nil, version: Int64) -> Bool {
        defer { checkInvariantsInDebug() }
        // In place (a copy of the record would share its lists, and changing them would copy them).
        guard let slot = observers.index(forKey: id), let table = observers.values[slot].rowTable else { return false }
        if let during = valuesChangedDuring {
            if !busy.contains(id) && routedThrough > version {
                observers.values[slot].lostThrough = max(observers.values[slot].lostThrough, routedThrough)
                observers.values[slot].registeredDuring = max(observers.values[slot].registeredDuring, during)
                busy.insert(id)
                _ = Self.hold(keys, of: id, in: table, replacing: &observers.values[slot].heldKeys, in: &holders)
                for dependency in observers.values[slot].dependencyTables {
                    _ = Self.hold(dependencyKeys[dependency] ?? [], of: id, in: dependency,
                                  replacing: &observers.values[slot].heldDependencyKeys[dependency, default: []],
                                  in: &dependencyHolders)
                    if observers.values[slot].heldDependencyKeys[dependency]?.isEmpty == true {
                        observers.values[slot].heldDependencyKeys[dependency] = nil
                    }
                }
                return true
            }
            observers.values[slot].registeredDuring = max(observers.values[slot].registeredDuring, during)
            busy.insert(id)
        }
        let entered = Self.hold(keys, of: id, in: table, replacing: &observers.values[slot].heldKeys, in: &holders)
        var enteredDependencies: [String: Set<RowKey>] = [:]
        for dependency in observers.values[slot].dependencyTables {
            let keys = dependencyKeys[dependency] ?? []
            let entered = Self.hold(keys, of: id, in: dependency,
                                    replacing: &observers.values[slot].heldDependencyKeys[dependency, default: []],
                                    in: &dependencyHolders)
            if observers.values[slot].heldDependencyKeys[dependency]?.isEmpty == true {
                observers.values[slot].heldDependencyKeys[dependency] = nil
            }
            if !entered.isEmpty { enteredDependencies[dependency] = entered }
        }
        if version >= observers.values[slot].registeredDuring { busy.remove(id) }
        // The keys it held before were routed by; only those that entered need a look.
        guard !entered.isEmpty || !enteredDependencies.isEmpty, recent.newestVersion > version else { return false }
        var readsAgain = false
        if !entered.isEmpty {
            guard let missed = recent.commits(to: table, after: version, changingAnyOf: entered,
                                              besides: observers.values[slot].told) else {
                observers.values[slot].lostThrough = max(observers.values[slot].lostThrough, routedThrough)
                return true
            }
            observers.values[slot].told += missed
            readsAgain = !missed.isEmpty
        }
        for (dependency, entered) in enteredDependencies {
            guard let missed = recent.commits(to: dependency, after: version, changingAnyOf: entered, besides: []) else {
                observers.values[slot].lostThrough = max(observers.values[slot].lostThrough, routedThrough)
                return true
            }
            Self.addReruns(missed, to: &observers.values[slot].told)
            readsAgain = readsAgain || !missed.isEmpty
        }
        return readsAgain
    }

    /// Makes `keys` the keys `id` holds in `table` (`held`, indexed in `index`); returns those
    /// that entered.
    private static func hold(_ keys: [RowKey], of id: ObserverID, in table: String, replacing held: inout [RowKey],
                             in index: inout [String: [RowKey: [ObserverID]]]) -> Set<RowKey> {
        guard held != keys else { return [] }
        var entered: Set<RowKey> = []
        let kept = Set(keys)
        let old = Set(held)
        release(held.filter { !kept.contains($0) }, of: id, in: table, from: &index)
        for key in keys where !old.contains(key) {
            index[table, default: [:]][key, default: []].append(id)
            entered.insert(key)
        }
        held = keys
        return entered
    }

    private static func release(_ keys: [RowKey], of id: ObserverID, in table: String,
                                from index: inout [String: [RowKey: [ObserverID]]]) {
        for key in keys {
            guard var list = index[table]?[key] else { continue }
            list.removeAll { $0 == id }
            index[table]![key] = list.isEmpty ? nil : list
        }
    }

    /// Adds `missed` (commits that changed a row a dependency selected) to `told` as commits to
    /// run the query again for: a commit already told (for the observer's own table) is marked so.
    private static func addReruns(_ missed: [ToldCommit], to told: inout [ToldCommit]) {
        for var commit in missed {
            if let index = told.firstIndex(where: { $0.version == commit.version }) {
                told[index].rerun = true
                told[index].keys = nil
            } else {
                commit.rerun = true
                commit.keys = nil
                told.append(commit)
            }
        }
        told.sort { $0.version < $1.version }
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
                for dependency in observer.dependencyTables where dependents[dependency]?.contains(id) != true {
                    found.append("row-precise \(id) missing from the dependents of \(dependency)")
                }
                for (dependency, keys) in observer.heldDependencyKeys {
                    if !observer.dependencyTables.contains(dependency) {
                        found.append("row-precise \(id) holds keys of \(dependency), no dependency of it")
                    }
                    for key in keys where dependencyHolders[dependency]?[key]?.contains(id) != true {
                        found.append("row-precise \(id) holds a dependency key that no holder list names")
                    }
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
        for (table, ids) in dependents {
            for id in ids where observers[id]?.dependencyTables.contains(table) != true {
                found.append("\(table)'s dependents name \(id)")
            }
        }
        for (table, keys) in dependencyHolders {
            for (key, ids) in keys {
                if ids.isEmpty { found.append("an empty dependency holder list in \(table)") }
                for id in ids where observers[id]?.heldDependencyKeys[table]?.contains(key) != true {
                    found.append("a dependency holder list of \(table) names \(id), which does not hold the key")
                }
            }
        }
        return found
    }

    /// In debug builds, traps with the violations found, while the router is small enough for
    /// the check to be cheap (its cost grows with every key held).
    private func checkInvariantsInDebug() {
        #if DEBUG
        guard observers.count <= 16, holders.count <= 4, holders.values.allSatisfy({ $0.count <= 256 }),
              dependencyHolders.values.allSatisfy({ $0.count <= 256 }) else { return }
        let violations = invariantViolations()
        precondition(violations.isEmpty, "CommitRouter invariants broken: \(violations.joined(separator: "; "))")
        #endif
    }
}
