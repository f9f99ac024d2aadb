import RippleDiff

/// The rows of one include in a subscription's snapshot (see ``IncludeDescription``).
///
/// ```json
/// {"columns": ["id", "name"], "types": ["int8", "text"], "key": [0], "rows": [[1, "Launch"]]}
/// {"columns": ["id", "project_id", "title"], "types": […], "key": [0], "rows": […], "counts": [2, 0, 1]}
/// ```
///
/// * A **to-one** include (no `counts`): the rows the parents refer to, a keyed set (in key
///   order; the order carries no meaning).
/// * A **to-many** include (`counts`): the children of each root row, root row after root row,
///   in the root's order (a to-many include is top-level only); `counts[i]` is how many belong
///   to root row `i`, and the counts add up to the rows. A child related to two parents is
///   listed under each.
public struct WireIncludedSnapshot: Codable, Hashable, Sendable {
    public var columns: [String]
    public var types: [String]
    /// The positions of the included table's key columns.
    public var key: [Int]
    public var rows: [[WireValue]]
    /// For a to-many include, the number of children of each parent; `nil` for a to-one.
    public var counts: [Int]?

    public init(columns: [String], types: [String], key: [Int], rows: [[WireValue]], counts: [Int]? = nil) {
        (self.columns, self.types, self.key, self.rows, self.counts) = (columns, types, key, rows, counts)
    }

    enum CodingKeys: String, CodingKey { case columns, types, key, rows, counts }

    /// Reads an include's rows; `counts`, when present, must be a number of children (0 or
    /// more) per parent that add up to the number of rows.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        columns = try container.decode([String].self, forKey: .columns)
        types = try container.decode([String].self, forKey: .types)
        key = try container.decode([Int].self, forKey: .key)
        rows = try container.decode([[WireValue]].self, forKey: .rows)
        counts = try container.decodeIfPresent([Int].self, forKey: .counts)
        if let problem = countsProblem {
            throw DecodingError.dataCorruptedError(forKey: .counts, in: container, debugDescription: problem)
        }
    }

    /// What is wrong with `counts` (a count below 0, or counts that do not add up to the
    /// rows); `nil`: nothing, or no `counts`.
    var countsProblem: String? {
        guard let counts else { return nil }
        var total = 0
        for count in counts {
            guard count >= 0 else { return "a parent's number of children is \(count), below 0" }
            let (sum, overflow) = total.addingReportingOverflow(count)
            guard !overflow, sum <= rows.count else { return "`counts` add up to more than the \(rows.count) rows" }
            total = sum
        }
        guard total == rows.count else { return "`counts` add up to \(total), not to the \(rows.count) rows" }
        return nil
    }

    /// Whether this is a to-many include (a sectioned list).
    public var isSectioned: Bool { counts != nil }

    /// A to-many include's children, one list per parent.
    public var sections: [[[WireValue]]] {
        guard let counts else { return [] }
        var sections: [[[WireValue]]] = []
        var start = 0
        for count in counts {
            let end = min(rows.count, start + max(0, count))
            sections.append(Array(rows[start..<end]))
            start = end
        }
        return sections
    }
}

/// How one include of a subscription changed in a frame: a keyed set's puts and deletes (a
/// to-one include), or a sectioned changeset (a to-many include).
public enum WireIncludedChange: Hashable, Sendable {
    case keyed(WireKeyedChange)
    case sectioned(WireSectionedChangeset)

    public var isEmpty: Bool {
        switch self {
        case .keyed(let change): change.isEmpty
        case .sectioned(let change): change.isEmpty
        }
    }
}

extension WireIncludedChange: Codable {
    enum Keys: String, CodingKey { case put, delete, deletes, inserts, moves, updates }

    /// A keyed change has `put` or `delete`; a sectioned one `deletes`, `inserts`, `moves` or
    /// `updates`; none has both (a member that is `null` counts as absent). An object with
    /// neither form's members (`{}`) is an empty sectioned change.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        func has(_ key: Keys) throws -> Bool { try container.contains(key) && !container.decodeNil(forKey: key) }
        let isKeyed = try has(.put) || has(.delete)
        let isSectioned = try has(.deletes) || has(.inserts) || has(.moves) || has(.updates)
        guard !(isKeyed && isSectioned) else {
            throw DecodingError.dataCorruptedError(forKey: .put, in: container, debugDescription: "an include's change has both a keyed "
                                                   + "set's put or delete and a sectioned list's deletes, inserts, moves or updates")
        }
        self = isKeyed ? .keyed(try WireKeyedChange(from: decoder)) : .sectioned(try WireSectionedChangeset(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .keyed(let change): try change.encode(to: encoder)
        case .sectioned(let change): try change.encode(to: encoder)
        }
    }
}

