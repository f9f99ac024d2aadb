/// The messages of Ripple Sync's WebSocket protocol (`/sync`, JSON text frames, protocol 1).
/// <doc:TheSyncProtocol> describes each one and the rules of the conversation; these types are its
/// Swift form, shared by the server and the Swift client.
public enum SyncProtocol {
    /// The protocol version this library speaks.
    public static let version = 1
}

/// Where a subscription's result stands, as a client keeps it to resume: the `basis` its
/// result came with (the Postgres cluster and timeline, and a digest of the user, the rules and
/// the query), and the Postgres commit position (`lsn`, as Postgres prints it: `16/B374D848`) of
/// the last frame or heartbeat it applied.
public struct ResumePoint: Codable, Hashable, Sendable {
    /// The `basis` of the latest ``WireSnapshot`` the client received for the subscription
    /// (opaque: kept as it came).
    public var basis: String
    /// The position the subscription stands at: the `lsn` of the latest `changes`, `heartbeat`
    /// or `pong` the client read after the subscription's first result on that socket.
    public var lsn: String

    /// A resume point of `basis` at `lsn`.
    public init(basis: String, lsn: String) { (self.basis, self.lsn) = (basis, lsn) }
}

/// A message a client sends.
public enum ClientMessage: Hashable, Sendable {
    /// Opens the conversation: the protocol the client speaks, its signed token, and, for a
    /// client that will push mutations, the client id the server gave this device before (an
    /// empty string on its first connection): the server answers with the id to use (the same
    /// one, or a new one when it does not know it for this user). `nil`: the client only reads.
    case hello(protocol: Int, token: String, client: String? = nil)
    /// Subscribes to a query under an id the client chose (unique on the socket); `resume`: where
    /// the client's copy of this same subscription stands, to be brought up to date by one
    /// changeset instead of a snapshot when the server can.
    case subscribe(id: String, query: QueryDescription, resume: ResumePoint?)
    /// Ends a subscription.
    case unsubscribe(id: String)
    /// Asks for a `pong` (with the position the socket is at).
    case ping
    /// Mutations to apply, in the order of their ids (see ``Mutation``); the server answers with
    /// `pushed`.
    case push(mutations: [Mutation])
    /// Replaces the socket's token before it expires (a compatible extension of protocol 1):
    /// the server answers `authed` with the new expiry, keeping the socket's subscriptions, or
    /// refuses with an `error` (and closes the socket) when the token is not valid, names
    /// another user, or carries other values of the claims the rules use.
    case auth(token: String)
}

extension ClientMessage: Codable {
    enum CodingKeys: String, CodingKey { case type, `protocol`, token, client, id, query, resume, mutations }

    /// Reads a message from its JSON object (`{"type": "subscribe", …}`).
    ///
    /// - Throws: `DecodingError` for an unknown `type` or a missing or mistyped field.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "hello":
            self = .hello(protocol: try container.decode(Int.self, forKey: .protocol),
                          token: try container.decode(String.self, forKey: .token),
                          client: try container.decodeIfPresent(String.self, forKey: .client))
        case "subscribe":
            self = .subscribe(id: try container.decode(String.self, forKey: .id),
                              query: try container.decode(QueryDescription.self, forKey: .query),
                              resume: try container.decodeIfPresent(ResumePoint.self, forKey: .resume))
        case "unsubscribe":
            self = .unsubscribe(id: try container.decode(String.self, forKey: .id))
        case "ping":
            self = .ping
        case "push":
            self = .push(mutations: try container.decode([Mutation].self, forKey: .mutations))
        case "auth":
            self = .auth(token: try container.decode(String.self, forKey: .token))
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown message type \(type)")
        }
    }

    /// Writes the message as its JSON object, with its `type`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .hello(let version, let token, let client):
            try container.encode("hello", forKey: .type)
            try container.encode(version, forKey: .protocol)
            try container.encode(token, forKey: .token)
            try container.encodeIfPresent(client, forKey: .client)
        case .subscribe(let id, let query, let resume):
            try container.encode("subscribe", forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(query, forKey: .query)
            try container.encodeIfPresent(resume, forKey: .resume)
        case .unsubscribe(let id):
            try container.encode("unsubscribe", forKey: .type)
            try container.encode(id, forKey: .id)
        case .ping:
            try container.encode("ping", forKey: .type)
        case .push(let mutations):
            try container.encode("push", forKey: .type)
            try container.encode(mutations, forKey: .mutations)
        case .auth(let token):
            try container.encode("auth", forKey: .type)
            try container.encode(token, forKey: .token)
        }
    }
}

