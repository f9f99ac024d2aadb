import Foundation

/// What a stress run found.
///
/// ```swift
/// var configuration = StressConfiguration()
/// configuration.seed = 7
/// configuration.seconds = 3
/// let report = try StressTest.run(configuration)
/// print(report.summaryLine)   // stress: seed=7 ops=… events=… discrepancies=0 write_errors=0 busy_retried=0 peak_subscribers=…
/// ```
public struct StressReport: Sendable {
    /// The seed the run's data, queries and writes came from.
    public let seed: UInt64
    /// Operations performed by every writer, in writes that committed or rolled back as
    /// planned (those of writes that failed unexpectedly are in ``writeErrors``).
    public let operations: Int
    /// Events delivered to subscribers (each checked).
    public let events: Int
    /// Findings: events or reads that disagree with the model, writes whose outcome or version
    /// the model does not explain, versions no writer took, broken subscription rules.
    public let discrepancies: Int
    /// Writes that failed with an error nobody expected (not the deliberate rollbacks).
    public let writeErrors: Int
    /// Writes retried after `SQLITE_BUSY` (another process held the lock past the busy timeout).
    public let busyRetried: Int
    /// The last version the model knows.
    public let finalVersion: Int64
    /// How many findings of each kind.
    public let discrepanciesByKind: [String: Int]
    /// The first event (or last snapshot) whose rows are wrong: the query, the version, the
    /// expected rows and the delivered ones.
    public let firstWrongEvent: String?
    /// The first finding of any kind, with its evidence.
    public let firstDiscrepancy: String?
    /// Per kind of finding (with what sets it apart, such as the kinds of keys whose rows
    /// differ: `wrong snapshot (keys: BLOB)`), the first one with its evidence.
    public let firstByKind: [String: String]
    /// The first unexpected write error, with the write that failed.
    public let firstWriteError: String?
    /// One line for each of the first findings.
    public let samples: [String]
    /// Events the checker could not judge: their version's state was forgotten (delivered more
    /// than 20,000 versions late) or is uncertain (a version taken by nobody while a write held
    /// every other writer off, which is itself a finding).
    public let uncheckedEvents: Int
    /// The database the run used.
    public let databasePath: String
    /// The most subscriptions open at once.
    public var peakSubscribers = 0

    /// Whether the run found nothing wrong.
    public var passed: Bool { discrepancies == 0 && writeErrors == 0 }

    /// `stress: seed=S ops=N events=E discrepancies=D write_errors=W busy_retried=B peak_subscribers=P`.
    public var summaryLine: String {
        "stress: seed=\(seed) ops=\(operations) events=\(events) discrepancies=\(discrepancies) "
            + "write_errors=\(writeErrors) busy_retried=\(busyRetried) peak_subscribers=\(peakSubscribers)"
    }

    /// A readable account of the failures (empty when the run passed): the seed, the findings by
    /// kind, the first wrong event with its expected and delivered rows, the first write error.
    public var details: String {
        guard !passed else { return "" }
        var lines = ["stress: FAILED with seed \(seed) (database: \(databasePath))"]
        if !discrepanciesByKind.isEmpty {
            lines.append("findings by kind: " + discrepanciesByKind.sorted { $0.key < $1.key }
                .map { "\($0.key): \($0.value)" }.joined(separator: ", "))
        }
        if let firstWrongEvent {
            lines.append("first wrong event:")
            lines.append("  " + firstWrongEvent.replacingOccurrences(of: "\n", with: "\n  "))
        }
        if let firstDiscrepancy, firstDiscrepancy != firstWrongEvent {
            lines.append("first finding:")
            lines.append("  " + firstDiscrepancy.replacingOccurrences(of: "\n", with: "\n  "))
        }
        for (kind, text) in firstByKind.sorted(by: { $0.key < $1.key }) where firstByKind.count > 1 {
            lines.append("first [\(kind)]:")
            lines.append("  " + text.replacingOccurrences(of: "\n", with: "\n  "))
        }
        if let firstWriteError {
            lines.append("first write error:")
            lines.append("  " + firstWriteError.replacingOccurrences(of: "\n", with: "\n  "))
        }
        if samples.count > 1 {
            lines.append("first findings:")
            lines += samples.map { "  " + $0 }
        }
        if uncheckedEvents > 0 { lines.append("events the checker could not check: \(uncheckedEvents)") }
        return lines.joined(separator: "\n")
    }
}

