#if Sync
import Foundation
import Logging
import Ripple
import RippleServer
import Testing

/// `ripple-server serve --log-format json`: one JSON object per message, on one line.
struct JSONLogHandlerTests {
    /// The lines a logger writes through a ``JSONLogHandler``, parsed.
    static func logged(_ body: (inout Logger) -> Void) throws -> [[String: Any]] {
        let lines = Locked<[String]>([])
        var logger = Logger(label: "ripple-test") { JSONLogHandler(label: $0) { line in lines.withLock { $0.append(line) } } }
        body(&logger)
        return try lines.withLock { $0 }.map { line in
            #expect(line.hasSuffix("\n") && line.dropLast().allSatisfy { $0 != "\n" }, "not one line: \(line)")
            return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    @Test func eachMessageIsOneJSONObjectWithTimeLevelLabelMessageAndMetadata() throws {
        let lines = try Self.logged { logger in
            logger.logLevel = .info
            logger[metadataKey: "node"] = "a"
            logger.debug("not at info")
            logger.warning("the feed failed; \"quoted\"\nsecond line\t\u{1}", metadata: [
                "attempt": "3", "tables": ["todos", "tags"], "slot": ["name": "ripple_a"],
            ])
        }
        #expect(lines.count == 1)
        let line = try #require(lines.first)
        #expect(Set(line.keys) == ["time", "level", "label", "message", "metadata"])
        #expect(line["level"] as? String == "warning")
        #expect(line["label"] as? String == "ripple-test")
        #expect(line["message"] as? String == "the feed failed; \"quoted\"\nsecond line\t\u{1}")
        let time = try #require(line["time"] as? String)
        #expect(time.firstMatch(of: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) != nil, "\(time)")
        let metadata = try #require(line["metadata"] as? [String: Any])
        #expect(metadata["node"] as? String == "a")
        #expect(metadata["attempt"] as? String == "3")
        #expect(metadata["tables"] as? [String] == ["todos", "tags"])
        #expect((metadata["slot"] as? [String: String]) == ["name": "ripple_a"])
    }
}
#endif
