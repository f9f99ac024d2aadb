import Foundation

/// Output helpers shared by the subcommands: results on stdout, notes and errors on stderr.
enum Console {
    /// Writes `line` and a newline to standard error.
    static func note(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Writes `error: message` to standard error.
    static func error(_ message: String) {
        note("error: \(message)")
    }
}

/// `identifier` as an SQL identifier: double-quoted, embedded quotes doubled.
func quotedIdentifier(_ identifier: String) -> String {
    "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
