#if Sync
import RippleSync

extension WireTree {
    /// A snapshot's tree for `query`, its includes checked against the query: each path must be
    /// one of the query's includes (its table is where the client keeps its rows), and a to-many
    /// include must have one list per root row.
    ///
    /// - Throws: ``SyncClientError`` saying which include does not fit.
    static func checked(_ snapshot: WireSnapshot, of query: QueryDescription) throws -> WireTree {
        let tree = WireTree(snapshot)
        let tables = includedTables(of: query)
        for (path, part) in tree.included {
            guard tables[path] != nil else { throw SyncClientError("the snapshot includes \(path), which the query does not") }
            if let sections = part.sections, sections.count != tree.rows.count {
                throw SyncClientError("the include \(path) has \(sections.count) lists for \(tree.rows.count) root rows")
            }
        }
        return tree
    }

    /// The table of each of `query`'s includes, by path.
    static func includedTables(of query: QueryDescription) -> [String: String] {
        Dictionary(query.includePaths.map { ($0.path, $0.include.table) }, uniquingKeysWith: { first, _ in first })
    }

    /// Per include that `changeset` changed, the indices (in the part's ``Part/flatRows``, in
    /// this tree: the one after the change) of the rows it wrote: a to-many include's inserted
    /// and updated items, a to-one include's put rows.
    func written(by changeset: WireChangeset) -> [String: [Int]] {
        var written: [String: [Int]] = [:]
        for (path, change) in changeset.included ?? [:] {
            guard let part = included[path] else { continue }
            switch change {
            case .sectioned(let sectioned):
                guard let sections = part.sections else { continue }
                // Where each section starts in the flat rows.
                var starts: [Int] = []
                var offset = 0
                for section in sections {
                    starts.append(offset)
                    offset += section.count
                }
                written[path] = (sectioned.inserts.map(\.path) + sectioned.updates.map(\.new))
                    .filter { starts.indices.contains($0.section) }.map { starts[$0.section] + $0.item }
            case .keyed(let keyed):
                let put = Set(keyed.puts.map { put in part.key.map { put[$0] ?? .null } })
                let rows = part.rows
                written[path] = rows.indices.filter { index in put.contains(part.key.map { rows[index][$0] }) }
            }
        }
        return written
    }
}

extension WireTree.Part {
    /// Every row the include holds, list after list for a to-many include (a child related to
    /// two parents is there twice).
    var flatRows: [[WireValue]] { sections.map { $0.flatMap { $0 } } ?? rows }

    /// The part as a snapshot sends it.
    var snapshot: WireIncludedSnapshot {
        WireIncludedSnapshot(columns: columns, types: types, key: key, rows: flatRows, counts: sections?.map(\.count))
    }
}
#endif
