/// Where a commit came from: every version the store takes records one, beside an optional tag
/// given by the caller (see ``Store/write(tag:_:)``). Both show on live-query events
/// (``LiveQueryEvent/origin``), in the change log (``ChangeLogEntry/origin``) and in the change
/// feed (``Store/commits(after:)``).
///
/// An open set: a later Ripple, or a layer above it such as a sync client, may add origins, and
/// an origin read from a file is kept as it was written.
public struct CommitOrigin: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The origin's name, as the change log stores it.
    public let rawValue: String

    /// An origin named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A ``Store/write(tag:_:)`` (collections' writes included).
    public static let write = CommitOrigin(rawValue: "write")
    /// Statements run by ``Store/writeWithoutTransaction(tag:_:)``.
    public static let maintenance = CommitOrigin(rawValue: "maintenance")
    /// Migrations applied by ``Store/migrate(_:)``.
    public static let migration = CommitOrigin(rawValue: "migration")
    /// A write made without Ripple (the `sqlite3` shell, another library) that the store noticed
    /// and gave a version: which rows it changed is unknown.
    public static let foreign = CommitOrigin(rawValue: "foreign")
    /// Changes applied from another system of record (a replica of a server's database).
    public static let replication = CommitOrigin(rawValue: "replication")
    /// Changes applied by a sync client (a rebase on a server's state).
    public static let sync = CommitOrigin(rawValue: "sync")

    public var description: String { rawValue }
}

/// Work run inside a commit of the store, on the writer, with the commit's origin (see
/// `Store.addCommitParticipant(_:)`).
package typealias CommitParticipant = @Sendable (Database, CommitOrigin) throws -> Void