/// A to-one include's change: rows put (a new row whole; a changed row as its key's columns and
/// the columns that changed) and rows deleted by key.
///
/// ```json
/// {"put": [{"0": 7, "1": "Launch"}, {"0": 3, "1": "renamed"}], "delete": [[5]]}
/// ```
///
/// A put's object maps column positions (as strings) to values. A row the client does not hold
/// is put whole; a row it holds is patched. A delete names a row by its key's values, in the
/// order of the snapshot's `key`.
public struct WireKeyedChange: Codable, Hashable, Sendable {
    public var puts: [[Int: WireValue]]
    public var deletes: [[WireValue]]

    public init(puts: [[Int: WireValue]] = [], deletes: [[WireValue]] = []) { (self.puts, self.deletes) = (puts, deletes) }

    public var isEmpty: Bool { puts.isEmpty && deletes.isEmpty }

    enum CodingKeys: String, CodingKey { case puts = "put", deletes = "delete" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let named = try container.decodeIfPresent([[String: WireValue]].self, forKey: .puts) ?? []
        puts = try named.map { object in
            var columns: [Int: WireValue] = [:]
            for (name, value) in object {
                guard let index = Int(name), index >= 0 else {
                    throw DecodingError.dataCorruptedError(forKey: .puts, in: container, debugDescription: "column \(name) is not an index")
                }
                columns[index] = value
            }
            return columns
        }
        deletes = try container.decodeIfPresent([[WireValue]].self, forKey: .deletes) ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if !puts.isEmpty {
            try container.encode(puts.map { Dictionary(uniqueKeysWithValues: $0.map { (String($0.key), $0.value) }) }, forKey: .puts)
        }
        if !deletes.isEmpty { try container.encode(deletes, forKey: .deletes) }
    }

    /// The change from `old` to `new` (rows of `width` columns identified by the columns at
    /// `key`): rows whose key is gone are deleted, new rows put whole, changed rows put as
    /// their key and changed columns.
    public init(from old: [[WireValue]], to new: [[WireValue]], key: [Int]) {
        var before: [[WireValue]: [WireValue]] = [:]
        before.reserveCapacity(old.count)
        for row in old { before[key.map { row[$0] }] = row }
        var puts: [[Int: WireValue]] = []
        var present = Set<[WireValue]>()
        present.reserveCapacity(new.count)
        for row in new {
            let identity = key.map { row[$0] }
            present.insert(identity)
            guard let previous = before[identity] else {
                puts.append(Dictionary(uniqueKeysWithValues: row.enumerated().map { ($0.offset, $0.element) }))
                continue
            }
            guard previous != row else { continue }
            var columns = WireChangeset.changedColumns(from: previous, to: row)
            for index in key { columns[index] = row[index] }
            puts.append(columns)
        }
        self.puts = puts
        self.deletes = old.map { row in key.map { row[$0] } }.filter { !present.contains($0) }
    }

    /// The keyed set after the change: `rows` (of `width` columns, identified by the columns at
    /// `key`), in key order of first appearance — puts of rows not held appended.
    ///
    /// - Throws: ``WireChangesetError`` when a put of a row not held is not whole, or names a
    ///   column beyond `width`, or a delete names a row not held.
    public func apply(to rows: [[WireValue]], key: [Int], width: Int) throws -> [[WireValue]] {
        var result = rows
        var position: [[WireValue]: Int] = [:]
        for (index, row) in rows.enumerated() { position[key.map { row[$0] }] = index }
        var removed = Set<Int>()
        for identity in deletes {
            guard let index = position[identity], !removed.contains(index) else {
                throw WireChangesetError("delete of \(identity), which is not held")
            }
            removed.insert(index)
            position[identity] = nil
        }
        for put in puts {
            guard put.keys.allSatisfy({ $0 >= 0 && $0 < width }), key.allSatisfy({ put[$0] != nil }) else {
                throw WireChangesetError("a put names a column beyond \(width) or lacks a key column")
            }
            let identity = key.map { put[$0]! }
            if let index = position[identity] {
                for (column, value) in put { result[index][column] = value }
            } else {
                guard put.count == width else { throw WireChangesetError("a put of \(identity), which is not held, is not whole") }
                position[identity] = result.count
                result.append((0..<width).map { put[$0]! })
            }
        }
        return result.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
    }
}

