import RippleDiff

/// A changeset as it travels to clients: what turns the rows a client last received for a
/// subscription into the new ones, in RippleDiff's batch-update convention, carrying only what
/// the client does not have — inserted rows whole, and for an updated row only the columns
/// that changed.
///
/// JSON: `{"deletes": [old…], "inserts": [[new, row]…], "moves": [[old, new]…],
/// "updates": [[old, new, {"column index": value…}]…]}`, rows as arrays in the snapshot's column
/// order; an empty list is left out (`{"updates": [[3, 3, {"1": "milk"}]]}`). ``apply(to:)`` is the whole client algorithm (a web page applies the same to its DOM).
public struct WireChangeset: Codable, Hashable, Sendable {
    /// Old indices of the rows removed, ascending.
    public var deletes: [Int]
    /// New indices and the rows inserted there, ascending by index.
    public var inserts: [Insert]
    /// Rows that changed position relative to the others: (old index, new index), ascending by
    /// new index (minimal: the others keep their order).
    public var moves: [Move]
    /// Rows whose values changed: (old index, new index) and the changed columns' new values.
    public var updates: [Update]
    /// How each include changed, by path (only those that changed); `nil` or empty: none did,
    /// or the subscription has no includes.
    public var included: [String: WireIncludedChange]?

    public struct Insert: Codable, Hashable, Sendable {
        public var index: Int
        public var row: [WireValue]

        public init(index: Int, row: [WireValue]) { (self.index, self.row) = (index, row) }

