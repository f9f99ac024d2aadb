import RippleDiff
import RippleDiffTesting
import Testing

/// The diff tour's examples (RippleDiff.docc/DiffTour.md), kept true when run.
@Suite struct ReadmeExamplesTests {
    struct Todo: Identifiable, Equatable, Diffable {
        var id: Int
        var title: String
    }

    @Test func tourOfRippleDiff() {
        let old = [Todo(id: 1, title: "Milk"), Todo(id: 2, title: "Eggs"), Todo(id: 3, title: "Tea")]
        let new = [Todo(id: 3, title: "Tea"), Todo(id: 1, title: "Oat milk"), Todo(id: 4, title: "Jam")]

        let changeset = Changeset(from: old, to: new)
        #expect(changeset.deletes == [1])
        #expect(changeset.inserts == [2])
        #expect(changeset.moves == [.init(old: 2, new: 0)])
        #expect(changeset.updates == [.init(old: 0, new: 1)])
        #expect(changeset.apply(to: old, using: new) == new)
        #expect(changeset.stages.count == 1)
        #expect(changeset.steps == [.delete(1), .move(from: 1, to: 0), .insert(2), .update(1)])
    }

    @Test func testingListUpdates() throws {
        var list = BatchUpdateListModel(items: ["a", "b", "c"])
        try list.apply(Changeset(from: ["a", "b", "c"], to: ["c", "a", "x"]), dataSource: ["c", "a", "x"])
        #expect(list.items == ["c", "a", "x"])
    }
}
