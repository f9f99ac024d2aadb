/// Every stress table's rows at one version: per table, the rows by key (a key is its typed
/// values, compared byte for byte).
struct StressState: Sendable, Equatable {
    var tables: [StressTable: [[StressValue]: StressRow]] = [:]

    init(_ rows: [StressTable: [StressRow]]) {
        for table in StressTable.allCases {
            tables[table] = Dictionary((rows[table] ?? []).map { ($0.key(in: table), $0) }, uniquingKeysWith: { _, last in last })
        }
    }

    /// The rows of `table`, in no particular order.
    func rows(of table: StressTable) -> Dictionary<[StressValue], StressRow>.Values {
        tables[table, default: [:]].values
    }

    /// Applies `operation` as SQLite would; returns how many rows it changes (what
    /// `db.changedRowCount` or the collection method reports).
    mutating func apply(_ operation: StressOperation) -> Int {
        let table = operation.table
        var rows = tables[table, default: [:]]
        defer { tables[table] = rows }
        switch operation {
        case .insert(_, let row):
            let key = row.key(in: table)
            guard rows[key] == nil else { return 0 }
            rows[key] = row
            return 1
        case .upsert(_, let row):
            rows[row.key(in: table)] = row
            return 1
        case .update(_, let row):
            let key = row.key(in: table)
            guard rows[key] != nil else { return 0 }
            rows[key] = row
            return 1
        case .delete(_, let key):
            return rows.removeValue(forKey: key) == nil ? 0 : 1
        case .insertAll(_, let batch):
            let keys = batch.map { $0.key(in: table) }
            guard Set(keys).count == keys.count, keys.allSatisfy({ rows[$0] == nil }) else { return 0 }
            for row in batch { rows[row.key(in: table)] = row }
            return batch.count
        case .upsertAll(_, let batch):
            for row in batch { rows[row.key(in: table)] = row }
            return batch.count
        case .updateAll(_, let batch):
            guard batch.allSatisfy({ rows[$0.key(in: table)] != nil }) else { return 0 }
            for row in batch { rows[row.key(in: table)] = row }
            return batch.count
        case .deleteAll(_, let keys):
            return keys.reduce(0) { count, key in count + (rows.removeValue(forKey: key) == nil ? 0 : 1) }
        case .updateWhere(_, let column, let value, let predicate):
            // The WHERE is evaluated on the rows as they were: each row is updated at most once.
            let matching = rows.filter { entry in predicate.map { $0.evaluate(entry.value, in: table) == true } ?? true }
            for (key, var row) in matching {
                row.values[column] = value
                rows[key] = row
            }
            return matching.count
        case .deleteWhere(_, let predicate):
            let matching = rows.filter { predicate.evaluate($0.value, in: table) == true }
            for key in matching.keys { rows.removeValue(forKey: key) }
            return matching.count
        }
    }
}

/// A finding about the store: a discrepancy between what it did and what the model says.
struct StressDiscrepancy: Sendable {
    enum Kind: String, Sendable, CaseIterable {
        case wrongSnapshot = "wrong snapshot"
        case tieOrder = "tied rows not ordered by key"
        case staleAfterWrite = "stale after write"
        case missedFinalEvent = "missed final event"
        case freshRead = "fresh read differs from the model"
        case invalidChangeset = "invalid changeset"
        case versionOrder = "version order"
        case notInitial = "first event not initial"
        case eventAfterCancel = "event after cancel"
        case eventWithoutChange = "event without change"
        case unknownVersion = "event at an unknown version"
        case phantomVersion = "phantom version"
        case writeOutcome = "write outcome"
        case versionAccounting = "version accounting"
        case subscriptionError = "subscription ended with an error"
        case unreadableRow = "unreadable row"
        case childFailure = "child process failed"
        case routingInvariant = "routing invariant broken"
    }

