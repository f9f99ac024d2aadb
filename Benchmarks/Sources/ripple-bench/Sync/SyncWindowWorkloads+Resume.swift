import Foundation
import PostgresNIO
import RippleSync

extension SyncWindowWorkloads {
    /// S5's missed commits, the window rows they touch, and the timed resumes (and snapshots).
    static let missedCommits = 1_000
    static let touchedRows = 10
    static let resumeReps = 5
    static let s5TargetRatio = 0.1

    /// S5: a client holding the window goes away; 1,000 commits each retitle one of 10 rows of
    /// the window; the client comes back with its resume point. Its first frame (one changeset,
    /// checked to turn its rows into the window's) is counted and timed from `subscribe` to
    /// arrival, beside a fresh subscription's snapshot — each on a new socket, nobody else
    /// subscribed (both start their live query afresh), `resumeReps` times each.
    func resume(node: SyncNode, cluster: SyncCluster) async -> Int {
        var lines = SyncLines(.s5)
        SyncProgress.phase = "S5: missed commits"
        Report.note("S5: resume after \(Self.missedCommits) missed commits touching \(Self.touchedRows) rows of the window")
        let id = "todos"
        do {
            // The client that goes away, and where it stood.
            let (leaving, first) = try await Self.subscribeWindow(node, id: id)
            await leaving.close()
            guard case .changes(let lsn, let snapshots, _) = try first.message(), let held = snapshots[id] else {
                throw SyncBenchError("the first frame holds no snapshot")
            }
            let point = ResumePoint(basis: held.basis, lsn: lsn)
            let ids = try Self.windowIDs(first)
            let touched = (0..<Self.touchedRows).map { ids[$0 * Self.windowSize / Self.touchedRows + Self.windowSize / 20] }

            // The commits it misses; a watcher tells when the node has them all.
            let (watcher, _) = try await Self.subscribeWindow(node, id: "watch")
            let writer = try await cluster.connect(id: 51)
            for index in 0..<Self.missedCommits {
                let row = touched[index % touched.count]
                try await writer.execute("UPDATE todos SET title = \("Todo \(row): revision \(index)") WHERE id = \(row)")
            }
            try? await writer.close()
            for _ in 0..<Self.missedCommits { _ = try await watcher.nextChanges() }
            await watcher.close()
            try await Task.sleep(for: .milliseconds(200))

            SyncProgress.phase = "S5: resumes and snapshots"
            var resumed = SyncLatencies()
            var fresh = SyncLatencies()
            var resumedBytes = 0
            var snapshotBytes = 0
            for _ in 0..<Self.resumeReps {
                let (resumeFrame, resumeTime) = try await firstFrame(node, id: id, resume: point)
                guard case .changes(_, let resumeSnapshots, let changesets) = try resumeFrame.message(), resumeSnapshots.isEmpty,
                      let changeset = changesets[id] else {
                    throw SyncBenchError("the resume's first frame is not one changeset: \(resumeFrame.text.prefix(300))")
                }
                let (snapshotFrame, snapshotTime) = try await firstFrame(node, id: id, resume: nil)
                guard case .changes(_, let freshSnapshots, _) = try snapshotFrame.message(), let snapshot = freshSnapshots[id] else {
                    throw SyncBenchError("the fresh subscription's first frame holds no snapshot")
                }
                if try changeset.apply(to: held.rows) != snapshot.rows {
                    lines.error("ripple", "the resumed rows differ from the fresh snapshot's")
                }
                if changeset.updates.count != Self.touchedRows
                    || !(changeset.deletes.isEmpty && changeset.inserts.isEmpty && changeset.moves.isEmpty) {
                    lines.error("ripple", "the resume's changeset is not \(Self.touchedRows) updates: \(resumeFrame.text.prefix(300))")
                }
                resumed.add(resumeTime)
                fresh.add(snapshotTime)
                (resumedBytes, snapshotBytes) = (resumeFrame.bytes, snapshotFrame.bytes)
            }
            let common: [JSONField] = [("commits", .int(Self.missedCommits)), ("touched_rows", .int(Self.touchedRows)),
                                       ("rows", .int(Self.windowSize))]
            lines.impl("ripple", [("bytes", .int(resumedBytes))] + resumed.fields + common)
            lines.impl("snapshot", [("bytes", .int(snapshotBytes))] + fresh.fields + common)
            let ratio = Double(resumedBytes) / Double(snapshotBytes)
            lines.ratio("ripple/snapshot", [("bytes_ratio", .number(ratio)),
                                            ("p50_ratio", .number(resumed.percentile(0.5) / fresh.percentile(0.5)))])
            lines.target("ripple/snapshot bytes_ratio <= 0.1", ratio, met: ratio <= Self.s5TargetRatio)
        } catch {
            lines.error("ripple", describe(error))
        }
        return lines.failures
    }

    /// A new socket's first frame for a subscription to the window, and the time from sending
    /// `subscribe` to its arrival.
    private func firstFrame(_ node: SyncNode, id: String, resume: ResumePoint?) async throws -> (SyncSocket.Frame, Duration) {
        let socket = try await SyncSocket(url: node.url)
        do {
            try await socket.hello(try node.token())
            let start = ContinuousClock.now
            try await socket.send(.subscribe(id: id, query: Self.window, resume: resume))
            let frame = try await socket.nextChanges()
            await socket.close()
            // Closed and unsubscribed before the next subscription starts afresh.
            try await Task.sleep(for: .milliseconds(50))
            return (frame, frame.at - start)
        } catch {
            await socket.close()
            throw error
        }
    }
}
