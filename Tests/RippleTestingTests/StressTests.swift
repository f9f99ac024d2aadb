import Foundation
import Ripple
import RippleDiff
@testable import RippleTesting
import Testing

/// `ripple stress`'s engine: first its own oracle against SQLite (so that a finding is about
/// Ripple, not about the checker), then proof that it can fail, then short seeded runs of live
/// queries against the model — several threads, a deterministic single-threaded replay, and
/// two processes.
@Suite(.serialized) struct StressTests {
    // MARK: The oracle agrees with SQLite

    /// A store whose stress tables hold a few hundred awkward rows, written with raw SQL.
    private func populatedStore(seed: UInt64) throws -> (StressStoreAccess, StressState, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-stress-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try Store(path: directory + "/oracle.sqlite")
        let access = try StressStoreAccess(store: store, createTables: true)
        var generator = StressGenerator(seed: seed, stream: 1)
        try store.write { db in
            for table in StressTable.allCases {
                for _ in 0..<60 { _ = try StressSQL.execute(.upsert(table, generator.row(of: table, raw: true)), in: db) }
            }
        }
        return (access, StressState(try access.readAll().tables), directory)
    }

    @Test func theReferenceEvaluatorGivesWhatSQLiteGives() throws {
        let (access, state, directory) = try populatedStore(seed: 11)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var generator = StressGenerator(seed: 12, stream: 2)
        for round in 0..<3_000 {
            let table = StressTable.allCases[round % StressTable.allCases.count]
            var query = generator.query(of: table)
            query.form = .rawSQL   // a total order: the answer is one list
            let expected = query.expected(from: state.rows(of: table))
            let read = try access.fetch(query)
            let comparison = StressFormat.comparison(expected: expected, delivered: read, table: table, expectedTitle: "model")
            #expect(read == expected, "\(query.description)\n\(comparison)")
            if read != expected { return }
        }
    }

    @Test func theModelChangesWhatSQLiteChanges() throws {
        let (access, initial, directory) = try populatedStore(seed: 21)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var generator = StressGenerator(seed: 22, stream: 3)
        let writer = try StressWriter(access: access, source: "test", gateDirectory: directory, generator: generator)
        var state = initial
        // Every kind of write, each checked: what each operation changed, and the rows after.
        for _ in 0..<400 {
            guard case .done(let record) = writer.perform(generator.plan()) else {
                Issue.record("a write failed")
                return
            }
            var model = StressModel(version: record.base, state: state)
            let found = model.submit(record)
            #expect(found.isEmpty, "\(found.map(\.detail))")
            state = model.state(at: model.version) ?? state
            let stored = StressState(try access.readAll().tables)
            #expect(stored == state, "after \(record.description)")
            if stored != state { return }
        }
    }

    @Test func keysCompareAsSQLiteComparesThem() throws {
        // Canonically equivalent spellings: equal to Swift, two keys (ordered by bytes) to SQLite.
        #expect("e\u{301}" == "\u{e9}")
        #expect(StressValue.sqliteOrder(.string("e\u{301}"), .string("\u{e9}")) == -1)
        let state = StressState([.strings: [StressRow([.string("e\u{301}"), .integer(0), .integer(0), .null, .integer(0)]),
                                            StressRow([.string("\u{e9}"), .integer(0), .integer(0), .null, .integer(0)])]])
        #expect(state.rows(of: .strings).count == 2)
        // NUL is a byte like another; types order as NULL < numbers < text < blobs.
        #expect(StressValue.sqliteOrder(.string("a"), .string("a\0b")) == -1)
        #expect(StressValue.sqliteOrder(.integer(.max), .string("")) == -1)
        #expect(StressValue.sqliteOrder(.string("\u{1F44D}"), .blob([])) == -1)
        #expect(StressValue.sqliteOrder(.null, .integer(.min)) == -1)
        #expect(StressValue.sqliteOrder(.integer(2), .real(1.5)) == 1)
        // Text that is not UTF-8 survives through typeof()/hex(), and reads readably.
        #expect(StressValue(typeName: "text", hex: "FF61") == .text([0xFF, 0x61]))
        #expect(StressValue.text([0xFF, 0x61]).description == "CAST(x'FF61' AS TEXT)")
        #expect(StressValue.string("e\u{301}").description == "'e\\u{301}'")
        // What a child process reports comes back exactly.
        let upsert = StressOperation.upsert(.loose, StressRow([.text([0xFF]), .integer(1), .null]))
        let record = StressWriteRecord(source: "c1/t0", sequence: 3, base: 41, after: nil,
                                       steps: [.operation(StressOperationRecord(operation: upsert, via: .rawSQL, changes: 1))],
                                       committed: true)
        let decoded = try JSONDecoder().decode(StressWriteRecord.self, from: JSONEncoder().encode(record))
        #expect(decoded.steps == record.steps && decoded.base == 41)
    }

