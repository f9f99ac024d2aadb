import ArgumentParser
import Foundation
import RippleTesting

/// `ripple replay FILE`: loads a recorded transcript and replays it on a list model that
/// enforces a UIKit-style list's batch-update rules, checking every step.
struct ReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Replay a recorded live-query transcript, checking every step.",
        discussion: """
            Step 0 must be the initial snapshot; each later step must follow the one before \
            (versions increasing, none missing), and its changeset, applied batch by batch to the \
            list the step before left, must give the step's snapshot. Prints `ok: N steps, \
            versions A…B`, or the first wrong step and exits non-zero.
            """
    )

    @Argument(help: ArgumentHelp("A transcript, as written by `ripple demo --record FILE` or TranscriptRecorder.",
                                 valueName: "FILE"))
    var file: String

    func run() throws {
        do {
            let transcript = try Transcript.load(from: URL(fileURLWithPath: file))
            try RippleTesting.replay(transcript)
            let first = transcript.steps.first?.version ?? 0
            let last = transcript.steps.last?.version ?? 0
            print("ok: \(transcript.steps.count) steps, versions \(first)…\(last)")
        } catch {
            Console.error(error.description)
            throw ExitCode.failure
        }
    }
}
