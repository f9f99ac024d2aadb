import Foundation

/// What every thread of a stress run shares, under one lock: the model, the subscribers, the
/// events waiting for the model to know their version, and the findings.
///
/// Events are checked as they come, or as soon as the model knows their version (another
/// writer's report may still be on its way), then dropped: memory holds each subscriber's last
/// snapshot, the model's states back to the oldest version anything may still deliver, and
/// the first findings.
final class StressLedger: @unchecked Sendable {   // every stored `var` is guarded by `condition`
    /// An event waiting for the model to know its version.
    private struct PendingCheck {
        var subscriber: StressSubscriber
        var version: Int64
        var previousVersion: Int64?
        var rows: [[StressRow]]
    }

    private struct CacheKey: Hashable {
        var query: Int
        var version: Int64
    }

    private let condition = NSCondition()
    /// The queries subscribers choose from (fixed for the run).
    let queries: [StressQuery]
    private let log: (@Sendable (String) -> Void)?
    private let verbose: Bool

    private var model: StressModel
    private var pending: [Int64: [PendingCheck]] = [:]
    private var cache: [CacheKey: [StressRow]] = [:]
    private var subscribers: [Int: StressSubscriber] = [:]
    /// Per open subscriber, the oldest version it may still deliver (its last event's, or the
    /// model's version when it subscribed).
    private var floors: [Int: Int64] = [:]
    private var flagged: Set<Int> = []
    private var nextSubscriberID = 1
    /// The most subscribers open at once.
    private var peakSubscribers = 0
    private var lastPrune: Int64 = 0
    /// Counts every recorded event, so that a waiter knows whether one came while it looked.
    private var serial = 0

    private var operations = 0
    private var events = 0
    private var writeErrors = 0
    private var busyRetried = 0
    private var uncheckable = 0
    private var discrepancyCount = 0
    private var byKind: [StressDiscrepancy.Kind: Int] = [:]
    private var firstDiscrepancy: StressDiscrepancy?
    private var firstWrongEvent: StressDiscrepancy?
    /// The first finding of each kind and facet (``StressDiscrepancy/label``).
    private var firstByLabel: [String: StressDiscrepancy] = [:]
    private var samples: [String] = []
    private var firstWriteError: String?

    init(model: StressModel, queries: [StressQuery], verbose: Bool, log: (@Sendable (String) -> Void)?) {
        self.model = model
        self.queries = queries
        self.verbose = verbose
        self.log = log
        self.lastPrune = model.version
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }

    // MARK: Writers

    func register(source: String) { locked { model.register(source: source) } }

    func finish(source: String) { locked { note(model.finish(source: source)); checkPending() } }

    /// Takes a writer's outcome: a record goes to the model, a failure counts as a write error.
    func submit(_ outcome: StressWriteOutcome) {
        locked {
            switch outcome {
            case .done(let record):
                operations += record.operationCount
                note(model.submit(record))
                checkPending()
            case .failed(let error, let plan):
                writeErrors += 1
                let text = "write failed: \(error)\n  the write: \(plan.replacingOccurrences(of: "\n", with: "\n  "))"
                if firstWriteError == nil { firstWriteError = text }
                if verbose { log?("stress: " + text) }
            }
        }
    }

    /// Adds a writer's count of writes retried after `SQLITE_BUSY`.
    func count(busyRetried: Int) {
        locked { self.busyRetried += busyRetried }
    }

    /// The store's final version: versions up to it that no writer took are phantoms.
    func settle(finalVersion: Int64) {
        locked {
            settled = true
            note(model.settle(finalVersion: finalVersion))
            if model.version > finalVersion {
                note([StressDiscrepancy(kind: .versionAccounting,
                                        summary: "the writes account for v\(model.version), the store is at v\(finalVersion)",
                                        detail: "writers reported row changes in more committed writes than the store has versions")])
            }
            checkPending()
        }
    }

    // MARK: Subscribers

    /// A new subscriber, registered before it subscribes (so that its first event can be checked).
    func makeSubscriber(kind: StressSubscriber.Kind, queryIndices: [Int]) -> StressSubscriber {
        locked {
            let subscriber = StressSubscriber(id: nextSubscriberID, kind: kind, queryIndices: queryIndices,
                                              queries: queryIndices.map { queries[$0] })
            nextSubscriberID += 1
            subscribers[subscriber.id] = subscriber
            peakSubscribers = max(peakSubscribers, subscribers.count)
            floors[subscriber.id] = model.version
            return subscriber
        }
    }