/// A place in a sectioned list: the section (the parent's index) and the item's index in it.
public struct WirePath: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var section: Int
    public var item: Int

    public init(section: Int, item: Int) { (self.section, self.item) = (section, item) }

    public static func < (lhs: WirePath, rhs: WirePath) -> Bool { (lhs.section, lhs.item) < (rhs.section, rhs.item) }

    public var description: String { "[\(section),\(item)]" }
}

/// A to-many include's change: how each parent's children changed, by path, in the batch
/// convention of RippleDiff's `SectionedChangeset` (deletes at old paths, inserts at new paths,
/// moves from an old path to a new one — also to another section — and updates of the item at
/// an old path, now at a new one, with its changed columns). The sections themselves change as
/// their parents do (the root's changeset, or the parent include's change): a removed section
/// takes its items with it, and every item of an inserted section is an insert.
///
/// ```json
/// {"deletes": [[0, 2]], "inserts": [[1, 0, [9, 4, "new"]]], "moves": [[[3, 10], [7, 0]]],
///  "updates": [[[3, 10], [7, 0], {"1": 8}]]}
/// ```
public struct WireSectionedChangeset: Codable, Hashable, Sendable {
    public var deletes: [WirePath]
    public var inserts: [Insert]
    public var moves: [Move]
    public var updates: [Update]

    public struct Insert: Hashable, Sendable {
        public var path: WirePath
        public var row: [WireValue]
        public init(path: WirePath, row: [WireValue]) { (self.path, self.row) = (path, row) }
    }

    public struct Move: Hashable, Sendable {
        public var old: WirePath
        public var new: WirePath
        public init(old: WirePath, new: WirePath) { (self.old, self.new) = (old, new) }
    }

    public struct Update: Hashable, Sendable {
        public var old: WirePath
        public var new: WirePath
        public var columns: [Int: WireValue]
        public init(old: WirePath, new: WirePath, columns: [Int: WireValue]) { (self.old, self.new, self.columns) = (old, new, columns) }
    }

    public init(deletes: [WirePath] = [], inserts: [Insert] = [], moves: [Move] = [], updates: [Update] = []) {
        (self.deletes, self.inserts, self.moves, self.updates) = (deletes, inserts, moves, updates)
    }

    public var isEmpty: Bool { deletes.isEmpty && inserts.isEmpty && moves.isEmpty && updates.isEmpty }

    enum CodingKeys: String, CodingKey { case deletes, inserts, moves, updates }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func path(_ pair: [Int]) throws -> WirePath {
            guard pair.count == 2, pair[0] >= 0, pair[1] >= 0 else {
                throw DecodingError.dataCorruptedError(forKey: .deletes, in: container, debugDescription: "a path is [section, item]")
            }
            return WirePath(section: pair[0], item: pair[1])
        }
        deletes = try (container.decodeIfPresent([[Int]].self, forKey: .deletes) ?? []).map(path)
        inserts = try (container.decodeIfPresent([InsertForm].self, forKey: .inserts) ?? []).map {
            Insert(path: try path([$0.section, $0.item]), row: $0.row)
        }
        moves = try (container.decodeIfPresent([[[Int]]].self, forKey: .moves) ?? []).map { pair in
            guard pair.count == 2 else {
                throw DecodingError.dataCorruptedError(forKey: .moves, in: container, debugDescription: "a move is [old path, new path]")
            }
            return Move(old: try path(pair[0]), new: try path(pair[1]))
        }
        updates = try (container.decodeIfPresent([UpdateForm].self, forKey: .updates) ?? []).map {
            Update(old: try path($0.old), new: try path($0.new), columns: $0.columns)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if !deletes.isEmpty { try container.encode(deletes.map { [$0.section, $0.item] }, forKey: .deletes) }
        if !inserts.isEmpty {
            try container.encode(inserts.map { InsertForm(section: $0.path.section, item: $0.path.item, row: $0.row) }, forKey: .inserts)
        }
        if !moves.isEmpty {
            try container.encode(moves.map { [[$0.old.section, $0.old.item], [$0.new.section, $0.new.item]] }, forKey: .moves)
        }
        if !updates.isEmpty {
            try container.encode(updates.map { UpdateForm(old: [$0.old.section, $0.old.item], new: [$0.new.section, $0.new.item],
                                                          columns: $0.columns) }, forKey: .updates)
        }
    }

