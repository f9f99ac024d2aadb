#if Sync
import Ripple
import RippleSync

extension RecordQuery {
    /// This query as a subscription describes it: the collection's table, the filter, the order
    /// and the window, to be evaluated by a Ripple Sync server.
    ///
    /// ```swift
    /// let open = try todos.filter(Column("done") == false).order(by: Column("rank")).limit(50).syncDescription()
    /// try await client.subscribe("open-todos", open)
    /// ```
    ///
    /// The server runs it with PostgreSQL's meaning, which differs from SQLite's in three places
    /// (see the protocol article): NULLs sort last in ascending order, `like` is case-sensitive,
    /// and text compares by bytes. A `like` with an escape character is rewritten with
    /// Postgres's escape, `\`.
    ///
    /// - Throws: ``SyncClientError`` for a filter the protocol cannot describe (a blob value).
    public func syncDescription() throws -> QueryDescription {
        QueryDescription(table: collection.name, filter: try filter.map(Self.description),
                         order: orderings.map { OrderDescription(column: $0.column.name, descending: $0.isDescending) },
                         limit: limit, offset: offset == 0 ? nil : offset)
    }

    private static func description(_ filter: Filter) throws -> FilterDescription {
        switch filter {
        case .comparison(let column, let op, let value):
            let comparison: FilterDescription.Comparison = switch op {
            case .equal: .equal
            case .notEqual: .notEqual
            case .less: .less
            case .lessOrEqual: .lessOrEqual
            case .greater: .greater
            case .greaterOrEqual: .greaterOrEqual
            }
            return .compare(column: column.name, op: comparison, value: try wireValue(value))
        case .in(let column, let values):
            return .isIn(column: column.name, values: try values.map(wireValue))
        case .like(let column, let pattern, let escape):
            return .like(column: column.name, pattern: postgresPattern(pattern, escape: escape))
        case .isNull(let column):
            return .isNull(column: column.name)
        case .and(let filters):
            return .and(try filters.map(description))
        case .or(let filters):
            return .or(try filters.map(description))
        case .not(.isNull(let column)):
            return .isNotNull(column: column.name)
        case .not(let inner):
            return .not(try description(inner))
        }
    }

    /// A stored value as the wire writes it: integers beyond ±2⁵³ as their digits.
    private static func wireValue(_ value: SQLValue) throws -> WireValue {
        switch value {
        case .null: .null
        case .integer(let integer): integer.magnitude <= 1 << 53 ? .integer(integer) : .text(String(integer))
        case .real(let real): .real(real)
        case .text(let text): .text(text)
        case .blob: throw SyncClientError("a subscription's filter cannot compare blobs")
        }
    }

    /// A LIKE pattern with SQLite's escape (none, or `escape`) as Postgres reads it (`\`).
    private static func postgresPattern(_ pattern: String, escape: Character?) -> String {
        var result = ""
        var escaping = false
        for character in pattern {
            if escaping {
                result += character == "%" || character == "_" ? "\\\(character)" : character == "\\" ? "\\\\" : String(character)
                escaping = false
            } else if character == escape {
                escaping = true
            } else if character == "\\" {
                result += "\\\\"
            } else {
                result.append(character)
            }
        }
        return result
    }
}

extension SyncClient {
    /// Subscribes under `id` to a typed query (see `RecordQuery.syncDescription()`): its rows
    /// are kept in the local store, where `query`'s collection reads them.
    ///
    /// - Throws: ``SyncClientError`` when the query cannot be described, or the client already
    ///   has a subscription `id`.
    public func subscribe<Record>(_ id: String, _ query: RecordQuery<Record>) async throws {
        try await subscribe(id, try query.syncDescription())
    }

    /// Subscribes under `id` to a typed query narrowed by a filter over other synced tables (an
    /// `in` sub-query or an `exists`, which a local `RecordQuery` cannot say): the server selects
    /// the rows of `query` that `relation` also selects, and they are kept in the local store.
    ///
    /// ```swift
    /// // The open todos of the projects I am a member of.
    /// try await client.subscribe("team-todos", todos.filter(Column("done") == false).order(by: Column("rank")),
    ///                            where: .column("project_id", in: "members", selecting: "project_id",
    ///                                           where: .compare(column: "user_id", op: .equal, value: .text(me))))
    /// ```
    ///
    /// - Throws: ``SyncClientError`` when the query cannot be described, or the client already
    ///   has a subscription `id`.
    public func subscribe<Record>(_ id: String, _ query: RecordQuery<Record>, where relation: FilterDescription) async throws {
        try await subscribe(id, try query.syncDescription().filtered(by: relation))
    }
}
#endif
