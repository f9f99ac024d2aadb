#if Sync
import Crypto
import Foundation
import Ripple
import RippleSync

/// A subscription as the hub serves it: a flat query, or a tree (a query with includes).
public enum HubQuery: Hashable, Sendable {
    case flat(CompiledQuery)
    case tree(CompiledTree)

    /// The root query.
    public var root: CompiledQuery {
        switch self {
        case .flat(let compiled): compiled
        case .tree(let tree): tree.root
        }
    }
}

/// A subscription's rows at one version, as ``HubQuery`` has them (to resume from).
public enum HubRows: Sendable {
    case flat([[WireValue]])
    case tree(TreeRows)
}

extension SubscriptionHub {
    /// The tables a query, its sub-queries, its includes (and theirs) and the read rules read.
    public func tablesNeeded(byQueryWithIncludes query: QueryDescription) -> Set<String> {
        var names = tablesNeeded(by: query)
        for (_, _, include) in query.includePaths {
            names.insert(include.table)
            names.formUnion(include.filter?.relatedTables ?? [])
        }
        return names
    }

    /// `query` compiled for `user`: flat, or a tree when it has includes.
    ///
    /// - Throws: ``RulesError`` when a table it reads (an included one too) may not be read;
    ///   ``QueryError`` when it cannot be compiled.
    public func compileSubscription(_ query: QueryDescription, user: String, schema: SyncedTableSchema,
                                    tables: [String: SyncedTableSchema]) throws -> (HubQuery, basis: String) {
        try compileSubscription(query, identity: SyncIdentity(user: user), schema: schema, tables: tables)
    }

    /// `query` compiled for `identity` (its claims standing for the rules' claims, bound as
    /// values: identities whose claims differ get different SQL arguments, so never share a
    /// live query, and different bases).
    ///
    /// - Throws: as the form for a user id does; ``RulesError`` also for a claim a rule needs
    ///   that the identity lacks.
    public func compileSubscription(_ query: QueryDescription, identity user: SyncIdentity, schema: SyncedTableSchema,
                                    tables: [String: SyncedTableSchema]) throws -> (HubQuery, basis: String) {
        var root = query
        root.include = nil
        for (_, _, include) in query.includePaths {
            try QueryCompiler.checkClientQuery(QueryDescription(table: include.table, filter: include.filter), tables: tables)
        }
        let (compiled, basis) = try compile(root, identity: user, schema: schema, tables: tables)
        guard query.hasIncludes else { return (.flat(compiled), basis) }
        var catalog = tables
        catalog[schema.name] = schema
        let tree = try TreeCompiler.compile(query, root: compiled, user: user, rules: rules, tables: catalog)
        return (.tree(tree), treeBasis(tree))
    }

    /// One basis for the whole tree: its parts' SQL and arguments, and their paths.
    func treeBasis(_ tree: CompiledTree) -> String {
        var hash = SHA256()
        for compiled in [tree.root] + tree.parts.map(\.compiled) {
            hash.update(data: Data(compiled.sql.utf8))
            for argument in compiled.arguments {
                hash.update(data: Data([0]))
                hash.update(data: Data(String(describing: argument).utf8))
            }
            hash.update(data: Data([1]))
        }
        for part in tree.parts { hash.update(data: Data((part.path + "\u{1}").utf8)) }
        let digest = hash.finalize().prefix(12).map { String(format: "%02x", $0) }.joined()
        return cluster.isEmpty ? "t" + digest : "\(cluster).t\(digest)"
    }

    /// The subscription's rows at replica `version` (from the store's history), to resume from.
    public func asyncRows(of query: HubQuery, schema: SyncedTableSchema, at version: Int64) async throws -> HubRows {
        switch query {
        case .flat(let compiled):
            return .flat(try await asyncRows(of: compiled, schema: schema, at: version))
        case .tree(let tree):
            var parts = [try await asyncRows(of: tree.root, schema: schema, at: version)]
            for part in tree.parts { parts.append(try await asyncRows(of: part.compiled, schema: part.schema, at: version)) }
            return .tree(TreeRows(parts: parts))
        }
    }

    /// Subscribes `handler` to `query` (see ``subscribe(_:basis:schema:resumingFrom:handler:)``):
    /// a tree's events carry its includes.
    public func subscribe(_ query: HubQuery, basis: String, schema: SyncedTableSchema, resumingFrom old: HubRows?,
                          handler: @escaping @Sendable (SubscriptionEvent) -> Void) -> SubscriptionToken {
        switch query {
        case .flat(let compiled):
            var rows: [[WireValue]]?
            if case .flat(let old) = old { rows = old }
            return subscribe(compiled, basis: basis, schema: schema, resumingFrom: rows, handler: handler)
        case .tree(let tree):
            var rows: TreeRows?
            if case .tree(let old) = old { rows = old }
            return subscribe(tree, basis: basis, schema: schema, resumingFrom: rows, handler: handler)
        }
    }