    /// `[section, item, row]`.
    private struct InsertForm: Codable {
        var section: Int, item: Int, row: [WireValue]
        init(section: Int, item: Int, row: [WireValue]) { (self.section, self.item, self.row) = (section, item, row) }
        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            (section, item, row) = (try container.decode(Int.self), try container.decode(Int.self), try container.decode([WireValue].self))
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(section)
            try container.encode(item)
            try container.encode(row)
        }
    }

    /// `[old path, new path, {column: value}]`.
    private struct UpdateForm: Codable {
        var old: [Int], new: [Int], columns: [Int: WireValue]
        init(old: [Int], new: [Int], columns: [Int: WireValue]) { (self.old, self.new, self.columns) = (old, new, columns) }
        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            old = try container.decode([Int].self)
            new = try container.decode([Int].self)
            var columns: [Int: WireValue] = [:]
            for (name, value) in try container.decode([String: WireValue].self) {
                guard let index = Int(name), index >= 0 else {
                    throw DecodingError.dataCorruptedError(in: container, debugDescription: "column \(name) is not an index")
                }
                columns[index] = value
            }
            self.columns = columns
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(old)
            try container.encode(new)
            try container.encode(Dictionary(uniqueKeysWithValues: columns.map { (String($0.key), $0.value) }))
        }
    }

    /// The new sections' items, from the old ones: `sourceOfNewSection` is how the sections
    /// themselves changed, one element per new section: the old section it was, or `nil` for a
    /// section inserted (``WireChangeset/sources(oldCount:)`` of the parents' changeset).
    ///
    /// In each new section, inserted and moved items take their new places; the items of its old
    /// section that were neither deleted nor moved keep their order in the free places; then
    /// updated items take their changed columns. Items of removed sections go with them.
    ///
    /// - Throws: ``WireChangesetError`` when the change does not fit the sections (a path out
    ///   of range, an item taken twice, a place left empty or filled twice).
    /// - Complexity: O(items + changes).
    public func apply(to old: [[[WireValue]]], sourceOfNewSection: [Int?]) throws -> [[[WireValue]]] {
        var taken = old.map { [Bool](repeating: false, count: $0.count) }
        func check(_ path: WirePath, in sections: [[[WireValue]]]) -> Bool {
            sections.indices.contains(path.section) && sections[path.section].indices.contains(path.item)
        }
        for path in deletes {
            guard check(path, in: old), !taken[path.section][path.item] else { throw WireChangesetError("item delete at \(path) does not fit") }
            taken[path.section][path.item] = true
        }
        for move in moves {
            guard check(move.old, in: old), !taken[move.old.section][move.old.item] else {
                throw WireChangesetError("item move from \(move.old) does not fit")
            }
            taken[move.old.section][move.old.item] = true
        }
        // What each new section keeps of its old one, in order.
        var kept: [[[WireValue]]] = sourceOfNewSection.map { source in
            guard let source, old.indices.contains(source) else { return [] }
            return old[source].indices.filter { !taken[source][$0] }.map { old[source][$0] }
        }
        var placedBySection: [[Int: [WireValue]]] = Array(repeating: [:], count: sourceOfNewSection.count)
        func place(_ row: [WireValue], at path: WirePath) throws {
            guard placedBySection.indices.contains(path.section), placedBySection[path.section][path.item] == nil else {
                throw WireChangesetError("item placed at \(path) does not fit")
            }
            placedBySection[path.section][path.item] = row
        }
        for insert in inserts { try place(insert.row, at: insert.path) }
        for move in moves { try place(old[move.old.section][move.old.item], at: move.new) }
        var result: [[[WireValue]]] = []
        result.reserveCapacity(kept.count)
        for section in kept.indices {
            let placed = placedBySection[section]
            let count = kept[section].count + placed.count
            var items: [[WireValue]] = []
            items.reserveCapacity(count)
            var next = 0
            for index in 0..<count {
                if let row = placed[index] {
                    items.append(row)
                } else {
                    guard next < kept[section].count else { throw WireChangesetError("section \(section) has a place left empty") }
                    items.append(kept[section][next])
                    next += 1
                }
            }
            guard next == kept[section].count, placed.keys.allSatisfy({ $0 < count }) else {
                throw WireChangesetError("section \(section)'s items do not fit")
            }
            result.append(items)
            kept[section] = []
        }
        for update in updates {
            guard check(update.new, in: result) else { throw WireChangesetError("item update at \(update.new) does not fit") }
            for (column, value) in update.columns {
                guard result[update.new.section][update.new.item].indices.contains(column) else {
                    throw WireChangesetError("item update of column \(column) does not fit")
                }
                result[update.new.section][update.new.item][column] = value
            }
        }
        return result
    }
}

