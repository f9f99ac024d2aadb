import RippleDiff

/// Replays `transcript` on a ``BatchUpdateListModel``, as a list view would have received it,
/// and checks every step:
///
/// * step 0 is the initial snapshot: no previous version, every element an insert;
/// * each later step's `previousVersion` is the version of the step before (no step is missing),
///   and versions strictly increase;
/// * each changeset is consistent (see `Changeset.init(oldCount:newCount:deletes:inserts:updates:moves:)`)
///   and has one set of updated columns per update;
/// * applied to the list as the step before left it — stage by stage, under the batch-update
///   rules of a UIKit-style list — the changeset gives exactly the step's snapshot.
///
/// ```swift
/// try replay(Transcript.load(from: url))   // throws naming the step that is wrong
/// ```
///
/// - Returns: the list after the last step.
/// - Throws: ``TranscriptError`` naming the first wrong step (`step 3 (v9): …`) and what is wrong.
@discardableResult
public func replay(_ transcript: Transcript) throws(TranscriptError) -> BatchUpdateListModel<JSONValue> {
    guard transcript.format == Transcript.currentFormat else {
        throw TranscriptError.unsupportedFormat(transcript.format)
    }
    guard !transcript.steps.isEmpty else {
        throw TranscriptError("the transcript has no steps: step 0 must be the initial snapshot")
    }
    var list = BatchUpdateListModel<JSONValue>(items: [])
    var previous: Transcript.Step?
    for (index, step) in transcript.steps.enumerated() {
        let name = Transcript.Step.name(index, version: step.version)
        func fail(_ message: String) -> TranscriptError {
            TranscriptError("\(name): \(message)", step: index)
        }
        let changes = step.changeset
        if let previous {
            guard let previousVersion = step.previousVersion else {
                throw fail("no previousVersion, but only step 0 may be an initial snapshot")
            }
            guard previousVersion == previous.version else {
                throw fail("follows v\(previousVersion), but the step before is v\(previous.version)"
                           + (previousVersion > previous.version ? " (a step is missing)" : ""))
            }
            guard step.version > previous.version else {
                throw fail("version v\(step.version) does not increase from v\(previous.version)")
            }
        } else {
            if let previousVersion = step.previousVersion {
                throw fail("the first step follows v\(previousVersion): it must be the initial snapshot "
                           + "(no previousVersion)")
            }
            guard changes.deletes.isEmpty, changes.updates.isEmpty, changes.moves.isEmpty,
                  changes.inserts == Array(step.snapshot.indices) else {
                throw fail("the initial snapshot must insert every element (inserts 0..<\(step.snapshot.count)), "
                           + "its changeset has \(changes)")
            }
        }
        guard step.updatedColumns.count == changes.updates.count else {
            throw fail("\(step.updatedColumns.count) sets of updated columns for \(changes.updates.count) updates")
        }
        let changeset: Changeset
        do {
            changeset = try changes.changeset(oldCount: list.items.count, newCount: step.snapshot.count)
        } catch {
            throw fail("invalid changeset from \(list.items.count) to \(step.snapshot.count) elements: \(error)")
        }
        do {
            try list.apply(changeset, dataSource: step.snapshot)
        } catch {
            throw fail("the changeset applied to the list of the step before does not give the snapshot: \(error)")
        }
        previous = step
    }
    return list
}

/// Compares a fresh run with a recorded transcript, step by step.
///
/// - Parameters:
///   - recorded: the transcript kept beside the tests.
///   - fresh: the transcript of this run.
///   - versions: whether versions count (turn it off when the fresh store starts from another
///     version than the recorded one did).
/// - Returns: `nil` when they are equal, otherwise where they first differ — the step, the field,
///   what was recorded and what the fresh run gave:
///   `step 2 (v8): changeset.moves differ: recorded [13→0], fresh [12→0]`.
public func compare(recorded: Transcript, fresh: Transcript, versions: Bool = true) -> String? {
    if recorded.format != fresh.format {
        return "format differs: recorded \(recorded.format), fresh \(fresh.format)"
    }
    if Transcript.unqualified(recorded.query) != Transcript.unqualified(fresh.query) {
        return "query differs: recorded \(recorded.query), fresh \(fresh.query)"
    }
    for (index, (old, new)) in zip(recorded.steps, fresh.steps).enumerated() {
        let name = Transcript.Step.name(index, version: old.version)
        var difference: String?
        func check<T: Equatable>(_ field: String, _ a: T, _ b: T) {
            if difference == nil && a != b {
                difference = "\(name): \(field) differs: recorded \(a), fresh \(b)"
            }
        }
        if versions {
            check("version", "v\(old.version)", "v\(new.version)")
            check("previousVersion", old.previousVersion.map { "v\($0)" } ?? "none",
                  new.previousVersion.map { "v\($0)" } ?? "none")
        }
        if difference == nil && old.snapshot != new.snapshot {
            if old.snapshot.count != new.snapshot.count {
                difference = "\(name): snapshot differs: recorded \(old.snapshot.count) elements, "
                    + "fresh \(new.snapshot.count)"
            }
            for position in old.snapshot.indices where difference == nil && old.snapshot[position] != new.snapshot[position] {
                difference = "\(name): snapshot[\(position)] differs: recorded \(old.snapshot[position]), "
                    + "fresh \(new.snapshot[position])"
            }
        }
        check("changeset.deletes", old.changeset.deletes, new.changeset.deletes)
        check("changeset.inserts", old.changeset.inserts, new.changeset.inserts)
        check("changeset.updates", old.changeset.updates, new.changeset.updates)
        check("changeset.moves", old.changeset.moves, new.changeset.moves)
        check("updatedColumns", old.updatedColumns, new.updatedColumns)
        if let difference { return difference }
    }
    if recorded.steps.count != fresh.steps.count {
        let common = min(recorded.steps.count, fresh.steps.count)
        let recordedIsLonger = recorded.steps.count > common
        let extra = (recordedIsLonger ? recorded : fresh).steps[common]
        return "step count differs: recorded \(recorded.steps.count) steps, fresh \(fresh.steps.count); "
            + "\(Transcript.Step.name(common, version: extra.version)) is only in the "
            + (recordedIsLonger ? "recorded" : "fresh") + " transcript"
    }
    return nil
}

/// Throws unless `fresh` equals `recorded` step by step (see ``compare(recorded:fresh:versions:)``);
/// in a swift-testing test, `try expectTranscript(fresh, matches: recorded)` fails the test with
/// where the transcripts first differ.
public func expectTranscript(_ fresh: Transcript, matches recorded: Transcript,
                             versions: Bool = true) throws(TranscriptError) {
    if let difference = compare(recorded: recorded, fresh: fresh, versions: versions) {
        throw TranscriptError("the fresh run differs from the recorded transcript: \(difference)")
    }
}

extension Transcript {
    /// `sql` without the `"main".` that the store writes before its tables' names: transcripts
    /// recorded before it did so name the same query without it.
    static func unqualified(_ sql: String) -> String {
        sql.replacingOccurrences(of: #""main"."#, with: "")
    }
}
