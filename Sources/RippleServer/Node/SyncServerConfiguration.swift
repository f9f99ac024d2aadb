#if Sync
import Foundation
import PostgresNIO
import Ripple

/// What a ``SyncServer`` serves, from where, and within which limits.
public struct SyncServerConfiguration: Sendable {
    /// The PostgreSQL database the server follows (the system of record).
    public var postgres: PostgresClient.Configuration
    /// The synced tables of its `public` schema (each needs a primary key).
    public var tables: [String]
    /// Who may read and write what (see ``SyncRules``).
    public var rules: SyncRules
    /// Per synced table, a resolver that decides what clients' operations do (see
    /// ``MutationResolver``); a table without one takes patches column by column, the last to
    /// arrive winning.
    public var resolvers: [String: MutationResolver] = [:]
    /// The secret the node's own `v1.` tokens are signed with (at least 32 bytes; see
    /// ``SyncToken``); empty when the node takes only JSON Web Tokens (``jwt``).
    public var secret: [UInt8]
    /// How JSON Web Tokens from the app's identity provider are verified (`nil`: the node takes
    /// only its own `v1.` tokens). Both kinds may be taken at once.
    public var jwt: JWTConfiguration?
    /// The replica's SQLite file (this node's own; see ``ReplicaFeed``).
    public var replicaPath: String

    /// The address to listen on.
    public var host = "127.0.0.1"
    /// The port to listen on; 0 lets the system choose (``SyncServer/port`` tells which).
    public var port = 8080
    /// This node's replication slot (one per node).
    public var slot = "ripple_node"
    /// The publication of the synced tables.
    public var publication = "ripple_sync"

    /// Sockets admitted at once; a socket beyond them gets a `retry_later` error and is closed.
    public var maxSockets = 10_000
    /// Subscriptions one socket may hold.
    public var maxSubscriptionsPerSocket = 100
    /// The longest message a client may send (longer ones get a `message_too_large` error).
    public var maxMessageBytes = 256 * 1024
    /// Bytes of frames waiting for a socket that does not read, beyond which the socket is
    /// dropped with a `slow_consumer` error (its client reconnects and resumes).
    public var maxQueuedBytes = 16 * 1024 * 1024
    /// How often a socket hears the position it stands at when nothing changed for it.
    public var heartbeatInterval: Duration = .seconds(5)
    /// How long a socket may stay open without a valid `hello`.
    public var helloTimeout: Duration = .seconds(10)
    /// Resumes (changesets reconstructed from the replica's history) admitted per second;
    /// more wait, and beyond `maxWaitingResumes` get a `retry_later` error.
    public var resumesPerSecond = 500
    /// Resumes that may wait for admission at once.
    public var maxWaitingResumes = 1_000
    /// How long a resume from a position the replica has not reached yet waits for it.
    public var resumeCatchUpTimeout: Duration = .seconds(10)
    /// How many replica versions the change log keeps for resumes (older positions get a
    /// snapshot).
    public var retainedVersions = 100_000
    /// How often the feed looks whether Postgres flushed more WAL (one trivial query,
    /// `pg_current_wal_flush_lsn()`, each time): half of it is the mean wait before a commit is
    /// seen. The default, ``defaultPollInterval``, costs Postgres about a thousand such queries a
    /// second while idle; a longer one trades latency for less of that.
    public var pollInterval: Duration = Self.defaultPollInterval
    /// The default ``pollInterval``: 1 ms.
    public static let defaultPollInterval: Duration = .milliseconds(1)
    /// How often the feed looks while commits are coming: for ``ReplicaFeed/activeWindow``
    /// after the WAL last moved, it looks this often instead of every ``pollInterval`` (a
    /// commit that follows another soon is seen sooner; an idle node costs what
    /// ``pollInterval`` says). Default ``defaultActivePollInterval``; equal to ``pollInterval``
    /// to turn it off.
    public var activePollInterval: Duration = Self.defaultActivePollInterval
    /// The default ``activePollInterval``: 250 µs.
    public static let defaultActivePollInterval: Duration = .microseconds(250)

    /// How long the feed may go without progress — a look at Postgres answered, a Postgres
    /// transaction applied — before the node gives up on it and starts it again (a wait that
    /// never ends, seen under repeated Postgres restarts). A long catch-up is progress. 5 minutes.
    public var feedStallLimit: Duration = .seconds(300)
    /// The most changes the feed asks Postgres for at once (a peek); it peeks again while the
    /// slot gives it that many. 10,000.
    public var feedBatchSize = 10_000
    /// How often the feed compares the synced tables' columns in the
    /// catalog with the replica's (``FeedConfiguration/catalogCheckInterval``): without event
    /// triggers, how soon a column added with no later write is seen. 5 s; `nil`: never.
    public var catalogCheckInterval: Duration? = .seconds(5)

    /// How long a node that shuts down gracefully waits for its parts (sockets told to come
    /// back later and closing, a push finishing, the feed) before it cancels what still runs,
    /// with a warning naming the sockets still open: a node must stop when told to. 10 s.
    public var stopGrace: Duration = .seconds(10)

    public init(postgres: PostgresClient.Configuration, tables: [String], rules: SyncRules, secret: [UInt8],
                replicaPath: String) {
        (self.postgres, self.tables, self.rules, self.secret, self.replicaPath) = (postgres, tables, rules, secret, replicaPath)
    }

    /// The configuration for a `postgres://user:password@host:port/database` URL (with
    /// `?sslmode=require` and the other parameters ``PostgresEndpoint`` takes).
    ///
    /// - Throws: ``SyncServerError`` when the URL is not one.
    public static func postgres(url: String) throws -> PostgresClient.Configuration {
        try PostgresEndpoint(url: url).clientConfiguration
    }
}
#endif
