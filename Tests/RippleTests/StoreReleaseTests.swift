import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Releasing observed stores leaves nothing behind (issue 38, item 6): no store kept alive, no
/// descriptor of its files, no thread, no entry in the process's registry of open files —
/// whatever the store's live queries were doing when it was released. Each way a released store
/// could be kept is made to happen every time (a queue that does not run, a retry that is not
/// due yet), not left to chance.
@Suite(.serialized) struct StoreReleaseTests {
    let directory: TemporaryDirectory

    struct Item: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
    }

    /// A reference that does not keep its store.
    final class Released: @unchecked Sendable {   // written before the store is shared, read after
        weak var store: Store?
        init(_ store: Store) { self.store = store }
    }

    init() throws {
        directory = try TemporaryDirectory(prefix: "ripple-release")
    }

    /// A refresh that fails for a passing reason, every time (the refresh's fault hook).
    static let readersFail: @Sendable () throws -> Void = {
        throw DatabaseError(code: .cannotOpen, message: "unable to open a reader (injected)")
    }

    /// A store at `name` in the directory with one item, its collection, and a weak reference to it.
    func openStore(_ name: String, configuration: Store.Configuration = Store.Configuration()) throws
        -> (Store, RecordCollection<Item>, Released) {
        let store = try Store(path: directory.path(name), configuration: configuration)
        let items = try store.collection("items", of: Item.self)
        try items.insert(Item(id: 1, title: "a"))
        return (store, items, Released(store))
    }

    /// The observer of `store`'s only live query.
    static func observer(of store: Store) -> LiveObserver<Item, LiveQueryEvent<Item>>? {
        store.observation.targets.first as? LiveObserver<Item, LiveQueryEvent<Item>>
    }

    /// Whether `condition` came to hold, looking at growing intervals (``Wait/blockingUntil(_:within:_:)``)
    /// for at most `seconds`, or the shared limit on a loaded machine, whichever is longer.
    static func wait(atMost seconds: Double, until condition: () -> Bool) -> Bool {
        (try? Wait.blockingUntil("a released store's resources", within: max(.seconds(seconds), Wait.limit)) { condition() }) != nil
    }

    /// The descriptors of this process open on files in the test's directory.
    func descriptorsInDirectory() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        let prefix = directory.url.resolvingSymlinksInPath().path
        return names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
            .filter { $0.hasPrefix(prefix) || $0.hasPrefix(directory.path("")) }
    }

    /// The keys of the process's registry of open store files (``OpenStoreFiles``) in the test's directory.
    func registryKeysInDirectory() -> [String] {
        let prefix = OpenStoreFiles.key(of: directory.path("x")).dropLast()
        return OpenStoreFiles.keys.filter { $0.hasPrefix(prefix) }
    }

    static func threadCount() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0 }

    /// A delivery queued on a queue that is not running (suspended here; a main queue nobody
    /// drains, a busy serial queue) held the live query's observer, and through it the store,
    /// its connections and its file watch, after the subscription and the store were released:
    /// forever, if the queue never runs again.
    @Test func aDeliveryWaitingForItsQueueDoesNotKeepTheReleasedStore() throws {
        let queue = DispatchQueue(label: "ripple.tests.held-delivery")
        queue.suspend()
        defer { queue.resume() }
        let released: Released
        do {
            let (store, items, reference) = try openStore("held.sqlite")
            released = reference
            let subscription = try items.order(by: Column("id")).live().subscribe(on: .queue(queue)) { _ in }
            // The initial snapshot is read in the background, then its delivery waits for the queue.
            let observer = try #require(Self.observer(of: store))
            #expect(Self.wait(atMost: 20) { observer.phase == .delivering }, "the initial event was read and handed to the queue")
            subscription.cancel()
        }
        #expect(Self.wait(atMost: 10) { released.store == nil },
                "the store is released once its subscription is, while a delivery waits for its queue")
        #expect(descriptorsInDirectory().isEmpty, "\(descriptorsInDirectory())")
    }

    /// A live query backing off (its refresh could not open a reader) held its observer and the
    /// store in the retry's timer until the retry was due (up to a second each), with the store's
    /// connections and file watch open. Here the retry is a second away when both are released.
    @Test func aLiveQueryBackingOffDoesNotKeepTheReleasedStore() throws {
        let released: Released
        do {
            let (store, items, reference) = try openStore("backoff.sqlite")
            released = reference
            let failures = Locked(0)
            store.observation.readFault.withLock { $0 = {
                failures.withLock { $0 += 1 }
                try Self.readersFail()
            } }
            let subscription = try items.order(by: Column("id")).live().subscribe { _ in }
            let observer = try #require(Self.observer(of: store))
            // Nine failures in a row: the pauses double from 5 ms to the longest, a second.
            #expect(Self.wait(atMost: 20) { failures.withLock { $0 } >= 9 && observer.phase == .backingOff },
                    "nine refreshes failed and the query is backing off")
            subscription.cancel()
        }
        // Nothing runs between the release and this check: the store is gone at once.
        #expect(released.store == nil, "the store is released with its subscription, its retry not due yet")
        #expect(Self.wait(atMost: 10) { descriptorsInDirectory().isEmpty }, "\(descriptorsInDirectory())")
    }

    /// Every store opened at a path stayed in the process's registry of open files (its entry
    /// only cleared when another store opened the same path): memory that grew with every store
    /// opened at a new path.
    @Test func aReleasedStoreLeavesNoEntryInTheRegistryOfOpenFiles() throws {
        for index in 0..<20 {
            let (store, items, _) = try openStore("registry-\(index).sqlite")
            let subscription = try items.all.live().subscribe { _ in }
            _ = (store, subscription)
        }
        #expect(registryKeysInDirectory().isEmpty, "\(registryKeysInDirectory().count) keys left")
    }

    /// What a store was doing when it was released, one path per store in turn.
    enum Path: Int, CaseIterable {
        /// Observed, idle.
        case idle
        /// A write's refresh and delivery in flight on a queue.
        case writeInFlight
        /// Its live query backing off (every refresh fails for a passing reason).
        case backingOff
        /// An `events()` iterator alive, its first event taken.
        case iterating
        /// Its own write just made: the file watch's settling timer armed.
        case settling
        /// Another store's commit on the file just told to it (its look queued).
        case noticing
    }

    /// A thousand observed stores, alive together, released together, each doing one of
    /// ``Path``'s things: the release starts no crowd of threads (a serial queue per store, each
    /// with a thread of its own to cancel its watch, started over a hundred at once), and then
    /// every store is gone, with its descriptors, file watch and registry entry. (The checks
    /// count what belongs to the test's directory: other suites run in this process meanwhile.)
    @Test func aThousandObservedStoresReleasedTogetherLeaveNothingBehind() async throws {
        let count = 1_000
        // One file with the collection, copied for each store: opening a copy is fast.
        let template = directory.path("template.sqlite")
        do {
            let store = try Store(path: template)
            try store.collection("items", of: Item.self).insert(Item(id: 1, title: "a"))
        }
        var released: [Released] = []
        var stores: [Store] = []
        var subscriptions: [Subscription] = []
        var iterators: [LiveQueryEvents<LiveQueryEvent<Item>>.Iterator] = []
        for index in 0..<count {
            let name = "store-\(index).sqlite"
            try FileManager.default.copyItem(atPath: template, toPath: directory.path(name))
            let store = try Store(path: directory.path(name))
            let items = try store.collection("items", of: Item.self)
            released.append(Released(store))
            stores.append(store)
            let query = try items.order(by: Column("id")).live()
            switch Path(rawValue: index % Path.allCases.count)! {
            case .idle:
                subscriptions.append(query.subscribe { _ in })
            case .writeInFlight:
                subscriptions.append(query.subscribe(on: .queue(.global())) { _ in })
                try items.insert(Item(id: 2, title: "b"))
            case .backingOff:
                store.observation.readFault.withLock { $0 = Self.readersFail }
                subscriptions.append(query.subscribe { _ in })
            case .iterating:
                var iterator = query.events().makeAsyncIterator()
                _ = try await iterator.next()
                iterators.append(iterator)
            case .settling:
                subscriptions.append(query.subscribe { _ in })
                try items.insert(Item(id: 2, title: "b"))
            case .noticing:
                subscriptions.append(query.subscribe { _ in })
                let other = try Store(path: directory.path(name))
                try other.collection("items", of: Item.self).insert(Item(id: 3, title: "c"))
            }
        }
        #expect(released.allSatisfy { $0.store != nil })

        let threadsBeforeRelease = Self.threadCount()
        subscriptions = []
        iterators = []
        stores = []
        let threadsAtRelease = Self.threadCount()
        #expect(threadsAtRelease <= threadsBeforeRelease + 32,
                "releasing \(count) stores started \(threadsAtRelease - threadsBeforeRelease) threads")

        let gone = await Self.wait(atMost: 20) { released.allSatisfy { $0.store == nil } }
        #expect(gone, "\(released.filter { $0.store != nil }.count) of \(count) released stores still alive")
        #expect(await Self.wait(atMost: 10) { descriptorsInDirectory().isEmpty },
                "descriptors of the stores' files still open: \(descriptorsInDirectory().count)")
        #expect(registryKeysInDirectory().isEmpty, "\(registryKeysInDirectory().count) registry keys left")
    }

    /// ``wait(atMost:until:)`` for async tests, without holding a thread.
    static func wait(atMost seconds: Double, until condition: () -> Bool) async -> Bool {
        (try? await Wait.until("a released store's resources", within: max(.seconds(seconds), Wait.limit)) { condition() }) != nil
    }
}
