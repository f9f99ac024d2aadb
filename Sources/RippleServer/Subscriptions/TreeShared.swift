#if Sync
import Foundation
import Ripple
import RippleDiff
import RippleSync

/// The rows of a subscription with includes at one version: the root's rows, then each
/// include's (in ``CompiledTree/parts``' order), each as its live query gives them.
public struct TreeRows: Hashable, Sendable {
    public var parts: [[[WireValue]]]
}

/// The columns, their types and the key of each of a tree's parts (the root first).
struct TreeShape: Sendable {
    var columns: [[String]]
    var types: [[String]]
    var keys: [[Int]]
}

/// A subscription with includes, shared by every socket subscribed to an equal one: the live
/// queries of its parts (the root and each include, each a hub subscription of its own, shared
/// with every equal part), and what its subscribers were last sent.
///
/// The parts' events come one by one while the replica commits; the tree sends its
/// subscribers one event per version once the version is finished (``SubscriptionHub/complete(version:)``),
/// made from the parts' rows then: the root's changeset, each to-one include's puts and deletes,
/// each to-many include's sectioned changeset. A first result is sent once every part has one
/// and none is ahead of the finished versions (so the parts' rows are those of one version).
final class TreeShared: @unchecked Sendable {   // every variable field is guarded by `lock`
    struct Subscriber {
        var handler: @Sendable (SubscriptionEvent) -> Void
        var resumingFrom: TreeRows?
    }

    let lock = NSLock()
    let tree: CompiledTree
    let basis: String
    /// Each part's rows as its live query last gave them (`nil`: no result yet), and the
    /// version of its last event.
    var rows: [[[WireValue]]?]
    var versions: [Int64]
    var shapes: [(columns: [String], types: [String], key: [Int])?]
    /// What the subscribers have, at ``version`` (`nil`: nothing sent yet).
    var emitted: TreeRows?
    var version: Int64 = 0
    var subscribers: [Int: Subscriber] = [:]
    /// For each to-many part, the related values (the parents' `on` values) of the rows its
    /// changes touched since the last event — the lists that may have changed; `nil`: any may
    /// have (a snapshot of the part, or none sent yet).
    var touched: [Set<[WireValue]>?]
    var tokens: [SubscriptionToken] = []
    var ended: SubscriptionEvent.Kind?

    init(tree: CompiledTree, basis: String) {
        self.tree = tree
        self.basis = basis
        rows = Array(repeating: nil, count: tree.parts.count + 1)
        versions = Array(repeating: 0, count: tree.parts.count + 1)
        shapes = Array(repeating: nil, count: tree.parts.count + 1)
        touched = Array(repeating: nil, count: tree.parts.count + 1)
    }

    /// Takes part `index`'s event (under the lock); whether the tree must hear of it.
    func receive(_ event: SubscriptionEvent, part index: Int) -> SubscriptionEvent.Kind? {
        switch event.kind {
        case .snapshot(let snapshot):
            rows[index] = snapshot.rows
            shapes[index] = (snapshot.columns, snapshot.types, snapshot.key)
            touched[index] = nil
        case .changes(let changeset):
            guard let current = rows[index] else { return .ended(reason: "a part of the subscription changed before its first result") }
            let next: [[WireValue]]
            do {
                next = try changeset.apply(to: current)
            } catch {
                return .ended(reason: "the subscription's parts went out of step (\(error)); subscribe again")
            }
            if index > 0, tree.parts[index - 1].isToMany, touched[index] != nil {
                // The lists this change may alter: those of the rows it took, put, moved or
                // changed, as they were and as they are.
                let columns = tree.parts[index - 1].relatedColumns
                var values = touched[index] ?? []
                for old in changeset.deletes { values.insert(columns.map { current[old][$0] }) }
                for insert in changeset.inserts { values.insert(columns.map { next[insert.index][$0] }) }
                for move in changeset.moves {
                    values.insert(columns.map { current[move.old][$0] })
                    values.insert(columns.map { next[move.new][$0] })
                }
                for update in changeset.updates {
                    values.insert(columns.map { current[update.old][$0] })
                    values.insert(columns.map { next[update.new][$0] })
                }
                touched[index] = values
            } else {
                touched[index] = nil
            }
            rows[index] = next
        case .ended, .refused:
            return event.kind
        }
        versions[index] = max(versions[index], event.version)
        return nil
    }

    /// The parts' rows, when every part has a result.
    var current: TreeRows? {
        var parts: [[[WireValue]]] = []
        for part in rows {
            guard let part else { return nil }
            parts.append(part)
        }
        return TreeRows(parts: parts)
    }

    var shape: TreeShape? {
        var shape = TreeShape(columns: [], types: [], keys: [])
        for part in shapes {
            guard let part else { return nil }
            shape.columns.append(part.columns)
            shape.types.append(part.types)
            shape.keys.append(part.key)
        }
        return shape
    }

