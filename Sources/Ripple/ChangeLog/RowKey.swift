import RippleSQLite

/// A row's identity exactly as SQLite holds it: for each key column, the value's storage class
/// and its bytes. Two keys are equal when SQLite stores the same values — by type and bytes, as
/// SQLite's `BINARY` comparison of keys does — never by Swift's `String` equality, which folds
/// canonically equivalent text (`"\u{e9}"` and `"e\u{301}"` are two rows), and never by a text
/// rendering, which confuses the blob `x'61'` with the text `'61'` and loses text that is not
/// UTF-8.
///
/// The hash is computed once: snapshots, the change log and the diff hash keys often.
///
/// Encoding (``bytes``): per column, a type byte — 1 integer, 2 real, 3 text, 4 blob, 5 NULL —
/// then for integers and reals their 8 bytes (little-endian bit pattern), for text and blobs a
/// length (LEB128) and the bytes as SQLite stores them (text in UTF-8), for NULL nothing. A
/// one-column integer key, the commonest, is held without an allocation.
struct RowKey: Hashable, Sendable, CustomStringConvertible {
    private enum Storage: Hashable {
        case integer(Int64)
        case encoded([UInt8])
    }

    private let storage: Storage
    private let hash: UInt64

    enum Tag {
        static let integer: UInt8 = 1
        static let real: UInt8 = 2
        static let text: UInt8 = 3
        static let blob: UInt8 = 4
        static let null: UInt8 = 5
    }

    /// A one-column integer key.
    init(integer: Int64) {
        self.init(storage: .integer(integer), hash: Fingerprint.word(UInt64(bitPattern: integer), type: 1))
    }

    /// A key from its encoding (see the type's documentation).
    init(encoded bytes: UnsafeBufferPointer<UInt8>) {
        if bytes.count == 9, bytes[0] == Tag.integer {
            self.init(integer: Self.loadInteger(bytes, at: 1))
        } else {
            self.init(storage: .encoded(Array(bytes)), hash: Fingerprint.bytes(UnsafeRawBufferPointer(bytes), type: 6))
        }
    }

    /// A key from its encoding.
    init(encoded bytes: [UInt8]) {
        self = bytes.withUnsafeBufferPointer { RowKey(encoded: $0) }
    }

    private init(storage: Storage, hash: UInt64) {
        self.storage = storage
        self.hash = hash
    }

    /// The key of one value.
    init(_ value: SQLValue) {
        if case .integer(let integer) = value {
            self.init(integer: integer)
            return
        }
        var bytes: [UInt8] = []
        Self.append(value, to: &bytes)
        self.init(encoded: bytes)
    }

    /// The key held by column `column` of the current row of a statement.
    init(column: Int32, of handle: OpaquePointer) {
        if sqlite3_column_type(handle, column) == SQLITE_INTEGER {
            self.init(integer: sqlite3_column_int64(handle, column))
            return
        }
        var bytes: [UInt8] = []
        // Text as UTF-8 whatever the database's encoding, as the change capture reads it (not
        // relying on the fingerprint having converted the value first).
        Self.append(sqlite3_column_value(handle, column), textIsUTF8: false, to: &bytes)
        self.init(encoded: bytes)
    }

    func hash(into hasher: inout Hasher) { hasher.combine(hash) }

    static func == (lhs: RowKey, rhs: RowKey) -> Bool { lhs.hash == rhs.hash && lhs.storage == rhs.storage }

