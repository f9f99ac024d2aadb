import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Calls back when a database's files change on disk: how a store hears that another process
/// committed (a commit in WAL mode appends to the `-wal` file), without polling. The callback
/// only says "look": the wal-index header, `PRAGMA data_version` and the change log decide what
/// changed.
///
/// * Linux: one inotify descriptor, read by a dispatch source, watching the `-wal` file (writes,
///   truncation by a checkpoint) and the database file (a checkpoint; the file deleted, renamed
///   or replaced). inotify watches by path and holds no descriptor of the files. While the store
///   holds its writer, the `-wal` watch is muted to the file's removal or replacement
///   (``muteWrites()``): its own commits do not wake it. (Only a checkpoint writes the database
///   file: that watch always hears, and its writes, like the `-wal` file's, are only writes.)
/// * Other platforms: dispatch file-system sources on the `-wal` file and on the directory (an
///   entry deleted, renamed or created: the file replaced). Never on the database file itself:
///   closing a descriptor of it would drop the process's POSIX locks on it, which SQLite's
///   connections rely on. SQLite takes no such lock on the `-wal` file.
///
/// Watching stops when the watch is released (or ``cancel()``).
final class FileWatch: @unchecked Sendable {   // @unchecked: the source is thread-safe and never replaced; the descriptor is behind a lock
    private let source: any DispatchSourceProtocol
    #if os(Linux)
    /// The inotify descriptor (-1 once closed), behind a lock: the writer mutes and unmutes its
    /// watches while the source may be closing it on its queue.
    private let inotify: Locked<Int32>
    private let walPath: String
    /// Writes, truncation (a checkpoint resets the WAL), and the file replaced or removed.
    private static let hearing = UInt32(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
    /// Muted: only the file replaced or removed.
    private static let muted = UInt32(IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
    #endif

    /// Watches the database at `path`; `changed` runs on `queue` after changes (events that
    /// arrive together are reported once), told whether the files were only written (not
    /// removed, renamed or replaced). `nil` when the `-wal` file cannot be watched (it does not
    /// exist: the database is not in WAL mode).
    init?(database path: String, queue: DispatchQueue, changed: @escaping @Sendable (_ onlyWrites: Bool) -> Void) {
        let wal = path + "-wal"
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        let walWatch = inotify_add_watch(fd, wal, Self.hearing)
        guard walWatch >= 0, inotify_add_watch(fd, path, Self.hearing) >= 0 else {
            close(fd)
            return nil
        }
        let inotify = Locked(fd)
        self.inotify = inotify
        walPath = wal
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler {
            // Drain what arrived; only whether a file was more than written matters.
            var onlyWrites = true
            let size = MemoryLayout<inotify_event>.size
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(fd, &buffer, buffer.count)
                guard count > 0 else { break }
                var offset = 0
                while offset + size <= count {
                    let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                    let written = event.wd == walWatch
                        ? event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) == 0
                        : event.mask & ~UInt32(IN_MODIFY | IN_CLOSE_WRITE) == 0
                    if !written { onlyWrites = false }
                    offset += size + Int(event.len)
                }
            }
            changed(onlyWrites)
        }
        source.setCancelHandler {
            inotify.withLock { descriptor in
                close(descriptor)
                descriptor = -1
            }
        }
        source.resume()
        self.source = source
        #else
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let walDescriptor = open(wal, O_EVTONLY)
        guard walDescriptor >= 0 else { return nil }
        let directoryDescriptor = open(directory, O_EVTONLY)
        guard directoryDescriptor >= 0 else {
            close(walDescriptor)
            return nil
        }
        // Bit 1: the -wal file changed; bit 2: something else did.
        let group = DispatchSource.makeUserDataOrSource(queue: queue)
        group.setEventHandler { changed(group.data == 1) }   // only the -wal file written
        let walSource = DispatchSource.makeFileSystemObjectSource(fileDescriptor: walDescriptor,
                                                                  eventMask: [.write, .extend, .delete, .rename], queue: queue)
        walSource.setEventHandler { group.or(data: walSource.data.isDisjoint(with: [.delete, .rename]) ? 1 : 2) }
        walSource.setCancelHandler { close(walDescriptor) }
        let directorySource = DispatchSource.makeFileSystemObjectSource(fileDescriptor: directoryDescriptor,
                                                                        eventMask: [.write, .delete, .rename], queue: queue)
        directorySource.setEventHandler { group.or(data: 2) }
        directorySource.setCancelHandler { close(directoryDescriptor) }
        group.setCancelHandler {
            walSource.cancel()
            directorySource.cancel()
        }
        walSource.resume()
        directorySource.resume()
        group.resume()
        self.source = group
        #endif
    }

    /// Stops hearing writes to the `-wal` file, still hearing it removed or replaced: the store
    /// is about to write, and its own writes need no wake (they cost two thread hand-offs per
    /// commit). The store looks for other connections' commits when it unmutes (see
    /// ``OwnCommitFilter``). Elsewhere than on Linux, writes are still heard.
    func muteWrites() {
        #if os(Linux)
        setMask(Self.muted)
        #endif
    }

    /// Hears writes again.
    func unmuteWrites() {
        #if os(Linux)
        setMask(Self.hearing)
        #endif
    }

    #if os(Linux)
    /// Changes the `-wal` watch's events (a watch of the same file keeps its descriptor). A file
    /// replaced meanwhile gets a new watch, whose events then count as more than writes, and
    /// make the store look.
    private func setMask(_ mask: UInt32) {
        inotify.withLock { descriptor in
            guard descriptor >= 0 else { return }
            _ = inotify_add_watch(descriptor, walPath, mask)
        }
    }
    #endif

    /// Stops watching.
    func cancel() {
        source.cancel()
    }

    deinit { source.cancel() }
}
