#if Sync
import RippleSync

/// What a socket's session asks of its node.
extension SyncServer {
    typealias Admission = SessionRegistry.Admission

    var hub: SubscriptionHub? { hubs.withLock { $0 } }

    func register(_ session: SyncSession) -> Admission { sessions.register(session) }

    func unregister(_ session: SyncSession) { sessions.unregister(session) }

    /// Files `event` for `session` under the version it belongs to (see
    /// ``SessionRegistry/file(_:subscription:generation:for:)``).
    func file(_ event: SubscriptionEvent, subscription id: String, generation: Int, for session: SyncSession) {
        sessions.file(event, subscription: id, generation: generation, for: session)
    }

    /// Closes every socket (each told to come back later), and every socket that opens from now
    /// on: what a graceful shutdown does first.
    package func beginStopping() { sessions.beginStopping() }

    /// `results` with the position a socket of this node reaches once its frames contain them.
    ///
    /// The writer names a position just past each result's commit; a socket's positions are
    /// those of replica commits (and a rejected mutation's commit changes no synced table: it
    /// makes none). So, once the feed has read past the commit (boundedly waited for), each
    /// result takes the newest finished replica position: the client reaches it with the frames
    /// it already has or that are on their way, without waiting for another commit. A feed that
    /// lags beyond the wait leaves the writer's position (reached at the next synced commit).
    func positioned(_ results: [MutationResult]) async -> [MutationResult] {
        guard let committed = results.compactMap({ $0.lsn.flatMap(PGOutput.LSN.init) }).max() else { return results }
        // (Longer than a read's answer limit: a feed that lost Postgres for a moment and tries
        // again still names a position in time. The writer's own position would only be
        // reached at the next synced commit, which a quiet server may not have: the client
        // would keep the mutation waiting. Seen in the sync stress checker.)
        let deadline = ContinuousClock.now + max(configuration.resumeCatchUpTimeout, .seconds(40))
        while feedStatus.withLock({ $0.readThrough }) < committed {
            guard ContinuousClock.now < deadline, (try? await Task.sleep(for: .milliseconds(1))) != nil else { return results }
        }
        let position = timeline.completed.position.description
        return results.map { result in
            var positioned = result
            if positioned.lsn != nil { positioned.lsn = position }
            return positioned
        }
    }

    /// The position of a finished replica version (for labelling frames).
    func position(of version: Int64) -> PGOutput.LSN { timeline.position(of: version) }

    /// The schema of synced table `table` as the node's replica holds it (`nil`: not synced, or
    /// not prepared yet), for compiling queries over it.
    public func schema(of table: String) async -> SyncedTableSchema? { await feed.schema(of: table) }
}
#endif
