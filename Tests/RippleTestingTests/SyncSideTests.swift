#if !Sync
import Foundation
import RippleTesting
import Testing

/// Ripple Sync's tests, run by a plain `swift test` too: one command runs every test.
///
/// The sync side (`RippleSyncClient`, `RippleServer`, `ripple-server` and their tests) is behind
/// the package's `Sync` trait, so that `swift run ripple demo`, and apps that use the store
/// alone, never resolve, fetch or build its dependencies (Hummingbird, PostgresNIO, SwiftNIO, …).
/// A plain `swift test` builds the package without the trait; this test builds it again with
/// the trait, in a build folder of its own (`.build/sync`: two trait settings in one folder
/// would rebuild each other), and runs the sync side's test targets there. Their output is this
/// test's output, as it comes. `swift test --traits Sync` runs them in-process instead, and
/// leaves this test out.
@Suite(.timeLimit(.minutes(60))) struct SyncSideTests {
    /// The test targets that the `Sync` trait builds.
    static let targets = ["RippleServerTests", "RippleSyncClientTests"]

    @Test func theSyncSidesTestsPassBuiltWithTheSyncTrait() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let scratch = root.appendingPathComponent(".build/sync").path
        let build = try await Self.swift(["build", "--traits", "Sync", "--build-tests", "--scratch-path", scratch],
                                         in: root, "the sync side's build (swift build --traits Sync)", within: .seconds(2400))
        try #require(build == 0, "swift build --traits Sync --build-tests --scratch-path .build/sync failed (status \(build)): its errors are above")
        let filter = "^(\(Self.targets.joined(separator: "|")))\\."
        let test = try await Self.swift(["test", "--skip-build", "--traits", "Sync", "--scratch-path", scratch, "--filter", filter],
                                        in: root, "the sync side's tests (swift test --traits Sync)", within: .seconds(2400))
        #expect(test == 0, "the sync side's tests failed (status \(test)): their report is above; run them alone with swift test --traits Sync --filter '\(filter)'")
    }

    /// Runs `swift` with `arguments` in `directory`, its output going to this process's, and
    /// returns its exit status.
    static func swift(_ arguments: [String], in directory: URL, _ what: String, within limit: Duration) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift"] + arguments
        process.currentDirectoryURL = directory
        // The outer `swift test` describes itself to its test process in variables of its own;
        // the inner one must not take them for its own.
        process.environment = ProcessInfo.processInfo.environment.filter { key, _ in
            !key.hasPrefix("SWIFTPM_") && !key.hasPrefix("XCTest") && !key.hasPrefix("SWT_")
        }
        process.standardOutput = FileHandle.standardOutput
        process.standardError = FileHandle.standardError
        try await Wait.run(process, what, within: limit) { () }
        return process.terminationStatus
    }
}
#endif