    /// The subscriber will deliver nothing more that needs checking against the model.
    func unregister(_ subscriber: StressSubscriber) {
        locked {
            subscribers[subscriber.id] = nil
            floors[subscriber.id] = nil
            condition.broadcast()
        }
    }

    /// The open subscribers, by id.
    var openSubscribers: [StressSubscriber] {
        locked { subscribers.keys.sorted().compactMap { subscribers[$0] } }
    }

    /// Handles an event delivered to `subscriber` (called from its handler or loop).
    func deliver(_ event: StressObservedEvent, to subscriber: StressSubscriber) {
        let (problems, rows) = subscriber.receive(event)
        locked {
            events += 1
            serial += 1
            defer { condition.broadcast() }
            note(problems, subscriber: subscriber)
            guard subscribers[subscriber.id] != nil, rows.count == subscriber.queries.count else { return }
            floors[subscriber.id] = event.version
            let check = PendingCheck(subscriber: subscriber, version: event.version, previousVersion: event.previousVersion,
                                     rows: rows)
            if event.version <= judgeableVersion {
                compare(check)
            } else {
                pending[event.version, default: []].append(check)
            }
        }
    }

    /// A subscription ended with an error (nothing makes the stress queries fail).
    func failed(_ subscriber: StressSubscriber, _ error: any Error) {
        subscriber.detach()
        locked {
            note([StressDiscrepancy(kind: .subscriptionError, summary: "subscriber \(subscriber.name) ended with \(error)",
                                    detail: "query: " + subscriber.queries.map(\.description).joined(separator: "\n  "))],
                 subscriber: subscriber)
            subscribers[subscriber.id] = nil
            floors[subscriber.id] = nil
            condition.broadcast()
        }
    }

    // MARK: Checks against the model

    /// The model's result of query `index` at `version` as a subscriber receives it (see
    /// ``StressQuery/asReceived(_:)`` and ``StressQuery/comparable(_:)``), if that state is kept.
    private func expected(_ index: Int, at version: Int64) -> [StressRow]? {
        let key = CacheKey(query: index, version: version)
        if let rows = cache[key] { return rows }
        guard let state = model.state(at: version) else { return nil }
        let query = queries[index]
        let rows = query.comparable(query.asReceived(query.expected(from: state.rows(of: query.table))))
        if cache.count > 4_096 { cache.removeAll(keepingCapacity: true) }
        cache[key] = rows
        return rows
    }

    /// Whether `rows` are query `index`'s result at `version` but for the order of tied rows.
    private func isTieVariant(_ rows: [StressRow], of index: Int, at version: Int64) -> Bool {
        guard let state = model.state(at: version) else { return false }
        let query = queries[index]
        return query.isTieVariant(rows, of: state.rows(of: query.table))
    }

    private func compare(_ check: PendingCheck) {
        let subscriber = check.subscriber
        for (member, index) in subscriber.queryIndices.enumerated() {
            guard !model.isUncertain(check.version), let expected = expected(index, at: check.version) else {
                uncheckable += 1
                continue
            }
            let query = queries[index]
            let delivered = query.comparable(check.rows[member])
            guard delivered != expected else { continue }
            let membership = subscriber.queries.count > 1 ? ", group member \(member + 1) of \(subscriber.queries.count)" : ""
            let previous = check.previousVersion.map { "previous event v\($0)" } ?? "the initial event"
            let ties = isTieVariant(delivered, of: index, at: check.version)
            let keys = StressFormat.keyKinds(StressFormat.differingKeys(expected: expected, delivered: delivered, table: query.table))
            note([StressDiscrepancy(
                kind: ties ? .tieOrder : .wrongSnapshot,
                summary: "subscriber \(subscriber.name): the snapshot at v\(check.version) is not the query's result"
                    + (ties ? " (rows that tie on the ORDER BY terms are ordered, or cut by the window, otherwise than by key)"
                       : " (keys: \(keys.joined(separator: ", ")))"),
                detail: "subscriber \(subscriber.name)\(membership)\n  query: \(query.description)\n"
                    + "  version: v\(check.version) (\(previous))\n"
                    + StressFormat.comparison(expected: expected, delivered: delivered, table: query.table,
                                              expectedTitle: "expected (the model at v\(check.version))"),
                facet: ties ? nil : "keys: \(keys.joined(separator: ", "))")],
                 subscriber: subscriber)
        }
    }

