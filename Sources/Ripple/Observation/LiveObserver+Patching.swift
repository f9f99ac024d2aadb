import Foundation
import RippleDiff

/// Patching: a result with a few changed rows read again and put in place, instead of the query
/// run again.
extension LiveObserver {
    /// The result of source `index` with the rows of `keys` read again: replaced in place, or
    /// for a source that places rows by its order, also removed, moved and inserted; `nil`
    /// when the query must run again instead (a row left a window or changed an ordering
    /// column, and the order cannot place it).
    func patch(_ index: Int, keys: Set<RowKey>, in db: Database) throws
        -> (elements: [Element], changeset: Changeset, columns: [Set<String>])? {
        let positions = self.positions(of: keys, in: index)
        guard let fetchRows = sources[index].fetchRows else { return nil }
        // What changes is worked out from the result as it stands (`old`, in this scope only);
        // rows that are only replaced where they stand are put in once nothing else holds it,
        // so that its buffers change in place instead of being copied whole for each event.
        let outcome: PatchOutcome
        do {
            guard let old = snapshots[index] else { return nil }
            if let order = orders[index] {
                let rows = try fetchRows(db, Array(keys))
                guard rows.columnNames == old.columnNames, rows.sortWidth == old.sortWidth else { return nil }
                outcome = place(index, old, rows: rows, keys: keys, positions: positions, order: order)
            } else {
                guard keys.allSatisfy({ positions[$0] != nil }) else { return nil }
                let rows = try fetchRows(db, Array(keys))
                // A row that no longer matches leaves the result; with a window (LIMIT), another
                // row would take its place: the query re-runs.
                let left = rows.items.count < keys.count
                guard !left || !sources[index].isWindowed, rows.columnNames == old.columnNames else { return nil }
                let width = old.columnNames.count
                var replaced = Replacements(rows: rows)
                for row in rows.items.indices {
                    guard let position = positions[rows.items[row].key] else { return nil }
                    for column in sources[index].orderColumns
                    where old.columnHashes[position * width + column] != rows.columnHashes[row * width + column] {
                        return nil
                    }
                    if old.items[position].content != rows.items[row].content {
                        replaced.add(position, with: row, columns: old.changedColumns(from: position, to: row, in: rows))
                    }
                }
                if left {
                    var new = old
                    for change in replaced.changes { new.replace(change.position, with: change.row, of: rows) }
                    let kept = Set(rows.items.map(\.key))
                    for position in keys.filter({ !kept.contains($0) }).compactMap({ positions[$0] }).sorted(by: >) {
                        new.remove(at: position)
                    }
                    snapshots[index] = new
                    keyIndexes[index] = nil
                    let changeset = Changeset(from: old.items, to: new.items)
                    outcome = .patched(new.elements, changeset, changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) })
                } else {
                    outcome = .replace(replaced)
                }
            }
        }
        switch outcome {
        case .patched(let elements, let changeset, let columns):
            return (elements, changeset, columns)
        case .replace(let replaced):
            return replaceInPlace(index, replaced)
        }
    }

    /// What ``patch(_:keys:in:)`` found: the new result, or rows to replace where they stand.
    private enum PatchOutcome {
        case patched([Element], Changeset, [Set<String>])
        case replace(Replacements)
    }

    /// Rows of a result to replace where they stand: by position, the row of `rows` that takes
    /// it and the columns that changed.
    private struct Replacements {
        let rows: Snapshot<Element>
        private(set) var changes: [(position: Int, row: Int, columns: Set<String>)] = []

        init(rows: Snapshot<Element>) { self.rows = rows }

        mutating func add(_ position: Int, with row: Int, columns: Set<String>) {
            changes.append((position, row, columns))
        }
    }

    /// Puts `replaced` into source `index`'s result. The result is taken out of ``snapshots``
    /// first: held nowhere else (the previous event's rows were let go once delivered), its
    /// buffers change in place.
    private func replaceInPlace(_ index: Int, _ replaced: Replacements)
        -> (elements: [Element], changeset: Changeset, columns: [Set<String>]) {
        var new = snapshots[index]!
        snapshots[index] = nil
        let changes = replaced.changes.sorted { $0.position < $1.position }
        for change in changes { new.replace(change.position, with: change.row, of: replaced.rows) }
        snapshots[index] = new
        return (new.elements, .updating(changes.map(\.position), count: new.elements.count), changes.map(\.columns))
    }

    /// Source `index`'s result with the changed rows of `keys` (`rows`: those that match now)
    /// put where they belong: a row that no longer matches leaves; one whose ORDER BY values
    /// kept their values is replaced where it stands; any other is placed by `order`.
    ///
    /// - Complexity: O(n + k log n) for n rows in the result and k changed rows, plus O(n) per
    ///   row that left, entered or moved, and the minimal moves (O(n log n)).
    private func place(_ index: Int, _ old: Snapshot<Element>, rows: Snapshot<Element>, keys: Set<RowKey>,
                       positions: [RowKey: Int], order: RowOrder) -> PatchOutcome {
        var fetched: [RowKey: Int] = [:]
        for (row, item) in rows.items.enumerated() { fetched[item.key] = row }
        var replaced = Replacements(rows: rows)
        var leaving: [Int] = []
        var entering: [Int] = []
        // The rows that left their place for another: their old positions.
        var moving: [Int: Int] = [:]
        for key in keys {
            switch (positions[key], fetched[key]) {
            case (nil, nil):
                continue
            case (let position?, nil):
                leaving.append(position)
            case (nil, let row?):
                entering.append(row)
            case (let position?, let row?):
                if old.sortValues(of: position) == rows.sortValues(of: row) {
                    if old.items[position].content != rows.items[row].content {
                        replaced.add(position, with: row, columns: old.changedColumns(from: position, to: row, in: rows))
                    }
                } else {
                    leaving.append(position)
                    entering.append(row)
                    moving[row] = position
                }
            }
        }
        if leaving.isEmpty && entering.isEmpty { return .replace(replaced) }
        var new = old
        for change in replaced.changes { new.replace(change.position, with: change.row, of: rows) }
        // Where each row of the new result was in the old one (nil: it entered), kept beside it:
        // the changeset follows without a diff.
        var origin: [Int?] = Array(old.items.indices)
        for position in leaving.sorted(by: >) {
            new.remove(at: position)
            origin.remove(at: position)
        }
        for row in entering.sorted() {
            let position = order.insertionIndex(of: rows.sortValues(of: row), in: new)
            new.insert(row, of: rows, at: position)
            origin.insert(moving[row], at: position)
        }
        // Changed content: the rows replaced in place, and the moved ones whose content changed.
        var changed = Set(replaced.changes.map(\.position))
        for (row, position) in moving where old.items[position].content != rows.items[row].content { changed.insert(position) }
        let changeset = Changeset(oldCount: old.items.count, newToOld: origin,
                                  updated: origin.indices.filter { origin[$0].map(changed.contains) ?? false })
        snapshots[index] = new
        keyIndexes[index] = nil
        return .patched(new.elements, changeset, changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) })
    }

    /// At most this many changed rows are patched in place.
    static var patchLimit: Int { 32 }
}
