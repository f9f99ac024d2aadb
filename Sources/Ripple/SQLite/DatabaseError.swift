import RippleSQLite

/// An error reported by SQLite: its result code, extended code and message, and the SQL that
/// failed. Bind arguments are kept but left out of descriptions (they may hold users' data)
/// unless ``Store/Configuration/publicStatementArguments`` is set.
///
/// ```swift
/// do { try store.write { try $0.execute("INSERT INTO t VALUES (1)") } }
/// catch let error as DatabaseError where error.code == .constraint { … }
/// ```
public struct DatabaseError: Error, CustomStringConvertible, Sendable {
    /// SQLite's primary result code (`SQLITE_BUSY`, `SQLITE_CONSTRAINT`, …).
    public let code: ResultCode
    /// SQLite's extended result code (`SQLITE_CONSTRAINT_PRIMARYKEY`, …).
    public let extendedCode: ResultCode
    /// SQLite's message.
    public let message: String
    /// The SQL that failed, when there was one.
    public let sql: String?
    /// The bind arguments of the failed statement.
    public let arguments: [SQLValue]
    /// Whether ``description`` shows ``arguments``.
    public let showsArguments: Bool

    /// An error with the given parts.
    public init(code: ResultCode, extendedCode: ResultCode? = nil, message: String, sql: String? = nil,
                arguments: [SQLValue] = [], showsArguments: Bool = false) {
        self.code = ResultCode(rawValue: code.rawValue & 0xFF)
        self.extendedCode = extendedCode ?? code
        self.message = message
        self.sql = sql
        self.arguments = arguments
        self.showsArguments = showsArguments
    }

    /// SQLite's codes and message, then the SQL and (when shown) the arguments, each cut to its
    /// first 300 characters with its full length noted: a statement of 2,000 terms gives a
    /// description of a few hundred characters. ``sql`` and ``arguments`` keep the whole.
    public var description: String {
        var text = "SQLite error \(extendedCode.rawValue) (\(code.name)): \(message)"
        if let sql { text += " — while executing `\(Self.abbreviated(sql))`" }
        if !arguments.isEmpty {
            text += showsArguments
                ? " with arguments \(Self.abbreviated("\(arguments)", length: "\(arguments.count) arguments"))"
                : " (\(arguments.count) arguments hidden)"
        }
        return text
    }

    /// How many characters of the SQL, and of the shown arguments, ``description`` includes.
    static let descriptionLimit = 300

    /// `text` when it has at most `limit` characters; else its first `limit` characters (whole
    /// grapheme clusters: an emoji or an accented letter is never split), `…`, and its length
    /// in parentheses: `length`, or `"N characters"`.
    static func abbreviated(_ text: String, limit: Int = descriptionLimit, length: @autoclosure () -> String? = nil) -> String {
        guard let cut = text.index(text.startIndex, offsetBy: limit, limitedBy: text.endIndex), cut != text.endIndex else {
            return text
        }
        return "\(text[..<cut])… (\(length() ?? "\(text.count) characters"))"
    }

    /// SQLite's result codes, primary and extended.
    public struct ResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let error = ResultCode(rawValue: SQLITE_ERROR)
        public static let `internal` = ResultCode(rawValue: SQLITE_INTERNAL)
        public static let permission = ResultCode(rawValue: SQLITE_PERM)
        public static let abort = ResultCode(rawValue: SQLITE_ABORT)
        public static let busy = ResultCode(rawValue: SQLITE_BUSY)
        public static let locked = ResultCode(rawValue: SQLITE_LOCKED)
        public static let noMemory = ResultCode(rawValue: SQLITE_NOMEM)
        public static let readOnly = ResultCode(rawValue: SQLITE_READONLY)
        public static let interrupt = ResultCode(rawValue: SQLITE_INTERRUPT)
        public static let ioError = ResultCode(rawValue: SQLITE_IOERR)
        public static let corrupt = ResultCode(rawValue: SQLITE_CORRUPT)
        public static let full = ResultCode(rawValue: SQLITE_FULL)
        public static let cannotOpen = ResultCode(rawValue: SQLITE_CANTOPEN)
        public static let schema = ResultCode(rawValue: SQLITE_SCHEMA)
        public static let tooBig = ResultCode(rawValue: SQLITE_TOOBIG)
        public static let constraint = ResultCode(rawValue: SQLITE_CONSTRAINT)
        public static let mismatch = ResultCode(rawValue: SQLITE_MISMATCH)
        public static let misuse = ResultCode(rawValue: SQLITE_MISUSE)
        public static let range = ResultCode(rawValue: SQLITE_RANGE)
        public static let notADatabase = ResultCode(rawValue: SQLITE_NOTADB)
        /// A statement the store does not allow where it ran (`SQLITE_AUTH`): transaction control
        /// (`BEGIN`, `COMMIT`, `SAVEPOINT`, …) or `ATTACH`/`DETACH` inside a write, a read or a migration.
        public static let authorization = ResultCode(rawValue: SQLITE_AUTH)

        /// The primary code of an extended code.
        public var primary: ResultCode { ResultCode(rawValue: rawValue & 0xFF) }

        /// SQLite's English name for the code.
        public var name: String { String(cString: sqlite3_errstr(rawValue)) }

        public var description: String { "\(rawValue) (\(name))" }
    }
}

extension DatabaseError {
    /// The error SQLite reports on `connection` for the result code `code`.
    static func fromConnection(_ connection: OpaquePointer?, code: Int32, sql: String?,
                               arguments: [SQLValue] = [], showsArguments: Bool = false) -> DatabaseError {
        let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
        return DatabaseError(code: ResultCode(rawValue: code), extendedCode: ResultCode(rawValue: extended),
                             message: message, sql: sql, arguments: arguments, showsArguments: showsArguments)
    }
}
