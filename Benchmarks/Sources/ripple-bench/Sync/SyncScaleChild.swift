import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import NIOWebSocket
import RippleServer

/// `ripple-bench sync-load` (hidden): one process of N1–N2's load generator, run by `sync`.
///
/// It holds sockets `first ..< first + count` of the run, each from `--source` (one of several
/// 127.0.0.x addresses: one address has about 28,000 ephemeral ports), and takes commands on
/// stdin, one per line, answering on stdout:
///
/// * `connect`: opens its sockets (at most `--in-flight` at a time not yet holding their first
///   result), each saying hello as user `u<k>` and subscribing to `own`; answers
///   `connected <ns> <failures> <first failure>` once every socket has its snapshot (`ns`: the
///   instant of the last, `CLOCK_MONOTONIC`).
/// * `more`: subscribes every socket to its other queries (``ScalePlan``); answers
///   `subscribed <ns> <failures> <first failure>`.
/// * `watch`: from now on notes the instant each `changes` frame naming `same` or `mine`
///   arrives; after each full round (every socket holding the id heard once more) prints
///   `got <id> <count>`.
/// * `report`: prints `hits <id> <ns>,<ns>,…` per watched id, in arrival order.
/// * `close`: closes its sockets and exits.
struct SyncScaleChild: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-load",
        abstract: "One process of N1–N2's WebSocket load generator.",
        shouldDisplay: false)

    @Option(help: "The server's address.")
    var host = "127.0.0.1"

    @Option(help: "The server's port.")
    var port: Int

    @Option(help: "The address the sockets connect from (127.0.0.x).")
    var source: String?

    @Option(help: "The run's index of the first socket.")
    var first: Int

    @Option(help: "How many sockets.")
    var count: Int

    @Option(help: "Sockets connecting at once (not yet holding their first result).")
    var inFlight = 64

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = ScaleLoadState(first: first, count: count)
        // Commands are read on a thread of their own: when the parent goes (finished, killed,
        // its watchdog) stdin ends and this process exits, whatever the main thread waits for.
        let commands = SyncLocked<[String]>([])
        let arrived = DispatchSemaphore(value: 0)
        let reader = Thread {
            while let line = readLine() {
                commands.withLock { $0.append(line) }
                arrived.signal()
            }
            Foundation.exit(0)
        }
        reader.start()
        ScaleLoadState.say("started")
        while true {
            arrived.wait()
            let line = commands.withLock { $0.removeFirst() }
            switch line {
            case "connect":
                let gate = DispatchSemaphore(value: inFlight)
                state.beginPhase(count: count)
                for k in first..<(first + count) {
                    gate.wait()
                    state.onFirstResults(k) { gate.signal() }
                    let token = (try? SyncToken.sign(user: ScalePlan.user(k), expires: Date().addingTimeInterval(6 * 3600),
                                                    secret: SyncNode.secret)) ?? ""
                    state.expect(k, ["own"])
                    ScaleWire.connect(group: group, host: host, port: port, path: "/sync", source: source, socket: k, sink: state)
                        .whenComplete { result in
                            switch result {
                            case .success(let channel):
                                state.opened(k, channel)
                                channel.writeAndFlush(ScaleWire.textFrame(ScalePlan.hello(token), allocator: channel.allocator),
                                                      promise: nil)
                                channel.writeAndFlush(ScaleWire.textFrame(ScalePlan.subscribe("own", k), allocator: channel.allocator),
                                                      promise: nil)
                            case .failure(let error):
                                state.failed(k, "socket \(k) did not open: \(error)")
                            }
                        }
                }
                let (at, failures, firstFailure) = state.awaitPhase()
                ScaleLoadState.say("connected \(at) \(failures) \(firstFailure)")
            case "more":
                state.beginPhase(count: count)
                for k in first..<(first + count) {
                    let ids = ScalePlan.moreIDs(k)
                    state.expect(k, Set(ids))
                    guard let channel = state.channel(k) else {
                        state.failed(k, "socket \(k) is not open")
                        continue
                    }
                    for id in ids {
                        channel.writeAndFlush(ScaleWire.textFrame(ScalePlan.subscribe(id, k), allocator: channel.allocator), promise: nil)
                    }
                }
                let (at, failures, firstFailure) = state.awaitPhase()
                ScaleLoadState.say("subscribed \(at) \(failures) \(firstFailure)")
            case "watch":
                state.watch(same: (first..<(first + count)).filter { ScalePlan.moreIDs($0).contains("same") }.count,
                            mine: (first..<(first + count)).filter { ScalePlan.moreIDs($0).contains("mine") }.count)
                ScaleLoadState.say("watching")
            case "report":
                for (id, instants) in state.hits() {
                    ScaleLoadState.say("hits \(id) " + instants.map(String.init).joined(separator: ","))
                }
                ScaleLoadState.say("reported")
            case "close":
                state.closeAll()
                try? group.syncShutdownGracefully()
                ScaleLoadState.say("closed")
                return
            default:
                ScaleLoadState.say("error unknown command \(line)")
            }
        }
    }
}

