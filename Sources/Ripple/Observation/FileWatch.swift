import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Calls back when files change on disk: how a store hears that another process committed (a
/// commit in WAL mode appends to the `-wal` file; a checkpoint or a write without WAL changes the
/// database file), without polling. The callback only says "look": `PRAGMA data_version` and the
/// change log decide what changed.
///
/// Linux: one inotify descriptor read by a dispatch source. Other platforms: a dispatch
/// file-system source per file. Watching stops when the watch is released (or ``cancel()``).
final class FileWatch: @unchecked Sendable {   // @unchecked: its one field, a dispatch source, is thread-safe and never replaced
    private let source: any DispatchSourceProtocol

    /// Watches the files at `paths` that exist now; `changed` runs on `queue` after changes
    /// (events that arrive together are reported once). `nil` when none can be watched.
    init?(paths: [String], queue: DispatchQueue, changed: @escaping @Sendable () -> Void) {
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        var watching = false
        for path in paths {
            // Writes, truncation (a checkpoint resets the WAL), and the file replaced or removed.
            let mask = UInt32(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
            if inotify_add_watch(fd, path, mask) >= 0 { watching = true }
        }
        guard watching else {
            close(fd)
            return nil
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler {
            // Drain what arrived; its content does not matter, only that something changed.
            var buffer = [UInt8](repeating: 0, count: 4096)
            while read(fd, &buffer, buffer.count) > 0 {}
            changed()
        }
        source.setCancelHandler { close(fd) }
        source.resume()
        self.source = source
        #else
        let descriptors = paths.map { open($0, O_EVTONLY) }.filter { $0 >= 0 }
        guard !descriptors.isEmpty else { return nil }
        let group = DispatchSource.makeUserDataAddSource(queue: queue)
        group.setEventHandler { changed() }
        var sources: [any DispatchSourceFileSystemObject] = []
        for fd in descriptors {
            let file = DispatchSource.makeFileSystemObjectSource(fileDescriptor: fd, eventMask: [.write, .extend, .delete, .rename],
                                                                 queue: queue)
            file.setEventHandler { group.add(data: 1) }
            file.setCancelHandler { close(fd) }
            file.resume()
            sources.append(file)
        }
        group.setCancelHandler { for file in sources { file.cancel() } }
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
