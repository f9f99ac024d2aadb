import ArgumentParser
import Foundation
import Ripple

/// A look at a database file that cannot change it, for subcommands that open it read-write
/// afterwards: a `Store` creates a missing file, and makes any SQLite database a store (it adds
/// its tables), so a mistyped path or someone else's database must be refused before that.
enum StoreFileCheck {
    /// The store at `path`, opened read-only and never polling, for subcommands that only read it
    /// (`ripple info`, `ripple history`).
    static func openForReading(_ path: String) throws -> Store {
        var configuration = Store.Configuration()
        configuration.readOnly = true
        configuration.externalWritePollInterval = nil
        return try Store(path: path, configuration: configuration)
    }

    /// Returns when `path` is a Ripple store; otherwise throws a `ValidationError` saying what it
    /// is instead: missing, a directory, not a SQLite database, or one without Ripple's tables.
    /// The file is read, never written: it is attached read-only to a private in-memory store.
    static func requireStore(at path: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ValidationError("\(path) does not exist (give the file of a Ripple store)")
        }
        guard !isDirectory.boolValue else { throw ValidationError("\(path) is a directory, not a database file") }
        // SQLite takes an empty file for an empty database: say what it is in plain words.
        if (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue == 0 {
            throw ValidationError("\(path) is empty, not a Ripple store")
        }
        var configuration = Store.Configuration()
        configuration.externalWritePollInterval = nil
        let look = try Store.inMemory(configuration: configuration)
        let hasStoreTable: Bool
        do {
            hasStoreTable = try look.writeWithoutTransaction { db in
                try db.execute("ATTACH DATABASE ? AS candidate", ["file:\(uriEscaped(path))?mode=ro"])
                defer { try? db.execute("DETACH DATABASE candidate") }
                return try db.fetchValue("SELECT count(*) FROM candidate.sqlite_schema WHERE type = 'table' AND name = 'ripple_meta'",
                                         as: Int.self) == 1
            }
        } catch let error as DatabaseError where error.code == .notADatabase || error.code == .corrupt {
            throw ValidationError("\(path) is not a SQLite database (\(error.message))")
        } catch let error as DatabaseError {
            throw ValidationError("cannot read \(path): \(error.message)")
        }
        guard hasStoreTable else {
            throw ValidationError("\(path) is a SQLite database but not a Ripple store (it has no ripple_meta table). "
                                  + "It was left as it is: opening it as a store would add Ripple's tables to it")
        }
    }

    /// `path` as the path of a `file:` URI (SQLite reads `%`, `?` and `#` there as syntax).
    private static func uriEscaped(_ path: String) -> String {
        path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
            .replacingOccurrences(of: "#", with: "%23")
    }
}
