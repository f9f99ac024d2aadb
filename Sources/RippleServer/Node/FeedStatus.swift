#if Sync
/// Where the node's feed stands: what `/health` says, what `/metrics` measures the lag from,
/// and how far a written mutation's commit has been read.
struct FeedStatus: Sendable {
    /// The Postgres position the feed has read through.
    var readThrough = PGOutput.LSN(0)
    /// When the feed last stood where Postgres had flushed.
    var caughtUpAt: ContinuousClock.Instant?
    /// When the feed last made progress (a look answered, a transaction applied).
    var progressAt: ContinuousClock.Instant?
    /// Whether the feed has copied Postgres (or caught up from its slot) and the hub exists.
    var ready = false
    /// Why the feed failed last, while it tries again.
    var failure: String?
}
#endif
