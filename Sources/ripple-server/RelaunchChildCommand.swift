#if Sync
import ArgumentParser
import Foundation
import Ripple
import RippleSync
import RippleSyncClient

/// `ripple-server relaunch-child` (hidden): an app that the client's relaunch test kills at
/// random moments and launches again over the same store. It declares two subscriptions
/// (`items` and `counters`, each a whole table by id), and every few milliseconds adds one to a
/// random counter in its local store (each such write one mutation pushed to the node).
///
/// It prints one JSON object per line on stdout, each written whole: first what its store kept
/// from earlier launches (`{"stored": ["counters", "items"]}`), then, after each frame the client
/// applied, what it received so far in this launch (`{"snapshots": {…}, "changesets": {…}}`).
struct RelaunchChildCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relaunch-child",
        abstract: "A client that subscribes and pushes until killed (the relaunch test's child).",
        shouldDisplay: false)

    @Option(help: "The node's /sync address.")
    var url: String

    @Option(help: "A signed token.")
    var token: String

    @Option(help: "The local store's file.")
    var store: String

    @Option(help: "The seed of the counters' choice.")
    var seed: UInt64 = 1

    @Option(help: "Milliseconds between two increments.")
    var interval = 20

    @Option(help: "Stop incrementing after this many (the client keeps running until killed).")
    var increments = Int.max

    func run() async throws {
        let store = try Store(path: self.store)
        let token = self.token
        let client = SyncClient(url: url, store: store) { token }
        await client.setBackoff(min: .milliseconds(50), max: .milliseconds(500))
        try await client.start()
        let stored = try await client.storedSubscriptions().keys.sorted()
        Self.say(["stored": stored])
        let reporter = Task {
            for await event in client.events {
                guard case .applied = event else { continue }
                let traffic = await client.traffic()
                Self.say(["snapshots": traffic.snapshots, "changesets": traffic.changesets])
            }
        }
        defer { reporter.cancel() }
        for table in ["items", "counters"] {
            try await client.subscribe(table, QueryDescription(table: table, order: [OrderDescription(column: "id")]))
        }
        var random = SplitMix(seed: seed)
        var done = 0
        while true {
            try await Task.sleep(for: .milliseconds(interval))
            guard done < increments else { continue }
            let id = Int64(random.next() % 5) + 1
            do {
                try store.write { db in
                    // (Until the first snapshot, the table is not there: nothing to add to yet.)
                    guard try db.fetchValue("SELECT 1 FROM sqlite_schema WHERE name = 'counters'", as: Int.self) != nil else { return }
                    try db.execute("UPDATE counters SET n = n + 1 WHERE id = ?", [id])
                }
                done += 1
            } catch {
                FileHandle.standardError.write(Data("the increment failed: \(error)\n".utf8))
            }
        }
    }

    /// Writes `object` as one JSON line on stdout, whole.
    static func say(_ object: [String: Any]) {
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        data.append(UInt8(ascii: "\n"))
        FileHandle.standardOutput.write(data)
    }
}

/// SplitMix64: a small seeded generator (the child's choices repeat for a seed).
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
#endif
