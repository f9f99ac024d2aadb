/// How a stress run (`StressTest.run(_:)`) goes.
public struct StressConfiguration: Sendable {
    /// The seed of everything random: data, queries, writes, subscriptions.
    public var seed: UInt64 = 1
    /// How long the writers write, in seconds (the checks after take a moment more).
    public var seconds: Double = 10
    /// Writer threads in this process (each also subscribes and cancels now and then).
    public var threads = 3
    /// Processes writing to the database, this one included: `processes - 1` children are
    /// started from ``childExecutable`` (`ripple stress-child`).
    public var processes = 1
    /// Replays the seed deterministically: one writer thread, `.immediate` delivery only, no
    /// child process, no polling for other processes' writes. Each write is then also followed by
    /// a check that every subscriber already shows its query's new result.
    public var singleThreaded = false
    /// The most subscriptions open at once (thousands are fine).
    public var maxSubscribers = 200
    /// Stops the writers after about this many operations (with ``seconds``, whichever comes first).
    public var maxOperations: Int?
    /// The share of writes (0…1) committed outside a `store.write`: in
    /// `store.writeWithoutTransaction`, in a migration, or by a connection that is not Ripple's
    /// (as the `sqlite3` shell writes), which the store then adopts. Default 0.
    public var outsideWrites = 0.0
    /// After the last write, how long without any event the run waits for subscribers still
    /// behind the final result before it calls their final event missed, in seconds. (Each
    /// arriving event restarts the wait; a run whose subscribers all caught up waits not at all.)
    public var settleQuietPeriod: Double = 3
    /// Says each finding as it is found (through ``log``).
    public var verbose = false
    /// Where to create the database; by default a new temporary directory, removed when the run passes.
    public var directory: String?
    /// The `ripple` executable, which runs child writers as `ripple stress-child …` (needed when
    /// ``processes`` > 1).
    public var childExecutable: String?
    /// Receives progress lines and, when ``verbose``, findings as they come (e.g. print to stderr).
    public var log: (@Sendable (String) -> Void)?

    /// The default configuration: 10 seconds, 3 threads, one process, seed 1.
    public init() {}

    var effectiveThreads: Int { singleThreaded ? 1 : max(1, threads) }
    var effectiveProcesses: Int { singleThreaded ? 1 : max(1, processes) }
}
