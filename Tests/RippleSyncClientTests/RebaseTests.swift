#if Sync
import Foundation
import Ripple
import RippleSync
import RippleDiffTesting
@testable import RippleSyncClient
import RippleTesting
import Testing

/// The client's rebase against a model, without a server: random local writes (captured by the
/// outbox), random server frames, and the server taking the oldest pending mutation; after every
/// step the local rows must be the server's rows with the pending mutations applied again, in
/// order, each whole or not at all (one that no longer applies is left out).
@Suite struct RebaseTests {
    typealias Rows = [Int64: [SQLValue]]   // id → (id, a, b)

    /// The model of a pending mutation: its row operations.
    enum ModelOp {
        case put([SQLValue]), patch(id: Int64, column: Int, value: SQLValue), delete(Int64)
        /// An update that changed no column: a patch of nothing, which does nothing anywhere.
        case nothing
    }

    /// `ops` applied to `rows` whole, or `nil` when one does not apply (a patch of a missing row).
    static func applying(_ ops: [ModelOp], to rows: Rows) -> Rows? {
        var rows = rows
        for op in ops {
            switch op {
            case .put(let row): rows[row[0].integerValue!] = row
            case .patch(let id, let column, let value):
                guard rows[id] != nil else { return nil }
                rows[id]![column] = value
            case .delete(let id): rows[id] = nil
            case .nothing: break
            }
        }
        return rows
    }

    static let columns = ["id", "a", "b"]
    static let types = ["int8", "int8", "text"]

    static func wire(_ rows: Rows) -> [[WireValue]] {
        rows.keys.sorted().map { id in
            rows[id]!.map { value -> WireValue in
                switch value {
                case .integer(let integer): .integer(integer)
                case .text(let text): .text(text)
                default: .null
                }
            }
        }
    }

    static func local(_ store: Store) throws -> Rows {
        try store.read { db in
            Dictionary(uniqueKeysWithValues: try db.fetchAll("SELECT id, a, b FROM items").map { row in
                (row.values[0].integerValue!, row.values)
            })
        }
    }

    /// A client's store whose subscription `id` holds `rows` (its first result), with the
    /// outbox capturing the app's writes.
    static func client(in directory: TemporaryDirectory, subscription id: String, holding rows: Rows) throws -> Store {
        let store = try Store(path: directory.path("client.sqlite"))
        try store.write(origin: .sync, tag: nil) { db in
            try LocalRows.prepare(db)
            try Outbox.prepare(db)
        }
        _ = store.addCommitParticipant { db, origin in if origin != .sync { try Outbox.seal(db) } }
        let first = LocalChange(subscription: id, table: "items", columns: columns, types: types, key: [0],
                                old: [], new: wire(rows), written: nil, isFirst: true)
        _ = try store.write(origin: .sync, tag: nil) { db in try LocalRows.apply([first], in: db) }
        return store
    }

    /// The rows a subscription that holds only `a < 5` sees of `rows`.
    static func window(_ rows: Rows) -> Rows { rows.filter { $0.value[1].integerValue.map { $0 < 5 } ?? false } }

    /// Writes the server's `rows` (after `previous`) to the local store as a frame of
    /// subscription `id`, which holds the rows `view` keeps — a changeset, or (`snapshot`) the
    /// whole result, as a resume the node could not make into a changeset sends it — settling
    /// `settled`, and rebases, as the client does in one local write.
    static func frame(_ rows: Rows, after previous: Rows, of id: String = "all", holding view: (Rows) -> Rows = { $0 },
                      snapshot: Bool = false, settling settled: [Int64], in store: Store) throws -> [(mutation: Int64, reason: String)] {
        let (shown, before) = (view(rows), view(previous))
        let written = snapshot ? nil : shown.keys.sorted().indices.filter { index in
            let id = shown.keys.sorted()[index]
            return before[id] != shown[id]
        }
        let change = LocalChange(subscription: id, table: "items", columns: columns, types: types, key: [0],
                                 old: wire(before), new: wire(shown), written: written, isFirst: false)
        return try store.write(origin: .sync, tag: nil) { db in
            let touched = try LocalRows.apply([change], in: db)
            return try Rebase.run(touched: touched, settled: settled, in: db)
        }
    }

