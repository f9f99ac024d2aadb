/// The outcome of Heckel's matching passes: which old element became which new element.
@usableFromInline
internal struct _Matching {
    /// For each old index, the new index it matched, or -1 (deleted).
    @usableFromInline var oldToNew: [Int32]
    /// For each new index, the old index it matched, or -1 (inserted).
    @usableFromInline var newToOld: [Int32]
    /// How many pairs matched.
    @usableFromInline var matchedCount: Int
    /// Identities that occur more than once in the old or the new collection.
    @usableFromInline var duplicates: [Changeset.Duplicate]

    @inlinable
    init(oldToNew: [Int32], newToOld: [Int32], matchedCount: Int, duplicates: [Changeset.Duplicate]) {
        self.oldToNew = oldToNew
        self.newToOld = newToOld
        self.matchedCount = matchedCount
        self.duplicates = duplicates
    }
}

/// Heckel's matching ("A technique for isolating differences between files", CACM 1978), for
/// identities rather than lines.
///
/// * Pass 1 — old elements into the symbol table: one entry per identity, holding the list of
///   its old occurrences in ascending order.
/// * Pass 2 — new elements against the table: each occurrence takes the first old occurrence of
///   its identity not yet taken. Unique identities match exactly as in Heckel's pass 3; a repeated
///   identity is matched in order (k-th old with k-th new) and its surplus is left unmatched, to be
///   reported as deletes or inserts. Because every occurrence that *can* be paired is paired here,
///   Heckel's run-extension passes (4 and 5) would find nothing left to add.
/// * Pass 3 — only when an identity repeats: list the occurrences of each repeated identity.
///
/// - Complexity: O(n + m) expected time and memory, one hash per element
///   (plus one more per element when an identity repeats).
@inlinable
internal func _heckelMatch<S: _IdentityStrategy>(
    _ old: UnsafeBufferPointer<S.Element>,
    _ new: UnsafeBufferPointer<S.Element>,
    _ strategy: S
) -> _Matching {
    let n = old.count
    let m = new.count
    precondition(n < Int(Int32.max) && m < Int(Int32.max),
                 "RippleDiff: collections of 2^31 elements or more are not supported")

    var table = _SymbolTable(expected: Swift.max(n, m))
    defer { table.deallocate() }
    var oldToNew = [Int32](repeating: -1, count: n)
    var newToOld = [Int32](repeating: -1, count: m)
    // Chains the old occurrences of a repeated identity; allocated when the first repeat is seen.
    var nextOccurrence: [Int32] = []
    var repeats = false
    var matchedCount = 0

    // Pass 1: old elements, last to first, so that each chain ends up in ascending order.
    var i = n - 1
    while i >= 0 {
        let id = strategy.identity(of: old[i])
        let hash = _SymbolTable.hash(id)
        let slot = table.probe(hash: hash) { representative, _ in
            strategy.identity(of: old[Int(representative)]) == id
        }
        if table.entries[slot].flags == 0 {
            _ = table.insert(.init(hash: hash, flags: _SymbolTable.occupied,
                                   representative: Int32(i), head: Int32(i)), at: slot)
        } else {
            if nextOccurrence.isEmpty { nextOccurrence = [Int32](repeating: -1, count: n) }
            nextOccurrence[i] = table.entries[slot].head
            table.entries[slot].head = Int32(i)
            table.entries[slot].flags |= _SymbolTable.repeatedInOld
            repeats = true
        }
        i -= 1
    }

    // Pass 2: new elements, first to last; each takes the first untaken old occurrence.
    oldToNew.withUnsafeMutableBufferPointer { oldToNew in
        newToOld.withUnsafeMutableBufferPointer { newToOld in
            for j in 0..<m {
                let id = strategy.identity(of: new[j])
                let hash = _SymbolTable.hash(id)
                let slot = table.probe(hash: hash) { representative, isNew in
                    strategy.identity(of: isNew ? new[Int(representative)] : old[Int(representative)]) == id
                }
                var entry = table.entries[slot]
                if entry.flags == 0 {
                    // Only in the new collection: recorded so that a repeat in `new` is noticed.
                    _ = table.insert(.init(hash: hash,
                                           flags: _SymbolTable.occupied | _SymbolTable.representativeIsNew
                                               | _SymbolTable.seenInNew,
                                           representative: Int32(j), head: -1), at: slot)
                    continue
                }
                if entry.flags & _SymbolTable.seenInNew != 0 {
                    entry.flags |= _SymbolTable.repeatedInNew
                    repeats = true
                } else {
                    entry.flags |= _SymbolTable.seenInNew
                }
                let matched = entry.head
                if matched >= 0 {
                    entry.head = entry.flags & _SymbolTable.repeatedInOld != 0
                        ? nextOccurrence[Int(matched)] : -1
                    oldToNew[Int(matched)] = Int32(j)
                    newToOld[j] = matched
                    matchedCount &+= 1
                }
                table.entries[slot] = entry
            }
        }
    }

    // Pass 3: where each repeated identity occurs.
    var duplicates: [Changeset.Duplicate] = []
    if repeats {
        let repeated = _SymbolTable.repeatedInOld | _SymbolTable.repeatedInNew
        var groupOfSlot: [Int: Int] = [:]
        func group(of slot: Int) -> Int {
            if let group = groupOfSlot[slot] { return group }
            duplicates.append(Changeset.Duplicate(oldIndices: [], newIndices: []))
            groupOfSlot[slot] = duplicates.count - 1
            return duplicates.count - 1
        }
        for i in 0..<n {
            let id = strategy.identity(of: old[i])
            let slot = table.probe(hash: _SymbolTable.hash(id)) { representative, isNew in
                strategy.identity(of: isNew ? new[Int(representative)] : old[Int(representative)]) == id
            }
            if table.entries[slot].flags & repeated != 0 { duplicates[group(of: slot)].oldIndices.append(i) }
        }
        for j in 0..<m {
            let id = strategy.identity(of: new[j])
            let slot = table.probe(hash: _SymbolTable.hash(id)) { representative, isNew in
                strategy.identity(of: isNew ? new[Int(representative)] : old[Int(representative)]) == id
            }
            if table.entries[slot].flags & repeated != 0 { duplicates[group(of: slot)].newIndices.append(j) }
        }
    }
    return _Matching(oldToNew: oldToNew, newToOld: newToOld, matchedCount: matchedCount, duplicates: duplicates)
}
