import Foundation
import RippleSQLite

/// The header of a WAL database's wal-index (the first 48 bytes of its `-shm` file), which every
/// commit rewrites: the same header twice means no commit in between.
struct WALIndexHeader: Equatable, Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)

    /// The header in `index` (a mapping from `ripple_wal_index`), or `nil` while a commit is
    /// rewriting it.
    init?(index: UnsafeRawPointer) {
        let read = withUnsafeMutableBytes(of: &words) { bytes in
            ripple_wal_index_header(index, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard read == 1 else { return nil }
    }

    /// The count of write transactions committed to the WAL since the wal-index was built
    /// (`iChange`, bytes 8–11): every commit, Ripple's or not, adds one; nothing else does. It
    /// starts again when the wal-index is rebuilt (all connections closed, then one opened).
    var transactionCount: UInt32 {
        withUnsafeBytes(of: words) { $0.load(fromByteOffset: 8, as: UInt32.self) }
    }

    static func == (lhs: WALIndexHeader, rhs: WALIndexHeader) -> Bool {
        lhs.words == rhs.words
    }
}

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
final class OwnCommitFilter: @unchecked Sendable {   // @unchecked: state is behind a lock; the timer is thread-safe and never replaced
    private struct State {
        /// Whether a file watch is on (otherwise every call returns at once).
        var active = false
        /// The writer's mapping of the wal-index (an address; 0 until known or without one).
        var index: UInt = 0
        /// The header when the store last knew of every commit in it; `nil` when in doubt.
        var known: WALIndexHeader?
        var writing = false
        var wokeWhileWriting = false
        /// The next settling look (an index into ``settleDelays``); `nil` when settled.
        var settleStep: Int?
        /// Whether the first settling look is scheduled (a wake in a burst then only moves the
        /// start of the following ones: no timer is rescheduled per commit).
        var firstSettleArmed = false
        var settleStart = DispatchTime.now()
        var look: (@Sendable () -> Void)?
        /// The watch, muted while the writer is held.
        var watch: FileWatch?
        /// The `data_version` of the last look started because the store had not noticed
        /// another connection's commit when it released the writer (a look that failed is not
        /// repeated for the same one: the next change is).
        var lookedForDataVersion: Int64?
    }

    /// When the settling looks come, after the wake that found nothing new, in milliseconds.
    private static let settleDelays = [1, 3, 10, 30, 100, 300, 1_000, 2_000]

    private let state = Locked(State())
    /// For tests: runs on the writer as it is released, while the watch is still muted (another
    /// connection's commit then is not heard: the release must notice it).
    let releaseGate = Locked<(@Sendable () -> Void)?>(nil)
    private let queue: DispatchQueue
    private let settleTimer: any DispatchSourceTimer

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
            state.active = true
            state.look = look
        }
    }

    /// The watch whose wakes this filter decides, muted while the writer is held.
    func attach(_ watch: FileWatch) {
        state.withLock { state in
            if state.active { state.watch = watch }
        }
    }

    /// Stops: the watch is gone.
    func deactivate() {
        state.withLock { $0 = State() }
        settleTimer.schedule(deadline: .distantFuture)
    }

    /// The watch woke (on the queue): looks when the header moved past what the store knows.
    func wake() {
        let look = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.active else { return nil }
            if state.writing {
                state.wokeWhileWriting = true
                return nil
            }
            return state.look
        }
        guard let look else { return }
        decide(look: look, now: true)
    }

    /// Runs `look` (now, on the queue, or queued) when the header differs from the known one;
    /// then settles either way.
    private func decide(look: @escaping @Sendable () -> Void, now: Bool) {
        let (moved, arm) = state.withLock { state -> (Bool, Bool) in
            let arm = Self.restartSettling(&state)
            guard let index = UnsafeRawPointer(bitPattern: state.index), let known = state.known else { return (true, arm) }
            return (WALIndexHeader(index: index) != known, arm)
        }
        if arm { armSettling() }
        if moved {
            if now { look() } else { queue.async(execute: look) }
        }
    }

    /// A settling look at the header (on the queue).
    private func settle() {
        let (look, next) = state.withLock { state -> ((@Sendable () -> Void)?, DispatchTime?) in
            state.firstSettleArmed = false
            guard state.active, let step = state.settleStep else { return (nil, nil) }
            let moved: Bool
            if state.writing {
                state.wokeWhileWriting = true   // the writer's release decides
                moved = false
            } else if let index = UnsafeRawPointer(bitPattern: state.index), let known = state.known {
                moved = WALIndexHeader(index: index) != known
            } else {
                moved = true
            }
            let following = step + 1
            state.settleStep = following < Self.settleDelays.count ? following : nil
            let next = state.settleStep.map { state.settleStart + .milliseconds(Self.settleDelays[$0]) }
            return (moved ? state.look : nil, next)
        }
        if let next { settleTimer.schedule(deadline: next) }
        look?()
    }

    /// The writer is about to be used (by anything: a write, a look, a migration).
    func writerWillStart() {
        let watch = state.withLock { state -> FileWatch? in
            guard state.active else { return nil }
            state.writing = true
            return state.watch
        }
        watch?.muteWrites()
    }

    /// The writer, still held, is about to be released: keeps the header when the store knows of
    /// every commit in it, and answers a wake that came meanwhile.
    func writerWillRelease(_ db: Database) {
        let (active, mapped, watch) = state.withLock { ($0.active, $0.index, $0.watch) }
        guard active else { return }
        if let gate = releaseGate.withLock({ $0 }) { gate() }
        // Hearing again before looking: a commit after the look below wakes the watch. (A watch
        // attached while the writer was held was never muted: unmuting it changes nothing.)
        watch?.unmuteWrites()
        // The mapping stays while the connection is open: asked of the VFS once per activation.
        let index = mapped != 0 ? mapped : ripple_wal_index(db.handle).map { UInt(bitPattern: $0) } ?? 0
        // The header first, then the check that nobody else committed: a commit made after the
        // header was read is seen in data_version, and the header is not trusted.
        let header = UnsafeRawPointer(bitPattern: index).flatMap(WALIndexHeader.init(index:))
        let foreign = db.changeLog?.foreignCommits(db, header: header)
        let (look, arm) = state.withLock { state -> ((@Sendable () -> Void)?, Bool) in
            guard state.active else { return (nil, false) }
            state.index = index
            state.known = foreign?.noticed == true ? header : nil
            state.writing = false
            defer { state.wokeWhileWriting = false }
            // Commits of others that the muted watch did not hear, once per data_version.
            var unheard = false
            if let foreign, !foreign.noticed, foreign.dataVersion != state.lookedForDataVersion {
                state.lookedForDataVersion = foreign.dataVersion
                unheard = true
            }
            // Settles, as after a wake: another connection may have written its commit's frames
            // while the watch was muted and publish it in the header only after this check
            // (with `synchronous = FULL` a sync sits between), and no file event would follow.
            // A look is scheduled only when none is pending: in a burst of writes the pending
            // one comes first (settling reschedules itself on its queue), so the writer sets no
            // timer per commit.
            let arm = Self.restartSettling(&state, onlyWhenNonePending: true)
            return (state.wokeWhileWriting || unheard ? state.look : nil, arm)
        }
        if arm { armSettling() }
        if let look { decide(look: look, now: false) }
    }

    /// Under the lock: the settling looks start again from now. Returns whether the first one
    /// must be scheduled (``armSettling()``): unless it is already (in a burst only the start
    /// moves), or, `onlyWhenNonePending`, unless any settling look is pending.
    private static func restartSettling(_ state: inout State, onlyWhenNonePending: Bool = false) -> Bool {
        let arm = onlyWhenNonePending ? state.settleStep == nil : !state.firstSettleArmed
        state.settleStep = 0
        state.settleStart = .now()
        if arm { state.firstSettleArmed = true }
        return arm
    }

    /// Schedules the first settling look.
    private func armSettling() {
        settleTimer.schedule(deadline: .now() + .milliseconds(Self.settleDelays[0]))
    }
}
