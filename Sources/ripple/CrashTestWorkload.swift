import Foundation
import Ripple
import RippleTesting

/// The crash test's data: what the child writes and the parent expects, both computed from the
/// seed alone. Transaction `n` is generated from the seed, `n` and the state after transaction
/// `n - 1`, so replaying transactions 1…n from an empty table gives the exact state a correct
/// store holds after `n` (see ``CrashModel``).
enum CrashWorkload {
    /// The collection the transactions write.
    static let itemsTable = "items"
    /// One row (`id = 1`) holding the number of the last committed transaction, written by every
    /// transaction: after a crash it says which transaction the database ends with.
    static let progressTable = "crash_progress"
    /// Creates the progress table and its row (a no-op once they exist, so it takes no version).
    static let progressSchema = """
        CREATE TABLE IF NOT EXISTS crash_progress(id INTEGER PRIMARY KEY, txn INTEGER NOT NULL);
        INSERT OR IGNORE INTO crash_progress(id, txn) VALUES (1, 0)
        """
    /// The database file inside the crash test's directory.
    static let fileName = "crashtest.sqlite"

    /// The configuration of the child's and the parent's stores: the whole change log is kept, so
    /// that the parent can check every version.
    static var configuration: Store.Configuration {
        var configuration = Store.Configuration()
        configuration.changeLogRetention = .unlimited
        return configuration
    }

    /// The number of the last committed transaction, as the database says.
    static func committedTransaction(in store: Store) throws -> Int {
        try store.read { db in
            try db.fetchValue("SELECT txn FROM crash_progress WHERE id = 1", as: Int.self) ?? 0
        }
    }

    /// Writes `transaction` in `db`'s transaction, through the collection or raw SQL as it says.
    static func write(_ transaction: CrashTransaction, items: RecordCollection<CrashItem>, in db: Database) throws {
        if !transaction.deletes.isEmpty {
            if transaction.deletesWithSQL {
                let list = "[" + transaction.deletes.map(String.init).joined(separator: ",") + "]"
                try db.execute("DELETE FROM items WHERE id IN (SELECT value FROM json_each(?))", [list])
                guard db.changedRowCount == transaction.deletes.count else {
                    throw CrashTestError("transaction \(transaction.number): deleted \(db.changedRowCount) rows, "
                                         + "expected \(transaction.deletes.count)")
                }
            } else {
                let deleted = try items.delete(ids: transaction.deletes, in: db)
                guard deleted == transaction.deletes.count else {
                    throw CrashTestError("transaction \(transaction.number): deleted \(deleted) rows, "
                                         + "expected \(transaction.deletes.count)")
                }
            }
        }
        if !transaction.updates.isEmpty {
            if transaction.updatesWithSQL {
                for item in transaction.updates {
                    try db.execute("UPDATE items SET title = ?, value = ?, txn = ?, payload = ? WHERE id = ?",
                                   [item.title, item.value, item.txn, item.payload, item.id])
                    guard db.changedRowCount == 1 else {
                        throw CrashTestError("transaction \(transaction.number): no row \(item.id) to update")
                    }
                }
            } else {
                try items.update(contentsOf: transaction.updates, in: db)
            }
        }
        if !transaction.inserts.isEmpty {
            if transaction.insertsWithSQL {
                for item in transaction.inserts {
                    try db.execute("INSERT INTO items(id, title, value, txn, payload) VALUES (?, ?, ?, ?, ?)",
                                   [item.id, item.title, item.value, item.txn, item.payload])
                }
            } else {
                try items.insert(contentsOf: transaction.inserts, in: db)
            }
        }
        try db.execute("UPDATE crash_progress SET txn = ? WHERE id = 1", [transaction.number])
    }

