#if Sync
import Ripple
import RippleDiff
import RippleSync

/// A to-many include of a subscription as a sectioned list for a collection view: the sections
/// are the subscription's rows (the parents, in the query's order), each section's items the
/// include's rows related to that parent (in the include's order, at most its limit per parent).
/// Each event carries the sections and a `SectionedChangeset` from the previous event's, ready
/// for a batch update. Make one with ``SyncClient/sectionedList(of:include:)``.
///
/// ```swift
/// let projects = QueryDescription(table: "projects", order: [OrderDescription(column: "name")])
///     .including("todos", .rows(of: "todos", on: ["id": "project_id"], order: [OrderDescription(column: "rank")], limit: 50))
/// try await client.subscribe("projects", projects)
/// for try await event in try await client.sectionedList(of: "projects", include: "todos") {
///     // event.sections[i].model: project i; event.sections[i].items: its todos
///     collectionView.apply(event.changeset, sections: event.sections)
/// }
/// ```
///
/// The list is read from the local store, not from the frames: the rows the subscription holds
/// in its table, each parent's children from the include's table by the include's `on`. So the
/// app's own writes show at once: a local write that moves a todo to another project (changes
/// its `project_id`) is one item move in the next event, and when the server's frame that
/// contains it arrives nothing moves again. A frame's rows come in one local write: one event.
///
/// What the local store knows decides what the list shows until the server's rows arrive:
/// * the children are the rows the include holds, plus rows the app inserted that are still
///   pending (not yet in the server's rows): a pending insert shows under its parent at once;
/// * the include's `filter` is the server's: a local change that takes a child out of it shows
///   once the server's frame removes it;
/// * order and limit per parent are applied locally, with PostgreSQL's default places for NULLs
///   (last ascending, first descending), text compared by bytes, and the key breaking ties.
///
/// The sequence waits for the subscription's first rows, and ends (`nil`) if the subscription is
/// unsubscribed before they come. Each iterator has its own live query over the store; it ends
/// when the iterating task is cancelled. A slow consumer gets one changeset to the newest
/// sections, never a queue of stale ones.
public struct SectionedLiveList: AsyncSequence, Sendable {
    public typealias Element = SectionedListEvent

    let client: SyncClient
    let id: String
    let path: String

    public func makeAsyncIterator() -> Iterator { Iterator(list: self) }

    /// Takes the list's events one at a time.
    public struct Iterator: AsyncIteratorProtocol {
        let list: SectionedLiveList
        private var events: LiveQueryEvents<LiveQueryGroupEvent<Row>>.Iterator?
        private var plan: SectionedListPlan?
        private var previous: [ListSection<SyncedRow, SyncedRow>]?
        private var ended = false

        init(list: SectionedLiveList) { self.list = list }

        /// The next event: the first is the sections as they are (every item an insert), each
        /// later one the sections after a commit that changed them. `nil` when the subscription
        /// ended before its first rows.
        ///
        /// - Throws: what reading the local store throws (a synced table dropped by the app).
        public mutating func next() async throws -> SectionedListEvent? {
            if ended { return nil }
            if events == nil {
                guard let plan = try await list.client.sectionedListPlan(of: list.id, include: list.path) else {
                    ended = true
                    return nil
                }
                let store = list.client.store
                let group = try LiveQueryGroup([
                    store.liveQuery(sql: plan.parentsSQL, arguments: plan.parentsArguments, identity: "ripple_section"),
                    store.liveQuery(sql: plan.childrenSQL, arguments: plan.childrenArguments, identity: "ripple_identity"),
                ])
                self.plan = plan
                events = group.events().makeAsyncIterator()
            }
            while let event = try await events!.next() {
                let sections = plan!.sections(parents: event.members[0].snapshot, children: event.members[1].snapshot)
                let changeset = SectionedChangeset(from: previous ?? [], to: sections)
                if previous != nil, changeset.isEmpty { continue }
                previous = sections
                return SectionedListEvent(version: event.version, origin: event.members.compactMap(\.origin).first,
                                          sections: sections, changeset: changeset)
            }
            ended = true
            return nil
        }
    }
}

/// One event of a ``SectionedLiveList``: the sections at a version of the local store and the
/// changeset from the previous event's sections (the first event: from none).
public struct SectionedListEvent: Sendable {
    /// The local store's version the sections were read at.
    public var version: Int64
    /// Where the commit of ``version`` came from: `.sync` for the server's rows, another origin
    /// for the app's own writes.
    public var origin: CommitOrigin?
    /// The parents (each section's model) and their children (its items), in order.
    public var sections: [ListSection<SyncedRow, SyncedRow>]
    /// From the previous event's sections to ``sections``: section deletes, inserts, moves and
    /// updates (a parent whose values changed), item deletes, inserts, moves (also across
    /// sections: a child that changed parent) and updates — in the batch convention of
    /// RippleDiff (`SectionedChangeset.stages` gives a list view's batches).
    public var changeset: SectionedChangeset
}

/// A row of a synced table as the local store holds it: its columns, values and key. Rows are
/// identified by their key (a list follows a row across events by it) and compared by their
/// values.
public struct SyncedRow: Hashable, Sendable, Diffable, CustomStringConvertible {
    /// The column names, in the values' order.
    public let columns: [String]
    /// The values, as the local store holds them (see the client's article for the types).
    public let values: [SQLValue]
    /// The key's values, in the key's order.
    public let key: [SQLValue]

    /// A row of `values` under `columns`, identified by `key`.
    public init(columns: [String], values: [SQLValue], key: [SQLValue]) {
        (self.columns, self.values, self.key) = (columns, values, key)
    }

