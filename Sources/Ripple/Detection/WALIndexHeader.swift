import RippleSQLite

/// The header of a WAL database's wal-index (the first 48 bytes of its `-shm` file), which every
/// commit rewrites: the same header twice means no commit in between.
struct WALIndexHeader: Equatable, Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)

    /// The header in `index` (a mapping from `ripple_wal_index`), or `nil` while a commit is
    /// rewriting it.
    init?(index: UnsafeRawPointer) {
        let read = withUnsafeMutableBytes(of: &words) { bytes in
            ripple_wal_index_header(index, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard read == 1 else { return nil }
    }

    /// The count of write transactions committed to the WAL since the wal-index was built
    /// (`iChange`, bytes 8–11): every commit, Ripple's or not, adds one; nothing else does. It
    /// starts again when the wal-index is rebuilt (all connections closed, then one opened).
    var transactionCount: UInt32 {
        withUnsafeBytes(of: words) { $0.load(fromByteOffset: 8, as: UInt32.self) }
    }

    static func == (lhs: WALIndexHeader, rhs: WALIndexHeader) -> Bool {
        lhs.words == rhs.words
    }
}