    var kind: Kind
    /// One line.
    var summary: String
    /// The evidence, readably (query, version, expected and delivered rows…).
    var detail: String
    /// What sets this finding apart from others of its kind (for rows: the kinds of keys that
    /// differ), so that a report shows the first finding of each.
    var facet: String? = nil

    /// The kind, with the facet: `wrong snapshot (keys: BLOB)`.
    var label: String { kind.rawValue + (facet.map { " (\($0))" } ?? "") }
}

/// The model the live system is checked against: every table's rows at each committed version
/// still needed, built only from what the writers say they did (their operations and the
/// versions they read inside their transactions), never from what the store reads back.
///
/// Writers report in any order across writers but in order per writer. A write whose base
/// version is the model's newest applies at once (taking the next version if it changed a row);
/// one whose base is ahead waits. When every writer has reported past the newest version and no
/// write is based on it, the next version was taken by none of them: a phantom version (reported;
/// the model assumes it changed nothing and goes on).
struct StressModel {
    private struct Source {
        var lastBase: Int64 = -1
        var finished = false
    }

    /// The newest version whose state is known.
    private(set) var version: Int64
    private var states: [Int64: StressState]
    private var waiting: [Int64: [StressWriteRecord]] = [:]
    private var sources: [String: Source] = [:]
    /// The store's version, once it is final (after the run): versions up to it that no writer
    /// took are phantoms.
    private var finalVersion: Int64?
    /// Versions whose state is not known for sure (see ``apply(_:)``).
    private var uncertain: Set<Int64> = []

    /// Whether the state at `version` is not known for sure, so an event there cannot be judged.
    func isUncertain(_ version: Int64) -> Bool { uncertain.contains(version) }

    init(version: Int64, state: StressState) {
        self.version = version
        self.states = [version: state]
    }

    /// The state at `version`, if known and not pruned.
    func state(at version: Int64) -> StressState? { states[version] }

    /// How many versions' states are kept.
    var statesKept: Int { states.count }

    /// How many records wait for an earlier version.
    var waitingCount: Int { waiting.values.reduce(0) { $0 + $1.count } }

    /// Declares a writer, so that the model waits for its reports before calling a version a phantom.
    mutating func register(source: String) {
        sources[source] = Source()
    }

    /// The writer will report nothing more.
    mutating func finish(source: String) -> [StressDiscrepancy] {
        sources[source, default: Source()].finished = true
        return advance()
    }

    /// The store's final version (no writer writes any more).
    mutating func settle(finalVersion: Int64) -> [StressDiscrepancy] {
        self.finalVersion = finalVersion
        return advance()
    }

    /// Takes a writer's report; returns the discrepancies found applying it and what it unblocked.
    mutating func submit(_ record: StressWriteRecord) -> [StressDiscrepancy] {
        sources[record.source, default: Source()].lastBase = max(sources[record.source]?.lastBase ?? -1, record.base)
        if record.base > version {
            waiting[record.base, default: []].append(record)
            return advance()
        }
        return apply(record) + advance()
    }

    /// The oldest version anything may still need: writers' pending reports need their base.
    var writersFloor: Int64 {
        sources.values.filter { !$0.finished }.map(\.lastBase).min().map { max($0, 0) } ?? version
    }

    /// Forgets the states before `floor` (never the newest), and in any case all but the newest
    /// `window` ones, so that memory stays bounded however long a subscriber stays idle.
    mutating func prune(below floor: Int64, window: Int64) {
        let limit = max(min(floor, version, writersFloor), version - window)
        for key in states.keys where key < limit { states.removeValue(forKey: key) }
        uncertain = uncertain.filter { $0 >= limit }
    }

    private mutating func advance() -> [StressDiscrepancy] {
        var found: [StressDiscrepancy] = []
        while true {
            if let records = waiting.removeValue(forKey: version) {
                for record in records { found += apply(record) }
                continue
            }
            let ahead = waiting.keys.contains { $0 > version } || (finalVersion ?? version) > version
            guard ahead, sources.values.allSatisfy({ $0.finished || $0.lastBase > version }) else { break }
            let phantom = version + 1
            found.append(StressDiscrepancy(
                kind: .phantomVersion, summary: "v\(phantom) was taken by no writer",
                detail: "v\(phantom): every writer reported writes based on later versions (or finished), none based on "
                    + "v\(version); the model assumes v\(phantom) changed nothing"))
            states[phantom] = states[version]
            version = phantom
        }
        return found
    }

