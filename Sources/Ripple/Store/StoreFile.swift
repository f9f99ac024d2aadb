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

/// A directory's identity and the time its entries last changed (its `st_ctime`, to the
/// nanosecond): creating, deleting or renaming a file in it changes that time, and moving the
/// directory itself changes what its path leads to.
struct DirectoryStamp: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64
    let changed: timespec

    /// The stamp of the directory at `path` now, or `nil` when there is none.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        #if canImport(Darwin)
        changed = info.st_ctimespec
        #else
        changed = info.st_ctim
        #endif
    }

    /// Whether the last change is old enough that any later one gets a later time. The kernel
    /// stamps changes with a clock that ticks every few milliseconds (the coarse real-time
    /// clock), so a change in the tick of the last one could leave the time as it was. On Linux,
    /// once that clock has moved past the last change, every later change gets a later time:
    /// settled within a tick. Elsewhere, a tenth of a second (many ticks) must have passed.
    var isSettled: Bool {
        var now = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_REALTIME_COARSE, &now)
        return (changed.tv_sec, changed.tv_nsec) < (now.tv_sec, now.tv_nsec)
        #else
        clock_gettime(CLOCK_REALTIME, &now)
        let age = (Int(now.tv_sec) - Int(changed.tv_sec)) * 1_000_000_000 + (Int(now.tv_nsec) - Int(changed.tv_nsec))
        return age > 100_000_000
        #endif
    }

    static func == (a: Self, b: Self) -> Bool {
        a.device == b.device && a.inode == b.inode && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
    }
}

/// The files of a store in WAL mode as it opened them: the database file, the write-ahead log
/// beside it (the `-wal` file, which holds the commits not yet copied into the database file)
/// and the log's index (the `-shm` file, through which every connection to the file shares the
/// log and its locks).
///
/// Each must stay the file the store opened. A deleted `-wal` file takes with it the commits
/// only it held, and the store's connections would go on writing to it where no other
/// connection reads, and lose it all when they close. Without its `-shm` file, a connection
/// opened later makes a new index, with locks of its own: it and the store would write over each
/// other's commits in the log.
struct StoreFiles: Sendable {
    /// One of a store's files.
    enum Role: Sendable {
        case database, log, index
    }

    let database: FileIdentity
    /// The paths of the log and its index, beside the database file as SQLite resolved it.
    let logPath: String
    let indexPath: String
    /// The identities of the log and its index, or `nil` for one that did not exist when the
    /// store opened (a read-only store of a file closed cleanly, whose reads need neither): it
    /// is not checked.
    let log: FileIdentity?
    let index: FileIdentity?
    /// The directories that hold the files: that of the path the store was opened at, and that
    /// of the path SQLite resolved (the same one unless a symbolic link leads elsewhere).
    let directories: [String]
    /// The directories' stamps when the files were last all found in place, kept only when
    /// those stamps were settled (see ``lost(at:)``).
    private let verified = Locked<[DirectoryStamp?]?>(nil)

    /// The files of the database file `database`, opened at `path`, which SQLite opened as
    /// `sqlitePath` (its `-wal` and `-shm` files are beside that one), as they are now.
    init(database: FileIdentity, path: String, sqlitePath: String) {
        self.database = database
        logPath = sqlitePath + "-wal"
        indexPath = sqlitePath + "-shm"
        log = FileIdentity(path: logPath)
        index = FileIdentity(path: indexPath)
        let folders = [path, sqlitePath].map { ($0 as NSString).deletingLastPathComponent }.map { $0.isEmpty ? "." : $0 }
        directories = folders[0] == folders[1] ? [folders[0]] : folders
    }

    /// The first of the files that is no longer at its path (deleted, renamed or replaced
    /// since the store opened it), the database file at `path` first; `nil` when all are there.
    ///
    /// A file deleted, renamed or replaced changes its directory's stamp (``DirectoryStamp``):
    /// while the directories' stamps are those of the last time every file was found in place,
    /// the files are not looked at one by one. The stamps are taken before the files are, so
    /// that a change made during the look changes them for the next one.
    ///
    /// - Complexity: a `stat` of the directory (about a microsecond); of each file as well when
    ///   an entry of the directory changed since the last look.
    /// Whether the last look found every file in place under directory stamps it trusts (the
    /// next look, with the same stamps, looks at no file).
    var trustsDirectories: Bool { verified.withLock { $0 != nil } }

