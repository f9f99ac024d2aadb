extension ServerMessage {
    /// Reads a frame the server sent from its UTF-8 bytes, much faster than `JSONDecoder` (a
    /// snapshot of many rows is most of a client's initial sync).
    ///
    /// It reads any JSON with a message's meaning: whitespace anywhere, keys in any order,
    /// unknown keys skipped, escapes in strings. A value in a row reads as `.null`, `.bool`,
    /// `.integer` (a number without a fraction or exponent, within `Int64`), `.real` (any other
    /// number, as `Double(String)` reads it: `1.0` stays a real) or `.text`. A changeset's empty
    /// list may be absent. A key written twice counts the first time, as with `JSONDecoder`. An
    /// error code this library does not know reads as ``SyncErrorCode/internalError``. Stricter
    /// than `JSONDecoder`, it refuses any text that is not JSON, also inside the values it skips.
    ///
    /// ```swift
    /// let message = try ServerMessage(json: frameText.utf8)
    /// ```
    ///
    /// - Throws: ``SyncFrameError`` for bytes that are not JSON (or not UTF-8), or JSON that is not
    ///   a server message: its description says at which byte, and what was expected there.
    /// - Complexity: O(bytes), in one pass when `type` comes first (as the server writes it).
    public init(json bytes: some Collection<UInt8>) throws(SyncFrameError) {
        let read = { (text: UnsafeBufferPointer<UInt8>) -> Result<ServerMessage, SyncFrameError> in
            Result { () throws(SyncFrameError) -> ServerMessage in try FrameReader.serverMessage(in: text) }
        }
        let result = bytes.withContiguousStorageIfAvailable(read) ?? Array(bytes).withUnsafeBufferPointer(read)
        self = try result.get()
    }
}

/// Reads the server's frames straight from their UTF-8 bytes, without Foundation: one pass
/// that builds the message's values as it meets them, checking the JSON grammar (RFC 8259) and
/// the protocol's shapes on the way, and throwing only when the frame is neither.
///
/// The shapes are those ``ServerMessage/json`` writes (see `JSONBytes`); the reader accepts
/// any JSON with the same meaning (see ``ServerMessage/init(json:)``). Known fields are read
/// where they stand; a field met before `type` is skipped and read again once `type` is known.
package struct FrameReader {
    /// The frame.
    let text: UnsafeBufferPointer<UInt8>
    /// The offset of the next byte to read.
    var position = 0
    /// A string's unescaped bytes while it is read, kept to reuse its storage.
    private var scratch: [UInt8] = []
    /// Whether an unpaired surrogate escape (`\uD800` alone) is read as U+FFFD and noted in
    /// `unpairedSurrogate` instead of refused: JSON's grammar allows it, though it names no
    /// character (a reader of client messages refuses the value, not the frame).
    var toleratesUnpairedSurrogates = false
    /// Where the last unpaired surrogate escape stood (see `toleratesUnpairedSurrogates`).
    var unpairedSurrogate: Int?

    /// As deep as arrays and objects may nest (as `JSONDecoder` allows).
    private static let maximumDepth = 512

    init(_ text: UnsafeBufferPointer<UInt8>) { self.text = text }

    /// The server message that `text` (the whole frame) holds.
    package static func serverMessage(in text: UnsafeBufferPointer<UInt8>) throws(SyncFrameError) -> ServerMessage {
        var reader = FrameReader(text)
        reader.skipByteOrderMark()
        let message = try reader.readMessage()
        try reader.expectEnd()
        return message
    }

    /// The values of the JSON array `text` holds (a row as the wire writes it).
    package static func values(in text: UnsafeBufferPointer<UInt8>) throws(SyncFrameError) -> [WireValue] {
        var reader = FrameReader(text)
        reader.skipByteOrderMark()
        reader.skipWhitespace()
        let row = try reader.readRow(capacity: 0)
        try reader.expectEnd()
        return row
    }
}

// MARK: - Messages

extension FrameReader {
    /// The message types, by their `type`.
    private enum MessageType: String {
        case welcome, changes, heartbeat, pong, error, pushed, authed

        /// Whether a message of this type has `field` (every other key is skipped).
        func has(_ field: Field) -> Bool {
            switch (self, field) {
            case (.welcome, .protocol), (.welcome, .user), (.welcome, .lsn), (.welcome, .heartbeatMilliseconds),
                 (.welcome, .maxSubscriptions), (.welcome, .maxMessageBytes), (.welcome, .client), (.welcome, .lastMutation): true
            case (.pushed, .results): true
            case (.changes, .lsn), (.changes, .snapshots), (.changes, .changesets): true
            case (.heartbeat, .lsn), (.pong, .lsn): true
            case (.error, .code), (.error, .message), (.error, .id): true
            case (.authed, .expires): true
            default: false
            }
        }
    }

    /// The fields of any message, as they are read.
    private struct MessageFields {
        var seen = Fields()
        var lsn: String?
        var snapshots: [String: WireSnapshot] = [:]
        var changesets: [String: WireChangeset] = [:]
        var code: String?
        var message: String?
        var id: String?
        var `protocol`: Int?
        var user: String?
        var heartbeatMilliseconds: Int?
        var maxSubscriptions: Int?
        var maxMessageBytes: Int?
        var client: String?
        var lastMutation: Int64?
        var results: [MutationResult]?
        var expires: Int64?
    }