    /// Whether the writers are done (``settle(finalVersion:)``).
    private var settled = false

    /// The newest version whose events are judged now: the one before the model's newest while
    /// writers write, since the write based on the newest may be one whose statements committed
    /// before its version was taken (a write outside a transaction, one made without Ripple):
    /// what a read at that version shows is then uncertain (see ``StressModel/apply(_:)``).
    private var judgeableVersion: Int64 { settled ? model.version : model.version - 1 }

    /// Compares the events whose version the model now knows.
    private func checkPending() {
        guard !pending.isEmpty else { return pruneIfDue() }
        for version in pending.keys.sorted() where version <= judgeableVersion {
            for check in pending.removeValue(forKey: version) ?? [] { compare(check) }
        }
        pruneIfDue()
    }

    /// The most versions whose states are kept (about 3 KB each). A subscriber idle for longer
    /// than this keeps no older state alive; an event older than that (a delivery late by this
    /// many commits) is counted as unchecked, and reported.
    static let stateWindow: Int64 = 20_000

    /// Every 64 versions, forgets the states nothing can need any more.
    private func pruneIfDue() {
        guard model.version - lastPrune >= 64 else { return }
        lastPrune = model.version
        let floor = min(floors.values.min() ?? model.version, pending.keys.min() ?? model.version)
        model.prune(below: floor, window: Self.stateWindow)
    }

    /// Events whose version the model never learned: versions no writer took.
    func reportUnknownVersions() {
        locked {
            // The end of the run: the events at versions the model knows are judged first.
            settled = true
            checkPending()
            for version in pending.keys.sorted() {
                for check in pending.removeValue(forKey: version) ?? [] {
                    note([StressDiscrepancy(
                        kind: .unknownVersion,
                        summary: "subscriber \(check.subscriber.name): event at v\(version), which no writer took "
                            + "(the writes account for v\(model.version))",
                        detail: "query: " + check.subscriber.queries.map(\.description).joined(separator: "\n  "))],
                         subscriber: check.subscriber)
                }
            }
        }
    }

    /// With a single writer and no other process, every `.immediate` subscriber has heard of a
    /// write before it returns: its last snapshot must be the query's result now.
    func checkImmediateSubscribersAreCurrent() {
        let open = openSubscribers.filter(\.isImmediate)
        locked {
            for subscriber in open {
                guard let last = subscriber.last, last.version < model.version else { continue }
                for (member, index) in subscriber.queryIndices.enumerated() {
                    guard let expected = expected(index, at: model.version) else { continue }
                    let query = queries[index]
                    let shown = query.comparable(last.rows[member])
                    // Rows tied otherwise than by key were reported with their event.
                    if shown != expected && !isTieVariant(shown, of: index, at: model.version) && subscriber.shouldReportStale() {
                        let keys = StressFormat.keyKinds(
                            StressFormat.differingKeys(expected: expected, delivered: shown, table: query.table))
                        note([StressDiscrepancy(
                            kind: .staleAfterWrite,
                            summary: "subscriber \(subscriber.name): after the write of v\(model.version) returned, it still "
                                + "shows v\(last.version), which is no longer the query's result (keys: \(keys.joined(separator: ", ")))",
                            detail: "subscriber \(subscriber.name)\n  query: \(query.description)\n"
                                + "  last event: v\(last.version); the store is at v\(model.version) and delivered nothing\n"
                                + StressFormat.comparison(expected: expected, delivered: shown, table: query.table,
                                                          expectedTitle: "expected (the model at v\(model.version))",
                                                          deliveredTitle: "shown (the last event, v\(last.version))"),
                            facet: "keys: \(keys.joined(separator: ", "))")],
                             subscriber: subscriber)
                        break
                    }
                }
            }
        }
    }

