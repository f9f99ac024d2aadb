import Foundation
import RippleDiff

/// Several live queries observed together — the sections of one screen, say. They are read in
/// one transaction, so every event holds all their results at the same version, and one commit
/// gives (at most) one event.
///
/// ```swift
/// let screen = LiveQueryGroup([try todos.filter(Column("done") == false).live(),
///                              try todos.filter(Column("done") == true).live()])
/// let subscription = screen.subscribe { event in
///     for (section, member) in event.members.enumerated() { apply(member.changeset, to: section) }
/// }
/// ```
public struct LiveQueryGroup<Element: Sendable>: Sendable {
    /// The queries, in order.
    public let queries: [LiveQuery<Element>]

    /// A group of `queries`, which must all read the same store.
    public init(_ queries: [LiveQuery<Element>]) {
        precondition(!queries.isEmpty, "Ripple: a LiveQueryGroup needs at least one query")
        precondition(queries.allSatisfy { $0.store === queries[0].store },
                     "Ripple: the queries of a LiveQueryGroup must read the same store")
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
