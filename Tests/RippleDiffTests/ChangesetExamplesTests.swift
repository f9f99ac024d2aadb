import RippleDiff
import RippleDiffTesting
import Testing

/// An element whose identity and content are separate: `version` is the content.
struct Item: Diffable, Hashable, CustomStringConvertible {
    var id: Int
    var version: Int = 0

    var diffID: Int { id }
    func isContentEqual(to other: Item) -> Bool { version == other.version }
    var description: String { version == 0 ? "\(id)" : "\(id)v\(version)" }
}

/// Checks every form of `changeset` against `old` → `new`, as a list view would apply it.
func expectAllFormsApply<E: Equatable>(_ changeset: Changeset, _ old: [E], _ new: [E],
                                       sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(changeset.apply(to: old, using: new) == new, "batch apply", sourceLocation: sourceLocation)
    #expect(changeset.applySteps(to: old, using: new) == new, "sequential steps", sourceLocation: sourceLocation)
    var stepped = BatchUpdateListModel(items: old)
    do {
        try stepped.performSteps(changeset.steps, dataSource: new)
        try stepped.expect(new)
    } catch {
        Issue.record("steps: \(error) for \(old) → \(new)", sourceLocation: sourceLocation)
    }
    var staged = BatchUpdateListModel(items: old)
    do {
        try staged.apply(changeset, dataSource: new)
    } catch {
        Issue.record("stages: \(error) for \(old) → \(new): \(changeset)", sourceLocation: sourceLocation)
    }
}

