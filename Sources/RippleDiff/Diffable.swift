/// An element that a diff can follow from one collection to the next.
///
/// Two ideas are kept apart:
/// * **identity** (`diffID`): which element this is. Elements with equal identities in the old
///   and the new collection are the *same* element — kept, moved, or updated in place.
/// * **content** (`isContentEqual(to:)`): whether what a list shows for the element changed.
///   Same identity with different content is reported as an *update*, not a delete and an insert.
///
/// Defaults make the common cases free:
/// * `Hashable` values are their own identity;
/// * `Identifiable` values are identified by `id`;
/// * `Equatable` values compare content with `==`.
///
/// ```swift
/// struct Todo: Identifiable, Equatable, Diffable {
///     var id: Int
///     var title: String
/// }
/// // diffID is `id`; an edited title is an update.
/// ```
public protocol Diffable {
    /// The type of the identity.
    associatedtype DiffID: Hashable

    /// The identity of the element: stable across versions of the element.
    var diffID: DiffID { get }

    /// Whether `self` and `other`, which have the same identity, show the same content.
    func isContentEqual(to other: Self) -> Bool
}

extension Diffable where Self: Hashable {
    /// A hashable value is its own identity.
    @inlinable
    public var diffID: Self { self }
}

extension Diffable where Self: Identifiable {
    /// An identifiable value is identified by its `id`.
    @inlinable
    public var diffID: ID { id }
}

extension Diffable where Self: Identifiable & Hashable {
    /// An identifiable value is identified by its `id`, even when it is also hashable.
    @inlinable
    public var diffID: ID { id }
}

extension Diffable where Self: Equatable {
    /// Equatable values compare content with `==`.
    @inlinable
    public func isContentEqual(to other: Self) -> Bool { self == other }
}
