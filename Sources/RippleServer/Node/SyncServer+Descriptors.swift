#if Sync
import Foundation

extension SyncServer {
    /// Raises this process's soft limit of open descriptors to its hard limit, as a node of many
    /// sockets needs (`ripple-server` does so when it starts). The hard limit stays the ceiling
    /// (`ulimit -Hn`; systemd's `LimitNOFILE=`).
    public static func raiseDescriptorLimit() {
        guard var limit = descriptorLimit(), limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(descriptorResource, &limit)
    }

    /// The most connections the node holds open at once: its limit of open descriptors less a
    /// reserve (`nil`: no limit). Beyond it, new connections wait in the listen backlog until
    /// one closes. A process that ran out of descriptors would not only refuse connections:
    /// libdispatch opens `/proc/<thread>/stat` to watch its worker threads, and crashes the
    /// process (SIGILL) when it cannot; so would the first timer on a clock, SQLite opening a
    /// reader, a new Postgres connection. The reserve is kept for them.
    static func connectionLimit() -> Int? {
        guard let limit = descriptorLimit(), limit.rlim_cur < rlim_t(Int.max) else { return nil }   // (unlimited: none)
        let descriptors = Int(limit.rlim_cur)
        return max(1, descriptors - max(64, descriptors / 8))
    }

    /// `RLIMIT_NOFILE` as `getrlimit` and `setrlimit` take it here.
    #if os(Linux)
    private static var descriptorResource: __rlimit_resource_t { __rlimit_resource_t(RLIMIT_NOFILE.rawValue) }
    #else
    private static var descriptorResource: Int32 { RLIMIT_NOFILE }
    #endif

    /// The process's limits of open descriptors (soft and hard), or `nil` when unknown.
    private static func descriptorLimit() -> rlimit? {
        var limit = rlimit()
        return getrlimit(descriptorResource, &limit) == 0 ? limit : nil
    }
}
#endif
