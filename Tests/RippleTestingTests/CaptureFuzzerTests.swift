import Foundation
import RippleTesting
import Testing

/// The capture fuzzer, short: a few seeds of random schemas and raw SQL writes, every live query
/// and history checked against fresh reads after each commit (`ripple stress --capture` runs it
/// for minutes).
@Suite struct CaptureFuzzerTests {
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomSchemasAndWritesAreObservedExactly(seed: UInt64) throws {
        let report = try CaptureFuzzer.run(seed: seed, operations: 250)
        #expect(report.passed, "\(report.details)")
        #expect(report.commits > 100 && report.checks > 1000, "\(report.summaryLine)")
    }

    /// A run is a function of its seed: the same seed makes the same writes and commits.
    @Test func aSeedReplaysTheSameRun() throws {
        let first = try CaptureFuzzer.run(seed: 11, operations: 60)
        let second = try CaptureFuzzer.run(seed: 11, operations: 60)
        #expect(first.summaryLine == second.summaryLine)
    }
}
