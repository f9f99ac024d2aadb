import Foundation

/// Which file a path names: its device and inode. A store remembers the identity of the file it
/// opened, to tell when the path no longer leads to it (deleted, renamed, replaced).
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    /// The identity of the file at `path` now, or `nil` when there is none.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

/// The database files the stores of this process opened, by path, so that a new store at a path
/// whose file was deleted under an open store does not silently start an empty database there.
enum OpenStoreFiles {
    private struct Entry {
        weak var store: Store?
        let identity: FileIdentity
    }

    private static let entries = Locked<[String: [Entry]]>([:])
    /// The key of `path`: absolute, with its directory's symbolic links resolved (the file itself
    /// may be gone).
    static func key(of path: String) -> String {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        return url.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(url.lastPathComponent).path
    }

    /// Remembers that `store` opened the file with `identity` under `key` (see ``key(of:)``).
    static func register(_ store: Store, key: String, identity: FileIdentity) {
        entries.withLock { entries in
            entries[key, default: []].removeAll { $0.store == nil }
            entries[key, default: []].append(Entry(store: store, identity: identity))
        }
    }

    /// The live stores of this process, other than `store`, that opened the file with
    /// `identity` under `key` (see ``key(of:)``: computed once per store, it resolves paths).
    static func otherStores(than store: Store, key: String, identity: FileIdentity) -> [Store] {
        entries.withLock { entries in
            guard let list = entries[key], list.count > 1 else { return [] }
            return list.compactMap { $0.identity == identity && $0.store !== store ? $0.store : nil }
        }
    }

    /// Whether a store of this process still has open a file that was at `path` (whose key is
    /// `key`, see ``key(of:)``) and is no longer.
    static func hasLostFile(at path: String, key: String) -> Bool {
        let identities = entries.withLock { entries -> [FileIdentity] in
            entries[key]?.removeAll { $0.store == nil }
            return entries[key]?.map(\.identity) ?? []
        }
        guard !identities.isEmpty else { return false }
        let current = FileIdentity(path: path)
        return identities.contains { $0 != current }
    }
}

extension Store {
    /// Throws ``StoreError/Kind/fileMoved`` when the database file is no longer at ``path`` (it
    /// was deleted, renamed or replaced since the store opened it), and tells the live queries,
    /// which end with that error when they next read.
    func checkFile() throws(StoreError) {
        guard let path, let openedFile, FileIdentity(path: path) != openedFile else { return }
        // Once: every live query re-reads, and its read fails with the error below (a live query
        // subscribed later fails on its first read).
        if fileLoss.withLock({ noticed in defer { noticed = true }; return !noticed }) {
            publishFileLoss()
        }
        throw Self.fileMovedError(path)
    }

    static func fileMovedError(_ path: String) -> StoreError {
        StoreError(.fileMoved, "the database file \(path) was deleted, moved or replaced while the store had it open: "
                   + "nothing more is written to it or read from it. Open a new Store once the file is back")
    }

    /// Why a database file could not be opened, in words: the missing directory, the directory
    /// in its place, the permission denied, or SQLite's own message.
    static func openFailure(path: String, readOnly: Bool, error: DatabaseError) -> StoreError {
        let manager = FileManager.default
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        let reason: String
        if !manager.fileExists(atPath: directory, isDirectory: &isDirectory) {
            reason = "the directory \(directory) does not exist (Ripple creates the file, not its directory)"
        } else if !isDirectory.boolValue {
            reason = "\(directory) is not a directory"
        } else if manager.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory.boolValue {
                reason = "\(path) is a directory, not a database file"
            } else if access(path, readOnly ? R_OK : R_OK | W_OK) != 0 {
                reason = "permission denied: this process may not \(readOnly ? "read" : "read and write") \(path)"
            } else {
                reason = error.message
            }
        } else if !readOnly && access(directory, W_OK | X_OK) != 0 {
            reason = "permission denied: this process may not create files in \(directory)"
        } else if readOnly {
            reason = "\(path) does not exist (a read-only store does not create it)"
        } else {
            reason = error.message
        }
        return StoreError(.unusableFile, "cannot open \(path): \(reason)", underlying: error)
    }
}