    /// Runs `body` over the key's encoding.
    func withEncoding<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        switch storage {
        case .encoded(let bytes):
            return bytes.withUnsafeBufferPointer(body)
        case .integer(let integer):
            var bytes: [UInt8] = []
            Self.appendInteger(integer, to: &bytes)
            return bytes.withUnsafeBufferPointer(body)
        }
    }

    /// The key as the change log writes it: see ``ChangeLogEntry/rowKeys``.
    var text: String {
        if case .integer(let integer) = storage { return String(integer) }
        var bytes: [UInt8] = []
        withEncoding { Self.appendText(of: $0, to: &bytes) }
        return String(decoding: bytes, as: UTF8.self)
    }

    var description: String { text }

    /// Binds the key's values to parameters `index`, `index + 1`, … of `statement`, each as
    /// exactly the value SQLite stores (text bytes as they are, even when not UTF-8).
    /// Returns the number of parameters bound.
    @discardableResult
    func bind(to statement: Statement, at index: Int32) throws(DatabaseError) -> Int32 {
        if case .integer(let integer) = storage {
            try statement.bindInteger(integer, at: index)
            return 1
        }
        var result: Result<Int32, DatabaseError> = .success(0)
        withEncoding { bytes in
            result = Result { () throws(DatabaseError) -> Int32 in try Self.bindValues(bytes, to: statement, at: index) }
        }
        return try result.get()
    }

    /// Binds the values of an encoding (one or more, one after the other) to parameters `index`,
    /// `index + 1`, … of `statement`, each as exactly the value SQLite stores. Returns the number
    /// of parameters bound.
    @discardableResult
    static func bindValues(_ bytes: UnsafeBufferPointer<UInt8>, to statement: Statement, at index: Int32) throws(DatabaseError) -> Int32 {
        var bound: Int32 = 0
        var offset = 0
        while offset < bytes.count {
            switch value(in: bytes, at: &offset) {
            case .integer(let value)?: try statement.bindInteger(value, at: index + bound)
            case .real(let value)?: try statement.bindReal(value, at: index + bound)
            case .text(let text)?: try statement.bindRawText(UnsafeRawBufferPointer(text), at: index + bound)
            case .blob(let blob)?: try statement.bindRawBlob(UnsafeRawBufferPointer(blob), at: index + bound)
            case .null?, nil: try statement.bindNull(at: index + bound)
            }
            bound += 1
        }
        return bound
    }

    // MARK: Encoding

    /// One decoded value of an encoding; text and blobs point into it.
    enum RawValue {
        case integer(Int64)
        case real(Double)
        case text(UnsafeBufferPointer<UInt8>)
        case blob(UnsafeBufferPointer<UInt8>)
        case null
    }

    /// The value at `offset` of an encoding, advancing `offset` past it (`nil`, and `offset`
    /// at the end, for a malformed encoding).
    static func value(in bytes: UnsafeBufferPointer<UInt8>, at offset: inout Int) -> RawValue? {
        guard offset < bytes.count else { return nil }
        let tag = bytes[offset]
        offset += 1
        switch tag {
        case Tag.integer, Tag.real:
            guard offset + 8 <= bytes.count else {
                offset = bytes.count
                return nil
            }
            let word = loadInteger(bytes, at: offset)
            offset += 8
            return tag == Tag.integer ? .integer(word) : .real(Double(bitPattern: UInt64(bitPattern: word)))
        case Tag.text, Tag.blob:
            guard let length = readLength(bytes, at: &offset), offset + length <= bytes.count else {
                offset = bytes.count
                return nil
            }
            let payload = UnsafeBufferPointer(rebasing: bytes[offset..<offset + length])
            offset += length
            return tag == Tag.text ? .text(payload) : .blob(payload)
        case Tag.null:
            return .null
        default:
            offset = bytes.count
            return nil
        }
    }

    @inline(__always)
    private static func loadInteger(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> Int64 {
        var word: UInt64 = 0
        for index in 0..<8 { word |= UInt64(bytes[offset + index]) << (8 * UInt64(index)) }
        return Int64(bitPattern: word)
    }

    @inline(__always)
    static func appendInteger(_ value: Int64, to bytes: inout [UInt8]) {
        bytes.append(Tag.integer)
        appendWord(UInt64(bitPattern: value), to: &bytes)
    }

    @inline(__always)
    private static func appendWord(_ word: UInt64, to bytes: inout [UInt8]) {
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: word >> (8 * UInt64(index)))) }
    }

    @inline(__always)
    static func appendLength(_ length: Int, to bytes: inout [UInt8]) {
        var remaining = UInt(length)
        while remaining >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: remaining) | 0x80)
            remaining >>= 7
        }
        bytes.append(UInt8(remaining))
    }

    static func readLength(_ bytes: UnsafeBufferPointer<UInt8>, at offset: inout Int) -> Int? {
        var length = 0
        var shift = 0
        while offset < bytes.count, shift < 63 {
            let byte = bytes[offset]
            offset += 1
            length |= Int(byte & 0x7F) << shift
            if byte < 0x80 { return length }
            shift += 7
        }
        return nil
    }

    /// Appends text (UTF-8 bytes as stored) or a blob.
    @inline(__always)
    static func appendBytes(_ payload: UnsafeRawBufferPointer, tag: UInt8, to bytes: inout [UInt8]) {
        bytes.append(tag)
        appendLength(payload.count, to: &bytes)
        bytes.append(contentsOf: payload)
    }

    /// Appends the encoding of one `sqlite3_value` (a pre-update hook's or a column's).
    /// `textIsUTF8`: the database stores text as UTF-8, so text is read without conversion.
    @inline(__always)
    static func append(_ value: OpaquePointer?, textIsUTF8: Bool, to bytes: inout [UInt8]) {
        guard let value else { return bytes.append(Tag.null) }
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER:
            appendInteger(sqlite3_value_int64(value), to: &bytes)
        case SQLITE_FLOAT:
            bytes.append(Tag.real)
            appendWord(sqlite3_value_double(value).bitPattern, to: &bytes)
        case SQLITE_TEXT:
            // The stored bytes: `sqlite3_value_text` would first copy them to add a terminator.
            let text = textIsUTF8 ? sqlite3_value_blob(value) : UnsafeRawPointer(sqlite3_value_text(value))
            let count = Int(sqlite3_value_bytes(value))
            appendBytes(UnsafeRawBufferPointer(start: count > 0 ? text : nil, count: text == nil ? 0 : count),
                        tag: Tag.text, to: &bytes)
        case SQLITE_BLOB:
            let blob = sqlite3_value_blob(value)
            let count = Int(sqlite3_value_bytes(value))
            appendBytes(UnsafeRawBufferPointer(start: count > 0 ? blob : nil, count: blob == nil ? 0 : count),
                        tag: Tag.blob, to: &bytes)
        default:
            bytes.append(Tag.null)
        }
    }

    /// Appends the encoding of one value.
    static func append(_ value: SQLValue, to bytes: inout [UInt8]) {
        switch value {
        case .null: bytes.append(Tag.null)
        case .integer(let integer): appendInteger(integer, to: &bytes)
        case .real(let real):
            bytes.append(Tag.real)
            appendWord(real.bitPattern, to: &bytes)
        case .text(var text): text.withUTF8 { appendBytes(UnsafeRawBufferPointer($0), tag: Tag.text, to: &bytes) }
        case .blob(let blob): blob.withUnsafeBytes { appendBytes($0, tag: Tag.blob, to: &bytes) }
        }
    }

    // MARK: Text, as the change log writes keys

    /// Appends the text form of an encoded key: one column's value as it is (integers and reals
    /// in decimal, text as is, blobs in lower-case hex, NULL as `NULL`); several columns as a
    /// JSON array of those texts.
    static func appendText(of key: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        var offset = 0
        guard let first = value(in: key, at: &offset) else { return }
        if offset >= key.count {
            appendText(first, escaped: false, to: &bytes)
            return
        }
        bytes.append(UInt8(ascii: "["))
        var next: RawValue? = first
        var isFirst = true
        while let raw = next {
            if !isFirst { bytes.append(UInt8(ascii: ",")) }
            isFirst = false
            bytes.append(UInt8(ascii: "\""))
            appendText(raw, escaped: true, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
            next = offset < key.count ? value(in: key, at: &offset) : nil
        }
        bytes.append(UInt8(ascii: "]"))
    }

    private static func appendText(_ raw: RawValue, escaped: Bool, to bytes: inout [UInt8]) {
        switch raw {
        case .integer(let value):
            ChangeCapture.appendDecimal(value, to: &bytes)
        case .real(let value):
            bytes.append(contentsOf: String(value).utf8)
        case .text(let text):
            if escaped && JSONText.needsEscaping(text) {
                JSONText.appendEscaped(text, to: &bytes)
            } else {
                bytes.append(contentsOf: text)
            }
        case .blob(let blob):
            ChangeCapture.appendHex(UnsafeRawBufferPointer(blob), to: &bytes)
        case .null:
            bytes.append(contentsOf: [UInt8(ascii: "N"), UInt8(ascii: "U"), UInt8(ascii: "L"), UInt8(ascii: "L")])
        }
    }

    // MARK: Lists of keys, as the change log stores them

    /// Appends `key` to a list of keys (its length, then its encoding).
    static func appendToList(_ key: UnsafeBufferPointer<UInt8>, to list: inout [UInt8]) {
        appendLength(key.count, to: &list)
        list.append(contentsOf: key)
    }

    /// The keys of a list written by ``appendToList(_:to:)``, or `nil` when it is malformed.
    static func list(_ bytes: [UInt8]) -> [RowKey]? {
        bytes.withUnsafeBufferPointer { buffer in
            var keys: [RowKey] = []
            var offset = 0
            while offset < buffer.count {
                guard let length = readLength(buffer, at: &offset), length > 0, offset + length <= buffer.count else {
                    return nil
                }
                keys.append(RowKey(encoded: UnsafeBufferPointer(rebasing: buffer[offset..<offset + length])))
                offset += length
            }
            return keys
        }
    }
}
