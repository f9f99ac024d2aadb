#if Sync
import Ripple
import RippleSync

/// A subscription with includes, compiled: its root query and one flat query per include, each
/// a live query of its own on the replica (shared with every equal subscription, routed row by
/// row as any query with sub-queries), whose results the hub puts together version by version
/// (see ``SubscriptionHub``).
public struct CompiledTree: Hashable, Sendable {
    /// The query without its includes.
    public var root: CompiledQuery
    /// Every include, parents before their children.
    public var parts: [CompiledPart]
}

/// One include of a ``CompiledTree``.
public struct CompiledPart: Hashable, Sendable {
    /// `name`, or the parent's path, `.`, `name`.
    public var path: String
    /// The index in ``CompiledTree/parts`` of the parent include; `nil`: the root.
    public var parent: Int?
    /// Whether each parent row has a list of rows (a sectioned list) rather than at most one.
    public var isToMany: Bool
    /// The included rows: those the parents refer to (to-one), or every parent's children,
    /// parent by parent (to-many: ordered by the `on` columns first).
    public var compiled: CompiledQuery
    /// The included table's schema.
    public var schema: SyncedTableSchema
    /// The positions of the `on` columns in the parent's result columns, and of the columns
    /// they equal in this part's, pair by pair.
    public var parentColumns: [Int]
    public var relatedColumns: [Int]
}