    // MARK: The checker can fail

    @Test func aStaleOrUnknownEventIsADiscrepancy() {
        let row = { (id: Int) in StressRow([.integer(Int64(id)), .integer(1), .integer(0), .null, .integer(0)]) }
        let query = StressQuery(table: .ints, form: .collection, predicate: nil, orderings: [], limit: nil, offset: 0)
        let ledger = StressLedger(model: StressModel(version: 7, state: StressState([.ints: [row(1)]])), queries: [query],
                                  verbose: false, log: nil)
        ledger.register(source: "w")
        ledger.submit(.done(StressWriteRecord(source: "w", sequence: 0, base: 7, after: nil,
                                              steps: [.operation(StressOperationRecord(operation: .upsert(.ints, row(2)),
                                                                                       via: .rawSQL, changes: 1))],
                                              committed: true)))
        let subscriber = ledger.makeSubscriber(kind: .immediate, queryIndices: [0])
        func event(_ version: Int64, _ previous: Int64?, _ old: [StressRow], _ new: [StressRow]) -> StressObservedEvent {
            StressObservedEvent(members: [StressObservedMember(version: version, previousVersion: previous, rows: new,
                                                               changeset: Changeset(from: old, to: new), unreadable: 0)])
        }
        ledger.deliver(event(7, nil, [], [row(1)]), to: subscriber)             // right at v7
        ledger.deliver(event(8, 7, [row(1)], [row(1)]), to: subscriber)         // v8 lost the new row: stale
        ledger.deliver(event(9, 8, [row(1)], [row(1), row(2)]), to: subscriber) // no writer took v9
        ledger.reportUnknownVersions()
        let report = ledger.report(seed: 0, database: "")
        #expect(report.discrepanciesByKind["wrong snapshot"] == 1)
        #expect(report.discrepanciesByKind["event without change"] == 1)
        #expect(report.discrepanciesByKind["event at an unknown version"] == 1)
        #expect(report.firstWrongEvent?.contains("missing: (id: 2") == true, "\(report.details)")
        #expect(!report.passed)
    }

    /// Found in CI (seed 2, under the suite's load): an `events()` loop still showed v916 when the
    /// run settled at v926, and its rows at v916 happened to be v926's but for the order of tied
    /// rows. The wait for final events let it off ("no event is coming for ties") and reported a
    /// tie-order finding at once, though its v926 event was merely late. A collection query's
    /// order is total (ties in key order): such a subscriber is behind and is waited for.
    @Test func aSubscriberShowingTiedRowsInAnotherOrderIsStillWaitedFor() {
        let row = { (id: Int64, rank: Int64) in StressRow([.integer(id), .integer(rank), .integer(0), .null, .integer(1)]) }
        let query = StressQuery(table: .ints, form: .collection, predicate: nil,
                                orderings: [StressOrdering(column: 1, descending: false)], limit: 3, offset: 0)
        let before = [row(-2, 0), row(2, 0), row(3, 1), row(8, 0)]
        let ledger = StressLedger(model: StressModel(version: 916, state: StressState([.ints: before])), queries: [query],
                                  verbose: false, log: nil)
        let subscriber = ledger.makeSubscriber(kind: .asyncLoop, queryIndices: [0])
        let shown = [row(-2, 0), row(2, 0), row(8, 0)]   // right at v916
        ledger.deliver(StressObservedEvent(members: [StressObservedMember(version: 916, previousVersion: nil, rows: shown,
                                                                          changeset: .initial(count: 3), unreadable: 0)]),
                       to: subscriber)
        ledger.register(source: "w")
        ledger.submit(.done(StressWriteRecord(source: "w", sequence: 0, base: 916, after: nil,
                                              steps: [.operation(StressOperationRecord(operation: .update(.ints, row(3, 0)),
                                                                                       via: .rawSQL, changes: 1))],
                                              committed: true)))
        ledger.settle(finalVersion: 917)
        // At v917 the first three by rank, then key, are -2, 2, 3: what it shows is a tie variant.
        #expect(query.isTieVariant(query.comparable(shown), of: [row(-2, 0), row(2, 0), row(3, 0), row(8, 0)]))
        let progress = ledger.finalSnapshotProgress()
        #expect(progress.behind.map(\.id) == [subscriber.id])
        #expect(progress.waiting, "a subscriber whose rows are a tie variant of the result is still owed an event")
        #expect(progress.patient)
        // Its late event arrives: nobody is behind any more.
        ledger.deliver(StressObservedEvent(members: [StressObservedMember(
            version: 917, previousVersion: 916, rows: [row(-2, 0), row(2, 0), row(3, 0)],
            changeset: Changeset(from: shown, to: [row(-2, 0), row(2, 0), row(3, 0)]), unreadable: 0)]), to: subscriber)
        #expect(ledger.awaitFinalSnapshots(quietPeriod: 0, limit: Date()).isEmpty)
        #expect(ledger.report(seed: 0, database: "").passed)
    }

