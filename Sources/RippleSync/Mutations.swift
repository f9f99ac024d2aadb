/// One local transaction of a client, sent to the server to apply to Postgres: its id (1, 2, 3…
/// per client id, with no gap) and its row operations, in the order they were made.
///
/// The server applies a mutation at most once, whatever socket or node it arrives on (its id is
/// checked against the client's last applied one in the same Postgres transaction), and answers
/// each with a ``MutationResult``.
public struct Mutation: Codable, Hashable, Sendable {
    /// The mutation's number for its client: one more than the client's previous mutation.
    public var id: Int64
    /// The row operations, applied in this order in one Postgres transaction.
    public var ops: [MutationOp]

    public init(id: Int64, ops: [MutationOp]) { (self.id, self.ops) = (id, ops) }
}

/// A row operation of a ``Mutation`` on a synced table. `values` are the row's columns by name,
/// as the wire writes them (see ``WireValue`` and the types table of the protocol page):
///
/// * `put`: the whole row as the app knows it — inserted, or written over the row with its key
///   (a column it leaves out, one added since the app was built, takes its default in a new
///   row and keeps its value in an existing one);
/// * `patch`: the key columns and only the columns that changed — other columns keep the
///   value they have on the server (concurrent patches of different columns both survive);
///   a row that no longer exists rejects the mutation;
/// * `delete`: the key columns (a row already gone is no error).
public struct MutationOp: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable, CaseIterable {
        case put, patch, delete
    }

    public var kind: Kind
    public var table: String
    public var values: [String: WireValue]

    public init(_ kind: Kind, table: String, values: [String: WireValue]) {
        (self.kind, self.table, self.values) = (kind, table, values)
    }

    enum CodingKeys: String, CodingKey { case kind = "op", table, values }
}

/// What became of a ``Mutation``: applied, or rejected with a reason. A rejection says which
/// rule or constraint refused it (never the values of other rows: Postgres's `DETAIL` is not
/// sent).
public struct MutationResult: Codable, Hashable, Sendable {
    public enum Status: String, Codable, Hashable, Sendable {
        /// Its operations are in Postgres (or were, when the server applied it before).
        case applied
        /// None of its operations reached Postgres; `code` and `message` say why.
        case rejected
    }

    /// The mutation's id.
    public var id: Int64
    public var status: Status
    /// Why it was rejected: a Postgres SQLSTATE (`23505`, `23514`, …) or one of Ripple's own
    /// codes (`write_rule`, `row_gone`, `bad_mutation`, `resolver`, `out_of_order`).
    public var code: String?
    /// The constraint Postgres named, when one refused it.
    public var constraint: String?
    /// A sentence for the app's log or its user.
    public var message: String?
    /// The Postgres position (as in `changes` and `heartbeat`, e.g. `0/16B3748`) at or after
    /// the commit that stored this result: once the client's position reaches it, the replica's
    /// frames include the mutation's effects (applied) or show it changed nothing (rejected).
    /// `nil` only from a server that does not say, or on a rejection the server did not store
    /// (`out_of_order`, `internal`).
    public var lsn: String?

    public init(id: Int64, status: Status, code: String? = nil, constraint: String? = nil, message: String? = nil,
                lsn: String? = nil) {
        (self.id, self.status, self.code, self.constraint, self.message) = (id, status, code, constraint, message)
        self.lsn = lsn
    }
}
