import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// The prepared statements each connection keeps for reuse: at most
/// ``Store/Configuration/statementCacheCapacity`` of them, the least recently used forgotten
/// first, and never one that a caller is still stepping.
@Suite struct StatementCacheTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    /// A store with a table of five notes, whose connections keep `capacity` statements (the
    /// default when `nil`).
    func makeStore(capacity: Int? = nil) throws -> Store {
        var configuration = Store.Configuration()
        if let capacity { configuration.statementCacheCapacity = capacity }
        let store = try Store(path: directory.path("statements-\(capacity ?? -1).sqlite"), configuration: configuration)
        try store.write { db in
            try db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
            for id in 1...5 { try db.execute("INSERT INTO notes(id, body) VALUES (?, ?)", [id, "note \(id)"]) }
        }
        return store
    }

    /// SQL built with its values inside (one text per value) left a prepared statement per text
    /// on the connection, forever: 50,000 texts grew the process by 120 MB. Each connection now
    /// keeps its capacity of statements, and the memory SQLite holds for them stays flat. (That
    /// memory is counted by SQLite for the one connection: the process's resident size would also
    /// count what tests running beside this one allocate.)
    @Test func fiftyThousandDistinctTextsKeepEachConnectionWithinItsCapacity() throws {
        let store = try makeStore()
        let capacity = store.configuration.statementCacheCapacity
        let (writerCount, writerMemory) = try store.write { db in
            for number in 0..<50_000 {
                let sql = "SELECT body FROM notes WHERE id = \(number % 7) AND body <> 'text \(number)'"
                switch number % 4 {
                case 0: try db.execute(sql)
                case 1: _ = try db.fetchAll(sql)
                case 2: _ = try db.fetchOne(sql)
                default: _ = try db.fetchValue(sql, as: String.self)
                }
            }
            return (db.cachedStatementCount, db.statementMemory)
        }
        #expect(writerCount <= capacity)
        // A statement of this size takes a few kB: 50,000 of them, over 100 MB.
        #expect(writerMemory < 8 << 20, "\(writerMemory) bytes of prepared statements on the writer")

        let (readerCount, readerMemory) = try store.read { db in
            for number in 0..<10_000 { _ = try db.fetchValue("SELECT count(*) FROM notes WHERE id > \(number)", as: Int.self) }
            return (db.cachedStatementCount, db.statementMemory)
        }
        #expect(readerCount <= capacity)
        #expect(readerMemory < 8 << 20, "\(readerMemory) bytes of prepared statements on a reader")
    }

    /// The statement forgotten to make room is the one used least recently: a text run between
    /// every other stays prepared however many others pass through.
    @Test func theLeastRecentlyUsedStatementIsForgottenFirst() throws {
        let store = try makeStore(capacity: 3)
        try store.read { db in
            let hot = try db.cachedStatement("SELECT count(*) FROM notes")
            for number in 0..<100 {
                _ = try db.fetchValue("SELECT \(number)", as: Int.self)
                #expect(try db.cachedStatement("SELECT count(*) FROM notes") === hot, "still prepared after \(number) others")
            }
            #expect(db.cachedStatementCount == 3)
            let cold = try db.cachedStatement("SELECT 'cold'")
            #expect(try db.cachedStatement("SELECT 'cold'") === cold)
            for number in 0..<3 { _ = try db.fetchValue("SELECT \(number + 1_000)", as: Int.self) }
            #expect(try db.cachedStatement("SELECT 'cold'") !== cold, "forgotten after three other texts")
        }
    }

    /// Capacity 0 keeps nothing: every call prepares its statement (and gets it right).
    @Test func capacityZeroKeepsNoStatement() throws {
        let store = try makeStore(capacity: 0)
        let (count, cached) = try store.read { db in
            let first = try db.cachedStatement("SELECT count(*) FROM notes")
            let again = try db.cachedStatement("SELECT count(*) FROM notes")
            return (try db.fetchValue("SELECT count(*) FROM notes", as: Int.self), (db.cachedStatementCount, first === again))
        }
        #expect(count == 5)
        #expect(cached == (0, false))
    }

    /// A statement a caller is stepping stays valid when the cache forgets it (the cache lets go
    /// of it; SQLite finalizes it once the caller lets go too), and a nested call running the same
    /// text is given a statement of its own, not the one being stepped (which it would reset,
    /// restarting the caller's rows).
    @Test func aStatementBeingSteppedIsNeitherFinalizedNorResetUnderItsCaller() throws {
        for capacity in [2, 128] {
            let store = try makeStore(capacity: capacity)
            let sql = "SELECT body FROM notes ORDER BY id"
            let (bodies, count) = try store.read { db in
                let outer = try db.cachedStatement(sql)
                defer { outer.reset() }
                var bodies: [String] = []
                // Bounded: a statement reset under its caller would start over, forever.
                while bodies.count < 50, try outer.step() {
                    bodies.append(outer.text(at: 0))
                    // Other texts run inside the loop: with capacity 2, the first two forget `outer`.
                    for other in 0..<3 { _ = try db.fetchAll("SELECT body FROM notes WHERE id = \(other + 10 * bodies.count)") }
                    #expect(try db.fetchAll(sql).count == 5, "capacity \(capacity)")
                }
                return (bodies, db.cachedStatementCount)
            }
            #expect(bodies == (1...5).map { "note \($0)" }, "capacity \(capacity)")
            #expect(count <= capacity)
        }
    }

    /// The cache against a model (an array of keys, most recent first) on seeded random finds and
    /// inserts over a few keys and capacities: the same keys kept, the same one forgotten, and
    /// its links consistent after every step.
    @Test(arguments: [0, 1, 2, 3, 8])
    func theCacheMatchesAModelOfRecency(capacity: Int) {
        var random = SeededGenerator(seed: UInt64(capacity) &* 7_919 &+ 1)
        var cache = LeastRecentlyUsed<Int, String>(capacity: capacity)
        var model: [Int] = []   // most recently used first
        for step in 0..<5_000 {
            let key = Int.random(in: 0..<12, using: &random)
            let found = cache.value(for: key)
            if let position = model.firstIndex(of: key) {
                #expect(found == "value \(key)", "step \(step)")
                model.remove(at: position)
                model.insert(key, at: 0)
            } else {
                #expect(found == nil, "step \(step)")
                let forgotten = cache.insert("value \(key)", for: key)
                model.insert(key, at: 0)
                let expected = model.count > capacity ? model.removeLast() : nil
                #expect(forgotten?.key == expected, "step \(step)")
                #expect(forgotten.map { $0.value == "value \($0.key)" } ?? true)
            }
            #expect(cache.count == model.count, "step \(step)")
            #expect(cache.keysByRecency == model, "step \(step)")
            #expect(cache.invariantViolations.isEmpty, "step \(step): \(cache.invariantViolations)")
        }
    }
}
