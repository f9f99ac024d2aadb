/// How the engine reads identity and content from an element.
///
/// A strategy is a generic parameter (not a closure) so that the engine is specialized for the
/// caller's element type and the identity read is inlined into the hot loops.
@usableFromInline
internal protocol _IdentityStrategy {
    associatedtype Element
    associatedtype ID: Hashable

    /// Whether content can differ between elements of equal identity. `false` skips the update pass.
    var comparesContent: Bool { get }

    func identity(of element: Element) -> ID
    func isContentEqual(_ old: Element, _ new: Element) -> Bool
}

/// Identity and content from ``Diffable``.
@usableFromInline
internal struct _DiffableStrategy<Element: Diffable>: _IdentityStrategy {
    @inlinable init() {}
    @inlinable var comparesContent: Bool { true }
    @inlinable func identity(of element: Element) -> Element.DiffID { element.diffID }
    @inlinable func isContentEqual(_ old: Element, _ new: Element) -> Bool { old.isContentEqual(to: new) }
}

/// A hashable value is its identity; equal identities mean equal content.
@usableFromInline
internal struct _HashableStrategy<Element: Hashable>: _IdentityStrategy {
    @inlinable init() {}
    @inlinable var comparesContent: Bool { false }
    @inlinable func identity(of element: Element) -> Element { element }
    @inlinable func isContentEqual(_ old: Element, _ new: Element) -> Bool { true }
}

/// Identity and content from closures supplied by the caller.
@usableFromInline
internal struct _ClosureStrategy<Element, ID: Hashable>: _IdentityStrategy {
    @usableFromInline let identify: (Element) -> ID
    @usableFromInline let contentEqual: ((Element, Element) -> Bool)?

    @inlinable
    init(identify: @escaping (Element) -> ID, contentEqual: ((Element, Element) -> Bool)?) {
        self.identify = identify
        self.contentEqual = contentEqual
    }

    @inlinable var comparesContent: Bool { contentEqual != nil }
    @inlinable func identity(of element: Element) -> ID { identify(element) }
    @inlinable func isContentEqual(_ old: Element, _ new: Element) -> Bool { contentEqual?(old, new) ?? true }
}
