import Foundation
import RippleTesting
import Testing

/// A short `ripple crashtest`: three rounds of a writing process killed with SIGKILL at seeded
/// moments, each followed by the command's checks of the reopened database (integrity, every
/// reported version's changes, the exact rows, a live query's initial snapshot).
///
/// The test runs the `ripple` executable built beside the test bundle (`swift build --build-tests`,
/// as CI does, builds it; so does `swift test`).
@Suite(.timeLimit(.minutes(15))) struct CrashTestTests {
    @Test func threeKilledWritersLoseNothing() async throws {
        let executable = try #require(RippleExecutable.url(),
                                      "the `ripple` executable is not built: run `swift build --build-tests` first")
        let directory = try TemporaryDirectory()
        let process = Process()
        process.executableURL = executable
        process.arguments = ["crashtest", "--rounds", "3", "--seed", "7", "--max-commits", "80",
                             "--path", directory.path("crash")]
        let output = Pipe()
        process.standardOutput = output
        let errors = directory.path("stderr.txt")
        try #require(FileManager.default.createFile(atPath: errors, contents: nil))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        let outputHandle = output.fileHandleForReading
        let text = try await Wait.run(process, "`ripple crashtest`", within: .seconds(600)) {
            String(decoding: outputHandle.readToEndRetryingInterrupts(), as: UTF8.self)
        }
        let diagnostics = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""

        let lines = text.split(separator: "\n").map(String.init)
        #expect(process.terminationStatus == 0, "\(text)\(diagnostics)")
        #expect(lines.filter { $0.hasPrefix("round ") }.count == 3, "\(text)")
        let last = try #require(lines.last, "no output; stderr: \(diagnostics)")
        let pattern = #/^rounds=3 versions_verified=(\d+) lost=0 integrity=ok$/#
        let match = try #require(last.wholeMatch(of: pattern), "last line: \(last); stderr: \(diagnostics)")
        #expect(Int(match.1) ?? 0 >= 3, "at least one version verified per round")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
    }
}
