import Foundation
import Ripple
import RippleDiff
import RippleTesting

/// `ripple-bench observe --breakdown`: where Ripple's commit-to-handler time goes, piece by piece,
/// on the O1 and O3 files (medians of `reps` runs; every piece on its own, no subscriber unless
/// said):
///
/// * `write`: `update(record)` of one row;
/// * `fetch_window` / `fetch_window_warm`: reading the 1,000-row window into records in a read
///   transaction, right after a write (the reader's page cache invalidated) / again without one;
/// * `diff_ids`: `Changeset(from:to:)` on the window's 1,000 ids, one removed and one inserted;
/// * `hop`: a block sent to a global queue, which sends one to a serial queue, until it starts
///   (Ripple's refresh-then-deliver path, without the work);
/// * `write_immediate_title` / `write_immediate_flip`: the write call with one `.immediate`
///   subscriber on the window, which refreshes and delivers inside the call (retitle: the row is
///   patched; flip: the window is re-read and diffed);
/// * `write_immediate_o3_1` / `write_immediate_o3_100`: an O3 retitle with 1 / 100 `.immediate`
///   range subscribers (the difference, over 99, is what a subscriber whose range the write misses
///   costs each commit).
struct ObserveBreakdown {
    var reps: Int

    func run(in directory: URL) throws {
        try windowPieces(in: directory)
        try rangePieces(in: directory)
    }

    private func emit(_ workload: String, _ piece: String, _ samples: [Double]) {
        var result = ObserveResult()
        result.latencies = samples
        Report.emit([("bench", "observe"), ("workload", .string(workload)), ("impl", "ripple"),
                     ("breakdown", .string(piece)), ("reps", .int(samples.count)),
                     ("p50_us", .number(result.percentile(0.5))), ("p99_us", .number(result.percentile(0.99)))])
    }

    private func seeded(_ workload: ObserveWorkload, in directory: URL) throws -> (Store, RecordCollection<ObserveTodo>) {
        let path = directory.appendingPathComponent("breakdown-\(workload.rawValue).sqlite").path
        ObserveFloor.seed(path: path, rows: workload.rows)
        let store = try Store(path: path)
        return (store, try store.collection("todo", of: ObserveTodo.self))
    }

    /// Times `body` `reps` times (after one untimed run), in microseconds.
    private func time(_ body: () throws -> Void) rethrows -> [Double] {
        let clock = ContinuousClock()
        try body()
        return try (0..<reps).map { _ in
            let start = clock.now
            try body()
            return start.duration(to: clock.now).microseconds
        }
    }

    private func windowPieces(in directory: URL) throws {
        let (store, todos) = try seeded(.o1, in: directory)
        var model = ObserveModel(rows: ObserveWorkload.o1.rows)
        var random = SeededGenerator(seed: Workloads.seed ^ 0xB4EA)
        var index = 0
        /// The next write of the given kind (O1's sequence: every 10th is a flip).
        func next(flip: Bool) -> ObserveTodo {
            while (index % 10 == 9) != flip { index += 1 }
            defer { index += 1 }
            let record = model.nextWrite(.o1, index: index, using: &random).record
            model.apply(record)
            return record
        }
        let window = todos.filter(Column("done") == false).order(by: Column("rank")).limit(ObserveModel.window)

        emit("O1", "write", try time { try todos.update(next(flip: false)) })
        let clock = ContinuousClock()
        var afterWrite: [Double] = []
        for _ in 0...reps {
            try todos.update(next(flip: false))
            let start = clock.now
            let records = try store.read { db in try window.fetchAll(in: db) }
            afterWrite.append(start.duration(to: clock.now).microseconds)
            blackHole(records)
        }
        emit("O1", "fetch_window", Array(afterWrite.dropFirst()))
        emit("O1", "fetch_window_warm", try time { blackHole(try store.read { db in try window.fetchAll(in: db) }) })

        let ids = try store.read { db in try window.fetchAll(in: db) }.map(\.id)
        var changed = ids
        changed.remove(at: 10)
        changed.append(UUID().uuidString)
        emit("O1", "diff_ids", time { blackHole(Changeset(from: ids, to: changed)) })

        let serial = DispatchQueue(label: "ripple-bench.observe.breakdown")
        let arrived = DispatchSemaphore(value: 0)
        let hops = (0...reps).map { _ -> Double in
            let start = clock.now
            let end = ObserveLocked<ContinuousClock.Instant?>(nil)
            DispatchQueue.global(qos: .userInitiated).async {
                serial.async {
                    end.set(clock.now)
                    arrived.signal()
                }
            }
            arrived.wait()
            return start.duration(to: end.get()!).microseconds
        }
        emit("O1", "hop", Array(hops.dropFirst()))

        let subscription = try window.live().subscribe(on: .immediate) { event in blackHole(event) }
        emit("O1", "write_immediate_title", try time { try todos.update(next(flip: false)) })
        emit("O1", "write_immediate_flip", try time { try todos.update(next(flip: true)) })
        subscription.cancel()
    }

    private func rangePieces(in directory: URL) throws {
        let (_, todos) = try seeded(.o3, in: directory)
        var model = ObserveModel(rows: ObserveWorkload.o3.rows)
        var random = SeededGenerator(seed: Workloads.seed ^ 0xB4EA)
        var index = 0
        for count in [1, 100] {
            let subscriptions = try (0..<count).map { range in
                try todos.filter(Column("rank") >= range * ObserveModel.rangeWidth
                                 && Column("rank") < (range + 1) * ObserveModel.rangeWidth)
                    .order(by: Column("rank")).live().subscribe(on: .immediate) { event in blackHole(event) }
            }
            emit("O3", "write_immediate_o3_\(count)", try time {
                // With one subscriber, write in its range, so that it always refreshes.
                var write = model.nextWrite(.o3, index: index, using: &random).record
                if count == 1 { write = model.byRank[write.rank % ObserveModel.rangeWidth] }
                write.title = "breakdown \(index)"
                index += 1
                try todos.update(write)
                model.apply(write)
            })
            subscriptions.forEach { $0.cancel() }
        }
    }
}
