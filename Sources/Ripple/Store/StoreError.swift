/// An error of the store layer: a migration that cannot apply, a record that does not decode,
/// a misuse of the API with bad input. Errors from SQLite itself are ``DatabaseError``s, kept
/// as ``underlying`` when one caused this error.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// A migration failed, was edited after being applied, or is malformed.
        public static let migration = Kind(name: "migration")
        /// A stored value does not decode into the record type.
        public static let decoding = Kind(name: "decoding")
        /// A record does not encode into a row.
        public static let encoding = Kind(name: "encoding")
        /// A query or argument is not valid.
        public static let invalidQuery = Kind(name: "invalid query")
        /// The database file cannot be used (corrupt, not a database, unreadable).
        public static let unusableFile = Kind(name: "unusable file")
        /// A record type and the table of its collection disagree (a property's type, its
        /// optionality, a property or column that only one of them has): the message names the
        /// property and the column, says what differs, and gives the SQL migration that fixes it.
        public static let schemaMismatch = Kind(name: "schema mismatch")
        /// The database file, or a file SQLite keeps beside it in WAL mode (the `-wal` file, the
        /// write-ahead log that holds the commits not yet copied into the database file, and the
        /// `-shm` file, the log's index shared by every connection), was deleted, moved or
        /// replaced while the store had it open: what the store would write or read is no longer
        /// the file at its path. The store then writes and reads nothing more (the write that
        /// finds it commits nothing): release it and open a new one.
        ///
        /// A `-wal` file deleted under a running store would take with it the commits since the
        /// last checkpoint, and a new `-shm` file would let another connection write over the
        /// store's commits. So when either is lost, the commits that only the store's open handle
        /// on the log still reaches are first copied into the database file (a checkpoint through
        /// that handle, also when the store is released before anything noticed), and the
        /// message says whether every one was: no commit reported done is lost silently.
        public static let fileMoved = Kind(name: "file moved")
        /// The database file holds another history than the one the store followed: another
        /// program restored an older copy over it (SQLite's backup API, `.restore` in the `sqlite3`
        /// shell), so its version went back, or a version the store saw now names another commit.
        /// Going on would let one version name two states, so the store writes and reads nothing
        /// more, and its live queries end with this error: release it and open a new one, whose
        /// versions continue the file's history as it is now. See <doc:LiveQueries>.
        public static let fileReplaced = Kind(name: "file replaced")
        /// The call cannot run where it was made: a write inside a read, or a migration or
        /// ``Store/writeWithoutTransaction(tag:_:)`` (which commit on their own) inside a write or a read.
        public static let nesting = Kind(name: "nesting")
        public var description: String { name }
    }

    /// What kind of failure this is.
    public let kind: Kind
    /// What happened, in words, naming the file, column or query involved.
    public let message: String
    /// The SQLite error that caused this one, if any.
    public let underlying: DatabaseError?

    /// An error of `kind`.
    public init(_ kind: Kind, _ message: String, underlying: DatabaseError? = nil) {
        self.kind = kind
        self.message = message
        self.underlying = underlying
    }

    public var description: String {
        var text = "\(kind) error: \(message)"
        if let underlying { text += " (\(underlying))" }
        return text
    }
}
