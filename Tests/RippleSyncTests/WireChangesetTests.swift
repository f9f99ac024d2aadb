import Foundation
import RippleDiff
import RippleDiffTesting
import RippleSync
import Testing

/// The changeset on the wire: applied by a client to the rows it had, through JSON, it gives
/// the new rows — on seeded random lists with moves, duplicates and value changes — and an
/// update carries only the columns that changed.
@Suite struct WireChangesetTests {
    /// Rows of (key, a, b, c).
    static func randomRows(_ count: Int, _ random: inout SeededGenerator) -> [[WireValue]] {
        (0..<count).map { _ in
            [.integer(Int64.random(in: 0..<40, using: &random)), .integer(Int64.random(in: 0..<3, using: &random)),
             [.text("x"), .text("y"), .null, .real(1.5)].randomElement(using: &random)!, .bool(Bool.random(using: &random))]
        }
    }

    /// A new list from `old`: some rows removed, some added, some moved, some changed.
    static func edited(_ old: [[WireValue]], _ random: inout SeededGenerator) -> [[WireValue]] {
        var new = old.filter { _ in Int.random(in: 0..<5, using: &random) > 0 }
        for index in new.indices where Int.random(in: 0..<4, using: &random) == 0 {
            new[index][Int.random(in: 1...3, using: &random)] = .text("changed \(Int.random(in: 0..<3, using: &random))")
        }
        for _ in 0..<Int.random(in: 0...4, using: &random) {
            new.insert(randomRows(1, &random)[0], at: Int.random(in: 0...new.count, using: &random))
        }
        for _ in 0..<Int.random(in: 0...3, using: &random) where new.count > 1 {
            let row = new.remove(at: Int.random(in: 0..<new.count, using: &random))
            new.insert(row, at: Int.random(in: 0...new.count, using: &random))
        }
        return new
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func aClientApplyingTheWireChangesetGetsTheNewRows(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for _ in 0..<400 {
            let old = Self.randomRows(Int.random(in: 0...25, using: &random), &random)
            let new = Self.edited(old, &random)
            let changeset = Changeset(from: old, to: new, identifiedBy: { $0[0] }, contentEqual: ==)
            let wire = WireChangeset(changeset, from: old, to: new)
            let received = try JSONDecoder().decode(WireChangeset.self, from: try JSONEncoder().encode(wire))
            #expect(received == wire)
            #expect(try received.apply(to: old) == new, "\(old) → \(new): \(wire)")
            for update in wire.updates {
                #expect(update.columns.keys.allSatisfy { old[update.old][$0] != new[update.new][$0] })
                #expect(!update.columns.isEmpty)
            }
        }
    }

    @Test func aOneColumnUpdateInAThousandRowWindowIsASmallFrame() throws {
        let old: [[WireValue]] = (0..<1000).map { [.integer(Int64($0)), .text("title \($0)"), .integer(Int64($0 % 7)), .bool(false)] }
        var new = old
        new[500][3] = .bool(true)
        let changeset = Changeset(from: old, to: new, identifiedBy: { $0[0] }, contentEqual: ==)
        let bytes = try JSONEncoder().encode(WireChangeset(changeset, from: old, to: new))
        #expect(String(decoding: bytes, as: UTF8.self).contains("[500,500,{\"3\":true}]"))
        #expect(bytes.count <= 150, "\(bytes.count) bytes")
    }

    @Test(arguments: [
        WireChangeset(deletes: [3]),
        WireChangeset(inserts: [.init(index: 5, row: [.null])]),
        WireChangeset(moves: [.init(old: 0, new: 9)]),
        WireChangeset(deletes: [0], moves: [.init(old: 0, new: 1)]),
        WireChangeset(updates: [.init(old: 0, new: 0, columns: [7: .null])]),
    ])
    func aChangesetThatDoesNotFitTheRowsIsRefused(changeset: WireChangeset) {
        let rows: [[WireValue]] = [[.integer(1)], [.integer(2)]]
        #expect(throws: WireChangesetError.self) { try changeset.apply(to: rows) }
    }
}