    /// Reads the message object; `type` may stand anywhere in it.
    private mutating func readMessage() throws(SyncFrameError) -> ServerMessage {
        skipWhitespace()
        let start = position
        guard byte == UInt8(ascii: "{") else { throw expected("a JSON object (a server message)") }
        position += 1
        var type: MessageType?
        var fields = MessageFields()
        var early: [(field: Field, offset: Int)] = []
        var first = true
        while try nextMember(&first, of: "the message") {
            let field = try readFieldName()
            if field == .type, type == nil {
                let offset = position
                let name = try readString(for: "`type`")
                guard let known = MessageType(rawValue: name) else {
                    throw SyncFrameError(offset: offset, reason: "unknown message type \(quoted(name))")
                }
                type = known
                let after = position
                for (field, offset) in early {
                    position = offset
                    try readField(field, of: known, into: &fields)
                }
                position = after
                early = []
            } else if let type {
                try readField(field, of: type, into: &fields)
            } else {
                if field != .other && field != .type { early.append((field, position)) }
                try skipValue(depth: 2)
            }
        }
        guard let type else { throw SyncFrameError(offset: start, reason: "the message has no `type`") }
        func required<Value>(_ value: Value?, _ name: String) throws(SyncFrameError) -> Value {
            guard let value else { throw SyncFrameError(offset: start, reason: "the \(type.rawValue) message has no `\(name)`") }
            return value
        }
        switch type {
        case .welcome:
            return .welcome(ServerMessage.Welcome(
                protocol: try required(fields.protocol, "protocol"), user: try required(fields.user, "user"),
                lsn: try required(fields.lsn, "lsn"), heartbeatMilliseconds: try required(fields.heartbeatMilliseconds, "heartbeat_ms"),
                maxSubscriptions: try required(fields.maxSubscriptions, "max_subscriptions"),
                maxMessageBytes: try required(fields.maxMessageBytes, "max_message_bytes"),
                client: fields.client, lastMutation: fields.lastMutation))
        case .pushed:
            return .pushed(results: try required(fields.results, "results"))
        case .changes:
            return .changes(lsn: try required(fields.lsn, "lsn"), snapshots: fields.snapshots, changesets: fields.changesets)
        case .heartbeat:
            return .heartbeat(lsn: try required(fields.lsn, "lsn"))
        case .pong:
            return .pong(lsn: try required(fields.lsn, "lsn"))
        case .error:
            return .error(code: SyncErrorCode(rawValue: try required(fields.code, "code")) ?? .internalError,
                          message: try required(fields.message, "message"), id: fields.id)
        case .authed:
            return .authed(expires: try required(fields.expires, "expires"))
        }
    }

    /// Reads `field`'s value into `fields` if a message of `type` has it and it was not read
    /// before; skips it otherwise.
    private mutating func readField(_ field: Field, of type: MessageType, into fields: inout MessageFields) throws(SyncFrameError) {
        guard type.has(field), fields.seen.insert(field) else { return try skipValue(depth: 2) }
        switch field {
        case .lsn: fields.lsn = try readString(for: "`lsn`")
        case .snapshots:
            if readNull() { return }
            fields.snapshots = try readObject(of: "`snapshots`", depth: 2) { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readSnapshot()
            }
        case .changesets:
            if readNull() { return }
            fields.changesets = try readObject(of: "`changesets`", depth: 2) { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readChangeset()
            }
        case .code: fields.code = try readString(for: "`code`")
        case .message: fields.message = try readString(for: "`message`")
        case .id: fields.id = readNull() ? nil : try readString(for: "`id`")
        case .protocol: fields.protocol = try readInteger(for: "`protocol`")
        case .user: fields.user = try readString(for: "`user`")
        case .heartbeatMilliseconds: fields.heartbeatMilliseconds = try readInteger(for: "`heartbeat_ms`")
        case .maxSubscriptions: fields.maxSubscriptions = try readInteger(for: "`max_subscriptions`")
        case .maxMessageBytes: fields.maxMessageBytes = try readInteger(for: "`max_message_bytes`")
        case .client: fields.client = readNull() ? nil : try readString(for: "`client`")
        case .lastMutation: fields.lastMutation = readNull() ? nil : Int64(try readInteger(for: "`last_mutation`"))
        case .expires: fields.expires = Int64(try readInteger(for: "`expires`"))
        case .results:
            fields.results = try readArray(of: "`results`") { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readMutationResult()
            }
        default: try skipValue(depth: 2)
        }
    }

    /// Reads a ``MutationResult`` object.
    private mutating func readMutationResult() throws(SyncFrameError) -> MutationResult {
        let start = position
        guard byte == UInt8(ascii: "{") else { throw expected("a mutation result (an object)") }
        position += 1
        var seen = Fields()
        var id: Int?, status: MutationResult.Status?, code: String?, constraint: String?, message: String?, lsn: String?
        var first = true
        while try nextMember(&first, of: "a mutation result") {
            let field = try readFieldName()
            guard seen.insert(field) else { try skipValue(depth: 4); continue }
            switch field {
            case .id: id = try readInteger(for: "a result's `id`")
            case .status:
                let offset = position
                let name = try readString(for: "a result's `status`")
                guard let known = MutationResult.Status(rawValue: name) else {
                    throw SyncFrameError(offset: offset, reason: "unknown mutation status \(quoted(name))")
                }
                status = known
            case .code: code = readNull() ? nil : try readString(for: "a result's `code`")
            case .constraint: constraint = readNull() ? nil : try readString(for: "a result's `constraint`")
            case .message: message = readNull() ? nil : try readString(for: "a result's `message`")
            case .lsn: lsn = readNull() ? nil : try readString(for: "a result's `lsn`")
            default: try skipValue(depth: 4)
            }
        }
        guard let id, let status else { throw SyncFrameError(offset: start, reason: "a mutation result has no `id` or `status`") }
        return MutationResult(id: Int64(id), status: status, code: code, constraint: constraint, message: message, lsn: lsn)
    }

