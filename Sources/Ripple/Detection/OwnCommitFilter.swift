import Foundation
import RippleSQLite

/// Decides, when the file watch wakes, whether the store must look for other connections'
/// commits (``Store/noticeExternalWrites()``, which takes the writer) — without taking it.
///
/// The store's own commits would wake the watch as much as others'. So while the store holds its
/// writer, the watch does not hear writes to the `-wal` file (``FileWatch/muteWrites()``, on
/// Linux; checkpoints, which write the database file, are rare and still heard); when the writer
/// is released, the watch hears them again, and then the filter checks that no other connection
/// committed since the writer last looked: another connection's commit made while the writer was
/// held, and not taken in by the store's own (see ``ChangeLog``), makes the store look, once per
/// `data_version`. After a commit of the store's own, the wal-index header answers (its count of
/// transactions is one past the count the commit read under the write lock); otherwise, or when
/// it is not, `PRAGMA data_version` does.
///
/// Where the watch still hears the store's own writes, or for a wake that comes late: after each
/// use of the writer, the filter keeps the wal-index header as it was, when no other connection
/// committed since the writer last looked (checked as above, after the header was read). A wake
/// that finds the same header needs no look; a wake while the writer is in use is answered when
/// it is released. So the store's own commits cost at most a read of 48 bytes, and never take
/// the writer.
///
/// A wake can also come before the commit it announces is visible: a writer appends its frames to
/// the `-wal` file (the events) before it publishes them in the header (no event; with
/// `synchronous=FULL` an `fsync` sits in between). So after a wake that found nothing new, the
/// filter looks at the header again a few times, from 1 ms to 2 s after it ("settling"), and
/// looks for commits as soon as it changed. It settles after each release of the writer too:
/// another connection may have written its frames while the watch was muted, and publish them
/// only after the release's check, with no event to follow.
///
/// The decisions are ``CommitDetectionState``'s (a value, tested without files); this class reads
/// the header, the clock and the change log, and performs them: the look, the watch's muting, the
/// settling timer.
final class OwnCommitFilter: @unchecked Sendable {   // @unchecked: state is behind a lock; the timer is thread-safe and never replaced
    private struct State {
        var decisions = CommitDetectionState<WALIndexHeader>()
        var look: (@Sendable () -> Void)?
        /// The watch, muted while the writer is held.
        var watch: FileWatch?
    }

    private let state = Locked(State())
    /// For tests: runs on the writer as it is released, while the watch is still muted (another
    /// connection's commit then is not heard: the release must notice it).
    let releaseGate = Locked<(@Sendable () -> Void)?>(nil)
    private let queue: DispatchQueue
    private let settleTimer: any DispatchSourceTimer

    /// The header in the wal-index mapped at `index` (`nil` while a commit rewrites it).
    private static func header(_ index: UInt) -> WALIndexHeader? {
        UnsafeRawPointer(bitPattern: index).flatMap(WALIndexHeader.init(index:))
    }

    /// A filter whose looks (and settling) run on `queue`, one at a time.
    init(queue: DispatchQueue) {
        self.queue = queue
        settleTimer = DispatchSource.makeTimerSource(queue: queue)
        settleTimer.schedule(deadline: .distantFuture)
        settleTimer.setEventHandler { [weak self] in self?.settle() }
        settleTimer.activate()
    }

    deinit { settleTimer.cancel() }

    /// Starts deciding for a watch: `look` runs (on the queue) when other connections may have
    /// committed.
    func activate(look: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state = State()
            state.decisions.activate()
            state.look = look
        }
    }

    /// The watch whose wakes this filter decides, muted while the writer is held.
    func attach(_ watch: FileWatch) {
        state.withLock { state in
            if state.decisions.active { state.watch = watch }
        }
    }

    /// Stops: the watch is gone.
    func deactivate() {
        state.withLock { $0 = State() }
        settleTimer.schedule(deadline: .distantFuture)
    }

    /// The watch woke (on the queue): looks when the header moved past what the store knows.
    func wake() {
        let (actions, look) = state.withLock { state in
            (state.decisions.wake(at: DispatchTime.now().uptimeNanoseconds, header: Self.header), state.look)
        }
        if actions.armSettling { armSettling() }
        if actions.look { look?() }
    }

    /// A settling look at the header (on the queue).
    private func settle() {
        let (actions, look) = state.withLock { state in (state.decisions.settle(header: Self.header), state.look) }
        if let next = actions.next { settleTimer.schedule(deadline: DispatchTime(uptimeNanoseconds: next)) }
        if actions.look { look?() }
    }

    /// The writer is about to be used (by anything: a write, a look, a migration).
    func writerWillStart() {
        let watch = state.withLock { state in state.decisions.writerWillStart() ? state.watch : nil }
        watch?.muteWrites()
    }

    /// The writer, still held, is about to be released: keeps the header when the store knows of
    /// every commit in it, and answers a wake that came meanwhile.
    func writerWillRelease(_ db: Database) {
        let (active, mapped, watch) = state.withLock { ($0.decisions.active, $0.decisions.index, $0.watch) }
        guard active else { return }
        if let gate = releaseGate.withLock({ $0 }) { gate() }
        // Hearing again before looking: a commit after the look below wakes the watch. (A watch
        // attached while the writer was held was never muted: unmuting it changes nothing.)
        watch?.unmuteWrites()
        // The mapping stays while the connection is open: asked of the VFS once per activation.
        let index = mapped != 0 ? mapped : ripple_wal_index(db.handle).map { UInt(bitPattern: $0) } ?? 0
        // The header first, then the check that nobody else committed: a commit made after the
        // header was read is seen in data_version, and the header is not trusted.
        let header = Self.header(index)
        let foreign = db.changeLog?.foreignCommits(db, header: header)
        let (actions, look) = state.withLock { state in
            (state.decisions.writerReleased(index: index, header: header, foreign: foreign,
                                            at: DispatchTime.now().uptimeNanoseconds), state.look)
        }
        if actions.armSettling { armSettling() }
        guard actions.decide, let look else { return }
        let decided = state.withLock { $0.decisions.decide(at: DispatchTime.now().uptimeNanoseconds, header: Self.header) }
        if decided.armSettling { armSettling() }
        if decided.look { queue.async(execute: look) }
    }

    /// Schedules the first settling look.
    private func armSettling() {
        settleTimer.schedule(deadline: .now() + .milliseconds(Int(CommitDetectionState<WALIndexHeader>.settleDelays[0])))
    }
}
