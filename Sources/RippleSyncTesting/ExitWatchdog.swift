#if Sync
import Foundation
import Ripple
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process that runs a command and removes a directory once this process ends — however it
/// ends: a normal exit after a failed test, `exit`, a crash, `SIGKILL` — or once ``dismiss()``
/// is called, whichever comes first. A throwaway PostgreSQL cluster uses one to stop its server,
/// which would otherwise outlive the process that started it.
///
/// The watchdog reads a pipe (on Linux, a socket pair) whose other end only this process holds
/// (close-on-exec: no child inherits it). The kernel closes that end when this process ends, the
/// read returns, and the watchdog runs its command. It runs in a process group of its own, so that the Ctrl-C that
/// ends this process's group leaves it to do its work.
final class ExitWatchdog: Sendable {
    /// The watchdog's process id.
    let pid: pid_t
    /// This process's end of the pipe (`nil` once dismissed).
    private let writeEnd: Locked<Int32?>

    /// Starts a watchdog that, once this process ends, runs `command` (its output discarded,
    /// its failure ignored) and then removes `directory`.
    init(removing directory: String, after command: [String]) throws {
        var ends: [Int32] = [0, 0]
        #if canImport(Glibc)
        // A socket pair rather than a pipe: it is made close-on-exec at once (no child spawned
        // meanwhile by another thread can inherit it), and reads the same end of file.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw ThrowawayPostgresError("cannot make the watchdog's pipe: errno \(errno)")
        }
        #else
        guard pipe(&ends) == 0 else { throw ThrowawayPostgresError("cannot make the watchdog's pipe: errno \(errno)") }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        #endif
        defer { close(ends[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[0], 0)   // (dup2 clears close-on-exec)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        // bash closes every other descriptor it inherited (a descriptor a test holds open, kept
        // open by the watchdog, would hide that test's end of it), waits for the end of its
        // standard input, then acts.
        let script = #"""
            for fd in $(ls /proc/$$/fd 2>/dev/null); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
            directory="$1"; shift
            cat >/dev/null
            "$@"
            rm -rf -- "$directory"
            """#
        let argv = (["/bin/bash", "-c", script, "ripple-postgres-watchdog", directory] + command).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, &attributes, argv, environ)
        guard spawned == 0 else {
            close(ends[1])
            throw ThrowawayPostgresError("cannot start the watchdog: error \(spawned)")
        }
        self.pid = pid
        writeEnd = Locked<Int32?>(ends[1])
    }

    /// Lets the watchdog act now (as if this process had ended) and returns once it has: its
    /// command ran and the directory is gone. Later calls return at once.
    func dismiss() {
        guard let descriptor = writeEnd.withLock({ end in defer { end = nil }; return end }) else { return }
        close(descriptor)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    deinit { dismiss() }
}
#endif