    /// Reads a ``WireSnapshot`` object.
    private mutating func readSnapshot() throws(SyncFrameError) -> WireSnapshot {
        let start = position
        guard byte == UInt8(ascii: "{") else { throw expected("a snapshot (an object)") }
        position += 1
        var seen = Fields()
        var basis: String?, columns: [String]?, types: [String]?, key: [Int]?, rows: [[WireValue]]?
        var included: [String: WireIncludedSnapshot]?
        var first = true
        while try nextMember(&first, of: "a snapshot") {
            let field = try readFieldName()
            guard seen.insert(field) else { try skipValue(depth: 4); continue }
            switch field {
            case .basis: basis = try readString(for: "`basis`")
            case .columns: columns = try readArray(of: "`columns`") { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readString(for: "a column name")
            }
            case .types: types = try readArray(of: "`types`") { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readString(for: "a type name")
            }
            case .key: key = try readArray(of: "`key`") { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readInteger(for: "a column position")
            }
            case .rows: rows = try readRows(columns: columns?.count ?? 0)
            case .included:
                if readNull() { continue }
                included = try readObject(of: "a snapshot's `included`", depth: 4) { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readIncludedSnapshot()
                }
            default: try skipValue(depth: 4)
            }
        }
        func required<Value>(_ value: Value?, _ name: String) throws(SyncFrameError) -> Value {
            guard let value else { throw SyncFrameError(offset: start, reason: "the snapshot has no `\(name)`") }
            return value
        }
        return WireSnapshot(basis: try required(basis, "basis"), columns: try required(columns, "columns"),
                            types: try required(types, "types"), key: try required(key, "key"), rows: try required(rows, "rows"),
                            included: included)
    }

    /// Reads a ``WireIncludedSnapshot`` object: a snapshot's rows of one include.
    private mutating func readIncludedSnapshot() throws(SyncFrameError) -> WireIncludedSnapshot {
        let start = position
        guard byte == UInt8(ascii: "{") else { throw expected("an include's rows (an object)") }
        position += 1
        var seen = Fields()
        var columns: [String]?, types: [String]?, key: [Int]?, rows: [[WireValue]]?, counts: [Int]?
        var countsOffset = start
        var first = true
        while try nextMember(&first, of: "an include's rows") {
            let field = try readFieldName()
            guard seen.insert(field) else { try skipValue(depth: 6); continue }
            switch field {
            case .columns: columns = try readArray(of: "`columns`") { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readString(for: "a column name")
            }
            case .types: types = try readArray(of: "`types`") { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readString(for: "a type name")
            }
            case .key: key = try readArray(of: "`key`") { (reader: inout FrameReader) throws(SyncFrameError) in
                try reader.readInteger(for: "a column position")
            }
            case .rows: rows = try readRows(columns: columns?.count ?? 0)
            case .counts:
                if readNull() { continue }
                countsOffset = position
                counts = try readArray(of: "`counts`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    let offset = reader.position
                    let count = try reader.readInteger(for: "a parent's number of children")
                    guard count >= 0 else { throw SyncFrameError(offset: offset, reason: "a parent's number of children is \(count), below 0") }
                    return count
                }
            default: try skipValue(depth: 6)
            }
        }
        func required<Value>(_ value: Value?, _ name: String) throws(SyncFrameError) -> Value {
            guard let value else { throw SyncFrameError(offset: start, reason: "an include's rows have no `\(name)`") }
            return value
        }
        let snapshot = WireIncludedSnapshot(columns: try required(columns, "columns"), types: try required(types, "types"),
                                            key: try required(key, "key"), rows: try required(rows, "rows"), counts: counts)
        if let problem = snapshot.countsProblem { throw SyncFrameError(offset: countsOffset, reason: problem) }
        return snapshot
    }

    /// Reads a snapshot's rows: an array of rows, each an array of values.
    private mutating func readRows(columns: Int) throws(SyncFrameError) -> [[WireValue]] {
        guard byte == UInt8(ascii: "[") else { throw expected("an array of rows for `rows`") }
        position += 1
        var rows: [[WireValue]] = []
        var capacity = columns
        var first = true
        while try nextElement(&first, of: "`rows`") {
            let row = try readRow(capacity: capacity)
            capacity = row.count
            rows.append(row)
        }
        return rows
    }

    /// Reads a ``WireChangeset`` object; an absent or `null` list is empty.
    private mutating func readChangeset() throws(SyncFrameError) -> WireChangeset {
        guard byte == UInt8(ascii: "{") else { throw expected("a changeset (an object)") }
        position += 1
        var seen = Fields()
        var changeset = WireChangeset()
        var first = true
        while try nextMember(&first, of: "a changeset") {
            let field = try readFieldName()
            guard seen.insert(field), field.isChangesetList || field == .included else { try skipValue(depth: 4); continue }
            if readNull() { continue }
            switch field {
            case .included:
                changeset.included = try readObject(of: "a changeset's `included`", depth: 4) { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readIncludedChange()
                }
            case .deletes:
                changeset.deletes = try readArray(of: "`deletes`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readInteger(for: "an old index")
                }
            case .inserts:
                changeset.inserts = try readArray(of: "`inserts`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readInsert()
                }
            case .moves:
                changeset.moves = try readArray(of: "`moves`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readMove()
                }
            default:
                changeset.updates = try readArray(of: "`updates`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readUpdate()
                }
            }
        }
        return changeset
    }

