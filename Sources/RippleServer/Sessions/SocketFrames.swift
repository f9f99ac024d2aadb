#if Sync
import RippleSync

/// What one socket has been told and what waits for it — the pure heart of a ``SyncSession``,
/// tested without sockets or Postgres. The session holds it under its lock and performs what it
/// returns (waking its writer, closing).
///
/// * Subscriptions' events are filed under the replica version they belong to; a version's
///   frame is made when the feed finishes the version (``flush(upTo:position:)``): one
///   `changes` frame with every subscription the transaction changed, then an `error` frame for
///   each subscription it ended. Versions go out in order, each labelled with its position.
/// * A heartbeat is due when the socket stands behind the replica and nothing waits.
/// * Frames wait in a queue bounded in bytes: a socket whose waiting frames already pass the
///   bound when another comes is dropped — its queue emptied, one `slow_consumer` error left
///   to write, nothing more accepted.
struct SocketFrames {
    /// The generation of each subscription the socket holds (a resubscription under the same id
    /// gets a new one: events of the old one are not sent).
    private(set) var subscriptions: [String: Int] = [:]
    private var nextGeneration = 0
    private var pending: [Int64: Pending] = [:]
    /// The position of the last frame or heartbeat queued.
    private(set) var lastPosition = PGOutput.LSN(0)
    private var queue: [[UInt8]] = []
    private var head = 0
    /// Bytes queued and not yet written.
    private(set) var queuedBytes = 0
    /// No more frames are accepted (the socket closes once the queue is written).
    private(set) var isClosing = false
    /// The socket was dropped for not reading.
    private(set) var wasDropped = false
    let maxQueuedBytes: Int

    struct Item {
        var id: String
        var generation: Int
        var json: [UInt8]
    }

    private struct Pending {
        var snapshots: [Item] = []
        var changesets: [Item] = []
        /// Subscriptions that ended (`subscription_ended`) or were refused (`invalid_query`).
        var ended: [(id: String, code: SyncErrorCode, reason: String)] = []
    }

    init(maxQueuedBytes: Int) { self.maxQueuedBytes = maxQueuedBytes }

    // MARK: Subscriptions

    /// Reserves `id` for a new subscription and returns its generation; `nil` when the socket
    /// already has one under `id`.
    mutating func reserve(_ id: String) -> Int? {
        guard subscriptions[id] == nil else { return nil }
        nextGeneration += 1
        subscriptions[id] = nextGeneration
        return nextGeneration
    }

    /// Forgets subscription `id`; whether it existed. Its waiting events are not sent.
    @discardableResult
    mutating func remove(_ id: String) -> Bool { subscriptions.removeValue(forKey: id) != nil }

    /// Whether subscription `id` is still the one of `generation`.
    func holds(_ id: String, generation: Int) -> Bool { subscriptions[id] == generation }

    /// Files a subscription's event under `version`; `true` when it ended the subscription.
    @discardableResult
    mutating func file(_ event: SubscriptionEvent, subscription id: String, generation: Int, at version: Int64) -> Bool {
        guard holds(id, generation: generation) else { return false }
        switch event.kind {
        case .snapshot: pending[version, default: Pending()].snapshots.append(Item(id: id, generation: generation, json: event.json))
        case .changes: pending[version, default: Pending()].changesets.append(Item(id: id, generation: generation, json: event.json))
        case .ended(let reason, let code):
            pending[version, default: Pending()].ended.append((id, code, reason))
            subscriptions[id] = nil
            return true
        case .refused(let reason):
            pending[version, default: Pending()].ended.append((id, .invalidQuery, reason))
            subscriptions[id] = nil
            return true
        }
        return false
    }

    // MARK: Frames

    /// Whether events wait for versions up to `version`.
    func hasPending(upTo version: Int64) -> Bool { pending.keys.contains { $0 <= version } }

    /// Queues the frames of the versions up to `version`, in order, each labelled with its
    /// position (never below the socket's last); `true` when anything was queued. Sockets
    /// flushed with one `memo` share the frames that are alike.
    @discardableResult
    mutating func flush(upTo version: Int64, position: (Int64) -> PGOutput.LSN, memo: FrameMemo? = nil) -> Bool {
        guard !pending.isEmpty else { return false }
        var queued = false
        var due = pending.keys.filter { $0 <= version }
        if due.count > 1 { due.sort() }
        for next in due {
            let items = pending.removeValue(forKey: next)!
            let label = max(position(next), lastPosition)
            let live = { (item: Item) in self.holds(item.id, generation: item.generation) }
            let (snapshots, changesets) = (items.snapshots.filter(live), items.changesets.filter(live))
            if !snapshots.isEmpty || !changesets.isEmpty {
                let frame = memo?.frame(label, snapshots: snapshots, changesets: changesets)
                    ?? Self.changesFrame(label, snapshots: snapshots, changesets: changesets)
                queued = push(frame) || queued
            }
            for (id, code, reason) in items.ended {
                queued = push(ServerMessage.error(code: code, message: reason, id: id).json) || queued
            }
            lastPosition = label
        }
        return queued
    }

