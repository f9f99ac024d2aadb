#if Sync
import CoreMetrics
import Prometheus
import RippleSync

/// The node's figures, as swift-metrics objects of the node's own Prometheus registry
/// (``SyncServer/metricsText()`` and `GET /metrics` are that registry's exposition).
///
/// Each node has its own ``PrometheusCollectorRegistry`` and makes its metrics with a
/// `PrometheusMetricsFactory` of it, rather than through the process-wide `MetricsSystem`:
/// that can be bootstrapped once per process, and a process may run several nodes (the tests
/// do), each of which must show its own figures. An application that bootstraps the global
/// system keeps its own metrics there; the node's stay on its `/metrics`.
final class SyncMetrics: Sendable {
    /// The registry `/metrics` shows.
    let registry = PrometheusCollectorRegistry()

    /// Open WebSocket connections.
    let sockets: MetricCell<Int>
    /// Subscriptions held by open sockets.
    let subscriptions: MetricCell<Int>
    /// Frames and bytes sent to clients.
    let sent: MetricCell<(frames: Int, bytes: Int)>
    /// Sockets dropped for not reading their frames.
    let droppedSockets: MetricCell<Int>
    /// Sockets refused beyond the configured limit.
    let refusedSockets: MetricCell<Int>
    /// Times the feed failed and started again.
    let feedRestarts: MetricCell<Int>
    /// Tokens refused at `hello` or in an `auth` renewal, by the refusal's code
    /// (``refusalCodes``): `ripple_refused_tokens_total{code="token_wrong_audience"}`.
    let refusedTokens: [SyncErrorCode: CoreMetrics.Counter]

    /// The codes a token is refused with (``TokenRefusal/code``): `unauthorized` and the
    /// `token_…` codes the authenticator gives (not `token_identity_changed`: a renewal's token
    /// that is valid but names another identity).
    static let refusalCodes = SyncErrorCode.allCases.filter {
        $0 == .unauthorized || ($0.rawValue.hasPrefix("token_") && $0 != .tokenIdentityChanged)
    }

    /// Figures read when `/metrics` is asked (see ``SyncServer/metricsText()``).
    let liveQueries: CoreMetrics.Gauge
    let replicaVersion: CoreMetrics.Gauge
    let replicaPosition: CoreMetrics.Gauge
    let replicaLagBytes: CoreMetrics.Gauge
    let replicaLagSeconds: CoreMetrics.Gauge

    init() {
        let factory = PrometheusMetricsFactory(registry: registry)
        func gauge(_ name: String) -> CoreMetrics.Gauge { CoreMetrics.Gauge(label: name, factory: factory) }
        func counter(_ name: String) -> CoreMetrics.Counter { CoreMetrics.Counter(label: name, factory: factory) }
        func gaugeCell(_ name: String) -> MetricCell<Int> {
            let gauge = gauge(name)
            gauge.record(0)
            return MetricCell(0) { _, new in gauge.record(new) }
        }
        func counterCell(_ name: String) -> MetricCell<Int> {
            let counter = counter(name)
            return MetricCell(0) { old, new in if new > old { counter.increment(by: new - old) } }
        }
        sockets = gaugeCell("ripple_sockets")
        subscriptions = gaugeCell("ripple_subscriptions")
        let frames = counter("ripple_sent_frames_total"), bytes = counter("ripple_sent_bytes_total")
        sent = MetricCell((0, 0)) { old, new in
            if new.frames > old.frames { frames.increment(by: new.frames - old.frames) }
            if new.bytes > old.bytes { bytes.increment(by: new.bytes - old.bytes) }
        }
        droppedSockets = counterCell("ripple_dropped_sockets_total")
        refusedSockets = counterCell("ripple_refused_sockets_total")
        feedRestarts = counterCell("ripple_feed_restarts_total")
        // One series per code from the start (each at 0), so that a rate or an alert on any of
        // them has a series before the first refusal.
        refusedTokens = Dictionary(uniqueKeysWithValues: Self.refusalCodes.map { code in
            (code, CoreMetrics.Counter(label: "ripple_refused_tokens_total", dimensions: [("code", code.rawValue)], factory: factory))
        })
        liveQueries = gauge("ripple_live_queries")
        replicaVersion = gauge("ripple_replica_version")
        replicaPosition = gauge("ripple_replica_position")
        replicaLagBytes = gauge("ripple_replica_lag_bytes")
        replicaLagSeconds = gauge("ripple_replica_lag_seconds")
    }
}
#endif
