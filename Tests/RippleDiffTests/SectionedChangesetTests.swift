import RippleDiff
import RippleDiffTesting
import Testing

/// A section model: identity `id`, content `title`.
struct Header: Diffable, Hashable, CustomStringConvertible {
    var id: Int
    var title = ""
    var diffID: Int { id }
    func isContentEqual(to other: Header) -> Bool { title == other.title }
    var description: String { title.isEmpty ? "S\(id)" : "S\(id)(\(title))" }
}

typealias Sections = [ListSection<Header, Item>]

func expectSectionedApplies(_ old: Sections, _ new: Sections, sourceLocation: SourceLocation = #_sourceLocation) {
    let changeset = SectionedChangeset(from: old, to: new)
    #expect(changeset.apply(to: old, using: new) == new, "\(changeset)", sourceLocation: sourceLocation)
    // Minimal moves within each section that stays (checked when item identities are unique):
    // the items that stayed in the section, minus a longest run that kept its order.
    let oldIDs = old.flatMap { $0.items.map(\.id) }
    let newIDs = new.flatMap { $0.items.map(\.id) }
    if Set(oldIDs).count == oldIDs.count && Set(newIDs).count == newIDs.count {
        for (target, section) in new.enumerated() {
            guard let source = changeset.sections.oldIndex(forNew: target) else { continue }
            let stayed = section.items.compactMap { item in old[source].items.firstIndex { $0.id == item.id } }
            let movedHere = changeset.itemMoves.filter { $0.new.section == target && $0.old.section == source }
            #expect(movedHere.count == stayed.count - quadraticLISLength(stayed), "\(changeset)",
                    sourceLocation: sourceLocation)
        }
    }
    var list = SectionedListModel(sections: old)
    do {
        try list.apply(changeset, dataSource: new)
    } catch {
        Issue.record("\(error)\n\(old)\n→ \(new)\n\(changeset)", sourceLocation: sourceLocation)
    }
    // The conservative split: no batch mixes section and item changes, each applies to the
    // list the one before left with its own data source, and the last leaves `new`.
    var conservative = SectionedListModel(sections: old)
    do {
        for stage in changeset.conservativeStages(from: old, to: new) {
            let batch = stage.batch
            let touchesSections = !(batch.sectionDeletes.isEmpty && batch.sectionInserts.isEmpty && batch.sectionMoves.isEmpty)
            let touchesItems = !(batch.itemDeletes.isEmpty && batch.itemInserts.isEmpty && batch.itemMoves.isEmpty)
            #expect(!(touchesSections && touchesItems), "\(batch)", sourceLocation: sourceLocation)
            try conservative.performBatchUpdates(batch, dataSource: stage.sections)
        }
        #expect(conservative.sections == new, "\(old)\n→ \(new)\n\(changeset)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("conservative: \(error)\n\(old)\n→ \(new)\n\(changeset)", sourceLocation: sourceLocation)
    }
}

@Suite struct SectionedChangesetTests {
    func section(_ id: Int, _ items: [Int], title: String = "") -> ListSection<Header, Item> {
        ListSection(model: Header(id: id, title: title), items: items.map { Item(id: $0) })
    }

    @Test func itemMovesAcrossSections() {
        let old = [section(1, [1, 2, 3]), section(2, [4, 5])]
        let new = [section(1, [1, 3]), section(2, [4, 2, 5])]
        let changeset = SectionedChangeset(from: old, to: new)
        #expect(changeset.sections.isEmpty)
        #expect(changeset.itemMoves == [.init(old: ItemPath(section: 0, item: 1), new: ItemPath(section: 1, item: 1))])
        #expect(changeset.itemDeletes.isEmpty && changeset.itemInserts.isEmpty)
        expectSectionedApplies(old, new)
    }

    @Test func sectionDeletesInsertsMovesAndUpdates() {
        let old = [section(1, [1, 2]), section(2, [3]), section(3, [4, 5])]
        let new = [section(3, [5, 4], title: "renamed"), section(1, [1, 2]), section(9, [6, 7])]
        let changeset = SectionedChangeset(from: old, to: new)
        #expect(changeset.sections.deletes == [1])
        #expect(changeset.sections.inserts == [2])
        #expect(changeset.sections.moves.count == 1)
        #expect(changeset.sections.updates == [.init(old: 2, new: 0)])
        // Items of the deleted and the inserted section are not listed one by one.
        #expect(changeset.itemDeletes.isEmpty && changeset.itemInserts.isEmpty)
        #expect(changeset.itemMoves.count == 1)
        #expect(changeset.stages.count == 2, "the section's new title is reloaded after its move")
        expectSectionedApplies(old, new)
    }

    @Test func itemInADeletedSectionReappearingElsewhereIsAnInsert() {
        let old = [section(1, [1]), section(2, [2])]
        let new = [section(1, [1, 2])]
        let changeset = SectionedChangeset(from: old, to: new)
        #expect(changeset.sections.deletes == [1])
        #expect(changeset.itemInserts == [ItemPath(section: 0, item: 1)])
        #expect(changeset.itemMoves.isEmpty)
        expectSectionedApplies(old, new)
    }

    @Test func movedAndUpdatedItemIsReloadedInTheSecondStage() {
        let old = [section(1, [1, 2, 3])]
        var new = [section(1, [3, 1, 2])]
        new[0].items[0].version = 1
        let changeset = SectionedChangeset(from: old, to: new)
        #expect(changeset.stages.count == 2)
        #expect(changeset.stages[1].itemReloads == [ItemPath(section: 0, item: 0)])
        expectSectionedApplies(old, new)
    }

    @Test func listModelRefusesItemInsertsIntoAnInsertedSection() {
        let old = [section(1, [1])]
        let new = [section(1, [1]), section(2, [2])]
        var batch = SectionedBatch()
        batch.sectionInserts = [1]
        batch.itemInserts = [ItemPath(section: 1, item: 0)]
        var list = SectionedListModel(sections: old)
        #expect(throws: BatchUpdateError.self) { try list.performBatchUpdates(batch, dataSource: new) }
        #expect(list.sections == old)
    }

    @Test func seededRandomSectionedPairsApplyInEveryStage() {
        var random = SeededGenerator(seed: 0x5EC7)
        func randomSections() -> Sections {
            let count = Int.random(in: 0...5, using: &random)
            return (0..<count).map { _ in
                let items = (0..<Int.random(in: 0...6, using: &random)).map { _ in Int.random(in: 0..<25, using: &random) }
                return section(Int.random(in: 0..<7, using: &random), items)
            }
        }
        for _ in 0..<3_000 {
            var old = randomSections()
            var new = Bool.random(using: &random) ? randomSections() : old.shuffled(using: &random)
            // Distinct section identities on each side (a list cannot show one section twice).
            old = old.reduce(into: Sections()) { sections, s in if !sections.contains(where: { $0.model.id == s.model.id }) { sections.append(s) } }
            new = new.reduce(into: Sections()) { sections, s in if !sections.contains(where: { $0.model.id == s.model.id }) { sections.append(s) } }
            for index in new.indices where Int.random(in: 0..<4, using: &random) == 0 {
                new[index].model.title = "t"
                if !new[index].items.isEmpty { new[index].items[0].version += 1 }
                new[index].items.shuffle(using: &random)
            }
            expectSectionedApplies(old, new)
        }
    }
}
