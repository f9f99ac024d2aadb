import Foundation
import RippleDiff

/// Patching: a result with a few changed rows read again and put in place, instead of the query
/// run again.
extension LiveObserver {
    /// The result of source `index` with the rows of `keys` read again: replaced in place, or
    /// for a source that places rows by its order, also removed, moved and inserted; `nil`
    /// when the query must run again instead (a row left a window or changed an ordering
    /// column, and the order cannot place it).
    func patch(_ index: Int, _ old: Snapshot<Element>, keys: Set<RowKey>, in db: Database) throws
        -> (elements: [Element], changeset: Changeset, columns: [Set<String>])? {
        let positions = self.positions(of: keys, in: index)
        guard let fetchRows = sources[index].fetchRows else { return nil }
        if let order = orders[index] {
            let rows = try fetchRows(db, Array(keys))
            guard rows.columnNames == old.columnNames, rows.sortWidth == old.sortWidth else { return nil }
            return place(index, old, rows: rows, keys: keys, positions: positions, order: order)
        }
        guard keys.allSatisfy({ positions[$0] != nil }) else { return nil }
        let rows = try fetchRows(db, Array(keys))
        // A row that no longer matches leaves the result; with a window (LIMIT), another row
        // would take its place: the query re-runs.
        let left = rows.items.count < keys.count
        guard !left || !sources[index].isWindowed, rows.columnNames == old.columnNames else { return nil }
        let width = old.columnNames.count
        var new = old
        var updated: [(index: Int, columns: Set<String>)] = []
        for row in rows.items.indices {
            guard let position = positions[rows.items[row].key] else { return nil }
            for column in sources[index].orderColumns
            where old.columnHashes[position * width + column] != rows.columnHashes[row * width + column] {
                return nil
            }
            if old.items[position].content != rows.items[row].content {
                updated.append((position, old.changedColumns(from: position, to: row, in: rows)))
                new.replace(position, with: row, of: rows)
            }
        }
        if left {
            let kept = Set(rows.items.map(\.key))
            for position in keys.filter({ !kept.contains($0) }).compactMap({ positions[$0] }).sorted(by: >) {
                new.remove(at: position)
            }
            snapshots[index] = new
            keyIndexes[index] = nil
            let changeset = Changeset(from: old.items, to: new.items)
            return (new.elements, changeset, changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) })
        }
        updated.sort { $0.index < $1.index }
        snapshots[index] = new
        return (new.elements, .updating(updated.map(\.index), count: new.elements.count), updated.map(\.columns))
    }

    /// Source `index`'s result with the changed rows of `keys` (`rows`: those that match now)
    /// put where they belong: a row that no longer matches leaves; one whose ORDER BY values
    /// kept their values is replaced where it stands; any other is placed by `order`.
    ///
    /// - Complexity: O(n + k log n) for n rows in the result and k changed rows, plus O(n) per
    ///   row that left, entered or moved, and the minimal moves (O(n log n)).
    private func place(_ index: Int, _ old: Snapshot<Element>, rows: Snapshot<Element>, keys: Set<RowKey>,
                       positions: [RowKey: Int], order: RowOrder) -> (elements: [Element], changeset: Changeset, columns: [Set<String>]) {
        var fetched: [RowKey: Int] = [:]
        for (row, item) in rows.items.enumerated() { fetched[item.key] = row }
        var new = old
        var updated: [(index: Int, columns: Set<String>)] = []
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
                        updated.append((position, old.changedColumns(from: position, to: row, in: rows)))
                        new.replace(position, with: row, of: rows)
                    }
                } else {
                    leaving.append(position)
                    entering.append(row)
                    moving[row] = position
                }
            }
        }
        if leaving.isEmpty && entering.isEmpty {
            updated.sort { $0.index < $1.index }
            snapshots[index] = new
            return (new.elements, .updating(updated.map(\.index), count: new.elements.count), updated.map(\.columns))
        }
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
        var changed = Set(updated.map(\.index))
        for (row, position) in moving where old.items[position].content != rows.items[row].content { changed.insert(position) }
        let changeset = Changeset(oldCount: old.items.count, newToOld: origin,
                                  updated: origin.indices.filter { origin[$0].map(changed.contains) ?? false })
        snapshots[index] = new
        keyIndexes[index] = nil
        return (new.elements, changeset, changeset.updates.map { old.changedColumns(from: $0.old, to: $0.new, in: new) })
    }

    /// At most this many changed rows are patched in place.
    static var patchLimit: Int { 32 }
}
