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
///   or replaced). inotify watches by path and holds no descriptor of the files.
/// * Other platforms: dispatch file-system sources on the `-wal` file and on the directory (an
///   entry deleted, renamed or created: the file replaced). Never on the database file itself:
///   closing a descriptor of it would drop the process's POSIX locks on it, which SQLite's
///   connections rely on. SQLite takes no such lock on the `-wal` file.
///
/// Watching stops when the watch is released (or ``cancel()``).
final class FileWatch: @unchecked Sendable {   // @unchecked: its one field, a dispatch source, is thread-safe and never replaced
    private let source: any DispatchSourceProtocol

    /// Watches the database at `path`; `changed` runs on `queue` after changes (events that
    /// arrive together are reported once), told whether only the `-wal` file changed. `nil` when
    /// the `-wal` file cannot be watched (it does not exist: the database is not in WAL mode).
    init?(database path: String, queue: DispatchQueue, changed: @escaping @Sendable (_ onlyWAL: Bool) -> Void) {
        let wal = path + "-wal"
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        // Writes, truncation (a checkpoint resets the WAL), and the file replaced or removed.
        let mask = UInt32(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
        let walWatch = inotify_add_watch(fd, wal, mask)
        guard walWatch >= 0, inotify_add_watch(fd, path, mask) >= 0 else {
            close(fd)
            return nil
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler {
            // Drain what arrived; only which files changed matters.
            var onlyWAL = true
            let size = MemoryLayout<inotify_event>.size
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(fd, &buffer, buffer.count)
                guard count > 0 else { break }
                var offset = 0
                while offset + size <= count {
                    let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                    if event.wd != walWatch || event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
                        onlyWAL = false
                    }
                    offset += size + Int(event.len)
                }
            }
            changed(onlyWAL)
        }
        source.setCancelHandler { close(fd) }
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
        group.setEventHandler { changed(group.data == 1) }
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

    /// Stops watching.
    func cancel() {
        source.cancel()
    }

    deinit { source.cancel() }
}
