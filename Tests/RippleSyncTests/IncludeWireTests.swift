import Foundation
import RippleDiff
import RippleDiffTesting
@testable import RippleSync
import Testing

/// Included rows on the wire: a snapshot's `included` and a changeset's `included` (keyed sets
/// and sectioned lists) read by the fast frame reader as the server writes them and as
/// `JSONDecoder` reads them, malformed ones refused saying what was wrong; and, on seeded random
/// trees of parents and children, the sectioned changeset a node makes, applied by a client
/// with the root's section mapping, gives the new tree (and the keyed change the new set).
@Suite struct IncludeWireTests {
    static func readBothWays(_ bytes: [UInt8]) throws -> (fast: ServerMessage, foundation: ServerMessage) {
        (try ServerMessage(json: bytes), try JSONDecoder().decode(ServerMessage.self, from: Data(bytes)))
    }

    // MARK: The worked example of the protocol page

    /// The snapshot of the golden line `server.changes-included`: projects 3 and 7 with their
    /// owners and their todos (and the todos' assignees).
    static var boards: WireSnapshot {
        guard case .changes(_, let snapshots, _) = GoldenFrameTests.serverMessages.first(where: { $0.0 == "server.changes-included" })!.1 else {
            preconditionFailure("server.changes-included is a changes frame")
        }
        return snapshots["boards"]!
    }

