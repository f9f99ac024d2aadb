/// A type-erased ``Diffable`` value, for collections that mix element types
/// (for example the rows of a settings screen: toggles, links and headers).
///
/// Identities of different underlying types never match, even when their values are equal:
/// a header with id `1` and a row with id `1` are different elements.
///
/// ```swift
/// let rows: [AnyDiffable] = [AnyDiffable(header), AnyDiffable(toggle)]
/// let changeset = Changeset(from: oldRows, to: rows)
/// ```
public struct AnyDiffable: Diffable, Equatable, Sendable {
    /// The wrapped value.
    public let base: any Diffable & Sendable

    /// The identity: the wrapped value's identity, tagged with its type.
    public let diffID: ID

    private let contentEqual: @Sendable (any Diffable & Sendable) -> Bool

    /// Wraps `base`.
    public init<Base: Diffable & Sendable>(_ base: Base) where Base.DiffID: Sendable {
        self.base = base
        self.diffID = ID(type: ObjectIdentifier(Base.self), value: base.diffID)
        self.contentEqual = { other in
            guard let other = other as? Base else { return false }
            return base.isContentEqual(to: other)
        }
    }

    /// Compares content when both values wrap the same type; values of different types never
    /// have equal content.
    public func isContentEqual(to other: AnyDiffable) -> Bool {
        contentEqual(other.base)
    }

    /// Equal when both wrap the same type, with the same identity and equal content (so that
    /// `changeset.apply(to: old, using: new) == new` can be written for `[AnyDiffable]`).
    public static func == (lhs: AnyDiffable, rhs: AnyDiffable) -> Bool {
        lhs.diffID == rhs.diffID && lhs.isContentEqual(to: rhs)
    }

    /// The identity of an ``AnyDiffable``: the wrapped type and the wrapped identity.
    public struct ID: Hashable, Sendable {
        private let type: ObjectIdentifier
        private let value: any Hashable & Sendable

        init(type: ObjectIdentifier, value: some Hashable & Sendable) {
            self.type = type
            self.value = value
        }

        public static func == (lhs: ID, rhs: ID) -> Bool {
            lhs.type == rhs.type && lhs.value.isEqual(to: rhs.value)
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(type)
            hasher.combine(value)
        }
    }
}

extension Hashable {
    fileprivate func isEqual(to other: any Hashable) -> Bool {
        guard let other = other as? Self else { return false }
        return self == other
    }
}