    /// Sends what changed since the last event, at `version` (under the lock): a first result
    /// to subscribers that have none, a change to the others. Nothing when no part has a result
    /// yet, or nothing changed.
    func emit(at version: Int64) {
        guard ended == nil, let current, let shape else { return }
        guard let emitted else {
            self.emitted = current
            self.version = version
            touched = Array(repeating: [], count: touched.count)
            for (id, subscriber) in subscribers {
                subscriber.handler(firstEvent(resumingFrom: subscriber.resumingFrom))
                subscribers[id]?.resumingFrom = nil
            }
            return
        }
        defer { touched = Array(repeating: [], count: touched.count) }
        guard emitted != current else { return }
        let changeset = TreeFrames.changeset(tree, shape, from: emitted, to: current, touched: touched)
        self.emitted = current
        self.version = version
        guard !changeset.isEmpty else { return }
        let delivered = event(changeset, rows: current, shape: shape)
        for subscriber in subscribers.values { subscriber.handler(delivered) }
    }

    /// A new subscriber's first event (under the lock, with a result sent already): the tree
    /// as sent, or from `old` a change to it.
    func firstEvent(resumingFrom old: TreeRows?) -> SubscriptionEvent {
        let rows = emitted!, shape = shape!
        guard let old, old.parts.count == rows.parts.count else { return snapshotEvent(rows, shape) }
        return event(TreeFrames.changeset(tree, shape, from: old, to: rows), rows: rows, shape: shape)
    }

    private func snapshotEvent(_ rows: TreeRows, _ shape: TreeShape) -> SubscriptionEvent {
        let snapshot = TreeFrames.snapshot(tree, shape, rows, basis: basis)
        var out = JSONBytes()
        out.snapshot(snapshot)
        return SubscriptionEvent(version: version, kind: .snapshot(snapshot), json: out.bytes)
    }

    /// `changeset` as an event, or the snapshot of `rows` when that is smaller.
    private func event(_ changeset: WireChangeset, rows: TreeRows, shape: TreeShape) -> SubscriptionEvent {
        var out = JSONBytes()
        out.changeset(changeset)
        if out.bytes.count > SubscriptionHub.snapshotComparisonThreshold {
            let snapshot = snapshotEvent(rows, shape)
            if snapshot.json.count < out.bytes.count { return snapshot }
        }
        return SubscriptionEvent(version: version, kind: .changes(changeset), json: out.bytes)
    }
}

/// How a tree's rows become wire frames: snapshots and changesets with their includes.
enum TreeFrames {
    /// Part `index`'s rows (1-based: 0 is the root) as sections of its parent's rows: the
    /// parents' keys and each parent's children (those whose related columns equal the parent's
    /// `on` columns; a NULL relates to nothing), in the children's order.
    static func sections(_ tree: CompiledTree, _ shape: TreeShape, _ rows: TreeRows, part index: Int)
        -> (parents: [[WireValue]], sections: [[[WireValue]]]) {
        let part = tree.parts[index - 1]
        let parentIndex = part.parent.map { $0 + 1 } ?? 0
        let children = self.children(rows.parts[index], of: part)
        let parentKey = shape.keys[parentIndex]
        var parents: [[WireValue]] = []
        var sections: [[[WireValue]]] = []
        for row in rows.parts[parentIndex] {
            parents.append(parentKey.map { row[$0] })
            let values = part.parentColumns.map { row[$0] }
            sections.append(values.contains(.null) ? [] : children[values] ?? [])
        }
        return (parents, sections)
    }

    /// A to-many part's `rows` grouped by their related values (the parents' `on` values they
    /// belong to), in their order; a row with a NULL among them belongs to no parent. With
    /// `values`, only the groups of those values.
    static func children(_ rows: [[WireValue]], of part: CompiledPart, among values: Set<[WireValue]>? = nil) -> [[WireValue]: [[WireValue]]] {
        var children: [[WireValue]: [[WireValue]]] = [:]
        if let values, part.relatedColumns.count == 1 {
            // One column: compared as it is, without making an array per row.
            let column = part.relatedColumns[0]
            let wanted = Set(values.map { $0[0] })
            for row in rows where wanted.contains(row[column]) { children[[row[column]], default: []].append(row) }
            return children
        }
        for row in rows {
            let related = part.relatedColumns.map { row[$0] }
            guard !related.contains(.null), values?.contains(related) ?? true else { continue }
            children[related, default: []].append(row)
        }
        return children
    }

