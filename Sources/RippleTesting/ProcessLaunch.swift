import Foundation

/// Serializes the launches of child processes in a test process: Foundation's `Process.run()` on
/// Linux was seen to crash (a bad pointer in a copy inside it) while many launches ran at once
/// from different threads — the whole suite runs hundreds of `psql`, `pg_ctl` and tool
/// processes from parallel tests. Only the launch is serialized: the children run, and are
/// waited for, side by side.
package enum ProcessLaunch {
    private static let lock = NSLock()

    /// Starts `process`, one launch at a time.
    package static func run(_ process: Process) throws {
        try lock.withLock { try process.run() }
    }
}
