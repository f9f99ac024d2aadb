/// The decisions of ``OwnCommitFilter`` as a value: when the file watch wakes, when the writer is
/// taken and released, and when a settling look is due, whether the store must look for other
/// connections' commits, and when to look at the wal-index header again. No file, lock, clock or
/// timer: the filter reads the header and the clock, passes them in, and performs what each
/// event returns.
///
/// `Header` is the wal-index header (``WALIndexHeader``; any equatable value in the tests):
/// the same header twice means no commit in between. Instants are in nanoseconds of a monotonic
/// clock (`DispatchTime.uptimeNanoseconds`).
struct CommitDetectionState<Header: Equatable & Sendable>: Sendable {
    /// What the filter does after a wake (``wake(at:header:)``) or a decision
    /// (``decide(at:header:)``).
    struct Actions: Equatable, Sendable {
        /// Look for other connections' commits (``Store/noticeExternalWrites()``).
        var look = false
        /// Schedule the first settling look, ``settleDelays``[0] from now.
        var armSettling = false
    }

    /// What the filter does after the writer's release (``writerReleased(index:header:foreign:at:)``).
    struct ReleaseActions: Equatable, Sendable {
        /// Decide now whether to look (``decide(at:header:)``), the look queued.
        var decide = false
        /// Schedule the first settling look, ``settleDelays``[0] from now.
        var armSettling = false
    }

    /// What a settling look (``settle(header:)``) found.
    struct SettleActions: Equatable, Sendable {
        /// Look for other connections' commits.
        var look = false
        /// When the next settling look is due (`nil`: settled).
        var next: UInt64?
    }

    /// When the settling looks come, after the wake that found nothing new, in milliseconds.
    static var settleDelays: [UInt64] { [1, 3, 10, 30, 100, 300, 1_000, 2_000] }

    /// Whether a file watch is on (otherwise every event is ignored).
    private(set) var active = false
    /// The writer's mapping of the wal-index (an address; 0 until known or without one).
    private(set) var index: UInt = 0
    /// The header when the store last knew of every commit in it; `nil` when in doubt.
    private(set) var known: Header?
    /// Whether the writer is in use.
    private(set) var writing = false
    /// Whether the watch woke while the writer was in use (its release then decides).
    private(set) var wokeWhileWriting = false
    /// The next settling look (an index into ``settleDelays``); `nil` when settled.
    private(set) var settleStep: Int?
    /// Whether the first settling look is scheduled (a wake in a burst then only moves the start
    /// of the following ones: no timer is rescheduled per commit).
    private(set) var firstSettleArmed = false
    /// When the settling looks started.
    private(set) var settleStart: UInt64 = 0
    /// The `data_version` of the last look started because the store had not noticed another
    /// connection's commit when it released the writer (a look that failed is not repeated for
    /// the same one: the next change is).
    private(set) var lookedForDataVersion: Int64?

    /// A watch starts: from a clean slate, deciding.
    mutating func activate() {
        self = Self()
        active = true
    }

    /// The watch is gone: back to a clean slate, ignoring every event.
    mutating func deactivate() {
        self = Self()
    }

    /// The watch woke (the files were only written): decides now, unless the writer is in use,
    /// whose release then does.
    mutating func wake(at now: UInt64, header: (UInt) -> Header?) -> Actions {
        guard active else { return Actions() }
        if writing {
            wokeWhileWriting = true
            return Actions()
        }
        return decide(at: now, header: header)
    }

    /// Looks when the header (read by `header` from the mapping) differs from the known one, or
    /// when either is unknown; settling starts again either way.
    mutating func decide(at now: UInt64, header: (UInt) -> Header?) -> Actions {
        let arm = restartSettling(at: now)
        return Actions(look: headerMoved(header), armSettling: arm)
    }

    /// A settling look at the header is due: whether to look, and when the next one is.
    mutating func settle(header: (UInt) -> Header?) -> SettleActions {
        firstSettleArmed = false
        guard active, let step = settleStep else { return SettleActions() }
        let moved: Bool
        if writing {
            wokeWhileWriting = true   // the writer's release decides
            moved = false
        } else {
            moved = headerMoved(header)
        }
        let following = step + 1
        settleStep = following < Self.settleDelays.count ? following : nil
        return SettleActions(look: moved, next: settleStep.map { settleStart + Self.settleDelays[$0] * 1_000_000 })
    }

    /// The writer is about to be used; returns whether the watch must stop hearing writes
    /// (``FileWatch/muteWrites()``).
    mutating func writerWillStart() -> Bool {
        guard active else { return false }
        writing = true
        return true
    }

    /// The writer, still held, is about to be released (the watch hears writes again): `index`
    /// is its mapping of the wal-index, `header` the header read from it before `foreign`, the
    /// `data_version` and whether the store noticed every other connection's commit (`nil`:
    /// unknown). Keeps the header when the store knows of every commit in it; decides when the
    /// watch woke meanwhile, or when another connection committed unheard (once per
    /// `data_version`); settles unless a settling look is pending.
    mutating func writerReleased(index: UInt, header: Header?, foreign: (dataVersion: Int64, noticed: Bool)?,
                                 at now: UInt64) -> ReleaseActions {
        guard active else { return ReleaseActions() }
        self.index = index
        known = foreign?.noticed == true ? header : nil
        writing = false
        defer { wokeWhileWriting = false }
        // Commits of others that the muted watch did not hear, once per data_version.
        var unheard = false
        if let foreign, !foreign.noticed, foreign.dataVersion != lookedForDataVersion {
            lookedForDataVersion = foreign.dataVersion
            unheard = true
        }
        // Settles, as after a wake: another connection may have written its commit's frames
        // while the watch was muted and publish it in the header only after this check (with
        // `synchronous = FULL` a sync sits between), and no file event would follow. A look is
        // scheduled only when none is pending: in a burst of writes the pending one comes first
        // (settling reschedules itself), so the writer sets no timer per commit.
        let arm = restartSettling(at: now, onlyWhenNonePending: true)
        return ReleaseActions(decide: wokeWhileWriting || unheard, armSettling: arm)
    }

    /// Whether the header moved past the known one (or either is unknown).
    private func headerMoved(_ header: (UInt) -> Header?) -> Bool {
        guard index != 0, let known else { return true }
        return header(index) != known
    }

    /// The settling looks start again from `now`. Returns whether the first one must be
    /// scheduled: unless it is already (in a burst only the start moves), or,
    /// `onlyWhenNonePending`, unless any settling look is pending.
    private mutating func restartSettling(at now: UInt64, onlyWhenNonePending: Bool = false) -> Bool {
        let arm = onlyWhenNonePending ? settleStep == nil : !firstSettleArmed
        settleStep = 0
        settleStart = now
        if arm { firstSettleArmed = true }
        return arm
    }
}
