import Foundation
import Observation

extension LiveQuery {
    /// Starts delivering events on the main actor: `onEvent` and `onError` are `@MainActor`, so
    /// a view model isolated to the main actor sets its state in them directly (Swift 6, with no
    /// `MainActor.assumeIsolated` and nothing `@unchecked`). The query runs on a background
    /// thread; only the delivery hops to the main actor.
    ///
    /// ```swift
    /// @MainActor final class TodoListModel {
    ///     private(set) var titles: [String] = []
    ///     private var subscription: Subscription?
    ///
    ///     func start(_ open: LiveQuery<Todo>) {
    ///         subscription = open.subscribeOnMainActor { [weak self] event in
    ///             self?.titles = event.snapshot.map(\.title)
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// Everything ``subscribe(on:onError:_:)`` promises holds (see ``LiveQuery``).
    public func subscribeOnMainActor(onError: (@MainActor (any Error) -> Void)? = nil,
                                     _ onEvent: @escaping @MainActor (LiveQueryEvent<Element>) -> Void) -> Subscription {
        subscribe(on: .queue(.main), onError: Self.onMainActor(onError)) { event in
            // Delivery `.queue(.main)` runs every handler on the main queue, the main actor's executor.
            MainActor.assumeIsolated { onEvent(event) }
        }
    }

    /// `onError` run on the main actor; `nil` without one (the store's handler of errors nobody
    /// handles then hears the error).
    static func onMainActor(_ onError: (@MainActor (any Error) -> Void)?) -> (@Sendable (any Error) -> Void)? {
        guard let onError else { return nil }
        return { error in
            if Thread.isMainThread {
                MainActor.assumeIsolated { onError(error) }
            } else {
                DispatchQueue.main.async { MainActor.assumeIsolated { onError(error) } }
            }
        }
    }
}

extension LiveQueryGroup {
    /// Starts delivering one event per commit that changes any result, on the main actor (see
    /// ``LiveQuery/subscribeOnMainActor(onError:_:)``).
    public func subscribeOnMainActor(onError: (@MainActor (any Error) -> Void)? = nil,
                                     _ onEvent: @escaping @MainActor (LiveQueryGroupEvent<Element>) -> Void) -> Subscription {
        subscribe(on: .queue(.main), onError: LiveQuery<Element>.onMainActor(onError)) {
            event in MainActor.assumeIsolated { onEvent(event) }
        }
    }
}

/// A live query's result as a main-actor model that a screen holds: SwiftUI observes it (it is
/// `@Observable`), and a UIKit list applies each changeset in ``onChange``.
///
/// ```swift
/// @MainActor final class TodoScreen {
///     let list: LiveList<Todo>
///     init(todos: RecordCollection<Todo>) throws {
///         list = LiveList(try todos.filter(Column("done") == false).order(by: Column("rank")).live())
///         list.onChange = { event in
///             // tableView.performBatchUpdates for each of event.changeset.stages
///         }
///     }
/// }
/// ```
///
/// It subscribes when made and cancels when released (or on ``stop()``).
@available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, *)
@MainActor @Observable
public final class LiveList<Element: Sendable> {
    /// The query's result as of ``version`` (empty until the first event).
    public private(set) var items: [Element] = []
    /// The version ``items`` was read at; `nil` until the first event.
    public private(set) var version: Int64?
    /// Why the stream ended, if it did.
    public private(set) var error: (any Error)?
    /// Runs after each event updated ``items``: the changeset turns the previous items into the
    /// new ones (for a list view's batch updates).
    @ObservationIgnored public var onChange: (@MainActor (LiveQueryEvent<Element>) -> Void)?
    @ObservationIgnored private var subscription: Subscription?

    /// Subscribes to `query`; the first event arrives on the main actor shortly after.
    public init(_ query: LiveQuery<Element>) {
        subscription = query.subscribeOnMainActor(onError: { [weak self] error in
            self?.error = error
        }) { [weak self] event in
            guard let self else { return }
            items = event.snapshot
            version = event.version
            onChange?(event)
        }
    }

    /// Stops the updates: nothing changes after it returns.
    public func stop() {
        subscription?.cancel()
        subscription = nil
    }
}