/// What each socket of N1–N2 subscribes to. Socket `k` belongs to user `u<k>`.
///
/// * `own`: `items WHERE id = k` — 15,000 distinct queries (N1's one subscription per socket);
/// * `grp`: `items WHERE grp = k % 100` — 15,000 subscriptions, 100 distinct queries;
/// * `same` (sockets 0 ..< 10,000): `hot WHERE id = 1` — one query, 10,000 subscriptions;
/// * `mine` (sockets 5,000 ..< 15,000): the table `mine`, under the read rule `owner = user OR
///   shared` — 10,000 per-user queries, every one of which holds the shared row.
///
/// With 15,000 sockets: 50,000 subscriptions, 25,101 distinct live queries.
enum ScalePlan {
    static let sameSockets = 0..<10_000
    static let mineSockets = 5_000..<15_000
    static let groups = 100

    static func user(_ k: Int) -> String { "u\(k)" }

    static func moreIDs(_ k: Int) -> [String] {
        ["grp"] + (sameSockets.contains(k) ? ["same"] : []) + (mineSockets.contains(k) ? ["mine"] : [])
    }

    static func hello(_ token: String) -> String { #"{"type":"hello","protocol":1,"token":""# + token + #""}"# }

    static func subscribe(_ id: String, _ k: Int) -> String {
        let query = switch id {
        case "own": #"{"table":"items","filter":{"column":"id","op":"=","value":\#(k)}}"#
        case "grp": #"{"table":"items","filter":{"column":"grp","op":"=","value":\#(k % groups)}}"#
        case "same": #"{"table":"hot","filter":{"column":"id","op":"=","value":1}}"#
        default: #"{"table":"mine"}"#
        }
        return #"{"type":"subscribe","id":""# + id + #"","query":"# + query + "}"
    }
}

/// The load process's sockets: which first results each still waits for, the watched frames'
/// instants, failures.
final class ScaleLoadState: ScaleFrameSink, @unchecked Sendable {   // every field is guarded by `lock`
    private let lock = NSLock()
    private let first: Int
    private var channels: [(any Channel)?]
    private var pending: [Set<String>]
    private var onDone: [(() -> Void)?]
    private var outstanding = 0
    private var failures = 0
    private var firstFailure = "-"
    private var lastAt: UInt64 = 0
    private var phaseDone = DispatchSemaphore(value: 0)
    private var watching = false
    private var expected: [String: Int] = [:]
    private var instants: [String: [UInt64]] = [:]

    init(first: Int, count: Int) {
        self.first = first
        channels = Array(repeating: nil, count: count)
        pending = Array(repeating: [], count: count)
        onDone = Array(repeating: nil, count: count)
    }

    private static let output = NSLock()

    static func say(_ line: String) {
        output.withLock {
            // (The parent may be gone: a broken pipe is not this process's failure.)
            try? FileHandle.standardOutput.write(contentsOf: Data((line + "\n").utf8))
        }
    }

