/// A subscription's rows as a client holds them, includes and all: built from a snapshot and
/// moved by each changeset, as the protocol says (the root's changeset first, then each
/// include; a to-many include's sections follow the root's rows).
///
/// ```swift
/// var tree = WireTree(snapshot)
/// try tree.apply(changeset)
/// tree.sections(of: "todos")   // each project's todos
/// ```
public struct WireTree: Hashable, Sendable {
    /// One include's rows: a keyed set (to-one) or one list per root row (to-many).
    public struct Part: Hashable, Sendable {
        public var columns: [String]
        public var types: [String]
        public var key: [Int]
        /// A to-one include's rows (in the order they came: key order in a snapshot, then new
        /// rows after).
        public var rows: [[WireValue]]
        /// A to-many include's rows, one list per root row; `nil` for a to-one include.
        public var sections: [[[WireValue]]]?
    }

    public var basis: String
    public var columns: [String]
    public var types: [String]
    public var key: [Int]
    /// The root's rows, in the query's order.
    public var rows: [[WireValue]]
    /// Each include's rows, by path.
    public var included: [String: Part]

    public init(_ snapshot: WireSnapshot) {
        (basis, columns, types, key, rows) = (snapshot.basis, snapshot.columns, snapshot.types, snapshot.key, snapshot.rows)
        included = (snapshot.included ?? [:]).mapValues { part in
            Part(columns: part.columns, types: part.types, key: part.key, rows: part.isSectioned ? [] : part.rows,
                 sections: part.isSectioned ? part.sections : nil)
        }
    }

    /// Moves the tree by `changeset`.
    ///
    /// - Throws: ``WireChangesetError`` when it does not fit (the client must ask for a
    ///   snapshot); the tree is then unchanged.
    public mutating func apply(_ changeset: WireChangeset) throws {
        let sources = try changeset.sources(oldCount: rows.count)
        var next = self
        next.rows = try changeset.apply(to: rows)
        let changes = changeset.included ?? [:]
        for path in changes.keys where included[path] == nil {
            throw WireChangesetError("a change of include \(path), which the subscription does not have")
        }
        for (path, part) in included {
            var moved = part
            switch (part.sections, changes[path]) {
            case (let sections?, .sectioned(let change)?):
                moved.sections = try change.apply(to: sections, sourceOfNewSection: sources)
            case (let sections?, nil):
                moved.sections = try WireSectionedChangeset().apply(to: sections, sourceOfNewSection: sources)
            case (nil, .keyed(let change)?):
                moved.rows = try change.apply(to: part.rows, key: part.key, width: part.columns.count)
            case (nil, nil):
                break
            default:
                throw WireChangesetError("include \(path) changed in a form that is not its own")
            }
            next.included[path] = moved
        }
        self = next
    }

    /// A to-many include's lists, one per root row (`nil`: no such to-many include).
    public func sections(of path: String) -> [[[WireValue]]]? { included[path]?.sections }
}
