import Dispatch
import Ripple

/// Subscribes and cancels at random, in every way a user can: handlers delivered `.immediate` or
/// on a queue, ``LiveQueryGroup``s, `events()` loops that break out early, and slow handlers
/// that wait at a gate the churn opens one event at a time.
final class StressChurn: Sendable {
    private let access: StressStoreAccess
    private let ledger: StressLedger
    private let queues: [DispatchQueue]
    private let maxSubscribers: Int
    private let immediateOnly: Bool

    init(access: StressStoreAccess, ledger: StressLedger, maxSubscribers: Int, immediateOnly: Bool) {
        self.access = access
        self.ledger = ledger
        self.maxSubscribers = max(1, maxSubscribers)
        self.immediateOnly = immediateOnly
        self.queues = (0..<4).map { DispatchQueue(label: "ripple.stress.delivery.\($0)") }
    }

    /// One random action: subscribe, cancel, or let a slow subscriber take an event.
    func step(using random: inout StressGenerator) {
        let open = ledger.openSubscribers
        let roll = random.int(0...99)
        if open.count < maxSubscribers && (roll < 55 || open.isEmpty) {
            // Below half the allowed number, several at a time: thousands are reached soon.
            let count = open.count < maxSubscribers / 2 ? max(1, maxSubscribers / 400) : 1
            for _ in 0..<count { subscribe(using: &random) }
        } else if roll < 85 || immediateOnly, !open.isEmpty {
            let subscriber = random.pick(open)
            subscriber.cancel()
            ledger.unregister(subscriber)
        } else {
            for subscriber in open where subscriber.slowGate != nil && random.chance(0.5) {
                subscriber.slowGate?.releaseOne()
            }
        }
    }

    /// Opens one subscription of a random kind over one query (or a group of two or three).
    func subscribe(using random: inout StressGenerator) {
        let ledger = self.ledger
        let kind: StressSubscriber.Kind
        if immediateOnly {
            kind = .immediate
        } else {
            kind = random.pick([.immediate, .immediate, .queue, .queue, .slowQueue, .asyncLoop])
        }
        var indices = [random.int(0...ledger.queries.count - 1)]
        if random.chance(0.2) {
            // A group: collection queries of the same table (one record type), or raw queries.
            let first = ledger.queries[indices[0]]
            let fits = ledger.queries.indices.filter { index in
                let query = ledger.queries[index]
                return query.form == first.form && (query.form == .rawSQL || query.table == first.table)
            }
            for _ in 0..<random.int(1...2) { indices.append(random.pick(fits)) }
        }
        let subscriber = ledger.makeSubscriber(kind: kind, queryIndices: indices)
        let live: any StressLiveSet
        do {
            live = try access.live(subscriber.queries)
        } catch {
            ledger.failed(subscriber, error)
            return
        }
        let onError: @Sendable (any Error) -> Void = { error in ledger.failed(subscriber, error) }
        switch kind {
        case .immediate:
            subscriber.attach(live.subscribe(on: .immediate, onError: onError) { ledger.deliver($0, to: subscriber) })
        case .queue:
            subscriber.attach(live.subscribe(on: .queue(random.pick(queues)), onError: onError) { ledger.deliver($0, to: subscriber) })
        case .slowQueue:
            let gate = subscriber.slowGate
            subscriber.attach(live.subscribe(on: .queue(random.pick(queues)), onError: onError) { event in
                ledger.deliver(event, to: subscriber)
                gate?.pass()   // holds the queue until the churn lets it go: later commits coalesce
            })
        case .asyncLoop:
            subscriber.attach(live.iterate(limit: random.int(1...12), { ledger.deliver($0, to: subscriber) }, onEnd: { error in
                if let error { ledger.failed(subscriber, error) } else { ledger.unregister(subscriber) }
            }))
        }
    }

    /// Lets every slow subscriber go for good (before the run settles).
    func releaseSlowSubscribers() {
        for subscriber in ledger.openSubscribers { subscriber.slowGate?.releaseForever() }
    }

    /// Waits for every delivery queue to run what was queued before.
    func drainQueues() {
        for queue in queues { queue.sync {} }
    }
}