    /// Waits until every open subscriber that has not misbehaved shows the model's newest
    /// result (its final event arrived); returns those that do not. Each arriving event wakes
    /// the wait; it gives up when no event came for `quietPeriod` seconds (deliveries had
    /// stopped) or at `limit`.
    func awaitFinalSnapshots(quietPeriod: TimeInterval, limit: Date) -> [StressSubscriber] {
        var lastProgress = Date()
        var lastSerial = locked { serial }
        while true {
            let (behind, waiting, seen, patient) = finalSnapshotProgress()
            if seen != lastSerial {
                lastSerial = seen
                lastProgress = Date()
            }
            let deadline = patient ? limit : min(lastProgress.addingTimeInterval(quietPeriod), limit)
            if !waiting || Date() >= deadline { return behind }
            locked {
                if serial == seen { _ = condition.wait(until: deadline) }
            }
        }
    }

    /// Waits until no subscriber is open (the `events()` loops ended), or until `deadline`.
    func awaitOpenSubscribers(until deadline: Date) -> Bool {
        locked {
            while !subscribers.isEmpty {
                if !condition.wait(until: deadline) { return subscribers.isEmpty }
            }
            return true
        }
    }

    /// Which open subscribers that have not misbehaved do not show the model's newest result
    /// yet (`behind`), whether an event is still to be waited for (`waiting`), the delivery
    /// serial this was judged at, and whether to wait until the limit rather than only while
    /// others progress (`patient`).
    ///
    /// A collection query's order is total (ties come in key order), so a subscriber showing
    /// the newest rows with tied rows in another order is behind like any other: its event is
    /// still to come (or, if it never comes, a finding). It is not let off the wait.
    func finalSnapshotProgress() -> (behind: [StressSubscriber], waiting: Bool, serial: Int, patient: Bool) {
        let open = locked { subscribers.keys.sorted().compactMap { subscribers[$0] }.filter { !flagged.contains($0.id) } }
        let lasts = open.map { ($0, $0.last) }
        return locked {
            var behind: [StressSubscriber] = []
            // An `events()` loop runs as a task: when other work holds every thread of the
            // concurrency pool (the test suite's other tests), its events come late, not wrong.
            // Such a subscriber is waited for until `limit`, not only while others progress.
            var patient = false
            for (subscriber, last) in lasts {
                let current = last.map { last in
                    subscriber.queryIndices.enumerated().allSatisfy { member, index in
                        queries[index].comparable(last.rows[member]) == expected(index, at: model.version)
                    }
                } ?? false
                guard !current else { continue }
                behind.append(subscriber)
                patient = patient || subscriber.kind == .asyncLoop
            }
            return (behind, !behind.isEmpty, serial, patient)
        }
    }

    /// Reports that `subscriber`'s last snapshot is not the final result.
    func reportMissedFinalEvent(_ subscriber: StressSubscriber) {
        let last = subscriber.last
        locked {
            for (member, index) in subscriber.queryIndices.enumerated() {
                let query = queries[index]
                let expected = expected(index, at: model.version) ?? []
                let shown = last.map { query.comparable($0.rows[member]) }
                guard shown != expected else { continue }
                let ties = shown.map { isTieVariant($0, of: index, at: model.version) } ?? false
                let keys = StressFormat.keyKinds(
                    StressFormat.differingKeys(expected: expected, delivered: shown ?? [], table: query.table))
                let lastEvent = last.map { "the last event, v\($0.version)" } ?? "nothing"
                note([StressDiscrepancy(
                    kind: ties ? .tieOrder : .missedFinalEvent,
                    summary: "subscriber \(subscriber.name): after the run settled at v\(model.version), it still shows "
                        + (last.map { "v\($0.version)" } ?? "no event at all") + " (keys: \(keys.joined(separator: ", ")))",
                    detail: "subscriber \(subscriber.name)\n  query: \(query.description)\n"
                        + StressFormat.comparison(expected: expected, delivered: shown ?? [], table: query.table,
                                                  expectedTitle: "expected (the model at v\(model.version))",
                                                  deliveredTitle: "shown (\(lastEvent))"),
                    facet: ties ? nil : "keys: \(keys.joined(separator: ", "))")],
                     subscriber: subscriber)
                break
            }
        }
    }