    func lost(at path: String) -> Role? {
        let stamps = directories.map(DirectoryStamp.init(path:))
        if verified.withLock({ $0 == stamps }) { return nil }
        // Before the files are looked at: a change after this gets a later time (see
        // DirectoryStamp.isSettled), and one before it is seen in the files.
        let settled = stamps.allSatisfy { $0?.isSettled == true }
        let lost: Role? = if FileIdentity(path: path) != database {
            .database
        } else if let log, FileIdentity(path: logPath) != log {
            .log
        } else if let index, FileIdentity(path: indexPath) != index {
            .index
        } else {
            nil
        }
        let trusted = lost == nil && settled
        verified.withLock { $0 = trusted ? stamps : nil }
        return lost
    }
}

/// What became of the commits held by a `-wal` file lost under a store (see
/// ``Store/salvageLostLog()``).
enum LogSalvage: Sendable {
    /// Not tried: nothing was lost, or the copy waits for the call that found the loss to end.
    case notTried
    /// Every commit the log held is in the database file.
    case copied
    /// Some could not be copied (another connection had started the log over, or kept the
    /// copy from finishing).
    case failed
}

/// The database files the stores of this process opened, by path, so that a new store at a path
/// whose file was deleted under an open store does not silently start an empty database there.
enum OpenStoreFiles {
    private struct Entry {
        weak var store: Store?
        let files: StoreFiles
    }

    private static let entries = Locked<[String: [Entry]]>([:])
    /// The key of `path`: absolute, with its directory's symbolic links resolved (the file itself
    /// may be gone).
    static func key(of path: String) -> String {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        return url.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(url.lastPathComponent).path
    }

    /// Remembers that `store` opened `files` under `key` (see ``key(of:)``).
    static func register(_ store: Store, key: String, files: StoreFiles) {
        entries.withLock { entries in
            entries[key, default: []].removeAll { $0.store == nil }
            entries[key, default: []].append(Entry(store: store, files: files))
        }
    }

    /// Forgets the released stores remembered under `key` (a store being released calls it: its
    /// own entry is among them). Without it, every path a store was ever opened at would keep
    /// an entry for the life of the process.
    static func forgetReleased(key: String) {
        entries.withLock { entries in
            entries[key]?.removeAll { $0.store == nil }
            if entries[key]?.isEmpty == true { entries[key] = nil }
        }
    }

    /// The keys under which stores are remembered (for tests).
    static var keys: [String] { entries.withLock { Array($0.keys) } }

    /// The live stores of this process, other than `store`, that opened the file with
    /// `identity` under `key` (see ``key(of:)``: computed once per store, it resolves paths).
    static func otherStores(than store: Store, key: String, identity: FileIdentity) -> [Store] {
        entries.withLock { entries in
            guard let list = entries[key], list.count > 1 else { return [] }
            return list.compactMap { $0.files.database == identity && $0.store !== store ? $0.store : nil }
        }
    }

    /// The file, among those a store of this process still has open at `path` (whose key is
    /// `key`, see ``key(of:)``), that is no longer at its path, with its path; `nil` when none.
    static func lostFile(at path: String, key: String) -> (role: StoreFiles.Role, path: String)? {
        let opened = entries.withLock { entries -> [StoreFiles] in
            entries[key]?.removeAll { $0.store == nil }
            return entries[key]?.map(\.files) ?? []
        }
        for files in opened {
            switch files.lost(at: path) {
            case .database?: return (.database, path)
            case .log?: return (.log, files.logPath)
            case .index?: return (.index, files.indexPath)
            case nil: continue
            }
        }
        return nil
    }
}

extension Store {
    /// Throws ``StoreError/Kind/fileMoved`` when one of the store's files is no longer at its
    /// path (see ``StoreFiles``): the database file (deleted, renamed or replaced since the store
    /// opened it), or its `-wal` or `-shm` file. Tells the live queries, which end with that
    /// error when they next read. A lost `-wal` or `-shm` file also has the commits that only the
    /// store's handle on the log still reaches copied into the database file (see
    /// ``salvageLostLog()``).
    func checkFile() throws(StoreError) {
        if let replacement = fileReplacement.withLock({ $0 }) { throw replacement }
        guard let path, let openedFiles else { return }
        guard let lost = openedFiles.lost(at: path) else {
            fileVerifiedAt.withLock { $0 = DispatchTime.now().uptimeNanoseconds }
            return
        }
        // Once: every live query re-reads, and its read fails with the error below (a live query
        // subscribed later fails on its first read).
        if fileLoss.withLock({ noticed in defer { noticed = true }; return !noticed }) {
            publishFileLoss()
        }
        switch lost {
        case .database:
            throw Self.fileMovedError(path)
        case .log, .index:
            salvageLostLog()
            throw lostLogError(lost, files: openedFiles)
        }
    }

