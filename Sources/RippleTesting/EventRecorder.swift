import Foundation
import Ripple

/// Collects what a live query delivers, for a test to read: the events, the last snapshot, the
/// error that ended the stream. It is the lock box a `@Sendable` handler would otherwise need.
///
/// With `Delivery/immediate` (the default) every event is recorded before the call that caused
/// it returns (`subscribe`, the committing `write`), so a test reads the result at once:
///
/// ```swift
/// let recorder = EventRecorder(try todos.order(by: Column("rank")).live())
/// try todos.insert(Todo(id: 1, title: "Milk", rank: 10))
/// #expect(recorder.snapshots == [[], [milk]])
/// #expect(recorder.events.last?.changeset.inserts == [0])
/// ```
public final class EventRecorder<Element: Sendable>: @unchecked Sendable {   // every var is used only holding `lock`
    private let lock = NSCondition()
    private var recorded: [LiveQueryEvent<Element>] = []
    private var ending: (any Error)?
    private var subscription: Subscription?

    /// Starts recording `live`'s events, delivered on `delivery`.
    public init(_ live: LiveQuery<Element>, on delivery: Delivery = .immediate) {
        let subscription = live.subscribe(on: delivery, onError: { [weak self] error in
            self?.update { $0.ending = error }
        }) { [weak self] event in
            self?.update { $0.recorded.append(event) }
        }
        update { $0.subscription = subscription }
    }

    private func update(_ change: (EventRecorder) -> Void) {
        lock.lock()
        change(self)
        lock.broadcast()
        lock.unlock()
    }

    private func reading<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// Every event so far, in order.
    public var events: [LiveQueryEvent<Element>] { reading { recorded } }

    /// The snapshot of each event so far, in order.
    public var snapshots: [[Element]] { reading { recorded.map(\.snapshot) } }

    /// The last snapshot received (empty before the first event).
    public var snapshot: [Element] { reading { recorded.last?.snapshot ?? [] } }

    /// The error that ended the stream, if it did.
    public var error: (any Error)? { reading { ending } }

    /// Waits until `condition` holds for the events so far (checked at once, then after each
    /// event), the stream ends with an error, or `timeout` seconds pass; returns whether it holds.
    /// For deliveries on a queue: explicit synchronization, no sleeps.
    @discardableResult
    public func wait(timeout: TimeInterval = 30, until condition: ([LiveQueryEvent<Element>]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !condition(recorded) && ending == nil {
            if !lock.wait(until: deadline) { break }
        }
        return condition(recorded)
    }

    /// Stops recording: nothing is recorded after it returns.
    public func stop() {
        let subscription = reading { self.subscription }
        subscription?.cancel()
    }
}