    /// Reports that a fresh read of query `index` differs from the model.
    func reportFreshRead(_ index: Int, rows: [StressRow]) {
        locked {
            let query = queries[index]
            let expected = expected(index, at: model.version) ?? []
            let delivered = query.comparable(rows)
            guard delivered != expected else { return }
            let ties = isTieVariant(delivered, of: index, at: model.version)
            note([StressDiscrepancy(
                kind: ties ? .tieOrder : .freshRead,
                summary: "a fresh read of query \(index) at v\(model.version) is not the query's result"
                    + (ties ? " (tied rows ordered otherwise than by key)" : ""),
                detail: "query: \(query.description)\n"
                    + StressFormat.comparison(expected: expected, delivered: delivered, table: query.table,
                                              expectedTitle: "expected (the model at v\(model.version))",
                                              deliveredTitle: "read (fetchAll / db.fetchAll)"),
                facet: ties ? nil : "keys: " + StressFormat.keyKinds(
                    StressFormat.differingKeys(expected: expected, delivered: delivered, table: query.table)).joined(separator: ", "))])
        }
    }

    /// Reports that a fresh read of query `index` failed.
    func reportFreshReadFailure(_ index: Int, _ error: any Error) {
        locked {
            note([StressDiscrepancy(kind: .freshRead, summary: "a fresh read of query \(index) failed: \(error)",
                                    detail: "query: \(queries[index].description)\n  error: \(error)")])
        }
    }

    /// Records what the store's commit router finds wrong in its own indexes.
    func reportRoutingInvariants(_ violations: [String]) {
        guard !violations.isEmpty else { return }
        locked {
            note([StressDiscrepancy(kind: .routingInvariant, summary: "the commit router's indexes disagree: \(violations[0])",
                                    detail: violations.prefix(20).joined(separator: "\n"))])
        }
    }

    /// Records a finding about a child process.
    func reportChildFailure(_ summary: String, detail: String) {
        locked { note([StressDiscrepancy(kind: .childFailure, summary: summary, detail: detail)]) }
    }

    // MARK: Findings

    private func note(_ found: [StressDiscrepancy], subscriber: StressSubscriber? = nil) {
        guard !found.isEmpty else { return }
        if let subscriber { flagged.insert(subscriber.id) }
        for discrepancy in found {
            discrepancyCount += 1
            byKind[discrepancy.kind, default: 0] += 1
            if firstDiscrepancy == nil { firstDiscrepancy = discrepancy }
            if firstByLabel[discrepancy.label] == nil { firstByLabel[discrepancy.label] = discrepancy }
            if firstWrongEvent == nil, [.wrongSnapshot, .tieOrder, .staleAfterWrite, .missedFinalEvent].contains(discrepancy.kind) {
                firstWrongEvent = discrepancy
            }
            if samples.count < 20 { samples.append("[\(discrepancy.label)] \(discrepancy.summary)") }
            if verbose && byKind[discrepancy.kind, default: 0] <= 25 {
                // The evidence of the first few of each kind, the summary of the next ones.
                let evidence = byKind[discrepancy.kind, default: 0] > 3 ? ""
                    : "\n  " + discrepancy.detail.replacingOccurrences(of: "\n", with: "\n  ")
                log?("stress: discrepancy [\(discrepancy.kind.rawValue)] \(discrepancy.summary)\(evidence)")
            }
        }
    }

    /// The counts so far, for progress lines.
    var progress: String {
        locked {
            "ops=\(operations) events=\(events) unchecked=\(uncheckable) version=v\(model.version) states_kept=\(model.statesKept) "
                + "subscribers=\(subscribers.count) waiting_writes=\(model.waitingCount) "
                + "pending_events=\(pending.values.reduce(0) { $0 + $1.count }) "
                + "discrepancies=\(discrepancyCount) write_errors=\(writeErrors)"
        }
    }

    var operationCount: Int { locked { operations } }

    func report(seed: UInt64, database: String) -> StressReport {
        locked {
            var report = StressReport(seed: seed, operations: operations, events: events, discrepancies: discrepancyCount,
                                      writeErrors: writeErrors, busyRetried: busyRetried, finalVersion: model.version,
                                      discrepanciesByKind: Dictionary(uniqueKeysWithValues: byKind.map { ($0.key.rawValue, $0.value) }),
                                      firstWrongEvent: firstWrongEvent.map { "[\($0.kind.rawValue)] \($0.detail)" },
                                      firstDiscrepancy: firstDiscrepancy.map { "[\($0.kind.rawValue)] \($0.summary)\n\($0.detail)" },
                                      firstByKind: firstByLabel.mapValues { "\($0.summary)\n\($0.detail)" },
                                      firstWriteError: firstWriteError, samples: samples, uncheckedEvents: uncheckable,
                                      databasePath: database)
            report.peakSubscribers = peakSubscribers
            return report
        }
    }
}
