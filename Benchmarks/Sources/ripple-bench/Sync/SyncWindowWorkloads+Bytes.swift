import Foundation
import RippleSync

extension SyncWindowWorkloads {
    /// The S1 target: a one-column update in a 1,000-row window travels in at most this many bytes.
    static let s1TargetBytes = 150

    /// S1: subscribes to the window, runs a psql UPDATE of one column of its row at index 500, and
    /// counts the `changes` frame the server sends for it; beside it, the same frame carrying the
    /// full row (what row-based sync sends) and the whole window after the change (what
    /// whole-result sync sends), written in the server's format.
    func bytes(node: SyncNode, cluster: SyncCluster) async -> Int {
        var lines = SyncLines(.s1)
        SyncProgress.phase = "S1"
        Report.note("S1: the frame of a one-column UPDATE in a \(Self.windowSize)-row window")
        let id = "todos"
        let socket: SyncSocket
        let first: SyncSocket.Frame
        do {
            (socket, first) = try await Self.subscribeWindow(node, id: id)
        } catch {
            lines.error("ripple", "subscribing to the window: \(describe(error))")
            return lines.failures
        }
        do {
            guard case .changes(_, let snapshots, _) = try first.message(), let snapshot = snapshots[id] else {
                throw SyncBenchError("the first frame holds no snapshot: \(first.text.prefix(200))")
            }
            guard snapshot.rows.count == Self.windowSize, let title = snapshot.columns.firstIndex(of: "title"),
                  snapshot.key.count == 1 else {
                throw SyncBenchError("the window has \(snapshot.rows.count) rows and columns \(snapshot.columns)")
            }
            if case .changes(let lsn, _, _) = try first.message(), SyncWireJSON.snapshotFrame(lsn: lsn, id: id, snapshot) != first.text {
                lines.error("window", "the benchmark writes the snapshot frame otherwise than the server: its bytes would be wrong")
            }
            let target = snapshot.rows[Self.windowSize / 2]
            guard case .integer(let rowID) = target[snapshot.key[0]] else { throw SyncBenchError("the key is not an integer") }
            let newTitle = "Todo \(rowID): water the garden"
            try await cluster.psql("UPDATE todos SET title = '\(newTitle)' WHERE id = \(rowID)")
            let frame = try await socket.nextChanges()
            guard case .changes(let lsn, let moreSnapshots, let changesets) = try frame.message(), moreSnapshots.isEmpty,
                  let changeset = changesets[id] else {
                throw SyncBenchError("the UPDATE's frame holds no changeset: \(frame.text.prefix(200))")
            }
            if changeset.updates.count != 1 || changeset.updates[0].columns.keys.sorted() != [title]
                || !(changeset.deletes.isEmpty && changeset.inserts.isEmpty && changeset.moves.isEmpty) {
                lines.error("ripple", "the changeset is not one update of the title: \(frame.text)")
            }
            if SyncWireJSON.changesFrame(lsn: lsn, id: id, changeset) != frame.text {
                lines.error("full-row", "the benchmark writes the changes frame otherwise than the server: its bytes would be wrong")
            }
            let after = try changeset.apply(to: snapshot.rows)
            if after[Self.windowSize / 2][title] != .text(newTitle) { lines.error("ripple", "the changeset does not carry the new title") }
            var fullRow = changeset
            fullRow.updates = changeset.updates.map { update in
                WireChangeset.Update(old: update.old, new: update.new,
                                     columns: Dictionary(uniqueKeysWithValues: after[update.new].enumerated().map { ($0.offset, $0.element) }))
            }
            let fullRowFrame = SyncWireJSON.changesFrame(lsn: lsn, id: id, fullRow)
            var window = snapshot
            window.rows = after
            let windowFrame = SyncWireJSON.snapshotFrame(lsn: lsn, id: id, window)

            let ripple = frame.bytes
            let common: [JSONField] = [("rows", .int(Self.windowSize)), ("columns", .int(snapshot.columns.count))]
            lines.impl("ripple", [("bytes", .int(ripple)), ("ws_bytes", .int(frame.wireBytes)), ("changed_columns", .int(1)),
                                  ("value_bytes", .int(newTitle.utf8.count))] + common)
            for (name, text) in [("full-row", fullRowFrame), ("window", windowFrame)] {
                let frame = SyncSocket.Frame(text: text, at: .now)
                lines.impl(name, [("bytes", .int(frame.bytes)), ("ws_bytes", .int(frame.wireBytes))] + common)
                lines.ratio("ripple/\(name)", [("bytes_ratio", .number(Double(ripple) / Double(frame.bytes)))])
            }
            lines.target("ripple bytes <= \(Self.s1TargetBytes)", Double(ripple), met: ripple <= Self.s1TargetBytes)
            if ripple > Self.s1TargetBytes {
                // What the frame spends its bytes on: its envelope, empty lists, the position, the value.
                let empty = #""deletes":[],"inserts":[],"moves":[],"#
                Report.note("S1: the frame is \(ripple - Self.s1TargetBytes) bytes over: \(frame.text) — the value is \(newTitle.utf8.count) bytes, "
                            + "the position \(lsn.utf8.count), the empty lists \(frame.text.contains(empty) ? empty.utf8.count : 0)")
            }
        } catch {
            lines.error("ripple", describe(error))
        }
        await socket.close()
        return lines.failures
    }
}