    /// Reads a ``WireIncludedChange`` object: a keyed change (`put`, `delete`) or a sectioned one
    /// (`deletes`, `inserts`, `moves`, `updates`), never both; a member that is `null` counts as
    /// absent, and an object with neither form's members is an empty sectioned change.
    private mutating func readIncludedChange() throws(SyncFrameError) -> WireIncludedChange {
        let start = position
        guard byte == UInt8(ascii: "{") else { throw expected("an include's change (an object)") }
        position += 1
        var seen = Fields()
        var keyed = WireKeyedChange(), isKeyed = false
        var sectioned = WireSectionedChangeset(), isSectioned = false
        var first = true
        while try nextMember(&first, of: "an include's change") {
            let field = try readFieldName()
            guard seen.insert(field), field.isChangesetList || field == .put || field == .delete else { try skipValue(depth: 6); continue }
            if readNull() { continue }
            switch field {
            case .put:
                isKeyed = true
                keyed.puts = try readArray(of: "`put`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readColumns(of: "a put")
                }
            case .delete:
                isKeyed = true
                keyed.deletes = try readArray(of: "`delete`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readRow(capacity: 1)
                }
            case .deletes:
                isSectioned = true
                sectioned.deletes = try readArray(of: "`deletes`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readPath("a delete's path")
                }
            case .inserts:
                isSectioned = true
                sectioned.inserts = try readArray(of: "`inserts`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.readSectionedInsert()
                }
            case .moves:
                isSectioned = true
                sectioned.moves = try readArray(of: "`moves`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.expectOpening("a move ([old path, new path])")
                    let old = try reader.readPath("a move's old path")
                    try reader.expectComma(in: "a move ([old path, new path])")
                    let new = try reader.readPath("a move's new path")
                    try reader.expectClosing(of: "a move ([old path, new path])")
                    return WireSectionedChangeset.Move(old: old, new: new)
                }
            default:
                isSectioned = true
                sectioned.updates = try readArray(of: "`updates`") { (reader: inout FrameReader) throws(SyncFrameError) in
                    try reader.expectOpening("an update ([old path, new path, columns])")
                    let old = try reader.readPath("an update's old path")
                    try reader.expectComma(in: "an update ([old path, new path, columns])")
                    let new = try reader.readPath("an update's new path")
                    try reader.expectComma(in: "an update ([old path, new path, columns])")
                    let columns = try reader.readColumns(of: "an update")
                    try reader.expectClosing(of: "an update ([old path, new path, columns])")
                    return WireSectionedChangeset.Update(old: old, new: new, columns: columns)
                }
            }
        }
        guard !(isKeyed && isSectioned) else {
            throw SyncFrameError(offset: start, reason: "an include's change has both a keyed set's `put` or `delete` and a sectioned "
                                 + "list's `deletes`, `inserts`, `moves` or `updates`")
        }
        return isKeyed ? .keyed(keyed) : .sectioned(sectioned)
    }

    /// `[section, item]`: a place in a sectioned list, neither below 0 (`what`: which one, for
    /// errors, such as "a move's old path").
    private mutating func readPath(_ what: String) throws(SyncFrameError) -> WirePath {
        try expectOpening("\(what) ([section, item])")
        let sectionOffset = position
        let section = try readInteger(for: "the section of \(what)")
        try expectComma(in: "\(what) ([section, item])")
        let itemOffset = position
        let item = try readInteger(for: "the item of \(what)")
        try expectClosing(of: "\(what) ([section, item])")
        guard section >= 0 else { throw SyncFrameError(offset: sectionOffset, reason: "the section of \(what) is \(section), below 0") }
        guard item >= 0 else { throw SyncFrameError(offset: itemOffset, reason: "the item of \(what) is \(item), below 0") }
        return WirePath(section: section, item: item)
    }

    /// `[section, item, row]`.
    private mutating func readSectionedInsert() throws(SyncFrameError) -> WireSectionedChangeset.Insert {
        try expectOpening("an insert ([section, item, row])")
        let sectionOffset = position
        let section = try readInteger(for: "an insert's section")
        try expectComma(in: "an insert ([section, item, row])")
        let itemOffset = position
        let item = try readInteger(for: "an insert's item")
        try expectComma(in: "an insert ([section, item, row])")
        guard byte == UInt8(ascii: "[") else { throw expected("an inserted row (an array)") }
        let row = try readRow(capacity: 0)
        try expectClosing(of: "an insert ([section, item, row])")
        guard section >= 0 else { throw SyncFrameError(offset: sectionOffset, reason: "an insert's section is \(section), below 0") }
        guard item >= 0 else { throw SyncFrameError(offset: itemOffset, reason: "an insert's item is \(item), below 0") }
        return WireSectionedChangeset.Insert(path: WirePath(section: section, item: item), row: row)
    }

    /// `{"column position": value, …}`: a put's or an update's columns (a position written
    /// twice counts the first time).
    private mutating func readColumns(of what: String) throws(SyncFrameError) -> [Int: WireValue] {
        guard byte == UInt8(ascii: "{") else { throw expected("\(what)'s columns (an object)") }
        position += 1
        var columns: [Int: WireValue] = [:]
        var first = true
        while try nextMember(&first, of: "\(what)'s columns") {
            let offset = position
            let name = try readString(for: "a column position")
            guard let column = Int(name), column >= 0 else {
                throw SyncFrameError(offset: offset, reason: "expected a column position (a decimal string), found \(quoted(name))")
            }
            try expectColon()
            if columns[column] != nil { try skipValue(depth: 9); continue }
            columns[column] = try readValue()
        }
        return columns
    }

