#if Sync
import Foundation

/// One message of PostgreSQL's built-in logical decoding output plugin, `pgoutput`, protocol
/// version 1, as `pg_logical_slot_peek_binary_changes` returns it (one message per row of its
/// result). The format is PostgreSQL's "Logical Replication Message Formats": integers are
/// big-endian, strings end with a NUL, column values come in their text form.
///
/// ```swift
/// let message = try PGOutput.Message(bytes)   // the `data` column of one row of a peek
/// if case .commit(let commit) = message { print(commit.endLSN) }
/// ```
public enum PGOutput {
    /// A log sequence number: a position in Postgres's write-ahead log.
    public struct LSN: Hashable, Comparable, Sendable, CustomStringConvertible {
        public var value: UInt64

        public init(_ value: UInt64) { self.value = value }

        /// An LSN in Postgres's text form, `16/B374D848` (two hexadecimal halves); `nil` when
        /// the text is not one.
        public init?(_ text: String) {
            let halves = text.split(separator: "/", omittingEmptySubsequences: false)
            guard halves.count == 2, let high = UInt32(halves[0], radix: 16), let low = UInt32(halves[1], radix: 16) else {
                return nil
            }
            value = UInt64(high) << 32 | UInt64(low)
        }

        /// Postgres's text form.
        public var description: String {
            String(value >> 32, radix: 16, uppercase: true) + "/" + String(value & 0xFFFF_FFFF, radix: 16, uppercase: true)
        }

        public static func < (lhs: LSN, rhs: LSN) -> Bool { lhs.value < rhs.value }
    }

    /// A transaction begins: everything until its ``Commit`` belongs to it.
    public struct Begin: Equatable, Sendable {
        /// The LSN of its commit record.
        public var finalLSN: LSN
        /// When it committed, in microseconds since 2000-01-01 (Postgres's epoch).
        public var commitTime: Int64
        public var xid: UInt32
    }

    /// A transaction ends.
    public struct Commit: Equatable, Sendable {
        public var flags: UInt8
        /// The LSN of the commit record.
        public var commitLSN: LSN
        /// The LSN just past it: where a slot is advanced to once the transaction is applied
        /// (advancing to `commitLSN` would deliver it again).
        public var endLSN: LSN
        public var commitTime: Int64
    }

    /// One column of a ``Relation``.
    public struct Column: Equatable, Sendable {
        /// Part of the key that identifies rows in updates and deletes (the replica identity).
        public var isKey: Bool
        public var name: String
        /// The type's OID (see ``PostgresTypes``).
        public var typeOID: UInt32
        /// The type modifier (`numeric(10,2)`'s precision and scale, `varchar(n)`'s length), -1 when none.
        public var typeModifier: Int32
    }

    /// A table's description, sent before its first row change in a session and again after its
    /// schema changed: the rows that follow are in this column order.
    public struct Relation: Equatable, Sendable {
        public var oid: UInt32
        public var namespace: String
        public var name: String
        /// `d` default (the primary key), `n` nothing, `f` full row, `i` an index.
        public var replicaIdentity: UInt8
        public var columns: [Column]
    }

    /// One column's value in a row.
    public enum Value: Equatable, Sendable {
        case null
        /// A TOASTed value the change left as it was: it is not sent; keep the one you have.
        case unchanged
        /// The value in its type's text form (`1.50`, `NaN`, `2026-11-27 06:32:03+00`…).
        case text(String)
        /// The value in its type's binary form (only when asked for; not with protocol 1).
        case binary([UInt8])
    }

    public struct Insert: Equatable, Sendable {
        public var relation: UInt32
        public var new: [Value]
    }

    public struct Update: Equatable, Sendable {
        public var relation: UInt32
        /// The old key (when the key changed) or the old row (with `REPLICA IDENTITY FULL`).
        public var old: [Value]?
        /// Whether `old` is the whole old row rather than its key columns.
        public var oldIsWholeRow: Bool
        public var new: [Value]
    }

    public struct Delete: Equatable, Sendable {
        public var relation: UInt32
        /// The key columns (the others NULL), or the whole row with `REPLICA IDENTITY FULL`.
        public var old: [Value]
        public var oldIsWholeRow: Bool
    }

    public struct Truncate: Equatable, Sendable {
        /// 1: `CASCADE`, 2: `RESTART IDENTITY`.
        public var options: UInt8
        public var relations: [UInt32]
    }

    /// A message emitted with `pg_logical_emit_message` (the DDL event triggers' channel).
    public struct LogicalMessage: Equatable, Sendable {
        /// Emitted inside the transaction (delivered at its commit) rather than at once.
        public var isTransactional: Bool
        public var lsn: LSN
        public var prefix: String
        public var content: [UInt8]
    }

    public enum Message: Equatable, Sendable {
        case begin(Begin)
        case commit(Commit)
        case relation(Relation)
        case insert(Insert)
        case update(Update)
        case delete(Delete)
        case truncate(Truncate)
        case message(LogicalMessage)
        /// A message this decoder does not act on (`Y` type, `O` origin), by its tag.
        case other(UInt8)

