/// A map that keeps at most ``capacity`` entries: making room for a new entry forgets the one
/// used least recently. (Each connection keeps its prepared statements in one, by SQL text.)
///
/// ```swift
/// var cache = LeastRecentlyUsed<String, Int>(capacity: 2)
/// cache.insert(1, for: "a")
/// cache.insert(2, for: "b")
/// _ = cache.value(for: "a")              // "a" is now the most recently used
/// let forgotten = cache.insert(3, for: "c")   // ("b", 2)
/// ```
///
/// The entries sit in an array of slots, threaded in order of use by a doubly-linked list whose
/// links are slot numbers; a dictionary gives each key's slot. Once full, a new entry takes the
/// slot of the entry it forgets, so the cache allocates nothing more.
///
/// - Complexity: ``value(for:)`` and ``insert(_:for:)`` are O(1). Finding hashes the key once,
///   rewrites a few links and allocates nothing; inserting hashes the key once more (and the
///   forgotten entry's key once).
struct LeastRecentlyUsed<Key: Hashable, Value> {
    private struct Slot {
        var key: Key
        var value: Value
        /// The slot used next after this one (toward the most recent), or `none`.
        var newer: Int32
        /// The slot used last before this one (toward the least recent), or `none`.
        var older: Int32
    }

    /// No slot: the end of the list.
    private static var none: Int32 { -1 }

    /// The most entries kept (0: none is).
    let capacity: Int
    private var slots: [Slot] = []
    private var slotOfKey: [Key: Int32] = [:]
    private var newest = Self.none
    private var oldest = Self.none

    /// The largest capacity (slots are numbered by 32-bit integers). Slots are made as entries
    /// come, so a large capacity costs nothing until it is used.
    static var largestCapacity: Int { Int(Int32.max) - 1 }

    /// An empty cache that will keep up to `capacity` entries (0 to ``largestCapacity``).
    init(capacity: Int) {
        precondition((0...Self.largestCapacity).contains(capacity),
                     "a cache's capacity is from 0 to \(Self.largestCapacity), not \(capacity)")
        self.capacity = capacity
    }

    /// How many entries the cache keeps now.
    var count: Int { slots.count }

    /// The value kept for `key`, which becomes the most recently used entry; `nil` when none is.
    @inline(__always)
    mutating func value(for key: Key) -> Value? {
        guard let slot = slotOfKey[key] else { return nil }
        if slot != newest { makeNewest(slot) }
        return slots[Int(slot)].value
    }

    /// Keeps `value` for `key` (which the cache must not hold) as the most recently used entry,
    /// and returns the entry forgotten to make room, if any. With capacity 0, nothing is kept: the
    /// entry given is the one returned.
    @discardableResult
    mutating func insert(_ value: Value, for key: Key) -> (key: Key, value: Value)? {
        guard capacity > 0 else { return (key, value) }
        if slots.count < capacity {
            let slot = Int32(slots.count)
            slots.append(Slot(key: key, value: value, newer: Self.none, older: newest))
            if newest != Self.none { slots[Int(newest)].newer = slot } else { oldest = slot }
            newest = slot
            slotOfKey[key] = slot
            return nil
        }
        // Full: the least recently used entry gives up its slot.
        let slot = oldest
        let forgotten = (key: slots[Int(slot)].key, value: slots[Int(slot)].value)
        slotOfKey[forgotten.key] = nil
        slots[Int(slot)].key = key
        slots[Int(slot)].value = value
        if slot != newest { makeNewest(slot) }
        slotOfKey[key] = slot
        return forgotten
    }

    /// Forgets every entry.
    mutating func removeAll() {
        slots.removeAll()
        slotOfKey.removeAll()
        (newest, oldest) = (Self.none, Self.none)
    }

    /// Unlinks `slot` (not the newest) from its place in the list and links it as the newest.
    private mutating func makeNewest(_ slot: Int32) {
        let (newer, older) = (slots[Int(slot)].newer, slots[Int(slot)].older)
        // Not the newest, so some slot is newer.
        slots[Int(newer)].older = older
        if older != Self.none { slots[Int(older)].newer = newer } else { oldest = newer }
        slots[Int(slot)].older = newest
        slots[Int(slot)].newer = Self.none
        slots[Int(newest)].newer = slot
        newest = slot
    }

    // MARK: Checks

    /// The keys, the most recently used first (for tests).
    var keysByRecency: [Key] {
        var keys: [Key] = []
        var slot = newest
        while slot != Self.none, keys.count <= slots.count {
            keys.append(slots[Int(slot)].key)
            slot = slots[Int(slot)].older
        }
        return keys
    }

    /// What is wrong with the links and the index (empty: nothing): the list runs through every
    /// slot once, both ways, and the dictionary gives each key its slot.
    var invariantViolations: [String] {
        var violations: [String] = []
        if slots.count > capacity { violations.append("\(slots.count) slots for capacity \(capacity)") }
        if slotOfKey.count != slots.count { violations.append("\(slotOfKey.count) keys indexed for \(slots.count) slots") }
        var seen = Set<Int32>()
        var slot = newest, previous = Self.none
        while slot != Self.none {
            guard seen.insert(slot).inserted, slot >= 0, Int(slot) < slots.count else {
                violations.append("the list loops or leaves the slots at \(slot)")
                return violations
            }
            if slots[Int(slot)].newer != previous { violations.append("slot \(slot) links back to \(slots[Int(slot)].newer), not \(previous)") }
            if slotOfKey[slots[Int(slot)].key] != slot { violations.append("the key of slot \(slot) is indexed elsewhere") }
            (previous, slot) = (slot, slots[Int(slot)].older)
        }
        if previous != oldest { violations.append("the list ends at \(previous), the oldest is \(oldest)") }
        if seen.count != slots.count { violations.append("the list runs through \(seen.count) of \(slots.count) slots") }
        return violations
    }
}
