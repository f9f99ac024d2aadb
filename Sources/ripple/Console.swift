import Foundation

/// Output helpers shared by the subcommands: results on stdout, notes and errors on stderr.
enum Console {
    /// Writes `line` and a newline to standard error.
    static func note(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Writes `text` to standard output at once, unbuffered (output that another program reads
    /// as it comes, or a terminal frame that must appear whole). Gives up quietly when a write
    /// fails (a pipe whose reader is gone ends the process with SIGPIPE first, as usual).
    static func output(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
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
