import Foundation
import RippleTesting
import Testing

/// `ripple demo`, run as a newcomer runs it: it explains itself, and its JSON speaks the
/// transcripts' vocabulary.
@Suite(.timeLimit(.minutes(15))) struct DemoCommandTests {
    func run(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        let executable = try #require(RippleExecutable.url(), "the ripple executable is not built")
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let (outputHandle, errorHandle) = (output.fileHandleForReading, errors.fileHandleForReading)
        let (out, err) = try await Wait.run(process, "`ripple \(arguments.joined(separator: " "))`") {
            (String(decoding: outputHandle.readToEndRetryingInterrupts(), as: UTF8.self),
             String(decoding: errorHandle.readToEndRetryingInterrupts(), as: UTF8.self))
        }
        return (process.terminationStatus, out, err)
    }

    @Test func theDemoShowsTitlesMarksAndALegend() async throws {
        let demo = try await run(["demo"])
        #expect(demo.status == 0, "\(demo.errors)")
        #expect(demo.output.contains("Legend: + inserted"))
        #expect(demo.output.contains("+   5  Call the plumber"), "\(demo.output)")
        #expect(demo.output.contains("~   3  Water the ferns  (changed: title)"))
        #expect(demo.output.contains("↕   1  Renew the car insurance  (changed: rank; from row 12)"))
        #expect(demo.output.contains("−      Pay rent  (was row 3)"))
        #expect(!demo.output.contains("#21"), "ids are not shown")
    }

    @Test func theDemosJSONLinesAreTranscriptSteps() async throws {
        let demo = try await run(["demo", "--json"])
        #expect(demo.status == 0, "\(demo.errors)")
        let lines = demo.output.split(separator: "\n")
        #expect(lines.count == 10)
        let steps = try lines.map { try JSONDecoder().decode(Transcript.Step.self, from: Data($0.utf8)) }
        #expect(steps.first?.previousVersion == nil)
        #expect(steps.contains { !$0.updatedColumns.isEmpty })
        #expect(!demo.output.contains("\"columns\""))
        try replay(Transcript(query: "demo", steps: steps))
    }

    @Test func theDemoKeepsItsStoreWhenAsked() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-demo-keep-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("demo.sqlite").path
        let demo = try await run(["demo", "--keep", path])
        #expect(demo.status == 0, "\(demo.errors)")
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(demo.errors.contains("swift run ripple history \(path)"))
        let again = try await run(["demo", "--keep", path])
        #expect(again.status != 0 && again.errors.contains("exists"), "\(again.errors)")

        // `ripple info` tells what the kept store holds.
        let info = try await run(["info", path])
        #expect(info.status == 0, "\(info.errors)")
        #expect(info.output.contains("version 13; history from version 1 (ripple history --from 1 … --to 13)"), "\(info.output)")
        #expect(info.output.contains("change log: 15 entries over 13 versions"), "\(info.output)")
        #expect(info.output.contains("todos  20 rows"), "\(info.output)")
        // The range info gives is one history accepts; one version earlier is refused, saying why.
        let fromInfo = try await run(["history", path, "--table", "todos", "--from", "1"])
        #expect(fromInfo.status == 0, "\(fromInfo.errors)")
        let tooEarly = try await run(["history", path, "--table", "todos", "--from", "0"])
        #expect(tooEarly.status != 0 && tooEarly.errors.contains("can start at version 1 at the earliest"), "\(tooEarly.errors)")
        // The command the demo suggests: `ripple history` up to the current version by default.
        let history = try await run(["history", path, "--table", "todos", "--where", "done = 0", "--order-by", "rank", "--from", "2"])
        #expect(history.status == 0, "\(history.errors)")
        #expect(history.output.hasPrefix("version 2 (start): 17 rows"), "\(history.output)")
        #expect(history.output.contains("version 13: 3 deleted"), "\(history.output)")
        let missing = try await run(["info", directory.appendingPathComponent("none.sqlite").path])
        #expect(missing.status != 0 && missing.errors.contains("does not exist"), "\(missing.errors)")
    }
}