extension WireChangeset {
    /// For each new index, the old index of the row there (`nil`: inserted): the sources of a
    /// sectioned include's new sections when this changeset changes its parents.
    ///
    /// - Throws: ``WireChangesetError`` when the changeset does not fit `oldCount` rows.
    public func sources(oldCount: Int) throws -> [Int?] {
        let count = oldCount - deletes.count + inserts.count
        guard count >= 0 else { throw WireChangesetError("more deletes than rows") }
        var placed = [Int??](repeating: nil, count: count)
        var taken = [Bool](repeating: false, count: oldCount)
        for index in deletes {
            guard index >= 0, index < oldCount, !taken[index] else { throw WireChangesetError("delete of row \(index) does not fit") }
            taken[index] = true
        }
        for insert in inserts {
            guard placed.indices.contains(insert.index), placed[insert.index] == nil else {
                throw WireChangesetError("insert at \(insert.index) does not fit")
            }
            placed[insert.index] = .some(nil)
        }
        for move in moves {
            guard move.old >= 0, move.old < oldCount, !taken[move.old], placed.indices.contains(move.new), placed[move.new] == nil else {
                throw WireChangesetError("move \(move.old)→\(move.new) does not fit")
            }
            taken[move.old] = true
            placed[move.new] = .some(move.old)
        }
        var next = 0
        for index in 0..<oldCount where !taken[index] {
            while next < count && placed[next] != nil { next += 1 }
            guard next < count else { throw WireChangesetError("more rows kept than places") }
            placed[next] = .some(index)
            next += 1
        }
        return try placed.map { source in
            guard let source else { throw WireChangesetError("a place was left empty") }
            return source
        }
    }
}

extension WireSectionedChangeset {
    /// The change from the sections `old` to `new`: each section a parent, identified by
    /// `oldParents[i]` / `newParents[i]` (its key's values), each item a child row identified by
    /// its columns at `key`. Items of sections on both sides are matched by Heckel's algorithm
    /// (RippleDiff's `SectionedChangeset`): a child that changed parent is one move. Items of a
    /// new section are inserts; those of a removed section go with it.
    ///
    /// - Complexity: O(items).
    public init(from old: [[[WireValue]]], parents oldParents: [[WireValue]], to new: [[[WireValue]]], parents newParents: [[WireValue]],
                key: [Int]) {
        precondition(old.count == oldParents.count && new.count == newParents.count, "one parent per section")
        let before = zip(oldParents, old).map { parent, items in
            ListSection(model: WireIdentity(values: parent), items: items.map { row in WireItem(identity: key.map { row[$0] }, row: row) })
        }
        let after = zip(newParents, new).map { parent, items in
            ListSection(model: WireIdentity(values: parent), items: items.map { row in WireItem(identity: key.map { row[$0] }, row: row) })
        }
        let changeset = SectionedChangeset(from: before, to: after)
        deletes = changeset.itemDeletes.map { WirePath(section: $0.section, item: $0.item) }
        var inserts = changeset.itemInserts.map { path in
            Insert(path: WirePath(section: path.section, item: path.item), row: new[path.section][path.item])
        }
        for section in new.indices where changeset.sections.oldIndex(forNew: section) == nil {
            for item in new[section].indices { inserts.append(Insert(path: WirePath(section: section, item: item), row: new[section][item])) }
        }
        self.inserts = inserts.sorted { $0.path < $1.path }
        moves = changeset.itemMoves.map {
            Move(old: WirePath(section: $0.old.section, item: $0.old.item), new: WirePath(section: $0.new.section, item: $0.new.item))
        }
        updates = changeset.itemUpdates.map { pair in
            Update(old: WirePath(section: pair.old.section, item: pair.old.item), new: WirePath(section: pair.new.section, item: pair.new.item),
                   columns: WireChangeset.changedColumns(from: old[pair.old.section][pair.old.item], to: new[pair.new.section][pair.new.item]))
        }
    }
}

/// A parent's identity, as a section's model.
struct WireIdentity: Hashable, Diffable {
    var values: [WireValue]
}

/// A child row, identified by its key's values.
struct WireItem: Diffable {
    var identity: [WireValue]
    var row: [WireValue]
    var diffID: [WireValue] { identity }
    func isContentEqual(to other: WireItem) -> Bool { row == other.row }
}