/// Readable rows for reports.
enum StressFormat {
    /// The expected and delivered rows side by side, the first difference marked.
    static func comparison(expected: [StressRow], delivered: [StressRow], table: StressTable,
                           expectedTitle: String, deliveredTitle: String = "delivered") -> String {
        let difference = zip(expected, delivered).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? (expected.count == delivered.count ? nil : min(expected.count, delivered.count))
        var lines = ["\(expectedTitle), \(expected.count) rows:"]
        lines += rows(expected, table: table, marking: difference)
        lines.append("\(deliveredTitle), \(delivered.count) rows:")
        lines += rows(delivered, table: table, marking: difference)
        if let difference {
            lines.append("first difference at row \(difference)")
            let keys = differingKeys(expected: expected, delivered: delivered, table: table)
            if !keys.isEmpty {
                lines.append("rows that differ, by key: " + keys.prefix(8).map { key in
                    key.map(\.description).joined(separator: ", ") + (keyKinds([key]).first.map { " (\($0))" } ?? "")
                }.joined(separator: "; "))
            }
            let missing = Set(expected).subtracting(delivered)
            let extra = Set(delivered).subtracting(expected)
            func some(_ rows: Set<StressRow>) -> String {
                rows.map { $0.describe(in: table) }.sorted().prefix(5).joined(separator: ", ")
            }
            if !missing.isEmpty { lines.append("missing: " + some(missing)) }
            if !extra.isEmpty { lines.append("extra: " + some(extra)) }
        }
        return lines.map { "  " + $0 }.joined(separator: "\n")
    }

    /// The keys of rows in one list and not the other, in both with other values, or repeated
    /// in one (a snapshot holding a row twice).
    static func differingKeys(expected: [StressRow], delivered: [StressRow], table: StressTable) -> [[StressValue]] {
        let want = Dictionary(grouping: expected) { $0.key(in: table) }
        let got = Dictionary(grouping: delivered) { $0.key(in: table) }
        return Set(want.keys).union(got.keys).filter { want[$0] != got[$0] }
            .sorted { lhs, rhs in
                zip(lhs, rhs).lazy.map { StressValue.sqliteOrder($0, $1) }.first { $0 != 0 }.map { $0 < 0 } ?? false
            }
    }

    /// What is awkward about these keys: `BLOB`, `text with NUL`, `text not UTF-8`, `text with
    /// canonically equivalent spellings` (Swift's `==` folds them), `plain` for none of these.
    static func keyKinds(_ keys: [[StressValue]]) -> [String] {
        var kinds: [String] = []
        func add(_ kind: String) { if !kinds.contains(kind) { kinds.append(kind) } }
        for value in keys.joined() {
            switch value {
            case .blob: add("BLOB")
            case .text(let bytes):
                if bytes.contains(0) { add("text with NUL") }
                if let string = StressValue.utf8String(bytes) {
                    // A collection reads text that is not UTF-8 into a `String` with U+FFFD.
                    if string.unicodeScalars.contains("\u{FFFD}") { add("text not UTF-8 (read with U+FFFD)") }
                    let composed = string.precomposedStringWithCanonicalMapping
                    let decomposed = string.decomposedStringWithCanonicalMapping
                    if !composed.utf8.elementsEqual(bytes) || !decomposed.utf8.elementsEqual(bytes) {
                        add("text with canonically equivalent spellings")
                    }
                } else {
                    add("text not UTF-8")
                }
                if bytes.isEmpty { add("empty text") }
            case .integer(let number) where number == .min || number == .max: add("Int64 extreme")
            default: break
            }
        }
        return kinds.isEmpty && !keys.isEmpty ? ["plain"] : kinds
    }

    private static func rows(_ rows: [StressRow], table: StressTable, marking: Int?) -> [String] {
        let shown = rows.prefix(24).enumerated().map { index, row in
            "  \(index == marking ? ">" : " ")\(index): \(row.describe(in: table))"
        }
        return rows.count > 24 ? shown + ["   … \(rows.count - 24) more"] : shown
    }
}