    /// FNV-1a (64 bits) of `text`, in hex: a digest both processes compute the same way.
    static func digest(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// A row of the crash test's collection.
struct CrashItem: Codable, Sendable, Identifiable, Equatable {
    var id: Int
    var title: String
    var value: Int
    /// The transaction that last wrote the row.
    var txn: Int
    /// Text of 0–300 characters, so that transactions span pages.
    var payload: String
}

/// One transaction of the crash test: distinct keys deleted, updated and inserted.
struct CrashTransaction: Sendable {
    var number: Int
    var deletes: [Int] = []
    var updates: [CrashItem] = []
    var inserts: [CrashItem] = []
    var deletesWithSQL = false
    var updatesWithSQL = false
    var insertsWithSQL = false

    var rowCount: Int { deletes.count + updates.count + inserts.count }

    /// What the transaction writes, canonically (sorted by key within each operation).
    var canonicalText: String {
        var text = "txn \(number)"
        for id in deletes.sorted() { text += ";d\(id)" }
        for item in updates.sorted(by: { $0.id < $1.id }) { text += ";u" + Self.describe(item) }
        for item in inserts.sorted(by: { $0.id < $1.id }) { text += ";i" + Self.describe(item) }
        return text
    }

    /// The digest the child prints for the transaction.
    var digest: String { CrashWorkload.digest(canonicalText) }

    private static func describe(_ item: CrashItem) -> String {
        "\(item.id),\(item.title),\(item.value),\(item.txn),\(item.payload)"
    }

    /// The change log entries the transaction must have left under its version: per
    /// `table/operation`, the keys as the log writes them (text), sorted.
    var expectedLog: [String: [String]] {
        var log: [String: [String]] = ["\(CrashWorkload.progressTable)/update": ["1"]]
        if !deletes.isEmpty { log["\(CrashWorkload.itemsTable)/delete"] = deletes.map(String.init).sorted() }
        if !updates.isEmpty { log["\(CrashWorkload.itemsTable)/update"] = updates.map { String($0.id) }.sorted() }
        if !inserts.isEmpty { log["\(CrashWorkload.itemsTable)/insert"] = inserts.map { String($0.id) }.sorted() }
        return log
    }
}

/// The expected state of the collection after a number of transactions, and the generator of
/// the next one.
struct CrashModel: Sendable {
    let seed: UInt64
    /// The transactions applied so far.
    private(set) var transaction = 0
    /// The live rows, by key.
    private(set) var items: [Int: CrashItem] = [:]
    /// The live keys in increasing order (so that random picks are the same in every process).
    private(set) var keys: [Int] = []
    /// The next key to insert (keys are never reused).
    private(set) var nextID = 1

    init(seed: UInt64) {
        self.seed = seed
    }

    /// The state after transactions 1…`count`.
    static func replayed(seed: UInt64, through count: Int) -> CrashModel {
        var model = CrashModel(seed: seed)
        model.advance(to: count)
        return model
    }

    /// Applies the transactions after the current one up to `count`.
    mutating func advance(to count: Int) {
        while transaction < count { apply(next()) }
    }

    /// The rows in key order.
    var sortedItems: [CrashItem] { keys.map { items[$0]! } }

    /// The transaction after the current one (the state is not changed).
    func next() -> CrashTransaction {
        let number = transaction + 1
        var random = SeededGenerator(seed: (seed &* 0x9E37_79B9_7F4A_7C15) ^ (UInt64(number) &* 0xD1B5_4A32_D192_ED03))
        var result = CrashTransaction(number: number)
        let sizeClass = Int.random(in: 0..<100, using: &random)
        let size = sizeClass < 50 ? Int.random(in: 1...10, using: &random)
            : sizeClass < 85 ? Int.random(in: 11...60, using: &random) : Int.random(in: 61...200, using: &random)
        let insertShare = keys.count < 300 ? 70 : keys.count > 2_000 ? 15 : 40
        var touched = Set<Int>()   // indices into `keys`
        var nextID = self.nextID
        for _ in 0..<size {
            let roll = Int.random(in: 0..<100, using: &random)
            if roll < insertShare || touched.count >= keys.count {
                result.inserts.append(Self.item(nextID, number, &random))
                nextID += 1
                continue
            }
            var index = Int.random(in: 0..<keys.count, using: &random)
            while touched.contains(index) { index = (index + 1) % keys.count }
            touched.insert(index)
            if roll < insertShare + (100 - insertShare) / 2 {
                result.updates.append(Self.item(keys[index], number, &random))
            } else {
                result.deletes.append(keys[index])
            }
        }
        result.deletesWithSQL = Bool.random(using: &random)
        result.updatesWithSQL = Bool.random(using: &random)
        result.insertsWithSQL = Bool.random(using: &random)
        return result
    }

    private static func item(_ id: Int, _ transaction: Int, _ random: inout SeededGenerator) -> CrashItem {
        // Eight letters (or spaces) per random number.
        let length = Int.random(in: 0...300, using: &random)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length + 7)
        while bytes.count < length {
            var bits = random.next()
            for _ in 0..<8 {
                let letter = UInt8(truncatingIfNeeded: bits % 27)
                bytes.append(letter == 26 ? UInt8(ascii: " ") : UInt8(ascii: "a") + letter)
                bits >>= 8
            }
        }
        let payload = String(decoding: bytes[..<length], as: UTF8.self)
        return CrashItem(id: id, title: "item \(id) of txn \(transaction)", value: Int.random(in: 0..<1_000, using: &random),
                         txn: transaction, payload: payload)
    }

    /// Applies `transaction`, which must be the one after the current one.
    mutating func apply(_ transaction: CrashTransaction) {
        precondition(transaction.number == self.transaction + 1, "crash test: transactions apply in order")
        var removed = Set<Int>()
        for id in transaction.deletes {
            items[id] = nil
            removed.insert(id)
        }
        if !removed.isEmpty { keys.removeAll { removed.contains($0) } }
        for item in transaction.updates { items[item.id] = item }
        for item in transaction.inserts {
            items[item.id] = item
            keys.append(item.id)   // new keys are larger than every key before
            nextID = max(nextID, item.id + 1)
        }
        self.transaction = transaction.number
    }
}

/// A failed check of the crash test.
struct CrashTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
