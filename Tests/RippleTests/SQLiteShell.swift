import Foundation
import RippleTesting
import Testing

/// The `sqlite3` shell (Debian package sqlite3): another process, not Ripple, writing to a
/// store's file.
enum SQLiteShell {
    /// Runs `sql` on the database file at `database`; returns the shell's exit status and what
    /// it wrote to standard error.
    @discardableResult
    static func run(_ sql: String, on database: String) throws -> (status: Int32, errors: String) {
        let shell = "/usr/bin/sqlite3"
        try #require(FileManager.default.isExecutableFile(atPath: shell), "the sqlite3 shell (Debian package sqlite3) is needed")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = [database, sql]
        let errors = Pipe()
        process.standardError = errors
        let message = try Wait.run(process, "the sqlite3 shell") {
            String(decoding: errors.fileHandleForReading.readToEndRetryingInterrupts(), as: UTF8.self)
        }
        return (process.terminationStatus, message)
    }

    /// A shell kept open on `database`, reading statements from a pipe: another process whose
    /// commits are not followed by it closing the file.
    static func session(on database: String) throws -> Session {
        let shell = "/usr/bin/sqlite3"
        try #require(FileManager.default.isExecutableFile(atPath: shell), "the sqlite3 shell (Debian package sqlite3) is needed")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = ["-bail", database]
        let input = Pipe()
        process.standardInput = input
        try ProcessLaunch.run(process)
        return Session(process: process, input: input.fileHandleForWriting)
    }

    /// A running sqlite3 shell (see ``session(on:)``).
    struct Session {
        let process: Process
        let input: FileHandle

        /// Sends `sql` (whole statements, each committed on its own as the shell runs it).
        func send(_ sql: String) throws {
            try input.write(contentsOf: Data((sql + "\n").utf8))
        }

        /// Closes the shell's input and waits for it to exit.
        func end() {
            try? input.close()
            do { try Wait.exit(of: process, "the sqlite3 shell session") } catch { Issue.record(error) }
        }
    }
}
