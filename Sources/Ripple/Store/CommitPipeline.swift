import Foundation

/// How a commit runs its work on the writer connection (see ``Store/commit(_:origin:tag:_:)``).
enum CommitWork {
    /// In one write transaction: all of it commits, or nothing.
    case transaction
    /// Outside any transaction: its statements commit on their own (or in transactions of their
    /// own, as migrations do). What they changed is recorded after them, in a transaction of its
    /// own.
    case outsideTransaction
}

/// The commit pipeline: the one path from work on the writer to everyone who hears of commits.
/// Every entry point that commits (``write(tag:_:)``, ``writeWithoutTransaction(tag:_:)``,
/// ``migrate(_:)``, ``noticeExternalWrites()``, and the file check's notice that the file is
/// gone) calls it; none repeats a step.
///
/// ```
///  on the writer, one at a time:   begin the log ─► run the work ─► check the file ─► record
///                                  (version, origin, tag, rows) ─► evaluate row filters ─► commit
///                                  ─► route (who the commit concerns: in version order)
///  then, off the writer:           deliver to the routed observers (live queries, change feeds)
///                                  ─► tell the other stores of this process on the same file
///                                  ─► with immediate delivery, wait for the observers' events
/// ```
extension Store {
    /// Runs `body` on the writer, as `work` says, and publishes what it committed: the version it
    /// took (with `origin` and `tag`), the rows it changed, to every observer it concerns.
    func commit<T>(_ work: CommitWork, origin: CommitOrigin, tag: String?, _ body: (Database) throws -> T) throws -> T {
        try commitTakingVersion(work, origin: origin, tag: tag, body).result
    }

    /// ``commit(_:origin:tag:_:)``, also returning the version the work took (`nil`: none, it
    /// changed no row).
    func commitTakingVersion<T>(_ work: CommitWork, origin: CommitOrigin, tag: String?,
                                _ body: (Database) throws -> T) throws -> (result: T, version: Int64?) {
        var routings: [ObservationCenter.Routing] = []
        // What the work gave or threw: thrown once what it committed is published (statements
        // outside a transaction may have committed before one of them failed).
        let outcome = try pool.withWriter { db -> Result<T, any Error> in
            let log = try changeLog(of: db)
            db.commitOrigin = origin
            defer { db.commitOrigin = nil }
            switch work {
            case .transaction:
                var recorded: (CommitSummary, FilterMatches)?
                let result = try db.transaction(.immediate) {
                    // Inside the transaction: the schema the capture reads cannot change under it.
                    try log?.begin(db)
                    let result = try body(db)
                    recorded = try record(db, log, origin: origin, tag: tag)
                    return result
                }
                log?.didCommit()
                // Committed: routed before another commit can be, so in version order.
                if let (summary, matches) = recorded { routings.append(observation.route(summary, matches)) }
                return .success(result)
            case .outsideTransaction:
                // Until their version is recorded, the statements' commits have none: the other
                // connections are told not to adopt them as writes made without Ripple.
                if let log, !configuration.readOnly,
                   let adopted = try db.transaction(.immediate, { try log.beginMaintenance(db) }) {
                    routings.append(observation.route(adopted, FilterMatches()))
                }
                try log?.begin(db)
                var outcome = Result { try body(db) }
                if db.isInTransaction {
                    try? db.allowingMaintenance { try db.executeScript("ROLLBACK") }
                    log?.capture.reset()
                    if case .success = outcome {
                        outcome = .failure(StoreError(.invalidQuery, "the work left a transaction open; it was rolled "
                                                      + "back (end your transactions with COMMIT)"))
                    }
                }
                // What committed is committed whatever happens now: a failure to record it is
                // thrown only when the work itself succeeded.
                do {
                    // Its version clears this connection's name (see ChangeLog.beginMaintenance).
                    let recorded = try db.transaction(.immediate) { try record(db, log, origin: origin, tag: tag) }
                    log?.didCommit()
                    if let (summary, matches) = recorded { routings.append(observation.route(summary, matches)) }
                } catch {
                    if case .success = outcome { outcome = .failure(error) }
                }
                return outcome
            }
        }
        for routing in routings { publish(routing) }
        let version = routings.last.map(\.summary.version).flatMap { $0 > 0 ? $0 : nil }
        return (try outcome.get(), version)
    }