    @Test func aVersionNoWriterTookIsAPhantom() {
        var model = StressModel(version: 0, state: StressState([:]))
        model.register(source: "a")
        model.register(source: "b")
        func write(_ source: String, base: Int64) -> StressWriteRecord {
            StressWriteRecord(source: source, sequence: 0, base: base, after: nil,
                              steps: [.operation(StressOperationRecord(operation: .upsert(.ints, StressRow([
                                  .integer(base), .integer(0), .integer(0), .null, .integer(0)])), via: .rawSQL, changes: 1))],
                              committed: true)
        }
        #expect(model.submit(write("a", base: 0)).isEmpty)
        #expect(model.submit(write("b", base: 2)).isEmpty)   // v2 is not known yet: it waits
        let found = model.submit(write("a", base: 3))          // now every writer is past v1: v2 was nobody's
        #expect(found.map(\.kind) == [.phantomVersion])
        #expect(model.version == 4)
    }

    @Test func aChangesetThatDoesNotLeadToTheSnapshotIsRefused() {
        let old = [StressRow([.integer(1)]), StressRow([.integer(2)])]
        let new = [StressRow([.integer(2)]), StressRow([.integer(3)])]
        #expect(StressSubscriber.validate(Changeset(from: old, to: new), from: old, to: new) == nil)
        #expect(StressSubscriber.validate(.unchanged(count: 2), from: old, to: new) != nil)
        #expect(StressSubscriber.validate(.initial(count: 2), from: old, to: new) != nil)
    }

    // MARK: Live queries against the model

    private func configuration(seed: UInt64, seconds: Double) -> StressConfiguration {
        var configuration = StressConfiguration()
        configuration.seed = seed
        configuration.seconds = seconds
        configuration.threads = 3
        configuration.maxSubscribers = 60
        configuration.settleQuietPeriod = 2
        return configuration
    }

    /// Records the report's account of what went wrong (the seed, the first wrong event…).
    private func expectPassed(_ report: StressReport, sourceLocation: SourceLocation = #_sourceLocation) {
        if !report.passed {
            Issue.record(Comment(rawValue: report.details + "\n" + report.summaryLine), sourceLocation: sourceLocation)
        }
    }

    @Test(.timeLimit(.minutes(1)), arguments: [1, 2, 3] as [UInt64])
    func liveQueriesMatchTheModel(seed: UInt64) async throws {
        let report = try await StressTest.run(configuration(seed: seed, seconds: 2))
        expectPassed(report)
        #expect(report.events > 0 && report.operations > 0)
    }

    /// CI found the parallel suite on 2 cores failing `liveQueriesMatchTheModel`: another test
    /// held one cooperative thread, the run held the other, and its `events()` subscribers never
    /// ran. Here every cooperative thread but one is held for the whole run, as then.
    @Test(.timeLimit(.minutes(1)))
    func aRunLeavesTheCooperativeThreadsToItsEventLoops() async throws {
        let release = DispatchSemaphore(value: 0)
        let held = (1..<max(2, ProcessInfo.processInfo.activeProcessorCount)).map { _ in
            Task.detached { _ = try? Wait.for(release, "the run to end") }
        }
        defer { for _ in held { release.signal() } }
        var configuration = configuration(seed: 2, seconds: 2)
        configuration.maxSubscribers = 30
        let report = try await StressTest.run(configuration)
        expectPassed(report)
    }

    @Test(.timeLimit(.minutes(1)))
    func aSingleThreadedRunMatchesTheModelAndReplaysTheSame() async throws {
        var replay = configuration(seed: 4, seconds: 30)
        replay.singleThreaded = true
        replay.maxOperations = 600
        let first = try await StressTest.run(replay)
        expectPassed(first)
        // The same seed, the same run: every operation, event and finding again.
        let second = try await StressTest.run(replay)
        #expect(second.summaryLine == first.summaryLine)
        #expect(second.discrepanciesByKind == first.discrepanciesByKind)
    }

    @Test(.timeLimit(.minutes(1)))
    func twoProcessesMatchTheModel() async throws {
        let executable = try #require(RippleExecutable.url(),
                                      "the `ripple` executable is not built: run `swift build --build-tests` first")
        var configuration = configuration(seed: 5, seconds: 2)
        configuration.processes = 2
        configuration.threads = 2
        configuration.childExecutable = executable.path
        let report = try await StressTest.run(configuration)
        expectPassed(report)
        let line = #/stress: seed=5 ops=\d+ events=\d+ discrepancies=\d+ write_errors=\d+ busy_retried=\d+ peak_subscribers=\d+/#
        #expect(report.summaryLine.wholeMatch(of: line) != nil)
    }
}