/// A subscription's whole result, as a `changes` frame carries it for a new subscription (or
/// instead of a changeset larger than the result).
public struct WireSnapshot: Codable, Hashable, Sendable {
    /// What a resume of this subscription must present (see ``ResumePoint``).
    public var basis: String
    /// The result's column names, in the rows' order.
    public var columns: [String]
    /// Each column's Postgres type name (`int8`, `text`, `numeric`…), which says how to read its
    /// values (see the protocol page).
    public var types: [String]
    /// The positions, in `columns`, of the table's primary key.
    public var key: [Int]
    /// The rows, in the query's order, each an array in `columns`' order.
    public var rows: [[WireValue]]
    /// The rows of each include, by path (`project`, `todos.assignee`; see
    /// ``IncludeDescription``); `nil` for a subscription without includes.
    public var included: [String: WireIncludedSnapshot]?

    /// A result of `rows` with its `basis`, `columns`, their `types`, the `key`'s positions, and
    /// its includes' rows.
    public init(basis: String, columns: [String], types: [String], key: [Int], rows: [[WireValue]],
                included: [String: WireIncludedSnapshot]? = nil) {
        (self.basis, self.columns, self.types, self.key, self.rows) = (basis, columns, types, key, rows)
        self.included = included
    }
}

/// A message the server sends.
public enum ServerMessage: Hashable, Sendable {
    /// The answer to `hello`: the user the token names, the position the socket starts at,
    /// how often heartbeats come, and the socket's limits.
    case welcome(Welcome)
    /// One Postgres transaction (or, for new and resumed subscriptions, the position they were
    /// read at): for each of the socket's subscriptions it changed, a changeset or a whole
    /// result. After it, every subscription of the socket stands at `lsn`.
    case changes(lsn: String, snapshots: [String: WireSnapshot], changesets: [String: WireChangeset])
    /// Nothing changed for this socket's subscriptions up to `lsn`: their resume points move to it.
    case heartbeat(lsn: String)
    /// The answer to `ping`.
    case pong(lsn: String)
    /// Something was refused or ended; `id` names the subscription it concerns, if one does.
    /// A socket stays open after an error unless the code says otherwise (see ``SyncErrorCode``).
    case error(code: SyncErrorCode, message: String, id: String?)
    /// The answer to `push`: what became of each mutation, in order.
    case pushed(results: [MutationResult])
    /// The answer to `auth`: the socket's token is the new one, valid until `expires` (seconds
    /// since 1970); its subscriptions go on.
    case authed(expires: Int64)

    /// The fields of `welcome`.
    public struct Welcome: Codable, Hashable, Sendable {
        /// The protocol the server speaks (``SyncProtocol/version``).
        public var `protocol`: Int
        /// The user id the client's token names.
        public var user: String
        /// The position the server's replica stands at (Postgres's text form of an LSN).
        public var lsn: String
        /// How often, at most, heartbeats come (`heartbeat_ms`).
        public var heartbeatMilliseconds: Int
        /// How many subscriptions the socket may hold at once (`max_subscriptions`).
        public var maxSubscriptions: Int
        /// The longest message, in bytes, the client may send (`max_message_bytes`).
        public var maxMessageBytes: Int
        /// The client id to send mutations under (`client`; `nil` when the server takes no writes).
        public var client: String?
        /// The id of the last mutation of that client the server applied or rejected
        /// (`last_mutation`; 0 for a new client id).
        public var lastMutation: Int64?

        /// A welcome with these fields.
        public init(protocol: Int, user: String, lsn: String, heartbeatMilliseconds: Int, maxSubscriptions: Int,
                    maxMessageBytes: Int, client: String? = nil, lastMutation: Int64? = nil) {
            (self.protocol, self.user, self.lsn, self.heartbeatMilliseconds) = (`protocol`, user, lsn, heartbeatMilliseconds)
            (self.maxSubscriptions, self.maxMessageBytes) = (maxSubscriptions, maxMessageBytes)
            (self.client, self.lastMutation) = (client, lastMutation)
        }

        enum CodingKeys: String, CodingKey {
            case `protocol`, user, lsn, heartbeatMilliseconds = "heartbeat_ms", maxSubscriptions = "max_subscriptions"
            case maxMessageBytes = "max_message_bytes", client, lastMutation = "last_mutation"
        }
    }
}