    /// Subscribes `handler` to the tree: its first event is a snapshot (or, from `old`, a
    /// change), then one event per version its rows change in.
    func subscribe(_ tree: CompiledTree, basis: String, schema: SyncedTableSchema, resumingFrom old: TreeRows?,
                   handler: @escaping @Sendable (SubscriptionEvent) -> Void) -> SubscriptionToken {
        let id = nextID.withLock { value -> Int in
            value += 1
            return value
        }
        let (entry, isNew) = trees.withLock { entries -> (TreeShared, Bool) in
            if let entry = entries[tree] { return (entry, false) }
            let entry = TreeShared(tree: tree, basis: basis)
            entries[tree] = entry
            return (entry, true)
        }
        entry.lock.withLock {
            if let ended = entry.ended {
                handler(SubscriptionEvent(version: entry.version, kind: ended, json: []))
            } else if entry.emitted != nil {
                handler(entry.firstEvent(resumingFrom: old))
                entry.subscribers[id] = TreeShared.Subscriber(handler: handler, resumingFrom: nil)
            } else {
                entry.subscribers[id] = TreeShared.Subscriber(handler: handler, resumingFrom: old)
            }
        }
        if isNew {
            // Each part is a hub subscription of its own (shared with every equal part). Their
            // events come under their own locks, then the tree's (never the other way round).
            let parts = [(tree.root, schema)] + tree.parts.map { ($0.compiled, $0.schema) }
            var tokens: [SubscriptionToken] = []
            for (index, (compiled, partSchema)) in parts.enumerated() {
                tokens.append(subscribe(compiled, basis: basis, schema: partSchema, resumingFrom: nil, encoded: false) { [weak self, entry] event in
                    self?.receive(event, part: index, of: entry)
                })
            }
            // (A part that ended at once ended the tree: its parts are let go of.)
            let ended = entry.lock.withLock { () -> Bool in
                guard entry.ended == nil else { return true }
                entry.tokens = tokens
                return false
            }
            if ended {
                for token in tokens { token.cancel() }
                return SubscriptionToken {}
            }
            // A first result now, when every part has one and they are of one finished version;
            // otherwise when the version they are ahead of finishes.
            emitIfSettled(entry)
        }
        return SubscriptionToken { [weak self] in self?.unsubscribe(id, from: entry) }
    }

    private func receive(_ event: SubscriptionEvent, part index: Int, of entry: TreeShared) {
        let ending = entry.lock.withLock { entry.receive(event, part: index) }
        if let ending {
            end(entry, as: ending)
            return
        }
        changedTrees.withLock { $0[ObjectIdentifier(entry)] = entry }
        // A part's first result that came after the tree was set up (no commit follows to
        // finish a version): the tree's first result when it is the last one missing.
        if entry.lock.withLock({ entry.emitted == nil }) { emitIfSettled(entry) }
    }

    /// Sends the tree's first result when every part has one and none is ahead of the last
    /// finished version (its rows are then those of that version).
    private func emitIfSettled(_ entry: TreeShared) {
        let completed = completedVersion.withLock { $0 }
        entry.lock.withLock {
            guard entry.emitted == nil, entry.current != nil, entry.versions.allSatisfy({ $0 <= completed }) else { return }
            entry.emit(at: entry.versions.max() ?? 0)
        }
    }

    /// The replica finished `version` (every live query heard its commit): the trees whose
    /// parts changed send their subscribers one event for it. The feed calls it after each
    /// commit, before the sockets' frames for the version are made.
    public func complete(version: Int64) {
        completedVersion.withLock { $0 = max($0, version) }
        let changed = changedTrees.withLock { changed in
            defer { changed = [:] }
            return Array(changed.values)
        }
        for entry in changed { entry.lock.withLock { entry.emit(at: version) } }
    }

    private func unsubscribe(_ id: Int, from entry: TreeShared) {
        let tokens: [SubscriptionToken] = entry.lock.withLock {
            entry.subscribers[id] = nil
            guard entry.subscribers.isEmpty else { return [] }
            defer { entry.tokens = [] }
            return entry.tokens
        }
        guard !tokens.isEmpty else { return }
        trees.withLock { entries in
            if entries[entry.tree] === entry { entries[entry.tree] = nil }
        }
        for token in tokens { token.cancel() }
    }

    /// Ends the tree for every subscriber (a part ended or was refused): they hear why.
    private func end(_ entry: TreeShared, as ending: SubscriptionEvent.Kind) {
        trees.withLock { entries in
            if entries[entry.tree] === entry { entries[entry.tree] = nil }
        }
        let tokens: [SubscriptionToken] = entry.lock.withLock {
            guard entry.ended == nil else { return [] }
            entry.ended = ending
            for subscriber in entry.subscribers.values {
                subscriber.handler(SubscriptionEvent(version: entry.version, kind: ending, json: []))
            }
            entry.subscribers = [:]
            defer { entry.tokens = [] }
            return entry.tokens
        }
        // The ending part's event came under its entry's lock, which cancelling takes: the
        // parts are let go of after it.
        guard !tokens.isEmpty else { return }
        Task { for token in tokens { token.cancel() } }
    }

    /// How many subscriptions with includes are live.
    public var treeCount: Int { trees.withLock { $0.count } }
}
#endif
