#if Sync
import RippleSync

/// The included rows of one subscription, as the server last sent them: per include path, a
/// to-one include's keyed set or a to-many include's sections (one per root row, in the root's
/// order). A snapshot gives the whole tree; each frame's changeset changes it, the root's
/// changeset first (a to-many include's sections are the root's rows), then each include.
struct IncludedTree {
    /// One include's rows.
    struct Part {
        /// The included table (the local table its rows are kept in).
        var table: String
        var columns: [String]
        var types: [String]
        var key: [Int]
        /// A to-one include's keyed set (in no meaningful order).
        var rows: [[WireValue]]
        /// A to-many include's children, one list per root row; `nil` for a to-one include.
        var sections: [[[WireValue]]]?

        /// Every row the include holds, section after section for a to-many include (a child
        /// related to two parents is there twice).
        var flatRows: [[WireValue]] { sections.map { $0.flatMap { $0 } } ?? rows }

        /// The part as a snapshot would send it.
        var snapshot: WireIncludedSnapshot {
            WireIncludedSnapshot(columns: columns, types: types, key: key, rows: flatRows, counts: sections?.map(\.count))
        }
    }

    /// The parts by include path.
    var parts: [String: Part] = [:]

    /// The tree a snapshot of `query` sends: an include path the query does not have is refused
    /// (its table is not known).
    ///
    /// - Throws: ``SyncClientError`` when a path is not one of the query's includes, or a to-many
    ///   include's sections do not match the root's `rootCount` rows.
    init(snapshot included: [String: WireIncludedSnapshot], of query: QueryDescription, rootCount: Int) throws {
        let tables = Dictionary(query.includePaths.map { ($0.path, $0.include.table) }, uniquingKeysWith: { first, _ in first })
        for (path, part) in included {
            guard let table = tables[path] else { throw SyncClientError("the snapshot includes \(path), which the query does not") }
            let sections = part.counts.map { _ in part.sections }
            if let counts = part.counts {
                guard counts.count == rootCount, counts.reduce(0, +) == part.rows.count else {
                    throw SyncClientError("the include \(path) has \(counts.count) sections of \(counts.reduce(0, +)) rows for "
                                          + "\(rootCount) root rows and \(part.rows.count) rows")
                }
            }
            parts[path] = Part(table: table, columns: part.columns, types: part.types, key: part.key,
                               rows: sections == nil ? part.rows : [], sections: sections)
        }
    }

    init() {}

    /// The tree after `changeset`, which changed the root from `rootOldCount` rows: every
    /// to-many include's sections follow the root's rows (a removed root row takes its children
    /// with it), and each include's change applies to its part. Returns the new tree and, per
    /// path, the indices (in the part's ``Part/flatRows``) of the rows the change wrote.
    ///
    /// - Throws: ``WireChangesetError`` or ``SyncClientError`` when the change does not fit the
    ///   tree (the client's rows are not the server's: the subscription starts afresh).
    func applying(_ changeset: WireChangeset, rootOldCount: Int) throws -> (tree: IncludedTree, written: [String: [Int]]) {
        var tree = self
        var written: [String: [Int]] = [:]
        for path in (changeset.included ?? [:]).keys where parts[path] == nil {
            throw SyncClientError("a change of the include \(path), which the subscription does not hold")
        }
        var sources: [Int?]?
        for (path, part) in parts {
            let change = changeset.included?[path]
            var next = part
            if let sections = part.sections {
                guard sections.count == rootOldCount else {
                    throw SyncClientError("the include \(path) has \(sections.count) sections for \(rootOldCount) root rows")
                }
                let sectioned: WireSectionedChangeset
                switch change {
                case nil: sectioned = WireSectionedChangeset()
                case .sectioned(let change)?: sectioned = change
                case .keyed?: throw SyncClientError("a keyed change of the to-many include \(path)")
                }
                if sources == nil { sources = try changeset.sources(oldCount: rootOldCount) }
                let new = try sectioned.apply(to: sections, sourceOfNewSection: sources!)
                next.sections = new
                // Where each new section starts in the flat rows.
                var starts: [Int] = []
                var offset = 0
                for section in new {
                    starts.append(offset)
                    offset += section.count
                }
                written[path] = (sectioned.inserts.map(\.path) + sectioned.updates.map(\.new)).map { starts[$0.section] + $0.item }
            } else {
                switch change {
                case nil: break
                case .keyed(let keyed)?:
                    next.rows = try keyed.apply(to: part.rows, key: part.key, width: part.columns.count)
                    let put = Set(keyed.puts.map { put in part.key.map { put[$0] ?? .null } })
                    let rows = next.rows
                    written[path] = rows.indices.filter { index in put.contains(part.key.map { rows[index][$0] }) }
                case .sectioned?: throw SyncClientError("a sectioned change of the to-one include \(path)")
                }
            }
            tree.parts[path] = next
        }
        return (tree, written)
    }
}
#endif