        public init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            index = try container.decode(Int.self)
            row = try container.decode([WireValue].self)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(index)
            try container.encode(row)
        }
    }

    public struct Move: Codable, Hashable, Sendable {
        public var old: Int
        public var new: Int

        public init(old: Int, new: Int) { (self.old, self.new) = (old, new) }

        public init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            old = try container.decode(Int.self)
            new = try container.decode(Int.self)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(old)
            try container.encode(new)
        }
    }

    public struct Update: Codable, Hashable, Sendable {
        public var old: Int
        public var new: Int
        /// The changed columns, by their position in the row, and their new values.
        public var columns: [Int: WireValue]

        public init(old: Int, new: Int, columns: [Int: WireValue]) { (self.old, self.new, self.columns) = (old, new, columns) }

        public init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            old = try container.decode(Int.self)
            new = try container.decode(Int.self)
            let named = try container.decode([String: WireValue].self)
            var columns: [Int: WireValue] = [:]
            for (key, value) in named {
                guard let index = Int(key), index >= 0 else {
                    throw DecodingError.dataCorruptedError(in: container, debugDescription: "column \(key) is not an index")
                }
                columns[index] = value
            }
            self.columns = columns
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(old)
            try container.encode(new)
            try container.encode(Dictionary(uniqueKeysWithValues: columns.map { (String($0.key), $0.value) }))
        }
    }

    public init(deletes: [Int] = [], inserts: [Insert] = [], moves: [Move] = [], updates: [Update] = [],
                included: [String: WireIncludedChange]? = nil) {
        (self.deletes, self.inserts, self.moves, self.updates) = (deletes, inserts, moves, updates)
        self.included = included
    }

    enum CodingKeys: String, CodingKey { case deletes, inserts, moves, updates, included }

    /// Reads a changeset; a list that is absent is empty (the server leaves empty lists out).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        deletes = try container.decodeIfPresent([Int].self, forKey: .deletes) ?? []
        inserts = try container.decodeIfPresent([Insert].self, forKey: .inserts) ?? []
        moves = try container.decodeIfPresent([Move].self, forKey: .moves) ?? []
        updates = try container.decodeIfPresent([Update].self, forKey: .updates) ?? []
        included = try container.decodeIfPresent([String: WireIncludedChange].self, forKey: .included)
    }

    /// Writes the changeset without its empty lists.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if !deletes.isEmpty { try container.encode(deletes, forKey: .deletes) }
        if !inserts.isEmpty { try container.encode(inserts, forKey: .inserts) }
        if !moves.isEmpty { try container.encode(moves, forKey: .moves) }
        if !updates.isEmpty { try container.encode(updates, forKey: .updates) }
        if let included, !included.isEmpty { try container.encode(included, forKey: .included) }
    }

    /// The wire form of `changeset` from `old` to `new` (the rows it was computed between):
    /// inserted rows whole, updated rows by the columns whose values differ.
    public init(_ changeset: Changeset, from old: [[WireValue]], to new: [[WireValue]]) {
        deletes = changeset.deletes
        inserts = changeset.inserts.map { Insert(index: $0, row: new[$0]) }
        moves = changeset.moves.map { Move(old: $0.old, new: $0.new) }
        updates = changeset.updates.map { pair in
            Update(old: pair.old, new: pair.new, columns: Self.changedColumns(from: old[pair.old], to: new[pair.new]))
        }
    }

    /// The columns of `after` that differ from `before`, by position, with their new values.
    public static func changedColumns(from before: [WireValue], to after: [WireValue]) -> [Int: WireValue] {
        var columns: [Int: WireValue] = [:]
        for index in after.indices where index >= before.count || before[index] != after[index] { columns[index] = after[index] }
        return columns
    }

    /// Whether nothing changes.
    public var isEmpty: Bool {
        deletes.isEmpty && inserts.isEmpty && moves.isEmpty && updates.isEmpty && (included?.values.allSatisfy(\.isEmpty) ?? true)
    }

    /// The new rows, from the rows the client had: removed rows go, inserted and moved rows are
    /// placed at their new indices, every other row keeps its order in the free places, then
    /// updated rows take their changed columns.
    ///
    /// - Throws: ``WireChangesetError`` when the changeset does not fit `rows` (an index out of
    ///   range, a row counted twice): the client's rows are not the ones it was made from, and it
    ///   must ask for a snapshot.
    /// - Complexity: O(rows + changes).
    public func apply(to rows: [[WireValue]]) throws -> [[WireValue]] {
        let count = rows.count - deletes.count + inserts.count
        guard count >= 0 else { throw WireChangesetError("more deletes than rows") }
        var placed = [[WireValue]?](repeating: nil, count: count)
        var taken = [Bool](repeating: false, count: rows.count)
        for index in deletes {
            guard rows.indices.contains(index), !taken[index] else { throw WireChangesetError("delete of row \(index) does not fit") }
            taken[index] = true
        }
        for insert in inserts {
            guard placed.indices.contains(insert.index), placed[insert.index] == nil else {
                throw WireChangesetError("insert at \(insert.index) does not fit")
            }
            placed[insert.index] = insert.row
        }
        for move in moves {
            guard rows.indices.contains(move.old), !taken[move.old], placed.indices.contains(move.new), placed[move.new] == nil else {
                throw WireChangesetError("move \(move.old)→\(move.new) does not fit")
            }
            taken[move.old] = true
            placed[move.new] = rows[move.old]
        }
        var next = 0
        for (index, row) in rows.enumerated() where !taken[index] {
            while next < count && placed[next] != nil { next += 1 }
            guard next < count else { throw WireChangesetError("more rows kept than places") }
            placed[next] = row
            next += 1
        }
        var result = try placed.map { row -> [WireValue] in
            guard let row else { throw WireChangesetError("a place was left empty") }
            return row
        }
        for update in updates {
            guard result.indices.contains(update.new) else { throw WireChangesetError("update at \(update.new) does not fit") }
            for (column, value) in update.columns {
                guard result[update.new].indices.contains(column) else {
                    throw WireChangesetError("update of column \(column) does not fit")
                }
                result[update.new][column] = value
            }
        }
        return result
    }
}

/// A changeset that does not fit the rows it is applied to.
public struct WireChangesetError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = "the changeset does not fit the rows: " + description }
}
