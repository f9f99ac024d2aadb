import Foundation
import Ripple
import RippleTesting

/// `ripple watch` once its query is ready: shows each event of the live query, records it when
/// asked, and ends on SIGINT or SIGTERM (status 0) or when the query fails (status 1) — the
/// terminal restored and the transcript written either way.
///
/// Everything happens on one serial queue — the events, the signals, the end — while the main
/// thread waits for the end: the signals are heard by dispatch sources, so nothing runs in a
/// signal handler.
final class WatchSession: @unchecked Sendable {   // every var is used only on `queue`
    private let queue = DispatchQueue(label: "ripple.watch")
    private let ended = DispatchSemaphore(value: 0)
    private let display: WatchDisplay
    private let recordPath: String?
    /// The exit status, once the watch ends.
    private var status: Int32?
    /// The snapshot of the last event, which the next one's changeset applies to.
    private var previous: [Row] = []
    /// The events so far, when recording.
    private var transcript: Transcript?

    /// The signals that end the watch.
    private static let terminationSignals = [SIGINT, SIGTERM]

    init(display: WatchDisplay, recordPath: String?) {
        self.display = display
        self.recordPath = recordPath
    }

    /// Keeps SIGINT, SIGTERM and SIGWINCH (the terminal was resized) pending, rather than acting
    /// on them, until a dispatch source takes them. Call before any other thread starts: threads
    /// inherit the mask, and a signal that reaches a thread not holding it is acted on at once —
    /// lost (ignored) or ending the process — which happens before a new source is set up.
    static func holdSignals() {
        var signals = sigset_t()
        sigemptyset(&signals)
        for number in terminationSignals + [SIGWINCH] {
            sigaddset(&signals, number)
            signal(number, SIG_IGN)
        }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Shows `live`'s events until a termination signal or an error; returns the exit status.
    func run(_ live: LiveQuery<Row>) -> Int32 {
        var sources = Self.terminationSignals.map { number in
            source(for: number) { $0.finish(0) }
        }
        if display.mode == .terminal {
            sources.append(source(for: SIGWINCH) { $0.display.redraw() })
        }
        queue.sync {
            if recordPath != nil { transcript = Transcript(query: live.description) }
            display.begin()
        }
        let subscription = live.subscribe(on: .queue(queue), onError: { [self] error in
            queue.async { self.fail(error) }
        }) { [self] event in
            try receive(event)
        }
        ended.wait()
        subscription.cancel()
        for source in sources { source.cancel() }
        return queue.sync { close() }
    }

    /// A resumed source that runs `handler` on the queue when signal `number` comes.
    private func source(for number: Int32, _ handler: @escaping @Sendable (WatchSession) -> Void) -> any DispatchSourceSignal {
        let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
        source.setEventHandler { [self] in handler(self) }
        source.resume()
        return source
    }

    /// Shows and records `event`. Throws (ending the subscription) when it cannot be encoded.
    private func receive(_ event: LiveQueryEvent<Row>) throws {
        guard status == nil else { return }
        try display.show(event, previous: previous)
        if transcript != nil { transcript?.steps.append(display.step(event)) }
        previous = event.snapshot
    }

    /// Ends the watch with status 1, saying why the query failed.
    private func fail(_ error: any Error) {
        guard status == nil else { return }
        display.end()
        Console.error("the watch ended: " + WatchCommand.describe(error))
        finish(1)
    }

    /// Ends the watch with `status` (the first status given counts).
    private func finish(_ status: Int32) {
        guard self.status == nil else { return }
        self.status = status
        ended.signal()
    }

    /// Restores the terminal and writes the transcript; returns the exit status.
    private func close() -> Int32 {
        display.end()
        var status = self.status ?? 0
        if let transcript, let recordPath {
            do {
                try transcript.save(to: URL(fileURLWithPath: recordPath))
                Console.note("recorded \(transcript.steps.count) steps to \(recordPath)")
            } catch {
                Console.error(error.description)
                status = 1
            }
        }
        return status
    }
}
