import Foundation
import Ripple

/// O4's Ripple processes: a plain store writes; another store, in the observer process, hears of
/// each commit through its watch on the file (polling off) and delivers the window's changeset.
extension ObserveRipple {
    /// The writer process's store.
    final class Writer: ObserveChildWriter {
        private let store: Store
        private let todos: RecordCollection<ObserveTodo>

        init(path: String) throws {
            store = try Store(path: path)
            todos = try store.collection("todo", of: ObserveTodo.self)
        }

        var wakesObserver: Bool { false }

        func write(_ record: ObserveTodo) throws {
            try todos.update(record)
        }

        func close() {}
    }

    /// What the observer's handler has seen.
    private struct Progress {
        /// When the handler received each write (0: not yet).
        var times: [UInt64]
        /// The newest write acknowledged.
        var acknowledged = 0
        var events = 0
    }

    /// The observer process: subscribes to the window on a store that watches the file and never
    /// polls, says it is ready once the initial event came, and acknowledges each write from the
    /// handler whose changeset shows it — until the writer's ``ObservePipe/end``. With `probe`,
    /// an ``ObserveNoticeProbe`` times the notice path (in ``ObserveNoticeProbe/Mode/notices``,
    /// in place of the store's watch).
    static func observe(path: String, writes: Int, warmUp: Int, probe mode: ObserveNoticeProbe.Mode? = nil,
                        input: ObservePipe, output: ObservePipe) throws -> ObserveChildReport {
        var configuration = Store.Configuration()
        // The event must come from the file watch, not from a poll.
        configuration.externalWritePollInterval = nil
        configuration.watchesFile = mode != .notices
        let store = try Store(path: path, configuration: configuration)
        let todos = try store.collection("todo", of: ObserveTodo.self)
        let window = todos.filter(Column("done") == false).order(by: Column("rank")).limit(ObserveModel.window)
        let progress = ObserveLocked(Progress(times: Array(repeating: 0, count: writes)))
        let subscribed = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "ripple-bench.observe.o4")
        let subscription = try window.live().subscribe(on: .queue(queue), onError: { error in
            ObserveChild.fail("ripple observer: the live query failed: \(error)")
        }) { event in
            let now = MonotonicClock.now()
            if event.isInitial {
                subscribed.signal()
                return
            }
            // The write is the newest one the changeset's updated rows show.
            let snapshot = event.snapshot
            let sequence = event.changeset.updates.compactMap { ObserveModel.writeNumber(in: snapshot[$0.new].title) }.max()
            let acknowledge = progress.withLock { progress -> Bool in
                if progress.acknowledged >= warmUp { progress.events += 1 }
                guard let sequence, sequence > progress.acknowledged, sequence <= writes else { return false }
                progress.times[sequence - 1] = now
                progress.acknowledged = sequence
                return true
            }
            if acknowledge, let sequence {
                do { try output.send(Int64(sequence)) } catch { ObserveChild.fail("ripple observer: \(error)") }
            }
        }
        defer { subscription.cancel() }
        guard subscribed.wait(timeout: .now() + ObserveChild.timeout) == .success else {
            throw ObserveFailure("ripple observer: no initial event within \(Int(ObserveChild.timeout)) s")
        }
        let probe = try mode.map { try ObserveNoticeProbe(path: path, mode: $0, store: store) }
        try output.send(ObservePipe.ready)
        guard try input.receive(timeout: nil) == ObservePipe.end else {
            throw ObserveFailure("ripple observer: the writer ended without saying so")
        }
        // The handler may still run (a late event): take the state as it is now.
        let seen = progress.get()
        return ObserveChildReport(times: seen.times, called: [], events: seen.events, wakes: probe?.stop())
    }
}
