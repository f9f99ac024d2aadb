import Foundation
import Ripple
import RippleTesting

/// How the subcommands show a live query's events (`ripple demo`, `ripple watch`): as a list
/// view would show them, each row marked with what happened to it, or as one JSON line each.
enum EventText {
    /// What the marks mean.
    static let legend = "Legend: + inserted   ~ updated (the changed columns)   ↕ moved (from its old row)   − deleted   "
        + "vN: store version"

    /// The event as a list view shows it: a summary line (`v4 (after v3): 1 updated, 1 moved`),
    /// `columnHeader` if given, then each row of the new list, marked, then the deleted rows.
    /// `title` is how a row is shown; `previous` is the list the event's changeset applies to.
    static func lines<Element>(_ event: LiveQueryEvent<Element>, previous: [Element], columnHeader: String? = nil,
                               title: (Element) -> String) -> [String] {
        let changeset = event.changeset
        var counts: [String] = []
        for (count, word) in [(changeset.inserts.count, "inserted"), (changeset.updates.count, "updated"),
                              (changeset.moves.count, "moved"), (changeset.deletes.count, "deleted")] where count > 0 {
            counts.append("\(count) \(word)")
        }
        let heading = event.previousVersion.map { "   v\(event.version) (after v\($0)): " } ?? "   v\(event.version), the first event: "
        var lines = [heading + (event.previousVersion == nil ? "\(event.snapshot.count) rows" : counts.joined(separator: ", "))]
        if let columnHeader { lines.append(String(repeating: " ", count: rowPrefixWidth) + columnHeader) }
        guard event.previousVersion != nil else {
            for (row, element) in event.snapshot.enumerated() { lines.append(Self.row(" ", row, title(element))) }
            return lines
        }
        let inserted = Set(changeset.inserts)
        let movedFrom = Dictionary(changeset.moves.map { ($0.new, $0.old) }, uniquingKeysWith: { first, _ in first })
        let updated = Dictionary(zip(changeset.updates.map(\.new), event.updatedColumns), uniquingKeysWith: { first, _ in first })
        for (row, element) in event.snapshot.enumerated() {
            var notes: [String] = []
            var mark = " "
            if inserted.contains(row) { mark = "+" }
            if let columns = updated[row] {
                mark = "~"
                notes.append("changed: " + columns.sorted().joined(separator: ", "))
            }
            if let old = movedFrom[row] {
                mark = "↕"
                notes.append("from row \(old + 1)")
            }
            lines.append(Self.row(mark, row, title(element), notes: notes))
        }
        for row in changeset.deletes {
            lines.append("    −      \(title(previous[row]))  (was row \(row + 1))")
        }
        return lines
    }

    /// How many characters come before a row's title (`    ~  3  `).
    static let rowPrefixWidth = 11

    /// `  ~  3  Water the ferns  (changed: title)`: a mark, the 1-based row, the title, notes.
    private static func row(_ mark: String, _ row: Int, _ title: String, notes: [String] = []) -> String {
        let number = String(row + 1)
        let padded = String(repeating: " ", count: max(0, 3 - number.count)) + number
        return "    \(mark) \(padded)  \(title)" + (notes.isEmpty ? "" : "  (" + notes.joined(separator: "; ") + ")")
    }

    /// `step` as one line of JSON, in the transcripts' vocabulary, keys sorted:
    /// `{"changeset":{"deletes":[…],"inserts":[…],"moves":[…],"updates":[…]},"previousVersion":…,
    /// "snapshot":[…],"updatedColumns":[…],"version":…}`.
    static func jsonLine(_ step: Transcript.Step) throws -> String {
        String(decoding: try jsonEncoder.encode(step), as: UTF8.self)
    }

    /// The encoder of ``jsonLine(_:)``, which also encodes the demo's records.
    static var jsonEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
