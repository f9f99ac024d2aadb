import Foundation

/// The events of a live query (or group) as an `AsyncSequence`. Each iterator has its own
/// subscription, started by `makeAsyncIterator()` and cancelled when the iterator is dropped or
/// the iterating task is cancelled. An error ending the stream is thrown by `next()`.
public struct LiveQueryEvents<Event: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Event

    private let start: @Sendable (EventChannel<Event>) -> Subscription

    init(start: @escaping @Sendable (EventChannel<Event>) -> Subscription) {
        self.start = start
    }

    public func makeAsyncIterator() -> Iterator {
        let channel = EventChannel<Event>()
        return Iterator(owner: Iterator.Owner(channel: channel, subscription: start(channel)))
    }

    /// Takes events one at a time; the subscription lives as long as the iterator.
    public struct Iterator: AsyncIteratorProtocol {
        final class Owner: Sendable {
            let channel: EventChannel<Event>
            let subscription: Subscription
            init(channel: EventChannel<Event>, subscription: Subscription) {
                self.channel = channel
                self.subscription = subscription
            }
            deinit { subscription.cancel() }
        }

        private let owner: Owner

        init(owner: Owner) { self.owner = owner }

        /// The next event, waiting for one; `nil` once the subscription is cancelled.
        public mutating func next() async throws -> Event? {
            let owner = self.owner
            return try await withTaskCancellationHandler {
                try await owner.channel.next()
            } onCancel: {
                owner.subscription.cancel()
            }
        }
    }
}

/// A one-event hand-off between an observer and an async iterator. The observer offers an event
/// only after the previous one was taken, so one slot is enough; taking an event tells the
/// observer it may refresh again.
final class EventChannel<Event: Sendable>: @unchecked Sendable {   // every field is guarded by `lock`
    private let lock = NSLock()
    private var slot: (event: Event, taken: @Sendable () -> Void)?
    private var waiter: CheckedContinuation<Event?, any Error>?
    private var isFinished = false
    private var failure: (any Error)?

    /// Hands `event` to the iterator; `taken` runs once the iterator has it.
    func offer(_ event: Event, taken: @escaping @Sendable () -> Void) {
        lock.lock()
        guard !isFinished else {
            lock.unlock()
            return
        }
        if let waiter {
            self.waiter = nil
            lock.unlock()
            waiter.resume(returning: event)
            taken()
        } else {
            slot = (event, taken)
            lock.unlock()
        }
    }

    /// Ends the sequence, with `error` or normally. Events not yet taken are dropped.
    func finish(throwing error: (any Error)?) {
        lock.lock()
        guard !isFinished else {
            lock.unlock()
            return
        }
        isFinished = true
        slot = nil
        let waiter = self.waiter
        self.waiter = nil
        if waiter == nil { failure = error }
        lock.unlock()
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    func next() async throws -> Event? {
        try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            if let (event, taken) = slot {
                slot = nil
                lock.unlock()
                continuation.resume(returning: event)
                taken()
            } else if isFinished {
                let error = failure
                failure = nil
                lock.unlock()
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: nil) }
            } else {
                waiter = continuation
                lock.unlock()
            }
        }
    }
}
