import Foundation
import Ripple
import RippleTesting
import Testing

/// The tests' bounded waits: each returns what it waited for when it comes, and otherwise ends
/// at its deadline with an error naming what never came — even when what it waits for ignores
/// cancellation or is another process.
@Suite struct WaitTests {
    @Test func aConditionThatNeverHoldsEndsTheWaitNamingIt() async {
        let error = await #expect(throws: Wait.TimedOut.self) {
            try await Wait.until("a condition that never holds", within: .milliseconds(50)) { false }
        }
        #expect(error?.what == "a condition that never holds")
        #expect(error.map { "\($0)" }?.contains("a condition that never holds") == true)
    }

    /// (Set by another thread, not counted in checks: a waiter that a loaded machine kept from
    /// running past its deadline checks once more when it runs, and then finds it.)
    @Test func aConditionThatComesToHoldEndsTheWait() async throws {
        let set = Locked(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.01) { set.withLock { $0 = true } }
        try await Wait.until("a flag another thread sets") { set.withLock { $0 } }
    }

    /// A continuation that nobody resumes ignores cancellation: the wait returns at its deadline
    /// all the same (the operation is left behind, resumed here afterwards).
    @Test func anOperationThatIgnoresCancellationIsLeftBehindAtTheDeadline() async throws {
        let parked = Locked<CheckedContinuation<Int, Never>?>(nil)
        await #expect(throws: Wait.TimedOut.self) {
            _ = try await Wait.value("a continuation nobody resumes", within: .milliseconds(50)) {
                await withCheckedContinuation { continuation in parked.withLock { $0 = continuation } }
            }
        }
        try await Wait.until("the operation to park its continuation") { parked.withLock { $0 != nil } }
        parked.withLock { $0 }?.resume(returning: 0)
        #expect(try await Wait.value("an answer") { 7 } == 7)
    }

    @Test func aStreamsElementsComeOneWaitAtATimeAndItsSilenceEnds() async throws {
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        continuation.yield(1)
        continuation.yield(2)
        #expect(try await Wait.next(stream, "the first element") == 1)
        #expect(try await Wait.next(stream, "the second element") == 2)
        await #expect(throws: Wait.TimedOut.self) {
            _ = try await Wait.next(stream, "an element never sent", within: .milliseconds(50))
        }
    }

    @Test func aSemaphoreNeverSignalledEndsTheWait() throws {
        let semaphore = DispatchSemaphore(value: 0)
        #expect(throws: Wait.TimedOut.self) { try Wait.for(semaphore, "a signal never sent", within: .milliseconds(50)) }
        semaphore.signal()
        try Wait.for(semaphore, "a signal sent")
    }

    /// A child that outlives its deadline is ended, so that reading its output ends too.
    @Test func anOverdueChildProcessIsEndedAndTheWaitThrows() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["600"]
        let output = Pipe()
        process.standardOutput = output
        let error = #expect(throws: Wait.TimedOut.self) {
            try Wait.run(process, "sleep 600", within: .milliseconds(200)) {
                _ = output.fileHandleForReading.readToEndRetryingInterrupts()
            }
        }
        #expect(error?.what == "sleep 600 to exit")
        #expect(!process.isRunning)
        #expect(process.terminationReason == .uncaughtSignal)
    }

    @Test func aChildProcessThatEndsInTimeGivesWhatWasRead() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/echo")
        process.arguments = ["ripple"]
        let output = Pipe()
        process.standardOutput = output
        let text = try Wait.run(process, "echo") {
            String(decoding: output.fileHandleForReading.readToEndRetryingInterrupts(), as: UTF8.self)
        }
        #expect(text == "ripple\n")
        #expect(process.terminationStatus == 0)
    }
}