    static func snapshot(_ tree: CompiledTree, _ shape: TreeShape, _ rows: TreeRows, basis: String) -> WireSnapshot {
        var included: [String: WireIncludedSnapshot] = [:]
        for (offset, part) in tree.parts.enumerated() {
            let index = offset + 1
            if part.isToMany {
                let (_, sections) = self.sections(tree, shape, rows, part: index)
                included[part.path] = WireIncludedSnapshot(columns: shape.columns[index], types: shape.types[index], key: shape.keys[index],
                                                           rows: sections.flatMap { $0 }, counts: sections.map(\.count))
            } else {
                included[part.path] = WireIncludedSnapshot(columns: shape.columns[index], types: shape.types[index], key: shape.keys[index],
                                                           rows: rows.parts[index])
            }
        }
        return WireSnapshot(basis: basis, columns: shape.columns[0], types: shape.types[0], key: shape.keys[0], rows: rows.parts[0],
                            included: included)
    }

    /// The change from `old` to `new`: the root's changeset (Heckel, by key), each to-one
    /// include's puts and deletes, each to-many include's sectioned changeset. `touched` says,
    /// per to-many part, which lists may have changed (`nil`: any): when the root's rows stayed,
    /// only those are compared.
    static func changeset(_ tree: CompiledTree, _ shape: TreeShape, from old: TreeRows, to new: TreeRows,
                          touched: [Set<[WireValue]>?]? = nil) -> WireChangeset {
        let rootKey = shape.keys[0]
        let rootStayed = old.parts[0] == new.parts[0]
        var changeset = WireChangeset()
        if !rootStayed {
            let rootChanges = Changeset(from: old.parts[0], to: new.parts[0], identifiedBy: { row in rootKey.map { row[$0] } }, contentEqual: ==)
            changeset = WireChangeset(rootChanges, from: old.parts[0], to: new.parts[0])
        }
        var included: [String: WireIncludedChange] = [:]
        for (offset, part) in tree.parts.enumerated() {
            let index = offset + 1
            if part.isToMany, old.parts[index] == new.parts[index], rootStayed { continue }
            if part.isToMany, rootStayed, part.parent == nil, let values = touched?[index] {
                let change = changedSections(tree, shape, from: old, to: new, part: index, among: values)
                if !change.isEmpty { included[part.path] = .sectioned(change) }
                continue
            }
            if part.isToMany {
                let before = sections(tree, shape, old, part: index)
                let after = sections(tree, shape, new, part: index)
                guard before.sections != after.sections || before.parents != after.parents else { continue }
                let change = WireSectionedChangeset(from: before.sections, parents: before.parents, to: after.sections, parents: after.parents,
                                                    key: shape.keys[index])
                if !change.isEmpty { included[part.path] = .sectioned(change) }
            } else {
                guard old.parts[index] != new.parts[index] else { continue }
                let change = WireKeyedChange(from: old.parts[index], to: new.parts[index], key: shape.keys[index])
                if !change.isEmpty { included[part.path] = .keyed(change) }
            }
        }
        if !included.isEmpty { changeset.included = included }
        return changeset
    }

    /// A to-many part's sectioned change when the root's rows stayed and only the lists of
    /// parents whose `on` values are among `values` may have changed: those lists alone, before
    /// and after, matched by Heckel's algorithm (a child moving between two of them is one move),
    /// their paths in the whole list's sections.
    static func changedSections(_ tree: CompiledTree, _ shape: TreeShape, from old: TreeRows, to new: TreeRows, part index: Int,
                                among values: Set<[WireValue]>) -> WireSectionedChangeset {
        let part = tree.parts[index - 1]
        let parents = new.parts[0]
        var affected: [Int] = []
        for (section, row) in parents.enumerated() {
            let value = part.parentColumns.map { row[$0] }
            if !value.contains(.null), values.contains(value) { affected.append(section) }
        }
        guard !affected.isEmpty else { return WireSectionedChangeset() }
        let parentKey = shape.keys[0]
        let keys = affected.map { section in parentKey.map { parents[section][$0] } }
        func sublists(_ rows: [[WireValue]]) -> [[[WireValue]]] {
            let children = self.children(rows, of: part, among: values)
            return affected.map { section in children[part.parentColumns.map { parents[section][$0] }] ?? [] }
        }
        let local = WireSectionedChangeset(from: sublists(old.parts[index]), parents: keys, to: sublists(new.parts[index]), parents: keys,
                                           key: shape.keys[index])
        func global(_ path: WirePath) -> WirePath { WirePath(section: affected[path.section], item: path.item) }
        return WireSectionedChangeset(
            deletes: local.deletes.map(global),
            inserts: local.inserts.map { .init(path: global($0.path), row: $0.row) },
            moves: local.moves.map { .init(old: global($0.old), new: global($0.new)) },
            updates: local.updates.map { .init(old: global($0.old), new: global($0.new), columns: $0.columns) })
    }
}
#endif