    /// Applies a record whose base is at most the newest version.
    private mutating func apply(_ record: StressWriteRecord) -> [StressDiscrepancy] {
        guard let base = states[record.base] else {
            return [StressDiscrepancy(kind: .versionAccounting, summary: "a write based on v\(record.base) came too late to check",
                                      detail: record.description)]
        }
        var state = base
        var touched = false
        var problems: [String] = []
        Self.walk(record.steps, &state, touched: &touched, problems: &problems)
        var found: [StressDiscrepancy] = []
        if !problems.isEmpty {
            found.append(StressDiscrepancy(
                kind: .writeOutcome, summary: "a write based on v\(record.base) changed other rows than the model says: \(problems[0])",
                detail: record.description + "\n" + problems.joined(separator: "\n")))
        }
        // A write made without Ripple that leaves every value as it was writes no page (SQLite
        // does not rewrite a record with the same bytes): nothing commits, nothing is adopted.
        let withoutRipple = record.steps.allSatisfy { step in
            if case .operation(let operation) = step { return operation.via == .withoutRipple }
            return false
        }
        let takesVersion = record.committed && (withoutRipple ? state != base : touched)
        if let after = record.after, after != record.base + (takesVersion ? 1 : 0) {
            found.append(StressDiscrepancy(
                kind: .versionAccounting,
                summary: "a collection method's write moved the version from v\(record.base) to v\(after), "
                    + (takesVersion ? "expected one version" : "expected none (it changed no row)"),
                detail: record.description))
        }
        guard takesVersion else { return found }
        if !record.steps.allSatisfy({ step in
            if case .operation(let operation) = step { return [.collection, .collectionInWrite, .rawSQL].contains(operation.via) }
            return true
        }) {
            // Its statements committed before its version was taken: a read at its base version
            // may show them or not.
            uncertain.insert(record.base)
        }
        if let after = record.after, after > record.base + 1, record.base == version {
            // Something took a version while this write held every other writer off (found
            // above): which of the versions is this write's cannot be told, so the ones before
            // the last are uncertain (events there are not judged), and the write lands on the last.
            for uncertainVersion in (record.base + 1)..<after {
                states[uncertainVersion] = base
                uncertain.insert(uncertainVersion)
            }
            version = after
            states[version] = state
            return found
        }
        if record.base < version {
            found.append(StressDiscrepancy(
                kind: .versionAccounting, summary: "two writes took v\(record.base + 1)",
                detail: "both read v\(record.base) inside their transaction and changed rows; the second:\n" + record.description))
            return found
        }
        version += 1
        states[version] = state
        return found
    }

    /// Applies steps to `state`, checking what each operation changed against the model; a
    /// rolled-back savepoint is applied to a copy (its outcomes checked) and dropped.
    private static func walk(_ steps: [StressStep], _ state: inout StressState, touched: inout Bool, problems: inout [String]) {
        for step in steps {
            switch step {
            case .operation(let record):
                let expected = state.apply(record.operation)
                if expected != record.changes {
                    problems.append("\(record.operation.description) via \(record.via.rawValue): "
                                    + "the store changed \(record.changes) rows, the model \(expected)")
                }
                // The store's count decides whether the write takes a version, so that one wrong
                // count is one finding, not a cascade.
                if record.changes > 0 { touched = true }
            case .savepoint(let inner, let rolledBack):
                var copy = state
                var innerTouched = false
                walk(inner, &copy, touched: &innerTouched, problems: &problems)
                if !rolledBack {
                    state = copy
                    touched = touched || innerTouched
                }
            }
        }
    }
}
