import BenchSQLite
import Foundation

/// O4's floor on SQLite's C API: the writer process commits, then wakes the observer process
/// through a pipe; the observer re-reads the window into records — no observation, no diff.
extension ObserveFloor {
    /// The writer process's connection.
    final class Writer: ObserveChildWriter {
        private let db: OpaquePointer
        private let update: OpaquePointer

        init(path: String) throws {
            db = CFloor.open(path)
            update = ObserveFloor.prepare(db, ObserveFloor.updateSQL)
        }

        var wakesObserver: Bool { true }

        func write(_ record: ObserveTodo) throws {
            try ObserveFloor.commit(record, with: update, on: db)
        }

        func close() {
            sqlite3_finalize(update)
            sqlite3_close(db)
        }
    }

    /// The observer process: reads the window once, says it is ready, then for each write number
    /// received re-reads the window, reads the clock, checks the window shows that write, and
    /// sends the number back — until the writer's ``ObservePipe/end``.
    static func observe(path: String, writes: Int, warmUp: Int, input: ObservePipe, output: ObservePipe) throws
        -> ObserveChildReport {
        let db = CFloor.open(path)
        let select = prepare(db, selectSQL(.openWindow(limit: ObserveModel.window)))
        defer {
            sqlite3_finalize(select)
            sqlite3_close(db)
        }
        blackHole(records(of: select))
        var report = ObserveChildReport(times: Array(repeating: 0, count: writes), called: [], events: 0)
        try output.send(ObservePipe.ready)
        while true {
            guard let sequence = try input.receive(timeout: nil) else {
                throw ObserveFailure("C observer: the writer ended without saying so")
            }
            if sequence == ObservePipe.end { break }
            let window = records(of: select)
            let now = MonotonicClock.now()
            guard (1...Int64(writes)).contains(sequence),
                  window.contains(where: { ObserveModel.writeNumber(in: $0.title) == Int(sequence) }) else {
                throw ObserveFailure("C observer: the window re-read after write \(sequence) does not show it")
            }
            report.times[Int(sequence) - 1] = now
            if sequence > warmUp { report.events += 1 }
            try output.send(sequence)
        }
        return report
    }
}
