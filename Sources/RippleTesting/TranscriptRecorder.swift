import Foundation
import Ripple

/// Records what a live query delivers as a ``Transcript``: one step per event, from the initial
/// snapshot until ``stop()``.
///
/// With `Delivery/immediate` (the default) the initial event is recorded before `init`
/// returns and each commit's event before the committing `write` returns, so a test reads a
/// complete transcript right after its writes:
///
/// ```swift
/// let recorder = TranscriptRecorder(try todos.order(by: Column("rank")).live())
/// try todos.insert(Todo(id: 1, title: "Milk", rank: 10))
/// let transcript = recorder.stop()    // two steps: the initial snapshot, then the insert
/// ```
///
/// Thread-safe: events may arrive on any thread while another reads ``transcript``.
public final class TranscriptRecorder<Element: Encodable & Sendable>: @unchecked Sendable {   // vars and `encoder` used only holding `lock`
    private let lock = NSCondition()
    private let encoder: JSONEncoder
    private var recorded: Transcript
    private var firstError: (any Error)?
    private var subscription: Subscription?

    /// Starts recording `live`, its events delivered on `delivery`; `encoder` turns each record
    /// into JSON (set its date or key strategies to taste).
    public init(_ live: LiveQuery<Element>, on delivery: Delivery = .immediate,
                encoder: JSONEncoder = JSONEncoder()) {
        self.encoder = encoder
        self.recorded = Transcript(query: live.description)
        let subscription = live.subscribe(on: delivery, onError: { [weak self] error in
            self?.fail(error)
        }) { [weak self] event in
            try self?.record(event)
        }
        lock.withLock {
            if firstError == nil { self.subscription = subscription } else { subscription.cancel() }
        }
    }

    /// The steps recorded so far.
    public var transcript: Transcript { lock.withLock { recorded } }

    /// Why recording ended early, if it did: the query failed, or a record could not be encoded.
    /// No step is recorded after an error.
    public var error: (any Error)? { lock.withLock { firstError } }

    /// Waits until the transcript recorded so far satisfies `condition` (checked at once, then
    /// after each step), recording ends with an error, or `timeout` seconds pass; returns whether
    /// `condition` holds. For deliveries on a queue: explicit synchronization, no sleeps.
    ///
    /// ```swift
    /// let recorder = TranscriptRecorder(live, on: .queue(queue))
    /// try todos.insert(milk)
    /// #expect(recorder.wait { $0.steps.count == 2 })
    /// ```
    @discardableResult
    public func wait(timeout: TimeInterval = 30, until condition: (Transcript) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !condition(recorded) && firstError == nil {
            if !lock.wait(until: deadline) { break }
        }
        return condition(recorded)
    }

    /// Stops recording (no step is added once it returns) and returns the transcript.
    @discardableResult
    public func stop() -> Transcript {
        let subscription = lock.withLock {
            defer { self.subscription = nil }
            return self.subscription
        }
        subscription?.cancel()
        return transcript
    }

    private func record(_ event: LiveQueryEvent<Element>) throws {
        try lock.withLock {
            defer { lock.broadcast() }
            guard firstError == nil else { return }
            do {
                recorded.steps.append(try Transcript.Step(event, encoder: encoder))
            } catch {
                firstError = error
                throw error   // ends the subscription
            }
        }
    }

    private func fail(_ error: any Error) {
        lock.withLock {
            if firstError == nil { firstError = error }
            lock.broadcast()
        }
    }

    deinit { subscription?.cancel() }
}

// MARK: - ManualClock

/// A clock that moves only when told: inject it where your own code stamps records with the
/// time (`createdAt`, `due`…), so that two runs write the same records and their transcripts
/// compare equal. (Ripple itself reads no clock: `Delivery/immediate` is all its live queries
/// need to be deterministic.)
///
/// ```swift
/// let clock = ManualClock()
/// try todos.insert(Todo(id: 1, title: "Milk", created: clock.now))
/// clock.advance(by: 60)
/// ```
///
/// Thread-safe.
public final class ManualClock: @unchecked Sendable {   // `current` is used only holding `lock`
    private let lock = NSLock()
    private var current: Date

    /// A clock showing `now` (by default 2001-01-01 00:00:00 UTC, the reference date).
    public init(now: Date = Date(timeIntervalSinceReferenceDate: 0)) {
        current = now
    }

    /// The time the clock shows.
    public var now: Date { lock.withLock { current } }

    /// Moves the clock forward (or back, for a negative interval) by `interval` seconds.
    public func advance(by interval: TimeInterval) {
        lock.withLock { current += interval }
    }
}
