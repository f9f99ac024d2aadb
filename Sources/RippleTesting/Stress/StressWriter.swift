import Foundation
import Ripple
import Synchronization

/// The error a write closure or savepoint throws to roll back on purpose.
struct StressRollback: Error {}

/// What came of one planned write.
enum StressWriteOutcome: Sendable {
    /// It committed or rolled back as planned; the record says what it did.
    case done(StressWriteRecord)
    /// It failed with an error nobody expected (the store rolled it back).
    case failed(error: String, plan: String)
}

/// One writer thread (of this process or of a child): performs seeded writes through a store's
/// public API and reports each as a ``StressWriteRecord``.
///
/// Not shared between threads: each thread makes its own (it owns descriptors of the write gate).
final class StressWriter {
    let access: StressStoreAccess
    let source: String
    private let gate: StressWriteGate
    private(set) var generator: StressGenerator
    private var sequence = 0
    /// How many times a write was retried after `SQLITE_BUSY` (another process holding the lock
    /// past the busy timeout).
    private(set) var busyRetried = 0
    static let busyAttempts = 8
    /// The migrations this writer applied (each of one operation), registered again with each
    /// new one: an applied migration must stay registered.
    private var migrator: Migrator?
    /// A connection that is not Ripple's, for writes made without Ripple (opened when first needed).
    private var foreignConnection: Database?

    init(access: StressStoreAccess, source: String, gateDirectory: String, generator: StressGenerator) throws {
        self.access = access
        self.source = source
        self.gate = try StressWriteGate(directory: gateDirectory)
        self.generator = generator
    }

    /// Plans and performs the next write.
    func writeNext() -> StressWriteOutcome {
        perform(generator.plan())
    }

    /// Performs `plan`, retrying it when another process kept the database busy.
    func perform(_ plan: StressPlan) -> StressWriteOutcome {
        var attempt = 0
        while true {
            do {
                let record = try attemptWrite(plan)
                sequence += 1
                return .done(record)
            } catch let error as DatabaseError where error.code.primary == .busy && attempt + 1 < Self.busyAttempts {
                attempt += 1
                busyRetried += 1
            } catch {
                return .failed(error: String(describing: error), plan: Self.describe(plan))
            }
        }
    }

    private func attemptWrite(_ plan: StressPlan) throws -> StressWriteRecord {
        let store = access.store
        switch plan {
        case .method(let operation):
            return try gate.exclusive {
                let before = try store.currentVersion()
                let changes = try access.perform(operation, via: .collection, in: nil)
                let after = try store.currentVersion()
                return StressWriteRecord(source: source, sequence: sequence, base: before, after: after,
                                         steps: [.operation(StressOperationRecord(operation: operation, via: .collection,
                                                                                  changes: changes))],
                                         committed: true)
            }
        case .write(let planned, let rollBack):
            return try gate.shared {
                var base: Int64 = -1
                var steps: [StressStep] = []
                var committed = true
                do {
                    try store.write { db in
                        base = try db.fetchValue("SELECT value FROM ripple_meta WHERE key = 'version'", as: Int64.self) ?? 0
                        steps = try run(planned, in: db)
                        if rollBack { throw StressRollback() }
                    }
                } catch is StressRollback {
                    committed = false
                }
                return StressWriteRecord(source: source, sequence: sequence, base: base, after: nil, steps: steps,
                                         committed: committed)
            }
        case .outside(let operation, let via):
            // Outside a write, the version cannot be read inside: no other stress writer commits
            // while this one does (as for a collection method).
            return try gate.exclusive {
                let before = try store.currentVersion()
                let changes = try commitOutside(operation, via: via)
                let after = try store.currentVersion()
                return StressWriteRecord(source: source, sequence: sequence, base: before, after: after,
                                         steps: [.operation(StressOperationRecord(operation: operation, via: via, changes: changes))],
                                         committed: true)
            }
        }
    }

    /// Commits one raw SQL operation as `via` says; returns the rows it changed.
    private func commitOutside(_ operation: StressOperation, via: StressVia) throws -> Int {
        let store = access.store
        switch via {
        case .withoutTransaction:
            return try store.writeWithoutTransaction { db in try access.perform(operation, via: via, in: db) }
        case .migration:
            var migrator = try self.migrator ?? Migrator(domain: "stress \(source)")
            // The migration runs on this thread, inside `migrate`: what it reports is read after.
            let changes = Mutex(0)
            try migrator.register(name: String(format: "%06d", sequence)) { [access] db in
                let count = try access.perform(operation, via: via, in: db)
                changes.withLock { $0 = count }
            }
            self.migrator = migrator
            try store.migrate(migrator)
            return changes.withLock { $0 }
        case .withoutRipple:
            guard let path = store.path else { throw StressError("a write without Ripple needs a database file") }
            let connection = try foreignConnection ?? Database(path: path, readOnly: false, configuration: store.configuration)
            foreignConnection = connection
            let changes = try access.perform(operation, via: via, in: connection)
            try store.noticeExternalWrites()
            return changes
        case .collection, .collectionInWrite, .rawSQL:
            throw StressError("\(via.rawValue) is not a write outside a transaction")
        }
    }

    /// Runs planned steps in `db`'s write transaction, savepoints as `db.transaction { }`.
    private func run(_ planned: [StressPlanStep], in db: Database) throws -> [StressStep] {
        var steps: [StressStep] = []
        for step in planned {
            switch step {
            case .operation(let operation, let via):
                let changes = try access.perform(operation, via: via, in: db)
                steps.append(.operation(StressOperationRecord(operation: operation, via: via, changes: changes)))
            case .savepoint(let inner, let rollBack):
                var innerSteps: [StressStep] = []
                do {
                    try db.transaction {
                        innerSteps = try run(inner, in: db)
                        if rollBack { throw StressRollback() }
                    }
                    steps.append(.savepoint(innerSteps, rolledBack: false))
                } catch is StressRollback {
                    steps.append(.savepoint(innerSteps, rolledBack: true))
                }
            }
        }
        return steps
    }

    static func describe(_ plan: StressPlan) -> String {
        func lines(_ steps: [StressPlanStep], _ indent: String) -> [String] {
            steps.flatMap { step -> [String] in
                switch step {
                case .operation(let operation, let via): ["\(indent)\(operation.description) via \(via.rawValue)"]
                case .savepoint(let inner, let rollBack):
                    ["\(indent)savepoint\(rollBack ? " (to roll back)" : ""):"] + lines(inner, indent + "  ")
                }
            }
        }
        switch plan {
        case .method(let operation): return "\(operation.description) via collection method"
        case .outside(let operation, let via): return "\(operation.description) via \(via.rawValue)"
        case .write(let steps, let rollBack):
            return (["store.write\(rollBack ? " (to roll back)" : ""):"] + lines(steps, "  ")).joined(separator: "\n")
        }
    }
}