    /// ``checkFile()`` for a read, at a third of its cost or less: only the database file is
    /// looked at (one `stat`) until a loss has been noticed, and not even that when a check
    /// found every file in place less than ``readCheckReuse`` ago (a live query's refresh right
    /// after the commit that started it reuses the commit's check). A read commits nothing, and
    /// one made after the `-wal` or `-shm` file was lost still reads what was committed, through
    /// the handles the reader has; the next commit, look for other writers or wake of the file
    /// watch notices the loss, and from then on reads fail too. (A commit never reuses a check:
    /// it is the last moment to refuse a write that would be lost.)
    func checkFileBeforeRead() throws(StoreError) {
        if fileLoss.withLock({ $0 }) { return try checkFile() }
        let now = DispatchTime.now().uptimeNanoseconds
        if now &- fileVerifiedAt.withLock({ $0 }) < Self.readCheckReuse { return }
        guard let path, let openedFile else { return }
        guard FileIdentity(path: path) != openedFile else {
            fileVerifiedAt.withLock { $0 = max($0, now) }
            return
        }
        try checkFile()
    }

    /// The file holds another history than the one this store followed (found by the change
    /// log, on the writer): from now on every call throws `error`, and every live query ends
    /// with it at its next read, which the file loss's notice starts (once the writer's current
    /// call ends, so that no refresh waits for it).
    func fileWasReplaced(_ error: StoreError) {
        fileReplacement.withLock { $0 = $0 ?? error }
        guard fileLoss.withLock({ noticed in defer { noticed = true }; return !noticed }) else { return }
        if !pool.whenAccessEnds({ [self] in publishFileLoss() }) { publishFileLoss() }
    }

    /// How long a check that found the files in place spares reads theirs, in nanoseconds.
    static var readCheckReuse: UInt64 { 1_000_000 }

    static func fileMovedError(_ path: String) -> StoreError {
        StoreError(.fileMoved, "the database file \(path) was deleted, moved or replaced while the store had it open: "
                   + "nothing more is written to it or read from it. Open a new Store once the file is back")
    }

    /// The error for a store whose `-wal` or `-shm` file is lost: which file, why the store
    /// stops, and what became of the commits only the log held.
    func lostLogError(_ role: StoreFiles.Role, files: StoreFiles) -> StoreError {
        let what = role == .log
            ? "write-ahead log \(files.logPath) was deleted, moved or replaced while the store had it open: the "
                + "store's commits would go on to a file no other connection reads, lost when the store closes"
            : "write-ahead log's index \(files.indexPath) was deleted, moved or replaced while the store had it open: "
                + "connections opened since share a new index, not the store's locks, and would write over its commits"
        let commits = switch logSalvage.withLock({ $0 }) {
        case .notTried: "are being copied into the database file through the handle the store still has on it"
        case .copied: "were copied into the database file through the handle the store still has on it"
        case .failed: "could not all be copied into the database file (another connection had started the log over, "
            + "or kept the copy from finishing): commits reported before this error may be missing from the file"
        }
        return StoreError(.fileMoved, "the database's \(what). Nothing more is written or read; the commits that only "
                          + "the log held \(commits). Release this store, then open a new one")
    }

    /// Copies into the database file the commits that only the store's lost `-wal` file holds
    /// (or, with its `-shm` file lost, that only the store's index knows of), through the handle
    /// the writer still has on it — once, on the writer, outside any transaction: now, or as the
    /// store call this thread is in ends. See ``Database/salvageWriteAheadLog()``.
    func salvageLostLog() {
        if !pool.whenAccessEnds({ [self] in salvageLostLogNow() }) { salvageLostLogNow() }
    }

    /// ``salvageLostLog()`` now, on the writer (unless done already).
    func salvageLostLogNow() {
        _ = try? pool.withWriter { db in
            guard logSalvage.withLock({ $0 }) == .notTried else { return }
            let copied = db.salvageWriteAheadLog()
            logSalvage.withLock { $0 = copied ? .copied : .failed }
        }
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
