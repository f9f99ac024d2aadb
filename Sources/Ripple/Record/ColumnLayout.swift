/// The column names of a row shape (a collection's table, or the result of one raw query) and
/// the index of each name, shared by every row of that shape.
final class ColumnLayout: Sendable {
    /// The names, in column order.
    let names: [String]
    /// The first column with each name.
    let indexByName: [String: Int]

    init(_ names: [String]) {
        self.names = names
        var index: [String: Int] = [:]
        index.reserveCapacity(names.count)
        for (offset, name) in names.enumerated() where index[name] == nil { index[name] = offset }
        self.indexByName = index
    }

    var count: Int { names.count }

    /// The names as a readable list for error messages: `id, title, rank`.
    var listed: String { names.joined(separator: ", ") }
}

/// SQL identifiers (table and column names): validated, then always double-quoted, never spliced
/// as raw text.
package enum SQLIdentifier {
    /// `name` in double quotes, embedded quotes doubled: `my "table"` → `"my ""table"""`.
    package static func quoted(_ name: String) -> String {
        guard name.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + name + "\"" }
        return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Throws ``StoreError/Kind/invalidQuery`` when `name` is not usable as an identifier: empty,
    /// longer than 256 bytes, with control characters (NUL, newlines…) or surrounding spaces,
    /// or (for tables) in SQLite's reserved `sqlite_` namespace.
    static func validate(_ name: String, as role: String, isTable: Bool = false) throws(StoreError) {
        func reject(_ reason: String) throws(StoreError) -> Never {
            throw StoreError(.invalidQuery, "invalid \(role) name \(String(reflecting: name)): \(reason)")
        }
        if name.isEmpty { try reject("it is empty") }
        if name.utf8.count > 256 { try reject("it is longer than 256 bytes") }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            try reject("it contains control characters")
        }
        if name.first!.isWhitespace || name.last!.isWhitespace { try reject("it begins or ends with spaces") }
        if isTable && name.lowercased().hasPrefix("sqlite_") { try reject("names beginning with sqlite_ are reserved") }
        // The change log does not track the store's own tables, and logs "*" for a change of
        // unknown extent: a collection by either name would never be observed correctly.
        if isTable && name.lowercased().hasPrefix("ripple_") {
            try reject("names beginning with ripple_ are reserved for the store's own tables")
        }
        if isTable && name == ChangeLog.everyTable {
            try reject("\"*\" is reserved: the change log's name for a change to any table")
        }
    }
}
