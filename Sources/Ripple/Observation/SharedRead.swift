import Foundation

/// What makes two live queries' results the same: the kind of reading and element type, the
/// SQL, the arguments exactly as bound, and the column that identifies an element — text by its
/// bytes (`"\u{e9}"` and `"e\u{301}"`, equal as Swift strings, are two arguments).
struct SharedReadKey: Hashable, Sendable {
    var reading: String
    var element: ObjectIdentifier
    var sql: ExactText
    var arguments: [RowKey]
    var identity: ExactText

    init<Element>(reading: String, element: Element.Type, sql: String, arguments: [SQLValue], identity: String) {
        self.reading = reading
        self.element = ObjectIdentifier(element)
        self.sql = ExactText(sql)
        self.arguments = arguments.map(RowKey.init)
        self.identity = ExactText(identity)
    }
}

/// The latest result read for the live queries with one ``SharedReadKey``, so that those that
/// must run their query again at a version already read take that result instead: subscribers
/// of the same query share one re-read. Each keeps its own last snapshot, and diffs from it.
///
/// Kept only while two or more queries share it (one alone would only hold an extra snapshot).
/// A version identifies what a read sees: every commit made through Ripple takes one, and a
/// write made without Ripple is given one when noticed, which every query then reads again.
final class SharedRead<Element: Sendable>: @unchecked Sendable {   // every field is guarded by `lock`
    private let lock = NSLock()
    private var members = 0
    private var latest: (version: Int64, snapshot: Snapshot<Element>)?

    /// The result read at `version`, if a member read it.
    func snapshot(at version: Int64) -> Snapshot<Element>? {
        lock.withLock { latest?.version == version ? latest?.snapshot : nil }
    }

    /// Keeps `snapshot`, read at `version`, for the other members (unless one kept a later one).
    func keep(_ snapshot: Snapshot<Element>, at version: Int64) {
        lock.withLock {
            guard members > 1, latest.map({ $0.version < version }) ?? true else { return }
            latest = (version, snapshot)
        }
    }

    /// A member joined or left; returns how many remain.
    fileprivate func count(_ change: Int) -> Int {
        lock.withLock {
            members += change
            if members < 2 { latest = nil }
            return members
        }
    }
}

/// The shared reads of a store's live queries, by key.
final class SharedReads: Sendable {
    private let reads = Locked<[SharedReadKey: AnyObject]>([:])

    /// The shared read of `key`, joined (see ``leave(_:)``).
    func join<Element>(_ key: SharedReadKey, as element: Element.Type) -> SharedRead<Element> {
        reads.withLock { reads in
            // The key holds the element type: the entry is of this type.
            let read = reads[key] as? SharedRead<Element> ?? SharedRead<Element>()
            reads[key] = read
            _ = read.count(1)
            return read
        }
    }

    /// A member of `key`'s shared read left.
    func leave<Element>(_ key: SharedReadKey, _ read: SharedRead<Element>) {
        reads.withLock { reads in
            if read.count(-1) == 0, reads[key] === read { reads[key] = nil }
        }
    }
}
