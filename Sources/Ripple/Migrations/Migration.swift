/// One schema change registered with a ``Migrator``: SQL text (from a file or a string) or a
/// Swift closure, with the name and checksum recorded in the database once it is applied.
public struct Migration: Sendable {
    /// The name recorded in the database, unique in its domain: `0001_create_todos`.
    public let name: String
    /// The file the migration was loaded from (`0001_create_todos.sql`), or `nil`.
    public let fileName: String?
    /// The SHA-256 of the SQL text (lowercase hex), with line endings normalized to `\n` so that
    /// a checkout that rewrites them does not count as an edit. For a closure migration, the
    /// SHA-256 of its name: editing the closure's code cannot be detected.
    public let checksum: String
    let body: Body

    enum Body: Sendable {
        case sql(String)
        case code(@Sendable (Database) throws -> Void)
    }

    init(name: String, fileName: String? = nil, sql: String) {
        self.name = name
        self.fileName = fileName
        self.checksum = SHA256.hexDigest(Self.normalizingLineEndings(sql))
        self.body = .sql(sql)
    }

    init(name: String, body: @escaping @Sendable (Database) throws -> Void) {
        self.name = name
        self.fileName = nil
        self.checksum = SHA256.hexDigest(name)
        self.body = .code(body)
    }

    /// How errors name the migration: its file when it has one.
    var displayName: String { fileName ?? name }

    /// Runs the migration's statements on `db` (inside the caller's transaction).
    func run(_ db: Database) throws {
        switch body {
        case .sql(let sql): try db.executeScript(sql)
        case .code(let body): try body(db)
        }
    }

    /// The UTF-8 bytes of `text` with every CR LF replaced by LF.
    private static func normalizingLineEndings(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var previous: UInt8?
        for byte in text.utf8 {
            if byte == 0x0A, previous == 0x0D { bytes.removeLast() }
            bytes.append(byte)
            previous = byte
        }
        return bytes
    }
}
