import Foundation
import RippleSQLite

extension Database {
    /// The path of the database file as SQLite opened it (symbolic links resolved: its `-wal`
    /// and `-shm` files are beside it), or `nil` in memory.
    var filePath: String? {
        guard let name = sqlite3_db_filename(handle, "main"), name.pointee != 0 else { return nil }
        return String(cString: name)
    }

    /// Copies into the database file the commits held by the write-ahead log this connection has
    /// open, and returns whether every one of them is in the database file. For when the log's
    /// `-wal` file, or its index's `-shm` file, is no longer at its path: the handles this
    /// connection still has are then the only way to those commits.
    ///
    /// The copy is a checkpoint, made only while the index the connection reads still describes
    /// the log it has open — the two carry the same salts; another connection starting the log
    /// over, in a new file, gives the index new ones — so that no page of a stale log reaches the
    /// database file. From then on, closing the connection neither checkpoints nor deletes
    /// anything: the files now at those paths are other connections'.
    ///
    /// Call it on the writer, outside any transaction.
    func salvageWriteAheadLog() -> Bool {
        ripple_db_config_flag(handle, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        // Not in WAL mode: there is no log.
        guard let index = ripple_wal_index(handle) else { return true }
        var header = [UInt8](repeating: 0, count: 48)
        // Another process may be rewriting it (its two copies then differ): a moment later it is not.
        var attempts = 0
        while ripple_wal_index_header(index, &header) != 1 {
            attempts += 1
            if attempts == 1_000 { return false }
            sched_yield()
        }
        // The header's mxFrame (bytes 16–19, in this machine's order): the log's committed frames.
        let frames = header.withUnsafeBytes { $0.load(fromByteOffset: 16, as: UInt32.self) }
        if frames == 0 { return true }
        // Its salts (bytes 32–39) against those of the log's own header (bytes 16–23).
        guard let logHeader = writeAheadLogHeader(), logHeader[16..<24].elementsEqual(header[32..<40]) else { return false }
        var logFrames: Int32 = 0, copied: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_FULL, &logFrames, &copied)
        return code == SQLITE_OK && copied == logFrames
    }

    /// The first 32 bytes (the header) of the write-ahead log this connection has open, read
    /// through SQLite's own handle on it; `nil` when it has none, or a shorter one.
    private func writeAheadLogHeader() -> [UInt8]? {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) == SQLITE_OK,
              let file, let read = file.pointee.pMethods?.pointee.xRead else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        let code = bytes.withUnsafeMutableBytes { read(file, $0.baseAddress, 32, 0) }
        return code == SQLITE_OK ? bytes : nil
    }
}