    /// Todo 10 moves from project 3 to project 7, and project 7's owner becomes Carol: the frame
    /// a node makes from the trees before and after is the golden line
    /// `server.changes-included-move`, and a client applying it gets the trees after.
    @Test func aTodoMovingToAnotherProjectIsOneMoveAndOneUpdate() throws {
        let before = Self.boards
        let todos = try #require(before.included?["todos"])
        let owners = try #require(before.included?["owner"])
        var projects = before.rows
        projects[1][2] = .text("carol")
        var moved = todos.sections
        var todo = moved[0].removeFirst()
        todo[1] = .integer(7)
        moved[1].insert(todo, at: 0)
        let newOwners = [owners.rows[0], [.text("carol"), .text("Carol")]]

        let root = WireChangeset(Changeset(from: before.rows, to: projects, identifiedBy: { $0[0] }, contentEqual: ==), from: before.rows, to: projects)
        let keys = before.rows.map { [$0[0]] }
        var change = root
        change.included = [
            "owner": .keyed(WireKeyedChange(from: owners.rows, to: newOwners, key: [0])),
            "todos": .sectioned(WireSectionedChangeset(from: todos.sections, parents: keys, to: moved, parents: projects.map { [$0[0]] }, key: [0])),
        ]
        let frame = ServerMessage.changes(lsn: "0/1A2B", snapshots: [:], changesets: ["boards": change])
        #expect(String(decoding: frame.json, as: UTF8.self) == GoldenFrameTests.golden["server.changes-included-move"])
        guard case .sectioned(let sectioned)? = change.included?["todos"] else { Issue.record("todos is sectioned"); return }
        #expect(sectioned == WireSectionedChangeset(moves: [.init(old: WirePath(section: 0, item: 0), new: WirePath(section: 1, item: 0))],
                                                    updates: [.init(old: WirePath(section: 0, item: 0), new: WirePath(section: 1, item: 0),
                                                                    columns: [1: .integer(7)])]))

        // The client: the root first, then each include (the sectioned one with the root's sections).
        let (read, _) = try Self.readBothWays(frame.json)
        guard case .changes(_, _, let changesets) = read, let got = changesets["boards"] else { Issue.record("a changes frame"); return }
        #expect(try got.apply(to: before.rows) == projects)
        guard case .keyed(let keyed)? = got.included?["owner"], case .sectioned(let list)? = got.included?["todos"] else {
            Issue.record("owner keyed, todos sectioned: \(got)")
            return
        }
        #expect(try keyed.apply(to: owners.rows, key: [0], width: 2) == newOwners)
        #expect(try list.apply(to: todos.sections, sourceOfNewSection: try got.sources(oldCount: before.rows.count)) == moved)
    }

    /// The protocol page's example of a sectioned change: todo 11 deleted, todo 13 inserted
    /// first in project 7, todo 10 moved to project 7 after it.
    @Test func theProtocolPagesSectionedExampleIsWhatTheWriterMakes() throws {
        let todos = try #require(Self.boards.included?["todos"])
        let water: [WireValue] = [.integer(13), .integer(7), .text("Water"), .integer(0), .null]
        var ten = todos.rows[0]
        ten[1] = .integer(7)
        let after: [[[WireValue]]] = [[], [water, ten, todos.rows[2]]]
        let keys = Self.boards.rows.map { [$0[0]] }
        let change = WireSectionedChangeset(from: todos.sections, parents: keys, to: after, parents: keys, key: [0])
        var out = JSONBytes()
        out.includedChange(.sectioned(change))
        #expect(String(decoding: out.bytes, as: UTF8.self)
                == #"{"deletes":[[0,1]],"inserts":[[1,0,[13,7,"Water",0,null]]],"moves":[[[0,0],[1,1]]],"updates":[[[0,0],[1,1],{"1":7}]]}"#)
        #expect(try change.apply(to: todos.sections, sourceOfNewSection: [0, 1]) == after)
    }

    // MARK: Reading

    @Test func aSnapshotsIncludedRowsReadAsWritten() throws {
        let snapshot = WireSnapshot(
            basis: "b", columns: ["id", "name", "owner_id"], types: ["int8", "text", "text"], key: [0],
            rows: [[.integer(3), .text("Launch"), .text("alice")], [.integer(7), .text("Garden"), .null]],
            included: [
                "owner": WireIncludedSnapshot(columns: ["id", "name"], types: ["text", "text"], key: [0], rows: [[.text("alice"), .text("Alice")]]),
                "todos": WireIncludedSnapshot(columns: ["id", "project_id", "title"], types: ["int8", "int8", "text"], key: [0],
                                              rows: [[.integer(10), .integer(3), .text("Write")], [.integer(12), .integer(7), .text("Plant")]],
                                              counts: [1, 1]),
                "todos.assignee": WireIncludedSnapshot(columns: ["id"], types: ["text"], key: [0], rows: []),
            ])
        let frame = ServerMessage.changes(lsn: "0/1", snapshots: ["s": snapshot], changesets: [:])
        let (fast, foundation) = try Self.readBothWays(frame.json)
        #expect(fast == frame && foundation == frame)
        // Without includes, a snapshot reads with none (as before includes existed).
        var plain = snapshot
        plain.included = nil
        let plainFrame = ServerMessage.changes(lsn: "0/1", snapshots: ["s": plain], changesets: [:])
        #expect(!String(decoding: plainFrame.json, as: UTF8.self).contains("included"))
        let (plainFast, plainFoundation) = try Self.readBothWays(plainFrame.json)
        #expect(plainFast == plainFrame && plainFoundation == plainFrame)
    }

    @Test(arguments: [
        // A keyed change: puts by column position, deletes by key.
        (#"{"put":[{"0":7,"1":"Launch"},{"0":3,"2":null}],"delete":[[5],["a",1]]}"#,
         WireIncludedChange.keyed(WireKeyedChange(puts: [[0: .integer(7), 1: .text("Launch")], [0: .integer(3), 2: .null]],
                                                  deletes: [[.integer(5)], [.text("a"), .integer(1)]]))),
        (#"{"delete":[[5]]}"#, .keyed(WireKeyedChange(deletes: [[.integer(5)]]))),
        (#"{"put":null,"delete":[[5]],"x":{"put":1}}"#, .keyed(WireKeyedChange(deletes: [[.integer(5)]]))),
        (#"{"put":[]}"#, .keyed(WireKeyedChange())),
        // A sectioned change.
        (#"{"deletes":[[0,2]],"inserts":[[1,0,[9,4,"new"]]],"moves":[[[3,10],[7,0]]],"updates":[[[3,10],[7,0],{"1":8}]]}"#,
         .sectioned(WireSectionedChangeset(deletes: [WirePath(section: 0, item: 2)],
                                           inserts: [.init(path: WirePath(section: 1, item: 0), row: [.integer(9), .integer(4), .text("new")])],
                                           moves: [.init(old: WirePath(section: 3, item: 10), new: WirePath(section: 7, item: 0))],
                                           updates: [.init(old: WirePath(section: 3, item: 10), new: WirePath(section: 7, item: 0),
                                                           columns: [1: .integer(8)])]))),
        (#"{ "updates" : [ [ [ 0 , 1.0 ] , [ 2e0 , 0 ] , { "1" : 8 , "1" : 9 } ] ] , "deletes" : null }"#,
         .sectioned(WireSectionedChangeset(updates: [.init(old: WirePath(section: 0, item: 1), new: WirePath(section: 2, item: 0),
                                                           columns: [1: .integer(8)])]))),
        // Neither form's members: an empty sectioned change.
        (#"{}"#, .sectioned(WireSectionedChangeset())),
        (#"{"put":null,"delete":null}"#, .sectioned(WireSectionedChangeset())),
    ] as [(String, WireIncludedChange)])
    func aChangesetsIncludedChangesReadAsJSONDecoderReadsThem(json: String, change: WireIncludedChange) throws {
        let frame = #"{"type":"changes","lsn":"0/1","changesets":{"p":{"updates":[[0,0,{"1":"x"}]],"included":{"todos":"# + json + "}}}}"
        let expected = ServerMessage.changes(lsn: "0/1", snapshots: [:], changesets: [
            "p": WireChangeset(updates: [.init(old: 0, new: 0, columns: [1: .text("x")])], included: ["todos": change]),
        ])
        let (fast, foundation) = try Self.readBothWays(Array(frame.utf8))
        #expect(fast == expected, "\(json)")
        #expect(foundation == expected, "\(json)")
    }

    @Test(arguments: [
        // Snapshots.
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[],"included":[]}}}"#,
         "expected an object for a snapshot's `included`, found an array"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[],"included":{"t":5}}}}"#,
         "expected an include's rows (an object), found a number"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[],"included":{"t":{"columns":[],"types":[],"rows":[]}}}}}"#,
         "an include's rows have no `key`"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[],"included":{"t":{"columns":["a"],"types":["int8"],"key":[0],"rows":[[1],[2]],"counts":[1,-1,2]}}}}}"#,
         "a parent's number of children is -1, below 0"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[],"included":{"t":{"columns":["a"],"types":["int8"],"key":[0],"rows":[[1],[2]],"counts":[1,0]}}}}}"#,
         "`counts` add up to 1, not to the 2 rows"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[],"included":{"t":{"columns":["a"],"types":["int8"],"key":[0],"rows":[[1]],"counts":[1,1]}}}}}"#,
         "`counts` add up to more than the 1 rows"),
        (#"{"type":"changes","lsn":"1","snapshots":{"s":{"basis":"b","columns":[],"types":[],"key":[],"rows":[],"included":{"t":{"columns":["a"],"types":["int8"],"key":[0],"rows":[[1]],"counts":[1.5]}}}}}"#,
         "expected an integer for a parent's number of children, found 1.5"),
        // Changesets.
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":[{"put":[]}]}}}"#, "expected an object for a changeset's `included`, found an array"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":[]}}}}"#, "expected an include's change (an object), found an array"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"put":[{"0":1}],"moves":[[[0,0],[0,1]]]}}}}}"#,
         "an include's change has both a keyed set's `put` or `delete` and a sectioned list's `deletes`, `inserts`, `moves` or `updates`"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"deletes":[[0,1]],"delete":[[1]]}}}}}"#,
         "an include's change has both"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"put":[{"x":1}]}}}}}"#,
         #"expected a column position (a decimal string), found "x""#),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"put":[[1]]}}}}}"#, "expected a put's columns (an object), found an array"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"put":[{"0":[1]}]}}}}}"#,
         "expected a value (null, true, false, a number or a string), found an array"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"delete":[5]}}}}}"#, "expected a row (an array of values), found a number"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"deletes":[[0,1,2]]}}}}}"#,
         "expected ']' closing a delete's path ([section, item]), found ','"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"deletes":[0]}}}}}"#,
         "expected a delete's path ([section, item]), found a number"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"deletes":[[-1,0]]}}}}}"#, "the section of a delete's path is -1, below 0"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"inserts":[[0,-2,[1]]]}}}}}"#, "an insert's item is -2, below 0"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"inserts":[[0,0]]}}}}}"#, "expected ',' in an insert ([section, item, row]), found ']'"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"inserts":[[0,0,5]]}}}}}"#, "expected an inserted row (an array), found a number"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"moves":[[[0,0]]]}}}}}"#,
         "expected ',' in a move ([old path, new path]), found ']'"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"moves":[[0,1]]}}}}}"#,
         "expected a move's old path ([section, item]), found a number"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"updates":[[[0,0],[0,1]]]}}}}}"#,
         "expected ',' in an update ([old path, new path, columns]), found ']'"),
        (#"{"type":"changes","lsn":"1","changesets":{"c":{"included":{"t":{"updates":[[[0,0],[0,1],{"-1":2}]]}}}}}"#,
         #"expected a column position (a decimal string), found "-1""#),
    ] as [(String, String)])
    func malformedIncludedPartsAreRefusedSayingWhat(frame: String, reason: String) {
        do {
            let message = try ServerMessage(json: frame.utf8)
            Issue.record("\(frame) read as \(message)")
        } catch {
            #expect(error.reason.contains(reason), "\(frame): \(error)")
            #expect(error.offset > 0 && error.offset < frame.utf8.count, "\(frame): \(error)")
        }
        #expect(throws: (any Error).self, "JSONDecoder refuses \(frame) too") {
            try JSONDecoder().decode(ServerMessage.self, from: Data(frame.utf8))
        }
    }

    // MARK: Sectioned changes, at random

    /// A parent (a section's model): its key.
    struct Parent: Hashable, Diffable { var key: WireValue }

    /// A child (an item): its key and its row.
    struct Child: Equatable, Diffable {
        var row: [WireValue]
        var diffID: WireValue { row[0] }
        func isContentEqual(to other: Child) -> Bool { row == other.row }
    }

    /// A tree of parents and their children: parent rows `[key, name]`; each parent's children
    /// by key, rows found in `rows` (`[key, title, rank]`), so that a child listed under two
    /// parents is the same row under each.
    struct Tree {
        var parents: [[WireValue]]
        var children: [[Int]]
        var rows: [Int: [WireValue]]

        var sections: [[[WireValue]]] { children.map { $0.map { rows[$0]! } } }
        var parentKeys: [[WireValue]] { parents.map { [$0[0]] } }
        var listSections: [ListSection<Parent, Child>] {
            zip(parents, sections).map { parent, items in ListSection(model: Parent(key: parent[0]), items: items.map { Child(row: $0) }) }
        }
    }

    static func row(_ key: Int, _ random: inout SeededGenerator) -> [WireValue] {
        [.integer(Int64(key)), [.text("a"), .text("b"), .null, .text("é\u{301}")].randomElement(using: &random)!,
         .integer(Int64.random(in: 0..<3, using: &random))]
    }

    /// Distinct child keys for one section, from a small pool (so that sections share some).
    static func someChildren(_ random: inout SeededGenerator, _ rows: inout [Int: [WireValue]], pool: Int) -> [Int] {
        var keys: [Int] = []
        for _ in 0..<Int.random(in: 0...5, using: &random) {
            let key = Int.random(in: 0..<pool, using: &random)
            if !keys.contains(key) { keys.append(key) }
            if rows[key] == nil { rows[key] = row(key, &random) }
        }
        return keys
    }

    static func randomTree(_ random: inout SeededGenerator) -> Tree {
        var keys = Array(0..<12)
        keys.shuffle(using: &random)
        let parents = keys.prefix(Int.random(in: 0...6, using: &random)).map { [WireValue.integer(Int64($0)), .text("p\($0)")] }
        var rows: [Int: [WireValue]] = [:]
        let children = parents.map { _ in someChildren(&random, &rows, pool: 30) }
        return Tree(parents: parents, children: children, rows: rows)
    }

    /// A new tree from `old`: parents removed, inserted, renamed and reordered; children
    /// deleted, inserted, reordered, updated, moved to another parent, and listed under a second
    /// parent too.
    static func edited(_ old: Tree, _ random: inout SeededGenerator) -> Tree {
        func chance(_ oneIn: Int) -> Bool { Int.random(in: 0..<oneIn, using: &random) == 0 }
        var rows = old.rows
        // Parents: some go (with their children), some come, some are renamed, some move.
        var pairs = zip(old.parents, old.children).filter { _ in !chance(5) }.map { (parent: $0.0, children: $0.1) }
        let used = Set(old.parents.map { $0[0] })
        for key in 12..<20 where chance(6) && !used.contains(.integer(Int64(key))) {
            pairs.insert((parent: [.integer(Int64(key)), .text("p\(key)")], children: someChildren(&random, &rows, pool: 40)),
                         at: Int.random(in: 0...pairs.count, using: &random))
        }
        for index in pairs.indices where chance(5) { pairs[index].parent[1] = .text("renamed") }
        if pairs.count > 1, chance(2) {
            let pair = pairs.remove(at: Int.random(in: 0..<pairs.count, using: &random))
            pairs.insert(pair, at: Int.random(in: 0...pairs.count, using: &random))
        }
        var children = pairs.map(\.children)
        // Children: deleted, moved to another parent or listed under it too, inserted, reordered.
        for section in children.indices {
            children[section] = children[section].filter { _ in !chance(6) }
            for key in children[section] where children.count > 1 && chance(5) {
                let target = Int.random(in: 0..<children.count, using: &random)
                guard target != section, !children[target].contains(key) else { continue }
                if chance(3) {
                    children[target].insert(key, at: Int.random(in: 0...children[target].count, using: &random))
                } else {
                    children[section].removeAll { $0 == key }
                    children[target].insert(key, at: Int.random(in: 0...children[target].count, using: &random))
                }
            }
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                let key = Int.random(in: 0..<40, using: &random)
                guard !children[section].contains(key) else { continue }
                if rows[key] == nil { rows[key] = row(key, &random) }
                children[section].insert(key, at: Int.random(in: 0...children[section].count, using: &random))
            }
            if children[section].count > 1, chance(3) {
                let key = children[section].remove(at: Int.random(in: 0..<children[section].count, using: &random))
                children[section].insert(key, at: Int.random(in: 0...children[section].count, using: &random))
            }
        }
        // Rows: some change a column (under every parent that lists them).
        for key in rows.keys.sorted() where chance(6) { rows[key]![Int.random(in: 1...2, using: &random)] = .text("changed") }
        return Tree(parents: pairs.map(\.parent), children: children, rows: rows)
    }

    /// The client's whole algorithm for a to-many include: the root's changeset gives each new
    /// section's old one, then the include's change is applied to the old sections.
    static func applied(_ change: WireSectionedChangeset, root: WireChangeset, to old: Tree) throws -> [[[WireValue]]] {
        try change.apply(to: old.sections, sourceOfNewSection: try root.sources(oldCount: old.parents.count))
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func aSectionedChangeAppliedWithTheRootsSectionsGivesTheNewTree(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var seen = (crossMoves: 0, duplicates: 0, insertedSections: 0, removedSections: 0, updates: 0)
        for number in 0..<400 {
            let old = Self.randomTree(&random)
            let new = Self.edited(old, &random)
            let change = WireSectionedChangeset(from: old.sections, parents: old.parentKeys, to: new.sections, parents: new.parentKeys, key: [0])
            let rootDiff = Changeset(from: old.parents, to: new.parents, identifiedBy: { $0[0] }, contentEqual: ==)
            let root = WireChangeset(rootDiff, from: old.parents, to: new.parents)
            let context = "seed \(seed) case \(number): \(old.parents) \(old.children) → \(new.parents) \(new.children); \(change)"
            #expect(try Self.applied(change, root: root, to: old) == new.sections, "\(context)")
            #expect(try root.apply(to: old.parents) == new.parents, "\(context)")

            // Through a frame, read by both readers.
            let frame = ServerMessage.changes(lsn: "0/1", snapshots: [:], changesets: [
                "s": WireChangeset(deletes: root.deletes, inserts: root.inserts, moves: root.moves, updates: root.updates,
                                   included: change.isEmpty ? nil : ["children": .sectioned(change)]),
            ])
            let (fast, foundation) = try Self.readBothWays(frame.json)
            #expect(fast == frame, "\(context)")
            #expect(FrameReaderTests.asNumbers(foundation) == FrameReaderTests.asNumbers(frame), "\(context)")
            if case .changes(_, _, let changesets) = fast, let read = changesets["s"] {
                let readChange: WireSectionedChangeset
                switch read.included?["children"] {
                case .sectioned(let sectioned)?: readChange = sectioned
                case nil: readChange = WireSectionedChangeset()
                case .keyed?: Issue.record("\(context): read as a keyed change"); continue
                }
                #expect(try Self.applied(readChange, root: read, to: old) == new.sections, "\(context)")
            }

            // A batch-safe list view accepts RippleDiff's changeset of the same trees.
            var model = SectionedListModel(sections: old.listSections)
            #expect(throws: Never.self, "\(context)") { try model.apply(SectionedChangeset(from: old.listSections, to: new.listSections),
                                                                         dataSource: new.listSections) }

            let sources = try root.sources(oldCount: old.parents.count)
            seen.insertedSections += sources.filter { $0 == nil }.count
            seen.removedSections += old.parents.count - sources.compactMap { $0 }.count
            seen.crossMoves += change.moves.filter { sources[$0.new.section] != $0.old.section }.count
            seen.updates += change.updates.count
            seen.duplicates += Set(new.children.flatMap { $0 }).count < new.children.joined().count ? 1 : 0
        }
        #expect(seen.crossMoves > 50 && seen.duplicates > 50 && seen.insertedSections > 50 && seen.removedSections > 50 && seen.updates > 50,
                "the trees reach every kind of change: \(seen)")
    }

    /// A change that does not fit the sections it is applied to is refused, never trapped on.
    @Test(arguments: [
        WireSectionedChangeset(deletes: [WirePath(section: 2, item: 0)]),
        WireSectionedChangeset(deletes: [WirePath(section: 0, item: 0), WirePath(section: 0, item: 0)]),
        WireSectionedChangeset(inserts: [.init(path: WirePath(section: 0, item: 5), row: [.integer(1)])]),
        WireSectionedChangeset(inserts: [.init(path: WirePath(section: 3, item: 0), row: [.integer(1)])]),
        WireSectionedChangeset(moves: [.init(old: WirePath(section: 0, item: 9), new: WirePath(section: 1, item: 0))]),
        WireSectionedChangeset(moves: [.init(old: WirePath(section: 0, item: 0), new: WirePath(section: 1, item: 2))]),
        WireSectionedChangeset(updates: [.init(old: WirePath(section: 0, item: 0), new: WirePath(section: 1, item: 7), columns: [1: .null])]),
        WireSectionedChangeset(updates: [.init(old: WirePath(section: 0, item: 0), new: WirePath(section: 0, item: 0), columns: [9: .null])]),
    ])
    func aSectionedChangeThatDoesNotFitIsRefused(change: WireSectionedChangeset) {
        #expect(throws: WireChangesetError.self) { try change.apply(to: Self.boards.included!["todos"]!.sections, sourceOfNewSection: [0, 1]) }
    }

    // MARK: Keyed changes, at random

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func aKeyedChangeAppliedGivesTheNewSet(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        func set(_ keys: some Sequence<Int>, _ random: inout SeededGenerator) -> [[WireValue]] {
            keys.map { [.integer(Int64($0)), .text("k\($0 % 3)"), Bool.random(using: &random) ? .null : .integer(Int64($0 % 2))] }
        }
        for number in 0..<400 {
            let old = set(Set((0..<Int.random(in: 0...12, using: &random)).map { _ in Int.random(in: 0..<20, using: &random) }), &random)
            let new = set(Set((0..<Int.random(in: 0...12, using: &random)).map { _ in Int.random(in: 0..<20, using: &random) }), &random)
            let change = WireKeyedChange(from: old, to: new, key: [0])
            let context = "seed \(seed) case \(number): \(old) → \(new); \(change)"
            let applied = try change.apply(to: old, key: [0], width: 3)
            #expect(Set(applied) == Set(new) && applied.count == new.count, "\(context)")
            // A row that did not change is not sent, and a changed one only by its key and changed columns.
            let unchanged = Set(old).intersection(new)
            #expect(change.puts.allSatisfy { put in !unchanged.contains(where: { $0[0] == put[0] }) }, "\(context)")
            #expect(change.puts.count + change.deletes.count <= Set(old).symmetricDifference(new).count, "\(context)")

            let frame = ServerMessage.changes(lsn: "0/1", snapshots: [:], changesets: [
                "s": WireChangeset(included: change.isEmpty ? nil : ["ref": .keyed(change)]),
            ])
            let (fast, foundation) = try Self.readBothWays(frame.json)
            #expect(fast == frame && foundation == frame, "\(context)")
        }
    }

    @Test func aKeyedChangeThatDoesNotFitIsRefused() {
        let rows: [[WireValue]] = [[.integer(1), .text("a")]]
        #expect(throws: WireChangesetError.self) { try WireKeyedChange(deletes: [[.integer(2)]]).apply(to: rows, key: [0], width: 2) }
        #expect(throws: WireChangesetError.self) { try WireKeyedChange(puts: [[0: .integer(2)]]).apply(to: rows, key: [0], width: 2) }
        #expect(throws: WireChangesetError.self) { try WireKeyedChange(puts: [[0: .integer(1), 5: .null]]).apply(to: rows, key: [0], width: 2) }
        #expect(throws: WireChangesetError.self) { try WireKeyedChange(puts: [[1: .text("b")]]).apply(to: rows, key: [0], width: 2) }
    }
}