@Suite struct ChangesetExamplesTests {
    @Test func oneElementJumpingToTheFrontIsOneMove() {
        let old = ["A", "B", "C", "D", "E"]
        let new = ["E", "A", "B", "C", "D"]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.moves == [.init(old: 4, new: 0)])
        #expect(changeset.deletes.isEmpty && changeset.inserts.isEmpty && changeset.updates.isEmpty)
        expectAllFormsApply(changeset, old, new)
    }

    @Test func oneElementJumpingToTheBackIsOneMove() {
        let old = Array(0..<100)
        let new = Array(1..<100) + [0]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.moves == [.init(old: 0, new: 99)])
        expectAllFormsApply(changeset, old, new)
    }

    @Test func deletesInsertsAndMovesUseBatchUpdateIndices() {
        let old = ["a", "b", "c", "d"]
        let new = ["d", "a", "x", "c"]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.deletes == [1])
        #expect(changeset.inserts == [2])
        #expect(changeset.moves == [.init(old: 3, new: 0)])
        #expect(changeset.newIndex(forOld: 0) == 1)
        #expect(changeset.newIndex(forOld: 1) == nil)
        #expect(changeset.oldIndex(forNew: 2) == nil)
        #expect(changeset.oldIndex(forNew: 3) == 2)
        expectAllFormsApply(changeset, old, new)
    }

    @Test func sameIdentityWithNewContentIsAnUpdate() {
        let old = [Item(id: 1), Item(id: 2), Item(id: 3)]
        let new = [Item(id: 1), Item(id: 2, version: 1), Item(id: 3)]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.updates == [.init(old: 1, new: 1)])
        #expect(changeset.deletes.isEmpty && changeset.inserts.isEmpty && changeset.moves.isEmpty)
        #expect(changeset.stages.count == 1)
        expectAllFormsApply(changeset, old, new)
    }

    @Test func movedAndUpdatedElementIsReloadedInASecondStage() {
        let old = [Item(id: 1), Item(id: 2), Item(id: 3)]
        let new = [Item(id: 3, version: 1), Item(id: 1), Item(id: 2)]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.moves == [.init(old: 2, new: 0)])
        #expect(changeset.updates == [.init(old: 2, new: 0)])
        let stages = changeset.stages
        #expect(stages.count == 2)
        #expect(stages[0].moves == [.init(old: 2, new: 0)] && stages[0].reloads.isEmpty)
        #expect(stages[1].reloads == [0] && stages[1].moves.isEmpty)
        expectAllFormsApply(changeset, old, new)
    }

    @Test func theWholeBatchReloadingAMovedElementIsRefusedByTheListModel() {
        let old = [Item(id: 1), Item(id: 2), Item(id: 3)]
        let new = [Item(id: 3, version: 1), Item(id: 1), Item(id: 2)]
        let changeset = Changeset(from: old, to: new)
        var list = BatchUpdateListModel(items: old)
        #expect(throws: BatchUpdateError.self) {
            try list.performBatchUpdates(changeset.batch, dataSource: new)
        }
        #expect(list.items == old, "a refused batch changes nothing")
    }

    @Test func emptyAndIdenticalCollections() {
        let empty: [Int] = []
        #expect(Changeset(from: empty, to: empty).isEmpty)
        #expect(Changeset(from: empty, to: empty).stages.isEmpty)
        #expect(Changeset(from: [1, 2, 3], to: [1, 2, 3]).isEmpty)
        #expect(Changeset(from: [1, 2, 3], to: [1, 2, 3]).steps.isEmpty)
        let allNew = Changeset(from: empty, to: [1, 2, 3])
        #expect(allNew.inserts == [0, 1, 2])
        #expect(allNew == Changeset.initial(count: 3))
        let allGone = Changeset(from: [1, 2, 3], to: empty)
        #expect(allGone.deletes == [0, 1, 2])
        expectAllFormsApply(allNew, empty, [1, 2, 3])
        expectAllFormsApply(allGone, [1, 2, 3], empty)
    }

    @Test func reversalKeepsOneElementAndMovesTheRest() {
        let old = Array(0..<10)
        let new = Array(old.reversed())
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.moves.count == 9)
        expectAllFormsApply(changeset, old, new)
    }

    @Test func duplicatesAreMatchedInOrderAndReported() {
        let old = ["a", "b", "a", "c"]
        let new = ["a", "a", "a", "b"]
        let changeset = Changeset(from: old, to: new)
        // old a(0)→new 0, old a(2)→new 1; the third "a" is new; "c" is gone.
        #expect(changeset.newIndex(forOld: 0) == 0)
        #expect(changeset.newIndex(forOld: 2) == 1)
        #expect(changeset.inserts == [2])
        #expect(changeset.deletes == [3])
        #expect(changeset.duplicates == [.init(oldIndices: [0, 2], newIndices: [0, 1, 2])])
        expectAllFormsApply(changeset, old, new)
    }

    @Test func duplicatesOnlyInTheNewCollectionAreReported() {
        let changeset = Changeset(from: ["x"], to: ["y", "y"])
        #expect(changeset.duplicates == [.init(oldIndices: [], newIndices: [0, 1])])
        #expect(changeset.inserts == [0, 1] && changeset.deletes == [0])
    }

    @Test func identifiableValuesAreIdentifiedByID() {
        struct Todo: Identifiable, Hashable, Diffable {
            var id: String
            var title: String
        }
        let old = [Todo(id: "1", title: "milk"), Todo(id: "2", title: "eggs")]
        let new = [Todo(id: "2", title: "eggs"), Todo(id: "1", title: "oat milk")]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.deletes.isEmpty && changeset.inserts.isEmpty)
        #expect(changeset.moves.count == 1)
        #expect(changeset.updates == [.init(old: 0, new: 1)])
        expectAllFormsApply(changeset, old, new)
    }

    @Test func closuresGiveIdentityAndContent() {
        let old = [(1, "a"), (2, "b")]
        let new = [(2, "B"), (3, "c")]
        let changeset = Changeset(from: old, to: new, identifiedBy: { $0.0 }, contentEqual: { $0.1 == $1.1 })
        #expect(changeset.deletes == [0])
        #expect(changeset.inserts == [1])
        #expect(changeset.updates == [.init(old: 1, new: 0)])
        let identityOnly = Changeset(from: old, to: new, identifiedBy: { $0.0 })
        #expect(identityOnly.updates.isEmpty)
    }

    @Test func typeErasedElementsOfDifferentTypesNeverMatch() {
        struct Header: Diffable, Hashable, Sendable { var id: Int }
        struct Row: Diffable, Hashable, Sendable { var id: Int; var title: String; var diffID: Int { id } }
        let old = [AnyDiffable(Header(id: 1)), AnyDiffable(Row(id: 1, title: "a")), AnyDiffable(Row(id: 2, title: "b"))]
        let new = [AnyDiffable(Row(id: 1, title: "A")), AnyDiffable(Header(id: 1)), AnyDiffable(Row(id: 2, title: "b"))]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.deletes.isEmpty && changeset.inserts.isEmpty)
        #expect(changeset.updates == [.init(old: 1, new: 0)])
        #expect(changeset.moves.count == 1)
        #expect(changeset.duplicates.isEmpty, "Header 1 and Row 1 are different identities")
    }

    @Test func nonContiguousCollectionsAreDiffed() {
        let old = (0..<50).lazy.map { $0 * 2 }
        let new = (0..<50).lazy.map { $0 * 2 }.filter { $0 % 3 != 0 }
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.deletes.count == 17)
        expectAllFormsApply(changeset, Array(old), Array(new))
    }
}

@Suite struct DiffConveniencesTests {
    struct Row: Diffable, Sendable, Equatable {
        var id: Int
        var title: String
        var diffID: Int { id }
        func isContentEqual(to other: Row) -> Bool { title == other.title }
    }

    @Test func anyDiffableArraysCompareSoApplyingCanBeChecked() {
        let old = [AnyDiffable(Row(id: 1, title: "a")), AnyDiffable(Row(id: 2, title: "b")), AnyDiffable("header")]
        let new = [AnyDiffable("header"), AnyDiffable(Row(id: 2, title: "B")), AnyDiffable(Row(id: 3, title: "c"))]
        let changeset = Changeset(from: old, to: new)
        #expect(changeset.apply(to: old, using: new) == new)
        #expect(AnyDiffable(Row(id: 1, title: "a")) != AnyDiffable(Row(id: 1, title: "z")))
        #expect(AnyDiffable(1) != AnyDiffable("1"))
    }

    @Test func stepsPrintShortly() {
        #expect("\(Changeset.Step.move(from: 1, to: 0))" == "move 1→0")
        #expect([Changeset.Step.delete(3), .insert(0), .update(2)].map(\.description) == ["delete 3", "insert 0", "update 2"])
    }

    @Test func aSliceIsDiffedFromItsStart() {
        let numbers = Array(0..<20)
        let changeset = Changeset(from: numbers[10...], to: numbers[11...])
        #expect(changeset.deletes == [0])
    }
}