    /// Inside the write transaction about to commit: the last check of the file, the version and
    /// the log (``ChangeLog/record(_:origin:tag:)``), and the row filters evaluated on the
    /// changed rows. `nil` when nothing was recorded.
    private func record(_ db: Database, _ log: ChangeLog?, origin: CommitOrigin,
                        tag: String?) throws -> (CommitSummary, FilterMatches)? {
        // What the commit's participants add commits with it, or nothing does.
        let participants = commitParticipants.withLock { $0.isEmpty ? [] : $0.sorted { $0.key < $1.key }.map(\.value) }
        for participant in participants { try participant(db, origin) }
        // The last moment to refuse: committing to a file no longer at `path` would acknowledge
        // a write that is lost when the store closes.
        try checkFile()
        guard let log else { return nil }
        var summary = try log.record(db, origin: origin, tag: tag)
        if summary == nil && !configuration.readOnly && db.changeLog != nil { summary = try log.recordCommitWithoutVersion(db) }
        guard let summary else { return nil }
        return (summary, observation.evaluateFilters(of: summary, in: db))
    }

    /// Adds `participant`, run on the writer inside every commit of this store right before its
    /// version is recorded (whatever the commit's origin): what it writes commits with the
    /// commit, and its error rolls the whole commit back. A sync client keeps its outbox so.
    /// Returns a token for ``removeCommitParticipant(_:)``.
    package func addCommitParticipant(_ participant: @escaping CommitParticipant) -> Int {
        commitParticipants.withLock { participants in
            let token = (participants.keys.max() ?? 0) + 1
            participants[token] = participant
            return token
        }
    }

    /// Removes the participant ``addCommitParticipant(_:)`` returned `token` for.
    package func removeCommitParticipant(_ token: Int) {
        commitParticipants.withLock { _ = $0.removeValue(forKey: token) }
    }

    /// Looks for other connections' commits on the writer (adopting a write made without Ripple
    /// under a version of its own) and publishes them. `awaitingDeliveries` (a caller that
    /// expects to see the events, not the file watch): also waits for the immediate deliveries
    /// of commits another thread noticed first.
    func noticeCommits(awaitingDeliveries: Bool = false) throws {
        try checkFile()
        let routing = try pool.withWriter { db -> ObservationCenter.Routing? in
            observation.diagnostics.withLock { $0.looks += 1 }
            guard let log = try changeLog(of: db) else { return nil }
            let gate = noticeGate.withLock { $0 }
            let summary = try log.noticeForeignCommits(db, adopt: !configuration.readOnly,
                                                       beforeLock: gate.map { gate in { gate() } })
            return summary.map { observation.route($0, FilterMatches()) }
        }
        if let routing { publish(routing) }
        if awaitingDeliveries, !ObservationThreads.handlers.isInside {
            let through = observation.routedThrough
            for target in observation.targets { target.awaitDelivery(of: through) }
        }
    }

    /// Tells every live query that the file is gone (it ends with ``StoreError/Kind/fileMoved``
    /// at its next read): a commit without a version, to every table.
    func publishFileLoss() {
        publish(observation.route(CommitSummary(version: 0, tables: [ChangeLog.everyTable]), FilterMatches()))
    }

    /// The end of the pipeline, off the writer: delivers `routing` to its observers, tells the
    /// other stores of this process when this store took a version, and, where delivery is
    /// immediate, returns once each observer told has delivered the version (unless this thread
    /// is inside a handler or a store call, which such an observer may be waiting for).
    private func publish(_ routing: ObservationCenter.Routing) {
        observation.deliver(routing)
        let version = routing.summary.version
        guard version > 0 else { return }
        if routing.summary.origin != nil { tellOtherStores() }
        guard !ObservationThreads.handlers.isInside, pool.currentAccess == nil else { return }
        for target in routing.targets { target.awaitDelivery(of: version) }
    }

    /// What the commit router finds wrong in its indexes (empty: nothing), for the stress checker.
    package var routingInvariantViolations: [String] { observation.routingInvariantViolations }

    /// Tells the other stores of this process on the same file, which have observers, that a
    /// commit happened: they look at once, without waiting for their file watch or poll.
    private func tellOtherStores() {
        guard let registryKey, let openedFile else { return }
        for peer in OpenStoreFiles.otherStores(than: self, key: registryKey, identity: openedFile) where peer.observation.isObserving {
            peer.observation.noticeQueue.async { [weak peer] in try? peer?.noticeCommits() }
        }
    }
}