    /// Queues a heartbeat when the socket stands behind `position` and nothing waits for
    /// versions up to `version`; `true` when one was queued.
    mutating func heartbeat(version: Int64, position: PGOutput.LSN) -> Bool {
        guard position > lastPosition, !hasPending(upTo: version) else { return false }
        lastPosition = position
        return push(ServerMessage.heartbeat(lsn: position.description).json)
    }

    /// Sets where the socket stands (at `hello`).
    mutating func start(at position: PGOutput.LSN) { lastPosition = position }

    /// `{"type":"changes","lsn":…,"snapshots":{id: …},"changesets":{id: …}}`, spliced from the
    /// events' encodings.
    static func changesFrame(_ position: PGOutput.LSN, snapshots: [Item], changesets: [Item]) -> [UInt8] {
        var out = JSONBytes(reservingCapacity: 64 + (snapshots + changesets).reduce(0) { $0 + $1.json.count + $1.id.utf8.count + 4 })
        out.raw(#"{"type":"changes","lsn":"#)
        out.string(position.description)
        for (name, list) in [("snapshots", snapshots), ("changesets", changesets)] where !list.isEmpty {
            out.raw(",\"\(name)\":{")
            for (offset, item) in list.enumerated() {
                if offset > 0 { out.raw(",") }
                out.string(item.id)
                out.raw(":")
                out.raw(item.json)
            }
            out.raw("}")
        }
        out.raw("}")
        return out.bytes
    }

    // MARK: The queue

    /// Queues a frame; `true` when queued (the writer should wake). A socket whose waiting
    /// frames already pass the bound is dropped instead (one frame larger than the bound is
    /// still sent); a closing socket takes nothing.
    @discardableResult
    mutating func push(_ bytes: [UInt8]) -> Bool {
        guard !isClosing else { return false }
        if queuedBytes > maxQueuedBytes {
            let error = ServerMessage.error(code: .slowConsumer, message: "more than \(maxQueuedBytes) bytes of frames waited for this "
                                            + "socket; reconnect and resume", id: nil).json
            (queue, head, queuedBytes) = ([error], 0, error.count)
            (isClosing, wasDropped) = (true, true)
            return true
        }
        queuedBytes += bytes.count
        queue.append(bytes)
        return true
    }

    /// Queues `bytes` as the socket's last frame.
    mutating func pushLast(_ bytes: [UInt8]) {
        push(bytes)
        isClosing = true
    }

    /// Closes at once: what waits is not written.
    mutating func close() {
        (queue, head, queuedBytes, isClosing) = ([], 0, 0, true)
    }

    /// The next frame to write (counted as waiting until ``written(_:)``); `nil` when none.
    mutating func next() -> [UInt8]? {
        guard head < queue.count else { return nil }
        let frame = queue[head]
        head += 1
        if head == queue.count || head > 1024 {
            queue.removeFirst(head)
            head = 0
        }
        return frame
    }

    /// Whether a frame waits to be written.
    var hasNext: Bool { head < queue.count }

    /// Whether a writer has nothing more to write, ever.
    var isFinished: Bool { isClosing && head >= queue.count }

    /// A frame of `count` bytes was written.
    mutating func written(_ count: Int) { queuedBytes = max(0, queuedBytes - count) }
}

/// The `changes` frames made while one version is flushed to many sockets: sockets told the
/// same thing at the same position (10,000 subscribers of one query) share one frame.
///
/// Used on one thread at a time. An event is known by its encoding's storage (shared by every
/// subscriber of its live query); the memo holds the encodings it saw, so no other can take
/// their place meanwhile.
final class FrameMemo {
    private struct Key: Hashable {
        var position: PGOutput.LSN
        var snapshot: Bool
        var id: String
        var encoding: UnsafeRawPointer?
    }

    private var frames: [Key: (encoding: [UInt8], frame: [UInt8])] = [:]

    init() {}

    /// The frame for `position` and these events: made once per distinct set. Only the common
    /// case is shared (a socket with one subscription changed); others are made afresh.
    func frame(_ position: PGOutput.LSN, snapshots: [SocketFrames.Item], changesets: [SocketFrames.Item]) -> [UInt8] {
        guard snapshots.count + changesets.count == 1, let item = snapshots.first ?? changesets.first, !item.json.isEmpty else {
            return SocketFrames.changesFrame(position, snapshots: snapshots, changesets: changesets)
        }
        let key = Key(position: position, snapshot: !snapshots.isEmpty, id: item.id,
                      encoding: item.json.withUnsafeBytes { UnsafeRawPointer($0.baseAddress) })
        if let known = frames[key] { return known.frame }
        let frame = SocketFrames.changesFrame(position, snapshots: snapshots, changesets: changesets)
        frames[key] = (item.json, frame)
        return frame
    }
}
#endif
