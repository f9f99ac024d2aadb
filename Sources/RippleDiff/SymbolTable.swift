/// Heckel's symbol table: one entry per distinct identity, open addressing with linear probing
/// over 32-bit hashes computed once per element.
///
/// Each entry is 16 bytes in one flat buffer (no per-element allocation): the hash, flags, a
/// representative element to compare identities with, and the head of the list of old
/// occurrences not yet matched. Old occurrences of a repeated identity are chained through a
/// side array, allocated only when an identity repeats.
@usableFromInline
internal struct _SymbolTable {
    @usableFromInline
    internal struct Entry {
        /// The identity's 32-bit hash; also gives the home slot (`hash & mask`).
        @usableFromInline var hash: UInt32
        /// `occupied`, `representativeIsNew`, `repeatedInOld`, `seenInNew`, `repeatedInNew`.
        @usableFromInline var flags: UInt32
        /// An element with this identity: an old index, or a new index if `representativeIsNew`.
        @usableFromInline var representative: Int32
        /// The first old occurrence not matched yet, or -1.
        @usableFromInline var head: Int32

        @inlinable
        init(hash: UInt32, flags: UInt32, representative: Int32, head: Int32) {
            self.hash = hash
            self.flags = flags
            self.representative = representative
            self.head = head
        }
    }

    @usableFromInline static var occupied: UInt32 { 1 }
    @usableFromInline static var representativeIsNew: UInt32 { 2 }
    @usableFromInline static var repeatedInOld: UInt32 { 4 }
    @usableFromInline static var seenInNew: UInt32 { 8 }
    @usableFromInline static var repeatedInNew: UInt32 { 16 }

    @usableFromInline var entries: UnsafeMutableBufferPointer<Entry>
    @usableFromInline var mask: Int
    @usableFromInline var count: Int

    /// A table that holds `expected` identities at a load factor of at most 1/2 without growing.
    @inlinable
    init(expected: Int) {
        var capacity = 16
        while capacity < expected * 2 { capacity &<<= 1 }
        entries = .allocate(capacity: capacity)
        entries.initialize(repeating: Entry(hash: 0, flags: 0, representative: -1, head: -1))
        mask = capacity - 1
        count = 0
    }

    @inlinable
    func deallocate() { entries.deallocate() }

    /// The 32-bit hash the table uses for an identity.
    @inlinable @inline(__always)
    static func hash<ID: Hashable>(_ id: ID) -> UInt32 {
        let h = id.hashValue
        return UInt32(truncatingIfNeeded: h ^ (h &>> 32))
    }

    /// The slot holding the identity with `hash` for which `isSame(representative, isNew)` holds,
    /// or the empty slot where it belongs (check `flags == 0`).
    @inlinable @inline(__always)
    func probe(hash: UInt32, isSame: (Int32, Bool) -> Bool) -> Int {
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let entry = entries[slot]
            if entry.flags == 0 { return slot }
            if entry.hash == hash
                && isSame(entry.representative, entry.flags & _SymbolTable.representativeIsNew != 0) {
                return slot
            }
            slot = (slot &+ 1) & mask
        }
    }

    /// Fills the empty `slot`, growing the table when it passes a load factor of 3/4.
    /// Returns the slot the entry finally lives in.
    @inlinable @inline(__always)
    mutating func insert(_ entry: Entry, at slot: Int) -> Int {
        entries[slot] = entry
        count &+= 1
        if count &* 4 > entries.count &* 3 {
            grow()
            return probeEmptyOrHash(entry)
        }
        return slot
    }

    @inlinable
    func probeEmptyOrHash(_ entry: Entry) -> Int {
        var slot = Int(truncatingIfNeeded: entry.hash) & mask
        while entries[slot].flags != 0 {
            if entries[slot].hash == entry.hash && entries[slot].representative == entry.representative
                && entries[slot].flags & _SymbolTable.representativeIsNew == entry.flags & _SymbolTable.representativeIsNew {
                return slot
            }
            slot = (slot &+ 1) & mask
        }
        return slot
    }

    /// Doubles the capacity, re-placing entries by their stored hashes (no element is re-hashed).
    @inlinable
    mutating func grow() {
        let old = entries
        let capacity = old.count * 2
        entries = .allocate(capacity: capacity)
        entries.initialize(repeating: Entry(hash: 0, flags: 0, representative: -1, head: -1))
        mask = capacity - 1
        for entry in old where entry.flags != 0 {
            var slot = Int(truncatingIfNeeded: entry.hash) & mask
            while entries[slot].flags != 0 { slot = (slot &+ 1) & mask }
            entries[slot] = entry
        }
        old.deallocate()
    }
}