/// Why the server refused a message or ended a subscription or a socket. The raw values are
/// the `code` of `error` frames.
public enum SyncErrorCode: String, Codable, Hashable, Sendable, CaseIterable {
    /// The frame is not JSON, not a text frame, nests deeper than
    /// ``SyncProtocol/maximumNesting``, or is not a message of the protocol (a field missing or
    /// of the wrong type, a subscription id that is empty or longer than 256 bytes).
    case malformed
    /// A message of a type the protocol does not have.
    case unknownMessage = "unknown_message"
    /// `hello` names a protocol version the server does not speak (the socket closes).
    case unsupportedProtocol = "unsupported_protocol"
    /// A message other than `hello` came before `hello`, or a second `hello` came; or no valid
    /// `hello` came within the server's time for it (then the socket closes).
    case outOfOrder = "out_of_order"
    /// The token is not valid: forged, or signed with another secret (the socket closes). The
    /// node's own `v1.` tokens are refused with this code; JSON Web Tokens with the `token_…`
    /// codes below, which say why.
    case unauthorized
    /// The token's expiry passed, at `hello`, at `auth`, or later on an open socket (the socket
    /// closes).
    case tokenExpired = "token_expired"
    /// The token is not a JSON Web Token the node can read (not three base64url parts, a header
    /// or payload that is not a JSON object, no user claim, no `exp`). The socket closes.
    case tokenMalformed = "token_malformed"
    /// The token's signature does not match the key it names (the socket closes).
    case tokenBadSignature = "token_bad_signature"
    /// The token names a key (`kid`) that the node does not have, even after fetching its
    /// JWKS again (the socket closes).
    case tokenUnknownKey = "token_unknown_key"
    /// The token's `alg` is `none`, not one the node verifies (HS256, RS256, ES256, EdDSA), or
    /// not the algorithm of the key it names (the socket closes).
    case tokenUnsupportedAlgorithm = "token_unsupported_algorithm"
    /// The token's `aud` does not name the audience the node expects (the socket closes).
    case tokenWrongAudience = "token_wrong_audience"
    /// The token's `iss` is not the issuer the node expects (the socket closes).
    case tokenWrongIssuer = "token_wrong_issuer"
    /// The token's `nbf` is still ahead (beyond the node's leeway; the socket closes).
    case tokenNotYetValid = "token_not_yet_valid"
    /// An `auth` renewal names another user, or other values of the claims the rules use, than
    /// the socket's token: the socket closes; connect again with the new token (subscriptions
    /// resume).
    case tokenIdentityChanged = "token_identity_changed"
    /// The query does not fit the table: unknown table or column, a value of the wrong type, an
    /// operator the column's type does not support, a limit of the node's exceeded; or the
    /// replica cannot run it. The subscription was not made.
    case invalidQuery = "invalid_query"
    /// The rules do not let this user read the table.
    case forbidden
    /// The socket holds as many subscriptions as it may.
    case tooManySubscriptions = "too_many_subscriptions"
    /// `subscribe` reused an id the socket already subscribed under.
    case duplicateSubscription = "duplicate_subscription"
    /// `unsubscribe` named no subscription of the socket.
    case unknownSubscription = "unknown_subscription"
    /// A message longer than the socket's `max_message_bytes`.
    case messageTooLarge = "message_too_large"
    /// The client did not read its frames: more than the server's bound waited for it (the
    /// socket closes; reconnect and resume).
    case slowConsumer = "slow_consumer"
    /// The server is at its limit of sockets or resumes: try again after a while. Without a
    /// subscription id it refuses the socket (which closes); with one, the subscription was not
    /// made: subscribe again later.
    case retryLater = "retry_later"
    /// The subscription ended: its table was dropped or changed in a way the node cannot
    /// follow, or (for a subscription with no column list) its table's columns changed, or its
    /// query no longer runs on the replica (the message says which). Subscribing again gives
    /// the table as it is.
    case subscriptionEnded = "subscription_ended"
    /// The subscription ended: it names a column that was dropped from its table (the message
    /// says `column <column> of <table> was dropped`). Subscribe again without it.
    case columnDropped = "column_dropped"
    /// A `push` the server cannot take now (no client id on this socket: reconnect).
    case unavailable
    /// The server failed; the message says how. Codes this library does not know read as this.
    case internalError = "internal"
}

extension ServerMessage: Decodable {
    enum CodingKeys: String, CodingKey { case type, lsn, snapshots, changesets, code, message, id, results, expires }

