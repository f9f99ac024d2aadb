extension Changeset {
    /// Diffs two collections of ``Diffable`` elements.
    ///
    /// ```swift
    /// let changeset = Changeset(from: oldTodos, to: newTodos)
    /// ```
    ///
    /// Indices in the changeset are offsets from each collection's start, whatever its own
    /// indices: diffing `array[10...]` reports its first element at 0, not 10 (this holds for
    /// every initializer).
    ///
    /// - Complexity: O(n + m) expected time and memory for matching (one hash per element),
    ///   O(n log n) for the minimal moves (O(n) when the matched elements are mostly in order).
    @inlinable
    public init<Old: Collection, New: Collection>(from old: Old, to new: New)
    where Old.Element: Diffable, New.Element == Old.Element {
        self = Changeset._diff(old, new, _DiffableStrategy<Old.Element>())
    }

    /// Diffs two collections of hashable elements: each value is its own identity, so there are
    /// no updates, only deletes, inserts and moves.
    ///
    /// - Complexity: O(n + m) expected time and memory; O(n log n) for the minimal moves.
    @inlinable
    public init<Old: Collection, New: Collection>(from old: Old, to new: New)
    where Old.Element: Hashable, New.Element == Old.Element {
        self = Changeset._diff(old, new, _HashableStrategy<Old.Element>())
    }

    /// Diffs two collections of elements that are both ``Diffable`` and `Hashable`: the
    /// ``Diffable`` conformance decides identity and content.
    ///
    /// - Complexity: O(n + m) expected time and memory; O(n log n) for the minimal moves.
    @inlinable
    public init<Old: Collection, New: Collection>(from old: Old, to new: New)
    where Old.Element: Diffable & Hashable, New.Element == Old.Element {
        self = Changeset._diff(old, new, _DiffableStrategy<Old.Element>())
    }

    /// Diffs two collections with identity and content given by closures.
    ///
    /// ```swift
    /// let changeset = Changeset(from: old, to: new, identifiedBy: \.id, contentEqual: { $0.title == $1.title })
    /// ```
    ///
    /// - Parameters:
    ///   - old: the collection before.
    ///   - new: the collection after.
    ///   - identify: the identity of an element.
    ///   - contentEqual: whether two elements of equal identity show the same content;
    ///     `nil` means always (no updates are reported).
    /// - Complexity: O(n + m) expected time and memory; O(n log n) for the minimal moves.
    @inlinable
    public init<Old: Collection, New: Collection, ID: Hashable>(
        from old: Old, to new: New,
        identifiedBy identify: @escaping (Old.Element) -> ID,
        contentEqual: ((Old.Element, Old.Element) -> Bool)? = nil
    ) where New.Element == Old.Element {
        self = Changeset._diff(old, new, _ClosureStrategy(identify: identify, contentEqual: contentEqual))
    }

    /// Runs the engine on contiguous storage (copying only collections that have none).
    @inlinable
    internal static func _diff<Old: Collection, New: Collection, S: _IdentityStrategy>(
        _ old: Old, _ new: New, _ strategy: S
    ) -> Changeset where Old.Element == S.Element, New.Element == S.Element {
        _withContiguousStorage(old) { old in
            _withContiguousStorage(new) { new in
                let matching = _heckelMatch(old, new, strategy)
                var updates: [IndexPair] = []
                if strategy.comparesContent {
                    matching.newToOld.withUnsafeBufferPointer { newToOld in
                        for index in 0..<newToOld.count where newToOld[index] >= 0 {
                            let source = Int(newToOld[index])
                            if !strategy.isContentEqual(old[source], new[index]) {
                                updates.append(IndexPair(old: source, new: index))
                            }
                        }
                    }
                }
                return Changeset(matching: matching, updates: updates)
            }
        }
    }
}

/// Calls `body` with the collection's elements in contiguous memory.
@inlinable
internal func _withContiguousStorage<C: Collection, R>(
    _ collection: C, _ body: (UnsafeBufferPointer<C.Element>) -> R
) -> R {
    if let result = collection.withContiguousStorageIfAvailable(body) { return result }
    return ContiguousArray(collection).withUnsafeBufferPointer(body)
}