    /// `[new index, row]`.
    private mutating func readInsert() throws(SyncFrameError) -> WireChangeset.Insert {
        try expectOpening("an insert ([index, row])")
        let index = try readInteger(for: "an insert's index")
        try expectComma(in: "an insert ([index, row])")
        guard byte == UInt8(ascii: "[") else { throw expected("an inserted row (an array)") }
        let row = try readRow(capacity: 0)
        try expectClosing(of: "an insert ([index, row])")
        return WireChangeset.Insert(index: index, row: row)
    }

    /// `[old index, new index]`.
    private mutating func readMove() throws(SyncFrameError) -> WireChangeset.Move {
        try expectOpening("a move ([old, new])")
        let old = try readInteger(for: "a move's old index")
        try expectComma(in: "a move ([old, new])")
        let new = try readInteger(for: "a move's new index")
        try expectClosing(of: "a move ([old, new])")
        return WireChangeset.Move(old: old, new: new)
    }

    /// `[old index, new index, {"column": value, …}]`.
    private mutating func readUpdate() throws(SyncFrameError) -> WireChangeset.Update {
        try expectOpening("an update ([old, new, columns])")
        let old = try readInteger(for: "an update's old index")
        try expectComma(in: "an update ([old, new, columns])")
        let new = try readInteger(for: "an update's new index")
        try expectComma(in: "an update ([old, new, columns])")
        guard byte == UInt8(ascii: "{") else { throw expected("an update's columns (an object)") }
        position += 1
        var columns: [Int: WireValue] = [:]
        var first = true
        while try nextMember(&first, of: "an update's columns") {
            let offset = position
            let name = try readString(for: "a column position")
            guard let column = Int(name), column >= 0 else {
                throw SyncFrameError(offset: offset, reason: "expected a column position (a decimal string), found \(quoted(name))")
            }
            try expectColon()
            if columns[column] != nil { try skipValue(depth: 7); continue }
            columns[column] = try readValue()
        }
        try expectClosing(of: "an update ([old, new, columns])")
        return WireChangeset.Update(old: old, new: new, columns: columns)
    }
}

// MARK: - Field names

extension FrameReader {
    /// The names of the fields of the protocol's objects (any other name is `other`).
    private enum Field: UInt8 {
        case type, lsn, snapshots, changesets, code, message, id
        case `protocol`, user, heartbeatMilliseconds, maxSubscriptions, maxMessageBytes
        case basis, columns, types, key, rows
        case deletes, inserts, moves, updates
        case client, lastMutation, results, status, constraint
        case included, counts, put, delete
        case expires
        case other

        init(name: String) {
            switch name {
            case "type": self = .type
            case "lsn": self = .lsn
            case "snapshots": self = .snapshots
            case "changesets": self = .changesets
            case "code": self = .code
            case "message": self = .message
            case "id": self = .id
            case "protocol": self = .protocol
            case "user": self = .user
            case "heartbeat_ms": self = .heartbeatMilliseconds
            case "max_subscriptions": self = .maxSubscriptions
            case "max_message_bytes": self = .maxMessageBytes
            case "basis": self = .basis
            case "columns": self = .columns
            case "types": self = .types
            case "key": self = .key
            case "rows": self = .rows
            case "deletes": self = .deletes
            case "inserts": self = .inserts
            case "moves": self = .moves
            case "updates": self = .updates
            case "client": self = .client
            case "last_mutation": self = .lastMutation
            case "results": self = .results
            case "status": self = .status
            case "constraint": self = .constraint
            case "included": self = .included
            case "counts": self = .counts
            case "put": self = .put
            case "delete": self = .delete
            case "expires": self = .expires
            default: self = .other
            }
        }

        var isChangesetList: Bool { self == .deletes || self == .inserts || self == .moves || self == .updates }
    }

    /// The fields of one object already read (a key written twice counts the first time).
    private struct Fields {
        private var bits: UInt64 = 0

        /// Adds `field`; `false` if it was there (or is `other`, which is never read).
        mutating func insert(_ field: Field) -> Bool {
            guard field != .other else { return false }
            let bit = UInt64(1) << field.rawValue
            defer { bits |= bit }
            return bits & bit == 0
        }
    }

    /// Reads a member's name and the `:` after it.
    private mutating func readFieldName() throws(SyncFrameError) -> Field {
        let name = try readString(for: "a member's name")
        try expectColon()
        return Field(name: name)
    }
}

// MARK: - JSON values

extension FrameReader {
    /// Reads a row: an array of values. `capacity`: how many values it likely holds.
    private mutating func readRow(capacity: Int) throws(SyncFrameError) -> [WireValue] {
        guard byte == UInt8(ascii: "[") else { throw expected("a row (an array of values)") }
        position += 1
        var row: [WireValue] = []
        row.reserveCapacity(capacity)
        var first = true
        while try nextElement(&first, of: "a row") {
            row.append(try readValue())
        }
        return row
    }

    /// Reads a value of a row: null, a boolean, a number or a string.
    @inline(__always)
    private mutating func readValue() throws(SyncFrameError) -> WireValue {
        switch byte {
        case UInt8(ascii: "\""):
            position += 1
            return .text(try readStringBody())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try readNumber() {
            case .integer(let integer): return .integer(integer)
            case .real(let real): return .real(real)
            }
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default:
            throw expected("a value (null, true, false, a number or a string)")
        }
    }

