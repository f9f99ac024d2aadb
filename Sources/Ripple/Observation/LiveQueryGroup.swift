import Foundation
import RippleDiff

/// Several live queries observed together — the sections of one screen, say. They are read in
/// one transaction, so every event holds all their results at the same version, and one commit
/// gives (at most) one event.
///
/// ```swift
/// let screen = try LiveQueryGroup([try todos.filter(Column("done") == false).live(),
///                                  try todos.filter(Column("done") == true).live()])
/// let subscription = screen.subscribe { event in
///     for (section, member) in event.members.enumerated() { apply(member.changeset, to: section) }
/// }
/// ```
public struct LiveQueryGroup<Element: Sendable>: Sendable {
    /// The queries, in order.
    public let queries: [LiveQuery<Element>]

    /// A group of `queries`, which must all read the same store.
    ///
    /// Throws ``StoreError`` of kind ``StoreError/Kind/invalidQuery`` when `queries` is empty
    /// (a group has no versions to deliver without a store: when a screen built from data has no
    /// sections, do not subscribe), or when two of them read different stores (their versions
    /// cannot be compared, nor read in one transaction).
    public init(_ queries: [LiveQuery<Element>]) throws(StoreError) {
        guard let store = queries.first?.store else {
            throw StoreError(.invalidQuery, "a LiveQueryGroup needs at least one query: with nothing to observe, do not "
                             + "make a group (it would have no store to take versions from)")
        }
        if let other = queries.firstIndex(where: { $0.store !== store }) {
            let otherStore: String
            switch (store.path, queries[other].store.path) {
            case let (path?, otherPath?) where path == otherPath: otherStore = "another Store opened on that file"
            case (nil, nil): otherStore = "another in-memory store"
            case (_, let otherPath): otherStore = otherPath ?? "an in-memory store"
            }
            throw StoreError(.invalidQuery, "the queries of a LiveQueryGroup must read one store: query 1 reads "
                             + "\(store.path ?? "an in-memory store"), query \(other + 1) reads \(otherStore); "
                             + "observe each store's queries in a group of their own")
        }
        self.queries = queries
    }

    /// Starts delivering one event per commit that changes any result (see
    /// ``LiveQuery/subscribe(on:onError:_:)`` for what a subscriber can rely on).
    public func subscribe(on delivery: Delivery = .immediate,
                          onError: (@Sendable (any Error) -> Void)? = nil,
                          _ onEvent: @escaping @Sendable (LiveQueryGroupEvent<Element>) throws -> Void) -> Subscription {
        let store = queries[0].store
        let description = queries.map(\.description).joined(separator: "; ")
        return LiveObserver<Element, LiveQueryGroupEvent<Element>>.start(
            store: store, sources: queries.map(\.source), delivery: delivery,
            sink: .handler(onEvent: onEvent, onError: store.errorHandler(onError, query: description)),
            makeEvent: LiveQueryGroupEvent.init)
    }

    /// The group's events as an asynchronous sequence (see ``LiveQuery/events()``).
    public func events() -> LiveQueryEvents<LiveQueryGroupEvent<Element>> {
        let store = queries[0].store
        let sources = queries.map(\.source)
        return LiveQueryEvents { channel in
            LiveObserver<Element, LiveQueryGroupEvent<Element>>.start(
                store: store, sources: sources, delivery: .background, sink: .channel(channel),
                makeEvent: LiveQueryGroupEvent.init)
        }
    }
}

/// One commit's changes to every query of a ``LiveQueryGroup``, all at the same version.
public struct LiveQueryGroupEvent<Element: Sendable>: Sendable {
    /// Per query of the group, in order: its snapshot and changeset (empty when unchanged).
    public let members: [LiveQueryEvent<Element>]

    init(_ members: [LiveQueryEvent<Element>]) { self.members = members }

    /// The version every snapshot was read at.
    public var version: Int64 { members[0].version }
    /// The version of the previous event, `nil` for the first.
    public var previousVersion: Int64? { members[0].previousVersion }

    /// Whether this is the first event (the initial snapshots).
    public var isInitial: Bool { previousVersion == nil }
}