    func beginPhase(count: Int) {
        lock.withLock {
            outstanding = count
            failures = 0
            firstFailure = "-"
            lastAt = 0
            phaseDone = DispatchSemaphore(value: 0)
        }
    }

    func awaitPhase() -> (UInt64, Int, String) {
        let done = lock.withLock { phaseDone }
        done.wait()
        return lock.withLock { (lastAt, failures, firstFailure) }
    }

    func expect(_ k: Int, _ ids: Set<String>) { lock.withLock { pending[k - first] = ids } }

    func onFirstResults(_ k: Int, _ body: @escaping () -> Void) { lock.withLock { onDone[k - first] = body } }

    func opened(_ k: Int, _ channel: any Channel) { lock.withLock { channels[k - first] = channel } }

    func channel(_ k: Int) -> (any Channel)? { lock.withLock { channels[k - first] } }

    /// Socket `k` has every first result it waited for (or failed): the phase counts it.
    private func settled(_ index: Int, at instant: UInt64) -> (() -> Void)? {
        pending[index] = []
        lastAt = max(lastAt, instant)
        outstanding -= 1
        if outstanding == 0 { phaseDone.signal() }
        defer { onDone[index] = nil }
        return onDone[index]
    }

    func failed(_ k: Int, _ reason: String) {
        let done = lock.withLock { () -> (() -> Void)? in
            failures += 1
            if firstFailure == "-" { firstFailure = reason.replacingOccurrences(of: "\n", with: " ") }
            guard !pending[k - first].isEmpty else { return nil }
            return settled(k - first, at: MonotonicClock.now())
        }
        done?()
    }

    private static let errorPrefix = Array(#"{"type":"error""#.utf8)
    private static let changesPrefix = Array(#"{"type":"changes""#.utf8)
    private static let changesets = Array(#""changesets":{"#.utf8)
    private static let watched = [("same", Array(#""same":{"#.utf8)), ("mine", Array(#""mine":{"#.utf8))]
    private static let snapshotOf = ["own", "grp", "same", "mine"].reduce(into: [String: [UInt8]]()) {
        $0[$1] = Array("\"\($1)\":{\"basis\"".utf8)
    }

    func received(_ bytes: ByteBuffer, at nanoseconds: UInt64, on k: Int, channel: any Channel) {
        if bytes.begins(with: Self.errorPrefix) {
            failed(k, "socket \(k): \(String(buffer: bytes))")
            return
        }
        guard bytes.begins(with: Self.changesPrefix) else { return }
        let (done, rounds) = lock.withLock { () -> ((() -> Void)?, [(String, Int)]) in
            var done: (() -> Void)?
            let index = k - first
            if !pending[index].isEmpty {
                for id in pending[index] where bytes.contains(Self.snapshotOf[id] ?? []) { pending[index].remove(id) }
                if pending[index].isEmpty { done = settled(index, at: nanoseconds) }
            }
            var rounds: [(String, Int)] = []
            if watching, bytes.contains(Self.changesets) {
                for (id, pattern) in Self.watched where bytes.contains(pattern) {
                    instants[id, default: []].append(nanoseconds)
                    let heard = instants[id]!.count
                    if let expected = expected[id], expected > 0, heard % expected == 0 { rounds.append((id, heard)) }
                }
            }
            return (done, rounds)
        }
        done?()
        for (id, heard) in rounds { Self.say("got \(id) \(heard)") }
    }

    func closed(_ k: Int) {
        let (wasPending, watched) = lock.withLock { (!pending[k - first].isEmpty, watching) }
        if wasPending { failed(k, "socket \(k) closed before its first results") }
        if watched { Self.say("error socket \(k) closed") }
    }

    func watch(same: Int, mine: Int) {
        lock.withLock {
            watching = true
            expected = ["same": same, "mine": mine]
            instants = [:]
        }
    }

    func hits() -> [(String, [UInt64])] {
        lock.withLock { instants.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    func closeAll() {
        let open = lock.withLock { () -> [any Channel] in
            watching = false
            return channels.compactMap { $0 }
        }
        for channel in open { channel.close(promise: nil) }
    }
}