    /// Reads `null` if it is next, and says whether it was.
    private mutating func readNull() -> Bool {
        guard text.count - position >= 4, text[position] == UInt8(ascii: "n"), text[position + 1] == UInt8(ascii: "u"),
              text[position + 2] == UInt8(ascii: "l"), text[position + 3] == UInt8(ascii: "l") else { return false }
        position += 4
        return true
    }

    /// Reads a number that must be an integer: written as one, or as a number with a fraction or
    /// an exponent whose value is a whole number within `Int` (as `JSONDecoder` reads `Int`).
    private mutating func readInteger(for what: String) throws(SyncFrameError) -> Int {
        let start = position
        guard byte == UInt8(ascii: "-") || Self.isDigit(byte) else { throw expected("an integer for \(what)") }
        let integer: Int? = switch try readNumber() {
        case .integer(let integer): Int(exactly: integer)
        case .real(let real): Int(exactly: real)
        }
        guard let integer else {
            let number = String(decoding: UnsafeBufferPointer(rebasing: text[start..<position]), as: UTF8.self)
            throw SyncFrameError(offset: start, reason: "expected an integer for \(what), found \(number)")
        }
        return integer
    }

    /// A number as JSON text means it.
    enum Number {
        /// Written without a fraction or an exponent, and within `Int64`.
        case integer(Int64)
        /// Any other number, rounded as `Double(String)` rounds it.
        case real(Double)
    }

