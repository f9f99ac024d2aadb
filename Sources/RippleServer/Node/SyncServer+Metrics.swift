#if Sync
import Foundation

extension SyncServer {
    /// The node's figures in Prometheus's text format, as `GET /metrics` serves them: the
    /// exposition of the node's own registry (swift-prometheus), with the figures read on
    /// demand (the replica's version, position and lag; the live queries) brought up to date
    /// first. The metrics are listed in the catalog's "Running nodes" page.
    public func metricsText() async -> String {
        let status = feedStatus.withLock { $0 }
        let flushed = (try? await feed.flushedPosition()) ?? status.readThrough
        let lagBytes = flushed.value > status.readThrough.value ? flushed.value - status.readThrough.value : 0
        let behind = lagBytes == 0 ? Duration.zero : status.caughtUpAt.map { ContinuousClock.now - $0 } ?? .zero
        let (version, position) = timeline.completed
        metrics.liveQueries.record(hub?.liveQueryCount ?? 0)
        metrics.replicaVersion.record(version)
        metrics.replicaPosition.record(Double(position.value))
        metrics.replicaLagBytes.record(Double(lagBytes))
        metrics.replicaLagSeconds.record(Double(behind.components.seconds) + Double(behind.components.attoseconds) / 1e18)
        return metrics.registry.emitToString()
    }

    /// A socket's token was refused (at `hello` or in an `auth` renewal): counted by its code in
    /// `ripple_refused_tokens_total`, and logged at info with its code and why — never the token.
    func tokenRefused(_ refusal: TokenRefusal) {
        metrics.refusedTokens[refusal.code]?.increment()
        logger.info("a token was refused: \(refusal.code.rawValue): \(refusal.message)")
    }
}
#endif
