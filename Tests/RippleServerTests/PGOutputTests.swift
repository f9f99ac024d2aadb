#if Sync
import Foundation
import RippleServer
import RippleSyncTesting
import RippleTesting
import Testing

/// The pgoutput decoder: messages as a real PostgreSQL 15 writes them (peeked through SQL from a
/// throwaway cluster), and malformed input refused with a message that says where.
@Suite struct PGOutputTests {
    @Test func lsnsReadAndPrintAsPostgresWritesThem() {
        #expect(PGOutput.LSN("16/B374D848")?.value == 0x16_B374_D848)
        #expect(PGOutput.LSN(0x16_B374_D848).description == "16/B374D848")
        #expect(PGOutput.LSN("0/0")?.value == 0)
        #expect(PGOutput.LSN("16B374D848") == nil && PGOutput.LSN("x/1") == nil && PGOutput.LSN("1/") == nil)
        #expect(PGOutput.LSN("1/0")! > PGOutput.LSN("0/FFFFFFFF")!)
    }

    @Test(arguments: [
        ([], "ends early"),
        ([UInt8(ascii: "B"), 0, 0], "runs past"),
        ([UInt8(ascii: "I"), 0, 0, 0, 1, UInt8(ascii: "X")], "new tuple is missing"),
        ([UInt8(ascii: "I"), 0, 0, 0, 1, UInt8(ascii: "N"), 0, 1, UInt8(ascii: "t"), 0, 0, 0, 9, 65], "runs past"),
        ([UInt8(ascii: "I"), 0, 0, 0, 1, UInt8(ascii: "N"), 0, 1, UInt8(ascii: "z")], "unknown column kind"),
        ([UInt8(ascii: "R"), 0, 0, 0, 1, 65, 66], "string runs past"),
    ] as [([UInt8], String)])
    func malformedMessagesAreRefusedSayingWhere(bytes: [UInt8], expected: String) {
        let error = #expect(throws: PGOutputError.self) { try PGOutput.Message(bytes) }
        #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
    }

    @Test func unknownTagsArePassedOver() throws {
        #expect(try PGOutput.Message([UInt8(ascii: "Y"), 1, 2]) == .other(UInt8(ascii: "Y")))
    }
}

/// Against a real cluster: what Postgres sends is decoded exactly.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: pgoutput tests against it skipped"), .timeLimit(.minutes(15)))
struct PGOutputAgainstPostgresTests {
    /// The messages of the slot since it was made, decoded (peeked: the slot does not move).
    func peek(_ postgres: ThrowawayPostgres) async throws -> [PGOutput.Message] {
        let rows = try await postgres.psql("""
            SELECT encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('feed', NULL, NULL,
                'proto_version', '1', 'publication_names', 'synced', 'messages', 'true')
            """)
        return try rows.split(separator: "\n").map { try PGOutput.Message(hexBytes(String($0))) }
    }

    func hexBytes(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    @Test func aTransactionArrivesWholeWithExactValues() async throws {
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        try await postgres.psql("""
            CREATE TABLE items(id bigint PRIMARY KEY, price numeric(10,2), ratio float8, title text, big text, note varchar(20));
            CREATE PUBLICATION synced FOR TABLE items;
            """)
        // A slot cannot be made in a transaction that wrote: a statement of its own.
        try await postgres.psql("SELECT pg_create_logical_replication_slot('feed', 'pgoutput')")
        try await postgres.psql("""
            BEGIN;
            INSERT INTO items VALUES (9007199254740993, 1.50, 'NaN', 'a',
                (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3000) AS g), NULL);
            INSERT INTO items VALUES (2, NULL, '-Infinity', 'b', 'small', 'n');
            UPDATE items SET title = 'c' WHERE id = 9007199254740993;
            UPDATE items SET id = 3 WHERE id = 2;
            DELETE FROM items WHERE id = 3;
            SELECT pg_logical_emit_message(true, 'ripple_ddl', 'hello');
            COMMIT;
            """)
        try await postgres.psql("TRUNCATE items")
        let messages = try await peek(postgres)
        // The transaction (begin, relation, 5 changes, message, commit), then the TRUNCATE's
        // (begin, relation, truncate, commit).
        guard messages.count == 13 else {
            Issue.record("\(messages.count) messages: \(messages)")
            return
        }
        guard case .begin(let begin) = messages[0], case .commit(let commit) = messages[8] else {
            Issue.record("not a transaction: \(messages)")
            return
        }
        #expect(begin.finalLSN == commit.commitLSN && commit.endLSN > commit.commitLSN)
        guard case .relation(let relation) = messages[1] else { Issue.record("\(messages[1])"); return }
        #expect(relation.name == "items" && relation.namespace == "public")
        #expect(relation.columns.map(\.name) == ["id", "price", "ratio", "title", "big", "note"])
        #expect(relation.columns.map(\.isKey) == [true, false, false, false, false, false])
        #expect(relation.columns.map(\.typeOID) == [20, 1700, 701, 25, 25, 1043])
        guard case .insert(let first) = messages[2], case .insert(let second) = messages[3] else { Issue.record("\(messages)"); return }
        #expect(first.relation == relation.oid)
        #expect(first.new[0...3] == [.text("9007199254740993"), .text("1.50"), .text("NaN"), .text("a")])
        // A value too large to keep in the row (stored out of line, TOASTed), sent whole here.
        let big = try await postgres.psql("SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3000) AS g")
        #expect(first.new[4] == .text(big.trimmingCharacters(in: .newlines)) && first.new[5] == .null)
        #expect(second.new[2] == .text("-Infinity"))
        // The big value was not changed: sent as unchanged (TOASTed), to be kept as it was.
        guard case .update(let title) = messages[4] else { Issue.record("\(messages[4])"); return }
        #expect(title.old == nil && title.new[3] == .text("c") && title.new[4] == .unchanged)
        guard case .update(let key) = messages[5] else { Issue.record("\(messages[5])"); return }
        #expect(key.old?[0] == .text("2") && key.oldIsWholeRow == false && key.new[0] == .text("3"))
        guard case .delete(let delete) = messages[6] else { Issue.record("\(messages[6])"); return }
        #expect(delete.old[0] == .text("3") && delete.old[1...].allSatisfy { $0 == .null })
        guard case .message(let message) = messages[7] else { Issue.record("\(messages[7])"); return }
        #expect(message.isTransactional && message.prefix == "ripple_ddl" && message.content == Array("hello".utf8))
        guard case .truncate(let truncate) = messages[11] else { Issue.record("\(messages[11])"); return }
        #expect(truncate.relations == [relation.oid])
    }
}
#endif
