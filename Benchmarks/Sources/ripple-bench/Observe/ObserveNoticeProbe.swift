import ArgumentParser
import BenchSQLite
import Foundation
import Ripple

/// What `observe --breakdown --workload O4` adds to Ripple's observer process: a thread of its
/// own, woken by an inotify watch of its own on the database file and its WAL (the files and
/// events Ripple's watch uses), recording when each change woke it.
///
/// * ``Mode/passive``: beside the store's own watch, it only records when the kernel's notice
///   reached a waiting thread.
/// * ``Mode/notices``: in place of the store's watch (turned off), it calls
///   `noticeExternalWrites()` on each wake, as the watch's handler does, and times the call.
///   `PRAGMA data_version` on a connection of its own, read before and after the call, tells
///   whether a commit was there to notice (a wake can come before the commit is visible: the WAL
///   is written first, the commit published after) or became visible during the call.
final class ObserveNoticeProbe: @unchecked Sendable {   // @unchecked: `wakes` and `stopped` are locked boxes; the rest is set once, before the thread starts
    enum Mode: String, ExpressibleByArgument {
        case passive, notices
    }

    /// One wake of the probe's thread (``MonotonicClock`` nanoseconds).
    struct Wake: Codable, Sendable {
        /// When the thread returned from waiting.
        var woke: UInt64
        /// ``Mode/notices``: when `noticeExternalWrites()` returned, and the probe connection's
        /// data version before and after the call.
        var returned: UInt64?
        var versionBefore: Int64?
        var versionAfter: Int64?
    }

    private let fd: Int32
    private let store: Store?
    private let connection: OpaquePointer?
    private let dataVersion: OpaquePointer?
    private let wakes = ObserveLocked<[Wake]>([])
    private let stopped = ObserveLocked(false)
    private let ended = DispatchSemaphore(value: 0)

    /// Starts watching the file at `path` and its WAL; in ``Mode/notices``, `store` (whose own
    /// watch must be off) is told on each wake.
    init(path: String, mode: Mode, store: Store) throws {
        #if os(Linux)
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        // The mask of Ripple's watch (FileWatch).
        let mask = UInt32(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
        guard fd >= 0, inotify_add_watch(fd, path + "-wal", mask) >= 0, inotify_add_watch(fd, path, mask) >= 0 else {
            throw ObserveFailure("probe: cannot watch \(path) with inotify")
        }
        #else
        throw ObserveFailure("probe: inotify is Linux only")
        #endif
        if mode == .notices {
            self.store = store
            let connection = CFloor.open(path)
            self.connection = connection
            dataVersion = ObserveFloor.prepare(connection, "PRAGMA data_version")
        } else {
            (self.store, connection, dataVersion) = (nil, nil, nil)
        }
        let thread = Thread { [self] in
            run()
            ended.signal()
        }
        thread.qualityOfService = .userInitiated
        thread.start()
    }

    /// Stops the thread; returns every wake, in order.
    func stop() -> [Wake] {
        stopped.set(true)
        ended.wait()
        close(fd)
        if let dataVersion { sqlite3_finalize(dataVersion) }
        if let connection { sqlite3_close(connection) }
        return wakes.get()
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopped.get() {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            var wake = Wake(woke: MonotonicClock.now())
            while read(fd, &buffer, buffer.count) > 0 {}
            if let store {
                wake.versionBefore = currentDataVersion()
                try? store.noticeExternalWrites()
                wake.returned = MonotonicClock.now()
                wake.versionAfter = currentDataVersion()
            }
            wakes.withLock { $0.append(wake) }
        }
    }

    /// The probe connection's `PRAGMA data_version`: it moves when another connection commits.
    private func currentDataVersion() -> Int64 {
        guard let dataVersion, sqlite3_step(dataVersion) == SQLITE_ROW else { return -1 }
        defer { sqlite3_reset(dataVersion) }
        return sqlite3_column_int64(dataVersion, 0)
    }
}