    /// The value of column `name`, or `nil` when the row has no such column.
    public subscript(_ name: String) -> SQLValue? {
        columns.firstIndex(of: name).map { values[$0] }
    }

    public var diffID: [SQLValue] { key }
    public func isContentEqual(to other: SyncedRow) -> Bool { values == other.values }
    public var description: String { "[" + zip(columns, values).map { "\($0): \($1)" }.joined(separator: ", ") + "]" }
}

/// The two queries of a sectioned list over the local store, and how their rows become sections.
struct SectionedListPlan: Sendable {
    /// The parents: `ripple_section` (their place), then the root table's columns.
    var parentsSQL: String
    var parentsArguments: [SQLValue]
    /// The children: `ripple_identity`, `ripple_section`, `ripple_item`, then the included
    /// table's columns, by section and place.
    var childrenSQL: String
    var childrenArguments: [SQLValue]
    var parentKey: [String]
    var childKey: [String]

    /// The queries for subscription `id`'s rows of `rootTable` (key `rootKey`, ordered by
    /// `order`) and their children by `include` (held as `part`, key `childKey`).
    init(id: String, rootTable: String, rootKey: [String], order: [OrderDescription], include: IncludeDescription,
         part: String, childKey: [String]) {
        func quoted(_ alias: String, _ columns: [String]) -> [String] { columns.map { "\(alias).\(SQLIdentifier.quoted($0))" } }
        func orderTerms(_ alias: String, _ order: [OrderDescription], key: [String]) -> String {
            var terms: [String] = []
            for term in order {
                let column = "\(alias).\(SQLIdentifier.quoted(term.column))"
                // PostgreSQL's places for NULLs: last ascending, first descending, unless named.
                let nullsFirst = term.nullsFirst ?? term.descending
                terms.append("(\(column) IS NULL)\(nullsFirst ? " DESC" : "")")
                terms.append(column + (term.descending ? " DESC" : ""))
            }
            terms += quoted(alias, key)
            return terms.joined(separator: ", ")
        }
        /// The rows of `alias` held by holder `?holder` in table `?table`: their key among the
        /// holds' keys (each a JSON array of the key's values).
        func held(_ alias: String, key: [String], holder: Int, table: Int) -> String {
            let columns = quoted(alias, key)
            let extracts = key.indices.map { "json_extract(row_key, '$[\($0)]')" }.joined(separator: ", ")
            let left = columns.count == 1 ? columns[0] : "(" + columns.joined(separator: ", ") + ")"
            return "\(left) IN (SELECT \(extracts) FROM ripple_sync_holds WHERE subscription = ?\(holder) AND table_name = ?\(table))"
        }
        let parents = """
            SELECT ROW_NUMBER() OVER (ORDER BY \(orderTerms("p", order, key: rootKey))) - 1 AS ripple_section, p.*
            FROM \(SQLIdentifier.quoted(rootTable)) AS p WHERE \(held("p", key: rootKey, holder: 1, table: 2))
            """
        parentsSQL = parents + " ORDER BY ripple_section"
        parentsArguments = [.text(id), .text(rootTable)]
        let join = include.pairs.map { "c.\(SQLIdentifier.quoted($0.related)) = ps.\(SQLIdentifier.quoted($0.parent))" }
            .joined(separator: " AND ")
        let childColumns = quoted("c", childKey)
        let childLeft = childColumns.count == 1 ? childColumns[0] : "(" + childColumns.joined(separator: ", ") + ")"
        let pending = "\(childLeft) IN (SELECT \(childKey.map(SQLIdentifier.quoted).joined(separator: ", ")) "
            + "FROM \(Outbox.baseTable(include.table)) WHERE ripple_present = 0)"
        childrenSQL = """
            SELECT ripple_section || '/' || ripple_item AS ripple_identity, * FROM (
                SELECT ps.ripple_section AS ripple_section,
                    ROW_NUMBER() OVER (PARTITION BY ps.ripple_section ORDER BY \(orderTerms("c", include.order, key: childKey))) - 1 AS ripple_item,
                    c.*
                FROM (\(parents)) AS ps JOIN \(SQLIdentifier.quoted(include.table)) AS c ON \(join)
                WHERE \(held("c", key: childKey, holder: 3, table: 4)) OR \(pending))
            \(include.limit == nil ? "" : "WHERE ripple_item < ?5")
            ORDER BY ripple_section, ripple_item
            """
        childrenArguments = [.text(id), .text(rootTable), .text(part), .text(include.table)]
            + (include.limit.map { [SQLValue.integer(Int64($0))] } ?? [])
        (parentKey, self.childKey) = (rootKey, childKey)
    }

    /// The sections the two queries' rows make.
    func sections(parents: [Row], children: [Row]) -> [ListSection<SyncedRow, SyncedRow>] {
        var sections = Self.rows(parents, dropping: 1, key: parentKey).map { ListSection<SyncedRow, SyncedRow>(model: $0, items: []) }
        let items = Self.rows(children, dropping: 3, key: childKey)
        for (row, item) in zip(children, items) {
            guard case .integer(let section)? = row.values.dropFirst().first, sections.indices.contains(Int(section)) else { continue }
            sections[Int(section)].items.append(item)
        }
        return sections
    }

    /// `rows` without their first `count` columns (the plan's own), as synced rows.
    private static func rows(_ rows: [Row], dropping count: Int, key: [String]) -> [SyncedRow] {
        guard let first = rows.first else { return [] }
        let columns = Array(first.columnNames.dropFirst(count))
        let positions = key.compactMap { columns.firstIndex(of: $0) }
        return rows.map { row in
            let values = Array(row.values.dropFirst(count))
            return SyncedRow(columns: columns, values: values, key: positions.map { values[$0] })
        }
    }
}
#endif