    /// Found by the sync stress checker with a node replaced (its clients' resumes answered by
    /// snapshots): a device's own inserts of rows outside its subscriptions stayed in its local
    /// store after the server took them, because a snapshot made the rebase take every pending
    /// row of the table — the device's optimistic ones included — for the server's. Here the
    /// subscription holds only `a < 5`, and a third of the frames are snapshots.
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func aWindowedSubscriptionsSnapshotsLeaveOnlyItsRowsAndThePendingOnes(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let directory = try TemporaryDirectory()
        var server: Rows = [1: [.integer(1), .integer(0), .text("x")], 2: [.integer(2), .integer(7), .null]]
        let store = try Self.client(in: directory, subscription: "window", holding: Self.window(server))
        var pending: [(id: Int64, ops: [ModelOp])] = []
        for step in 0..<300 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                let id = Int64.random(in: 1...8, using: &random)
                let value = Int64.random(in: 0...9, using: &random)
                let current = try Self.local(store)[id]
                var ops: [ModelOp] = []
                try store.write { db in
                    switch (Int.random(in: 0..<3, using: &random), current) {
                    case (0, nil):
                        try db.execute("INSERT INTO items(id, a, b) VALUES (?, ?, ?)", [id, value, "s\(step)"])
                        ops = [.put([.integer(id), .integer(value), .text("s\(step)")])]
                    case (1, let current?):
                        try db.execute("UPDATE items SET a = ? WHERE id = ?", [value, id])
                        ops = [current[1] == .integer(value) ? .nothing : .patch(id: id, column: 1, value: .integer(value))]
                    case (2, _?):
                        try db.execute("DELETE FROM items WHERE id = ?", [id])
                        ops = [.delete(id)]
                    default:
                        break
                    }
                }
                if !ops.isEmpty { pending.append((try store.read { db in try Outbox.lastAssigned(db) }, ops)) }
            case 5..<8:
                let previous = server
                let id = Int64.random(in: 1...8, using: &random)
                if Bool.random(using: &random), server[id] != nil {
                    server[id] = nil
                } else {
                    server[id] = [.integer(id), .integer(Int64.random(in: 0...9, using: &random)), .text("o\(step)")]
                }
                _ = try Self.frame(server, after: previous, of: "window", holding: Self.window,
                                   snapshot: Int.random(in: 0..<3, using: &random) == 0, settling: [], in: store)
            default:
                guard let oldest = pending.first else { continue }
                pending.removeFirst()
                let previous = server
                server = Self.applying(oldest.ops, to: server) ?? server
                _ = try Self.frame(server, after: previous, of: "window", holding: Self.window,
                                   snapshot: Int.random(in: 0..<3, using: &random) == 0, settling: [oldest.id], in: store)
            }
            // The rows the subscription holds, then each pending mutation that still applies.
            var expected = Self.window(server)
            for mutation in pending { expected = Self.applying(mutation.ops, to: expected) ?? expected }
            let local = try Self.local(store)
            #expect(local == expected, "seed \(seed), step \(step): local \(local.keys.sorted()) vs \(expected.keys.sorted())")
            if local != expected { return }
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func theLocalRowsAreTheServersWithThePendingMutationsOnTop(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let directory = try TemporaryDirectory()
        var server: Rows = [1: [.integer(1), .integer(0), .text("x")], 2: [.integer(2), .integer(5), .null]]
        let store = try Self.client(in: directory, subscription: "all", holding: server)
        var pending: [(id: Int64, ops: [ModelOp])] = []
        var conflicts = 0

        for step in 0..<300 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                // The app writes its local store.
                let id = Int64.random(in: 1...6, using: &random)
                let value = Int64.random(in: 0...9, using: &random)
                let current = try Self.local(store)[id]
                let exists = current != nil
                var ops: [ModelOp] = []
                try store.write { db in
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0 where !exists:
                        try db.execute("INSERT INTO items(id, a, b) VALUES (?, ?, ?)", [id, value, "s\(step)"])
                        ops = [.put([.integer(id), .integer(value), .text("s\(step)")])]
                    case 1 where exists:
                        try db.execute("UPDATE items SET a = ? WHERE id = ?", [value, id])
                        // Only a changed column is patched (the others are not the app's to send).
                        ops = [current?[1] == .integer(value) ? .nothing : .patch(id: id, column: 1, value: .integer(value))]
                    case 2 where exists:
                        try db.execute("UPDATE items SET b = ? WHERE id = ?", ["s\(step)", id])
                        ops = [current?[2] == .text("s\(step)") ? .nothing : .patch(id: id, column: 2, value: .text("s\(step)"))]
                    case 3 where exists:
                        try db.execute("DELETE FROM items WHERE id = ?", [id])
                        ops = [.delete(id)]
                    default:
                        break
                    }
                }
                if !ops.isEmpty {
                    let assigned = try store.read { db in try Outbox.lastAssigned(db) }
                    pending.append((assigned, ops))
                }
            case 5..<8:
                // Another client changes the server's rows.
                let previous = server
                let id = Int64.random(in: 1...6, using: &random)
                if Bool.random(using: &random), server[id] != nil {
                    server[id] = nil
                } else {
                    server[id] = [.integer(id), .integer(Int64.random(in: 0...9, using: &random)), .text("o\(step)")]
                }
                conflicts += try Self.frame(server, after: previous, settling: [], in: store).count
            default:
                // The server takes the oldest pending mutation (or rejects it: a patch of a
                // row gone), and its frame settles it.
                guard let oldest = pending.first else { continue }
                pending.removeFirst()
                let previous = server
                server = Self.applying(oldest.ops, to: server) ?? server
                conflicts += try Self.frame(server, after: previous, settling: [oldest.id], in: store).count
            }
            // The local rows: the server's, then each pending mutation that still applies.
            var expected = server
            for mutation in pending { expected = Self.applying(mutation.ops, to: expected) ?? expected }
            let local = try Self.local(store)
            #expect(local == expected, "seed \(seed), step \(step): local \(local.keys.sorted()) vs \(expected.keys.sorted())")
            if local != expected { return }
        }
        // Every pending mutation is still in the outbox, nothing else.
        #expect(try store.read { db in try Outbox.count(db) } == pending.count)
        // The model's runs do reach the conflict path.
        if seed == 1 { #expect(conflicts > 0) }
    }
}

private extension SQLValue {
    var integerValue: Int64? { if case .integer(let value) = self { value } else { nil } }
}
#endif