    /// Reads a frame the server sent. An error code this library does not know reads as
    /// ``SyncErrorCode/internalError``.
    ///
    /// - Throws: `DecodingError` for an unknown `type` or a missing or mistyped field.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "welcome": self = .welcome(try Welcome(from: decoder))
        case "changes":
            self = .changes(lsn: try container.decode(String.self, forKey: .lsn),
                            snapshots: try container.decodeIfPresent([String: WireSnapshot].self, forKey: .snapshots) ?? [:],
                            changesets: try container.decodeIfPresent([String: WireChangeset].self, forKey: .changesets) ?? [:])
        case "heartbeat": self = .heartbeat(lsn: try container.decode(String.self, forKey: .lsn))
        case "pong": self = .pong(lsn: try container.decode(String.self, forKey: .lsn))
        case "error":
            let code = try container.decode(String.self, forKey: .code)
            self = .error(code: SyncErrorCode(rawValue: code) ?? .internalError,
                          message: try container.decode(String.self, forKey: .message),
                          id: try container.decodeIfPresent(String.self, forKey: .id))
        case "pushed": self = .pushed(results: try container.decode([MutationResult].self, forKey: .results))
        case "authed": self = .authed(expires: try container.decode(Int64.self, forKey: .expires))
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown message type \(type)")
        }
    }
}

extension ServerMessage {
    /// The message as the server writes it (compact JSON, keys in a fixed order).
    public var json: [UInt8] {
        var out = JSONBytes()
        switch self {
        case .welcome(let welcome):
            out.raw(#"{"type":"welcome","protocol":"#); out.integer(Int64(welcome.protocol))
            out.raw(#","user":"#); out.string(welcome.user)
            out.raw(#","lsn":"#); out.string(welcome.lsn)
            out.raw(#","heartbeat_ms":"#); out.integer(Int64(welcome.heartbeatMilliseconds))
            out.raw(#","max_subscriptions":"#); out.integer(Int64(welcome.maxSubscriptions))
            out.raw(#","max_message_bytes":"#); out.integer(Int64(welcome.maxMessageBytes))
            if let client = welcome.client { out.raw(#","client":"#); out.string(client) }
            if let last = welcome.lastMutation { out.raw(#","last_mutation":"#); out.integer(last) }
            out.raw("}")
        case .changes(let lsn, let snapshots, let changesets):
            out.raw(#"{"type":"changes","lsn":"#); out.string(lsn)
            if !snapshots.isEmpty {
                out.raw(#","snapshots":{"#)
                for (offset, (id, snapshot)) in snapshots.sorted(by: { $0.key < $1.key }).enumerated() {
                    if offset > 0 { out.raw(",") }
                    out.string(id); out.raw(":"); out.snapshot(snapshot)
                }
                out.raw("}")
            }
            if !changesets.isEmpty {
                out.raw(#","changesets":{"#)
                for (offset, (id, changeset)) in changesets.sorted(by: { $0.key < $1.key }).enumerated() {
                    if offset > 0 { out.raw(",") }
                    out.string(id); out.raw(":"); out.changeset(changeset)
                }
                out.raw("}")
            }
            out.raw("}")
        case .heartbeat(let lsn):
            out.raw(#"{"type":"heartbeat","lsn":"#); out.string(lsn); out.raw("}")
        case .pong(let lsn):
            out.raw(#"{"type":"pong","lsn":"#); out.string(lsn); out.raw("}")
        case .error(let code, let message, let id):
            out.raw(#"{"type":"error","code":"#); out.string(code.rawValue)
            out.raw(#","message":"#); out.string(message)
            if let id { out.raw(#","id":"#); out.string(id) }
            out.raw("}")
        case .pushed(let results):
            out.raw(#"{"type":"pushed","results":["#)
            for (offset, result) in results.enumerated() {
                if offset > 0 { out.raw(",") }
                out.raw(#"{"id":"#); out.integer(result.id)
                out.raw(#","status":"#); out.string(result.status.rawValue)
                if let code = result.code { out.raw(#","code":"#); out.string(code) }
                if let constraint = result.constraint { out.raw(#","constraint":"#); out.string(constraint) }
                if let message = result.message { out.raw(#","message":"#); out.string(message) }
                if let lsn = result.lsn { out.raw(#","lsn":"#); out.string(lsn) }
                out.raw("}")
            }
            out.raw("]}")
        case .authed(let expires):
            out.raw(#"{"type":"authed","expires":"#); out.integer(expires); out.raw("}")
        }
        return out.bytes
    }
}