/// Compiles a query's includes (see ``IncludeDescription``) into flat queries over the replica.
///
/// An include's rows are the rows of its table related to the parent's rows, under its read rule
/// (and its own filter, order and per-parent limit for a to-many include). Each is compiled in two
/// layers:
///
/// * a **wider** query, which the routing follows: the included table's rows whose `on` columns
///   are `in` a sub-query over the parent's table with the parent's filter (and the parent's
///   read rule, which the rules add to every table a client's sub-query reaches). It is what the
///   previous issue's sub-queries are: row-precise routing of the parent's rows (a dependency)
///   and of this table's rows (the values the sub-query selects), whatever other users hold;
/// * an **exact** condition added to it when the parent's rows are a window (a `limit` or an
///   `offset`, here or above): the `on` columns are among the parent's query's own rows
///   (`IN (SELECT … FROM (<the parent's SQL>))`), so a row is included only while a row of the
///   parent's result refers to it.
///
/// A to-many include's rows are read with a window function when it has a per-parent limit
/// (`ROW_NUMBER() OVER (PARTITION BY <on columns> ORDER BY <its order>)`): one live query for
/// every parent, not one per parent (N live queries would cost N reruns per commit and N times
/// the memory; the window reruns once).
enum TreeCompiler {
    /// Compiles `query`'s includes for `user`: `root` is the query itself, compiled; `tables`
    /// holds the schemas of every table the query, its includes and the rules read.
    ///
    /// - Throws: ``QueryError`` for an include that cannot be compiled (a table that is not
    ///   synced, an `on` column that is not selected, a to-many include nested in another
    ///   include, too many or too deep); ``RulesError`` for an included table the user may not read.
    static func compile(_ query: QueryDescription, root: CompiledQuery, user: SyncIdentity, rules: SyncRules,
                        tables: [String: SyncedTableSchema]) throws -> CompiledTree {
        let includes = query.includePaths
        guard includes.count <= IncludeDescription.maximumCount else {
            throw QueryError("the query has \(includes.count) includes; at most \(IncludeDescription.maximumCount) are allowed")
        }
        // What each compiled level is, to relate its children to: its table, its client-level
        // filter (the wider query's), its compiled query, and whether its rows are a window.
        struct Level {
            var table: String
            var filter: FilterDescription?
            var compiled: CompiledQuery
            var isWindow: Bool
        }
        let rootLevel = Level(table: query.table, filter: query.filter, compiled: root,
                              isWindow: query.limit != nil || (query.offset ?? 0) != 0)
        var levels: [String: Level] = [:]
        var indices: [String: Int] = [:]
        var parts: [CompiledPart] = []
        for (path, parentPath, include) in includes {
            let depth = path.split(separator: ".").count
            guard depth <= IncludeDescription.maximumDepth else {
                throw QueryError("include \(path) nests \(depth) levels deep; at most \(IncludeDescription.maximumDepth) are allowed")
            }
            let parent = parentPath.map { levels[$0]! } ?? rootLevel
            guard let schema = tables[include.table] else { throw QueryError("include \(path): there is no synced table \(include.table)") }
            let pairs = include.pairs
            var parentColumns: [Int] = []
            for pair in pairs {
                guard let index = parent.compiled.columns.firstIndex(of: pair.parent) else {
                    throw QueryError("include \(path): its on column \(pair.parent) is not among the columns \(parent.table)'s rows send")
                }
                parentColumns.append(index)
                guard schema.columns.contains(where: { $0.name == pair.related }) else {
                    throw QueryError("include \(path): no column \(pair.related) in \(include.table)")
                }
            }
            let keyNames = Set(schema.key.map { schema.columns[$0].name })
            let isToMany = Set(pairs.map(\.related)) != keyNames
            if isToMany {
                guard parentPath == nil else {
                    throw QueryError("include \(path): a to-many include can only be at the top (a sectioned list has one level of "
                                     + "sections); inside an include, only to-one includes (onto the included table's key)")
                }
            } else {
                guard include.limit == nil, include.order.isEmpty else {
                    throw QueryError("include \(path) is to-one (its on reaches \(include.table)'s key): it has no order or limit")
                }
            }
            if let limit = include.limit, limit < 0 { throw QueryError("include \(path): limit \(limit) is negative") }
            // The wider query: rows related to any row the parent's filter selects.
            let related: FilterDescription
            if pairs.count == 1 {
                related = .inQuery(column: pairs[0].related,
                                   query: SubqueryDescription(table: parent.table, column: pairs[0].parent, filter: parent.filter))
            } else {
                related = .exists(ExistsDescription(table: parent.table, on: Dictionary(uniqueKeysWithValues: pairs.map { ($0.related, $0.parent) }),
                                                    filter: parent.filter))
            }
            let filter: FilterDescription = include.filter.map { .and([$0, related]) } ?? related
            var description = QueryDescription(table: include.table, filter: filter, columns: include.columns)
            if isToMany {
                description.order = pairs.map { OrderDescription(column: $0.related) } + include.order
            }
            var options = QueryCompiler.PartOptions()
            if parent.isWindow {
                options.condition = exactReference(pairs.map(\.related), of: include.table, to: pairs.map(\.parent), of: parent.compiled)
            }
            if isToMany, let limit = include.limit {
                options.partition = pairs.map(\.related)
                options.limit = limit
            }
            let restricted = try rules.restrict(description, to: user)
            let compiled = try QueryCompiler.compile(restricted, for: schema, tables: tables, part: options)
            var relatedColumns: [Int] = []
            for pair in pairs {
                guard let index = compiled.columns.firstIndex(of: pair.related) else {
                    throw QueryError("include \(path): its on column \(pair.related) is not among the columns it selects")
                }
                relatedColumns.append(index)
            }
            indices[path] = parts.count
            parts.append(CompiledPart(path: path, parent: parentPath.flatMap { indices[$0] }, isToMany: isToMany, compiled: compiled,
                                      schema: schema, parentColumns: parentColumns, relatedColumns: relatedColumns))
            levels[path] = Level(table: include.table, filter: filter, compiled: compiled,
                                 isWindow: parent.isWindow || (isToMany && include.limit != nil))
        }
        return CompiledTree(root: root, parts: parts)
    }

    /// `columns` (of the included `table`) equal, pair by pair, `parentColumns` of a row of
    /// `parent`'s result: the parent's SQL as a sub-query, its arguments after the include's.
    static func exactReference(_ columns: [String], of table: String, to parentColumns: [String],
                               of parent: CompiledQuery) -> (sql: String, arguments: [SQLValue]) {
        if columns.count == 1 {
            return ("\(SQLIdentifier.quoted(columns[0])) IN (SELECT \(SQLIdentifier.quoted(parentColumns[0])) FROM (\(parent.sql)))",
                    parent.arguments)
        }
        let pairs = zip(columns, parentColumns).map {
            "\"ripple_parent\".\(SQLIdentifier.quoted($1)) = \(SQLIdentifier.quoted(table)).\(SQLIdentifier.quoted($0))"
        }
        return ("EXISTS (SELECT 1 FROM (\(parent.sql)) AS \"ripple_parent\" WHERE \(pairs.joined(separator: " AND ")))", parent.arguments)
    }
}
#endif
