import RippleDiff
import RippleTesting
import Testing

/// The list-view model must refuse every batch a UIKit-style list would crash on, and change
/// nothing when it does.
@Suite struct BatchUpdateListModelTests {
    let old = ["a", "b", "c", "d"]

    func expectRefused(_ batch: Batch, dataSource: [String], mentioning phrase: String,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        var list = BatchUpdateListModel(items: old)
        do {
            try list.performBatchUpdates(batch, dataSource: dataSource)
            Issue.record("accepted an invalid batch", sourceLocation: sourceLocation)
        } catch {
            #expect(error.description.contains(phrase), "\(error)", sourceLocation: sourceLocation)
        }
        #expect(list.items == old, sourceLocation: sourceLocation)
        #expect(list.batchesPerformed == 0, sourceLocation: sourceLocation)
    }

    @Test func acceptsAValidBatchAndReadsInsertsAndReloadsFromTheDataSource() throws {
        var list = BatchUpdateListModel(items: old)
        let batch = Batch(deletes: [1], inserts: [0], moves: [.init(old: 3, new: 1)], reloads: [2], countBefore: 4)
        try list.performBatchUpdates(batch, dataSource: ["x", "d", "a", "C"])
        #expect(list.items == ["x", "d", "a", "C"])
        #expect(batch.apply(to: old, using: ["x", "d", "a", "C"]) == ["x", "d", "a", "C"])
    }

    @Test func refusesAnIndexDeletedTwice() {
        expectRefused(Batch(deletes: [1, 1], countBefore: 4), dataSource: ["a", "c"], mentioning: "used twice")
    }

    @Test func refusesAnOutOfRangeDelete() {
        expectRefused(Batch(deletes: [4], countBefore: 4), dataSource: ["a", "b", "c"], mentioning: "out of range")
    }

    @Test func refusesAnElementBothMovedAndReloaded() {
        expectRefused(Batch(moves: [.init(old: 0, new: 3)], reloads: [0], countBefore: 4),
                      dataSource: ["b", "c", "d", "A"], mentioning: "both moved and reloaded")
    }

    @Test func refusesReloadingADeletedElement() {
        expectRefused(Batch(deletes: [2], reloads: [2], countBefore: 4), dataSource: ["a", "b", "d"],
                      mentioning: "used twice")
    }

    @Test func refusesAMoveOntoAnInsertedIndex() {
        expectRefused(Batch(inserts: [0], moves: [.init(old: 3, new: 0)], countBefore: 4),
                      dataSource: ["x", "d", "a", "b", "c"], mentioning: "used twice")
    }

    @Test func refusesACountThatDoesNotAddUp() {
        expectRefused(Batch(deletes: [0], countBefore: 4), dataSource: ["b", "c", "d", "e"],
                      mentioning: "invalid number of items")
    }

    @Test func refusesABatchMadeForAnotherList() {
        expectRefused(Batch(deletes: [0], countBefore: 5), dataSource: ["b", "c", "d"], mentioning: "made for 5")
    }

    @Test func reportsStaleContentWhenAnUpdateIsMissing() {
        // A batch that moves "d" but never reloads the cell whose content changed.
        var list = BatchUpdateListModel(items: old)
        let new = ["a", "B", "c", "d"]
        #expect(throws: BatchUpdateError.self) {
            try list.performBatchUpdates(Batch(countBefore: 4), dataSource: new)
            try list.expect(new)
        }
    }

    @Test func refusesAStepWhoseIndexIsInvalidAtThatMoment() {
        var list = BatchUpdateListModel(items: old)
        #expect(throws: BatchUpdateError.self) {
            // After deleting index 0 there are 3 items: index 3 no longer exists.
            try list.performSteps([.delete(0), .delete(3)], dataSource: [])
        }
        #expect(list.items == old)
    }

    @Test func seededGeneratorIsDeterministic() {
        var first = SeededGenerator(seed: 7)
        var second = SeededGenerator(seed: 7)
        let a = (0..<5).map { _ in first.next() }
        #expect(a == (0..<5).map { _ in second.next() })
        #expect(Set(a).count == 5)
    }
}