    /// Reads a number (RFC 8259's grammar).
    mutating func readNumber() throws(SyncFrameError) -> Number {
        let start = position
        let negative = byte == UInt8(ascii: "-")
        if negative { position += 1 }
        // The digits, up to 19 significant ones, as an integer and a power of ten.
        var significand: UInt64 = 0
        var significantDigits = 0
        var exponent = 0
        var exact = true
        guard Self.isDigit(byte) else { throw expected("a digit in a number") }
        if byte == UInt8(ascii: "0") {
            position += 1
            if Self.isDigit(byte) { throw expected("no digit after a number's leading 0") }
        } else {
            while position < text.count, Self.isDigit(text[position]) {
                if significantDigits < 19 {
                    significand = significand &* 10 &+ UInt64(text[position] &- UInt8(ascii: "0"))
                    significantDigits += 1
                } else {
                    exact = false
                }
                position += 1
            }
        }
        var isInteger = true
        if byte == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            guard Self.isDigit(byte) else { throw expected("a digit after a number's decimal point") }
            while position < text.count, Self.isDigit(text[position]) {
                let digit = text[position] &- UInt8(ascii: "0")
                if significantDigits < 19 {
                    if significand != 0 || digit != 0 {
                        significand = significand &* 10 &+ UInt64(digit)
                        significantDigits += 1
                    }
                    exponent -= 1
                } else if digit != 0 {
                    exact = false
                }
                position += 1
            }
        }
        if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            isInteger = false
            position += 1
            let negativeExponent = byte == UInt8(ascii: "-")
            if negativeExponent || byte == UInt8(ascii: "+") { position += 1 }
            guard Self.isDigit(byte) else { throw expected("a digit in a number's exponent") }
            var written = 0
            while position < text.count, Self.isDigit(text[position]) {
                written = min(written * 10 + Int(text[position] &- UInt8(ascii: "0")), 1_000_000)
                position += 1
            }
            exponent += negativeExponent ? -written : written
        }
        if isInteger && exact {
            if negative, significand <= UInt64(Int64.max) + 1 { return .integer(Int64(bitPattern: 0 &- significand)) }
            if !negative, significand <= UInt64(Int64.max) { return .integer(Int64(significand)) }
            // Beyond Int64 but exactly the integer: one rounding, as the decimal's.
            let real = Double(significand)
            return .real(negative ? -real : real)
        }
        // Both factors exact in a Double, so one correctly rounded operation (Clinger's fast path).
        if exact, significand <= 1 << 53, exponent >= -22, exponent <= 22 {
            var real = Double(significand)
            real = exponent < 0 ? real / Self.powersOfTen[-exponent] : real * Self.powersOfTen[exponent]
            return .real(negative ? -real : real)
        }
        let written = String(decoding: UnsafeBufferPointer(rebasing: text[start..<position]), as: UTF8.self)
        guard let real = Double(written) else { throw SyncFrameError(offset: start, reason: "the number \(written) cannot be read") }
        return .real(real)
    }

    /// 10⁰ through 10²², each exact in a `Double`.
    private static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    /// Reads a string that stands for `what`.
    mutating func readString(for what: String) throws(SyncFrameError) -> String {
        guard byte == UInt8(ascii: "\"") else { throw expected("a string for \(what)") }
        position += 1
        return try readStringBody()
    }

    /// Reads a string from after its opening quote to past its closing one.
    @inline(__always)
    mutating func readStringBody() throws(SyncFrameError) -> String {
        let start = position
        var bits: UInt8 = 0
        while position < text.count {
            let byte = text[position]
            if byte == UInt8(ascii: "\"") {
                let utf8 = UnsafeBufferPointer(rebasing: text[start..<position])
                position += 1
                if bits < 0x80 { return String(decoding: utf8, as: UTF8.self) }
                guard let string = String(validating: utf8, as: UTF8.self) else { throw invalidUTF8(from: start) }
                return string
            }
            if byte == UInt8(ascii: "\\") { return try readEscapedString(from: start) }
            if byte < 0x20 { throw expected("a character or an escape in a string (a control character must be escaped)", inString: true) }
            bits |= byte
            position += 1
        }
        throw expected("the end of a string (\")", inString: true)
    }

    /// Reads the rest of a string that has an escape at `position` (`start`: where its
    /// characters begin).
    private mutating func readEscapedString(from start: Int) throws(SyncFrameError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: text[start..<position]))
        try readCharacters()
        guard let string = String(validating: scratch, as: UTF8.self) else { throw invalidUTF8(from: start) }
        return string
    }

    /// Reads a string's characters from `position` to past its closing quote, appending their
    /// unescaped UTF-8 to `scratch`.
    private mutating func readCharacters() throws(SyncFrameError) {
        while position < text.count {
            let byte = text[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return
            case UInt8(ascii: "\\"):
                position += 1
                try readEscape()
            case 0..<0x20:
                throw expected("a character or an escape in a string (a control character must be escaped)", inString: true)
            default:
                scratch.append(byte)
                position += 1
            }
        }
        throw expected("the end of a string (\")", inString: true)
    }

    /// Reads an escape after its `\`, appending the character's UTF-8 to `scratch`.
    private mutating func readEscape() throws(SyncFrameError) {
        let escaped = byte
        switch escaped {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(escaped)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            let start = position - 1
            position += 1
            var code = try readHex4()
            if (0xDC00..<0xE000).contains(code) {
                guard toleratesUnpairedSurrogates else {
                    throw SyncFrameError(offset: start, reason: "expected a high surrogate before the low surrogate \\u\(hex(code))")
                }
                unpairedSurrogate = start
                code = 0xFFFD
            }
            if (0xD800..<0xDC00).contains(code) {
                guard text.count - position >= 2, text[position] == UInt8(ascii: "\\"), text[position + 1] == UInt8(ascii: "u") else {
                    guard toleratesUnpairedSurrogates else {
                        throw expected("\\u and a low surrogate after the high surrogate \\u\(hex(code))", inString: true)
                    }
                    unpairedSurrogate = start
                    scratch.append(contentsOf: Unicode.Scalar(0xFFFD as UInt32)!.utf8)
                    return
                }
                position += 2
                let low = try readHex4()
                if (0xDC00..<0xE000).contains(low) {
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    guard toleratesUnpairedSurrogates else {
                        throw SyncFrameError(offset: position - 6, reason: "expected a low surrogate after \\u\(hex(code)), found \\u\(hex(low))")
                    }
                    unpairedSurrogate = start
                    code = 0xFFFD
                }
            }
            guard let scalar = Unicode.Scalar(code) else { preconditionFailure("a \\u escape outside the surrogates is a scalar") }
            scratch.append(contentsOf: scalar.utf8)
            return
        default:
            throw expected("an escape (\\\", \\\\, \\/, \\b, \\f, \\n, \\r, \\t or \\u and four hexadecimal digits)", inString: true)
        }
        position += 1
    }

    /// Reads the four hexadecimal digits of a `\u` escape.
    private mutating func readHex4() throws(SyncFrameError) -> UInt32 {
        var code: UInt32 = 0
        for _ in 0..<4 {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw expected("a hexadecimal digit in a \\u escape", inString: true)
            }
            code = code << 4 | UInt32(digit)
            position += 1
        }
        return code
    }

    /// Skips a JSON value of any kind (one nested `depth` arrays and objects deep), checking it.
    private mutating func skipValue(depth: Int) throws(SyncFrameError) {
        switch byte {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth <= Self.maximumDepth else {
                throw SyncFrameError(offset: position, reason: "arrays and objects nest deeper than \(Self.maximumDepth)")
            }
            let isObject = byte == UInt8(ascii: "{")
            position += 1
            var first = true
            if isObject {
                while try nextMember(&first, of: "an object") {
                    try skipString()
                    try expectColon()
                    try skipValue(depth: depth + 1)
                }
            } else {
                while try nextElement(&first, of: "an array") {
                    try skipValue(depth: depth + 1)
                }
            }
        case UInt8(ascii: "\""):
            try skipString()
        default:
            _ = try readValue()
        }
    }

    /// Skips a string, checking its escapes and its UTF-8.
    private mutating func skipString() throws(SyncFrameError) {
        guard byte == UInt8(ascii: "\"") else { throw expected("a string") }
        position += 1
        let start = position
        var bits: UInt8 = 0
        while position < text.count {
            let byte = text[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                if bits >= 0x80, String(validating: UnsafeBufferPointer(rebasing: text[start..<position - 1]), as: UTF8.self) == nil {
                    throw invalidUTF8(from: start)
                }
                return
            }
            if byte == UInt8(ascii: "\\") {
                _ = try readEscapedString(from: start)
                return
            }
            if byte < 0x20 { throw expected("a character or an escape in a string (a control character must be escaped)", inString: true) }
            bits |= byte
            position += 1
        }
        throw expected("the end of a string (\")", inString: true)
    }
}

// MARK: - Arrays, objects and punctuation

extension FrameReader {
    /// Reads an array whose elements `readElement` reads.
    private mutating func readArray<Element>(of what: String, _ readElement: (inout FrameReader) throws(SyncFrameError) -> Element)
        throws(SyncFrameError) -> [Element] {
        guard byte == UInt8(ascii: "[") else { throw expected("an array for \(what)") }
        position += 1
        var elements: [Element] = []
        var first = true
        while try nextElement(&first, of: what) {
            elements.append(try readElement(&self))
        }
        return elements
    }

    /// Reads an object whose members' values `readValue` reads, by their names (a name written
    /// twice counts the first time). `depth`: the object's.
    private mutating func readObject<Value>(of what: String, depth: Int, _ readValue: (inout FrameReader) throws(SyncFrameError) -> Value)
        throws(SyncFrameError) -> [String: Value] {
        guard byte == UInt8(ascii: "{") else { throw expected("an object for \(what)") }
        position += 1
        var members: [String: Value] = [:]
        var first = true
        while try nextMember(&first, of: what) {
            let name = try readString(for: "a member's name")
            try expectColon()
            if members[name] != nil { try skipValue(depth: depth + 1); continue }
            members[name] = try readValue(&self)
        }
        return members
    }

