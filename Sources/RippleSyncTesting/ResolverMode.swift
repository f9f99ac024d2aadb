#if Sync
import RippleServer

/// How a write test's node takes operations: with no resolver, or with a resolver on every
/// synced table that returns each operation as it came (`.apply(op)`, changing nothing). The
/// two must give the same results, rows and stored outcomes: a resolver only decides the
/// operations, which then go through the same exactly-once step.
package enum ResolverMode: String, CaseIterable, Sendable {
    case none
    case passThrough

    /// Installs the mode's resolvers in `configuration`, beside any a test gave (which stay).
    package func install(in configuration: inout SyncServerConfiguration) {
        guard self == .passThrough else { return }
        for table in configuration.tables where configuration.resolvers[table] == nil {
            configuration.resolvers[table] = { op, _, _ in .apply(op) }
        }
    }
}
#endif
