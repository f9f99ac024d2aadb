#if Sync
import Logging
import Ripple
@testable import RippleServer
import RippleTesting
import Testing

/// A node's stop that outlasts its grace says which parts still run, again while they do, and
/// nothing once they ended or the stop finished.
@Suite(.timeLimit(.minutes(1)))
struct StopWatchTests {
    /// The messages logged through it, in order.
    final class Lines: Sendable {
        private let lock = Locked<[(Logger.Level, String)]>([])
        var all: [(Logger.Level, String)] { lock.withLock { $0 } }
        func append(_ level: Logger.Level, _ message: String) { lock.withLock { $0.append((level, message)) } }
    }

    struct Capture: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.append(event.level, "\(event.message)") }
    }

    @Test func aStopThatOutlastsItsGraceNamesThePartsStillRunning() async throws {
        let lines = Lines()
        let logger = Logger(label: "test") { _ in Capture(lines: lines) }
        let parts = Locked(["the HTTP listener", "the feed from Postgres"])
        let watch = StopWatch(parts: parts, grace: .milliseconds(20), overtime: .milliseconds(10), every: .milliseconds(30), logger: logger)
        watch.begin()
        watch.begin()   // again: one watch
        #expect(lines.all.map(\.1) == ["stopping: telling the sockets to come back later, then stopping the node's parts"])
        try await Wait.until("the watch to name the parts twice") { lines.all.filter { $0.0 == .error }.count >= 2 }
        let first = try #require(lines.all.first { $0.0 == .error }?.1)
        #expect(first.hasPrefix("stopping: still running "), "\(first)")
        #expect(first.hasSuffix("after the stop began (the stop grace is 0.02 seconds): the HTTP listener, the feed from Postgres"), "\(first)")
        // One part ends: the next line names the other alone.
        parts.withLock { $0 = ["the feed from Postgres"] }
        let seen = lines.all.count
        try await Wait.until("the watch to name the part left") { lines.all.count > seen }
        #expect(lines.all.last?.1.hasSuffix(": the feed from Postgres") == true, "\(lines.all)")
        watch.end()
        await watch.finished()   // (a line it was saying as it ended comes before)
        let ended = lines.all.count
        try await Task.sleep(for: .milliseconds(150))   // several periods: nothing more after the end
        #expect(lines.all.count == ended, "\(lines.all)")
    }

    @Test func aStopWithinItsGraceSaysNothingMore() async throws {
        let lines = Lines()
        let parts = Locked(["the sockets"])
        let watch = StopWatch(parts: parts, grace: .milliseconds(20), overtime: .milliseconds(10), every: .milliseconds(10),
                              logger: Logger(label: "test") { _ in Capture(lines: lines) })
        watch.begin()
        parts.withLock { $0 = [] }
        try await Task.sleep(for: .milliseconds(100))
        #expect(lines.all.filter { $0.0 == .error }.isEmpty)
        watch.end()
    }
}
#endif