    /// Moves to an object's next member, if it has one: past the `,` before it (not before the
    /// first), to its name. At the object's `}`, moves past it and returns `false`.
    @inline(__always)
    private mutating func nextMember(_ first: inout Bool, of object: String) throws(SyncFrameError) -> Bool {
        skipWhitespace()
        if first {
            first = false
            if byte == UInt8(ascii: "}") { position += 1; return false }
        } else {
            switch byte {
            case UInt8(ascii: ","):
                position += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                position += 1
                return false
            default:
                throw expected("',' or '}' after a member of \(object)")
            }
        }
        guard byte == UInt8(ascii: "\"") else { throw expected("a member's name (a string) in \(object)") }
        return true
    }

    /// Moves to an array's next element, if it has one: past the `,` before it (not before the
    /// first). At the array's `]`, moves past it and returns `false`.
    @inline(__always)
    private mutating func nextElement(_ first: inout Bool, of array: String) throws(SyncFrameError) -> Bool {
        skipWhitespace()
        if first {
            first = false
            if byte == UInt8(ascii: "]") { position += 1; return false }
            return true
        }
        switch byte {
        case UInt8(ascii: ","):
            position += 1
            skipWhitespace()
            return true
        case UInt8(ascii: "]"):
            position += 1
            return false
        default:
            throw expected("',' or ']' after an element of \(array)")
        }
    }

    /// Moves past the `[` of a fixed-length array (an insert, a move, an update).
    private mutating func expectOpening(_ what: String) throws(SyncFrameError) {
        guard byte == UInt8(ascii: "[") else { throw expected("\(what)") }
        position += 1
        skipWhitespace()
    }

    /// Moves past the `,` between two elements of a fixed-length array.
    private mutating func expectComma(in what: String) throws(SyncFrameError) {
        skipWhitespace()
        guard byte == UInt8(ascii: ",") else { throw expected("',' in \(what)") }
        position += 1
        skipWhitespace()
    }

    /// Moves past the `]` of a fixed-length array.
    private mutating func expectClosing(of what: String) throws(SyncFrameError) {
        skipWhitespace()
        guard byte == UInt8(ascii: "]") else { throw expected("']' closing \(what)") }
        position += 1
    }

    /// Moves past the `:` after a member's name.
    mutating func expectColon() throws(SyncFrameError) {
        skipWhitespace()
        guard byte == UInt8(ascii: ":") else { throw expected("':' after a member's name") }
        position += 1
        skipWhitespace()
    }

    /// Moves past `literal` (`true`, `false`, `null`).
    mutating func expectLiteral(_ literal: StaticString) throws(SyncFrameError) {
        let count = literal.utf8CodeUnitCount
        guard text.count - position >= count,
              UnsafeBufferPointer(start: literal.utf8Start, count: count).elementsEqual(text[position..<position + count]) else {
            throw expected("\(literal)")
        }
        position += count
    }

    /// Checks that only whitespace follows the message.
    mutating func expectEnd() throws(SyncFrameError) {
        skipWhitespace()
        guard position == text.count else { throw expected("the end of the frame") }
    }

    /// Moves past JSON's whitespace (space, tab, line feed, carriage return).
    @inline(__always)
    mutating func skipWhitespace() {
        while position < text.count {
            switch text[position] {
            case UInt8(ascii: " "), 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    /// Moves past a UTF-8 byte order mark at the start (which JSON readers may ignore).
    mutating func skipByteOrderMark() {
        if text.count >= 3, text[0] == 0xEF, text[1] == 0xBB, text[2] == 0xBF { position = 3 }
    }

    /// The byte at `position`, or 0 at the end (where any byte read is refused, as 0 is).
    @inline(__always)
    var byte: UInt8 { position < text.count ? text[position] : 0 }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }
}

// MARK: - Errors

extension FrameReader {
    /// The error for something other than `what` at `position` (`inString`: inside a string,
    /// where a quote ends it rather than starting one).
    func expected(_ what: String, inString: Bool = false) -> SyncFrameError {
        SyncFrameError(offset: position, reason: "expected \(what), found \(found(inString: inString))")
    }

    /// The error for a string, starting at `start`, that is not UTF-8.
    private func invalidUTF8(from start: Int) -> SyncFrameError {
        SyncFrameError(offset: start, reason: "expected UTF-8 in a string, found bytes that are not")
    }

    /// What stands at `position`, for errors.
    private func found(inString: Bool) -> String {
        guard position < text.count else { return "the end of the frame" }
        let byte = text[position]
        switch byte {
        case UInt8(ascii: "\"") where !inString: return "a string"
        case UInt8(ascii: "{"): return "an object"
        case UInt8(ascii: "["): return "an array"
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return "a number"
        case 0x21...0x7E: return "'\(Character(Unicode.Scalar(byte)))'"
        default: return "byte 0x\(hex(UInt32(byte), digits: 2))"
        }
    }

    /// `code` in upper-case hexadecimal, `digits` long.
    private func hex(_ code: UInt32, digits: Int = 4) -> String {
        let text = String(code, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    /// `string` in quotes, its quotes and backslashes escaped, for errors.
    private func quoted(_ string: String) -> String {
        var json = JSONBytes()
        json.string(string)
        return String(decoding: json.bytes, as: UTF8.self)
    }
}
