/// A section of a sectioned list: a model that identifies the section and carries its own content
/// (a header title, say), and the section's items.
///
/// ```swift
/// let sections = [
///     ListSection(model: "Today", items: todayTodos),
///     ListSection(model: "Later", items: laterTodos),
/// ]
/// let changeset = SectionedChangeset(from: oldSections, to: sections)
/// ```
public struct ListSection<Model: Diffable, Item: Diffable> {
    /// The section's identity and own content.
    public var model: Model
    /// The section's items.
    public var items: [Item]

    /// A section with its items.
    public init(model: Model, items: [Item]) {
        self.model = model
        self.items = items
    }
}

extension ListSection: Equatable where Model: Equatable, Item: Equatable {}
extension ListSection: Hashable where Model: Hashable, Item: Hashable {}
extension ListSection: Sendable where Model: Sendable, Item: Sendable {}

/// The position of an item in a sectioned list (an `IndexPath` without Foundation).
public struct ItemPath: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The section index.
    public var section: Int
    /// The item index within the section.
    public var item: Int

    /// A path.
    public init(section: Int, item: Int) {
        self.section = section
        self.item = item
    }

    public static func < (lhs: ItemPath, rhs: ItemPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    public var description: String { "[\(section), \(item)]" }
}