        /// Decodes one message.
        ///
        /// - Throws: ``PGOutputError`` naming what is malformed.
        public init(_ bytes: [UInt8]) throws {
            var reader = Reader(bytes)
            let tag = try reader.byte()
            switch tag {
            case UInt8(ascii: "B"):
                self = .begin(Begin(finalLSN: LSN(try reader.uint64()), commitTime: try reader.int64(), xid: try reader.uint32()))
            case UInt8(ascii: "C"):
                self = .commit(Commit(flags: try reader.byte(), commitLSN: LSN(try reader.uint64()), endLSN: LSN(try reader.uint64()),
                                      commitTime: try reader.int64()))
            case UInt8(ascii: "R"):
                let oid = try reader.uint32()
                let namespace = try reader.string()
                let name = try reader.string()
                let identity = try reader.byte()
                let count = try reader.int16()
                var columns: [Column] = []
                for _ in 0..<max(0, Int(count)) {
                    let flags = try reader.byte()
                    columns.append(Column(isKey: flags & 1 == 1, name: try reader.string(), typeOID: try reader.uint32(),
                                          typeModifier: try reader.int32()))
                }
                self = .relation(Relation(oid: oid, namespace: namespace, name: name, replicaIdentity: identity, columns: columns))
            case UInt8(ascii: "I"):
                let relation = try reader.uint32()
                try reader.expect(UInt8(ascii: "N"), "an insert's new tuple")
                self = .insert(Insert(relation: relation, new: try reader.tuple()))
            case UInt8(ascii: "U"):
                let relation = try reader.uint32()
                var old: [Value]?
                var whole = false
                var kind = try reader.byte()
                if kind == UInt8(ascii: "K") || kind == UInt8(ascii: "O") {
                    whole = kind == UInt8(ascii: "O")
                    old = try reader.tuple()
                    kind = try reader.byte()
                }
                guard kind == UInt8(ascii: "N") else { throw PGOutputError("an update's new tuple is missing (found \(kind))") }
                self = .update(Update(relation: relation, old: old, oldIsWholeRow: whole, new: try reader.tuple()))
            case UInt8(ascii: "D"):
                let relation = try reader.uint32()
                let kind = try reader.byte()
                guard kind == UInt8(ascii: "K") || kind == UInt8(ascii: "O") else {
                    throw PGOutputError("a delete's old tuple is missing (found \(kind))")
                }
                self = .delete(Delete(relation: relation, old: try reader.tuple(), oldIsWholeRow: kind == UInt8(ascii: "O")))
            case UInt8(ascii: "T"):
                let count = try reader.int32()
                let options = try reader.byte()
                var relations: [UInt32] = []
                for _ in 0..<max(0, Int(count)) { relations.append(try reader.uint32()) }
                self = .truncate(Truncate(options: options, relations: relations))
            case UInt8(ascii: "M"):
                let flags = try reader.byte()
                let lsn = LSN(try reader.uint64())
                let prefix = try reader.string()
                let length = try reader.int32()
                self = .message(LogicalMessage(isTransactional: flags & 1 == 1, lsn: lsn, prefix: prefix,
                                               content: try reader.bytes(Int(length))))
            default:
                self = .other(tag)
            }
        }
    }

    /// Reads a message's fields in order.
    struct Reader {
        private let bytes: [UInt8]
        private var offset = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func byte() throws -> UInt8 {
            guard offset < bytes.count else { throw PGOutputError("the message ends early (at byte \(offset))") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func expect(_ value: UInt8, _ what: String) throws {
            let found = try byte()
            guard found == value else { throw PGOutputError("\(what) is missing (found \(found))") }
        }

        mutating func bytes(_ count: Int) throws -> [UInt8] {
            guard count >= 0, offset + count <= bytes.count else {
                throw PGOutputError("a field of \(count) bytes runs past the message's end (at byte \(offset))")
            }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }

        mutating func uint64() throws -> UInt64 {
            try bytes(8).reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func int64() throws -> Int64 { Int64(bitPattern: try uint64()) }

        mutating func uint32() throws -> UInt32 {
            try bytes(4).reduce(0) { $0 << 8 | UInt32($1) }
        }

        mutating func int32() throws -> Int32 { Int32(bitPattern: try uint32()) }

        mutating func int16() throws -> Int16 {
            let pair = try bytes(2)
            return Int16(bitPattern: UInt16(pair[0]) << 8 | UInt16(pair[1]))
        }

        /// A NUL-terminated string (UTF-8: the cluster's encoding, which the feed checks).
        mutating func string() throws -> String {
            guard let end = bytes[offset...].firstIndex(of: 0) else {
                throw PGOutputError("a string runs past the message's end (at byte \(offset))")
            }
            defer { offset = end + 1 }
            return String(decoding: bytes[offset..<end], as: UTF8.self)
        }

        /// TupleData: a count, then per column `n` (NULL), `u` (unchanged TOAST), `t` (text) or
        /// `b` (binary) with a length and the bytes.
        mutating func tuple() throws -> [Value] {
            let count = try int16()
            var values: [Value] = []
            values.reserveCapacity(max(0, Int(count)))
            for _ in 0..<max(0, Int(count)) {
                switch try byte() {
                case UInt8(ascii: "n"): values.append(.null)
                case UInt8(ascii: "u"): values.append(.unchanged)
                case UInt8(ascii: "t"): values.append(.text(String(decoding: try bytes(Int(try int32())), as: UTF8.self)))
                case UInt8(ascii: "b"): values.append(.binary(try bytes(Int(try int32()))))
                case let kind: throw PGOutputError("unknown column kind \(kind) in a tuple")
                }
            }
            return values
        }
    }
}

/// A pgoutput message that could not be decoded, and where.
public struct PGOutputError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = "malformed pgoutput message: " + description }
}
#endif
