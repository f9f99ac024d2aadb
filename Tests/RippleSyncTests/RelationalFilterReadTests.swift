import Foundation
@testable import RippleSync
import Testing

/// The filters over other tables (`in` a sub-query, `exists`): read from a client's frame as
/// `JSONDecoder` reads them, written back by `JSONEncoder` to the same meaning, and refused with
/// `invalid_query` naming the subscription when malformed.
@Suite struct RelationalFilterReadTests {
    static let membership = FilterDescription.column("project_id", in: "members", selecting: "project_id",
                                                     where: .compare(column: "user_id", op: .equal, value: .text("alice")))
    static let flagged = FilterDescription.exists("comments", on: ["id": "todo_id", "list_id": "list_id"],
                                                  where: .and([.compare(column: "flagged", op: .equal, value: .bool(true)), membership]))

    static func subscribe(_ filter: String) -> String {
        #"{"type":"subscribe","id":"s","query":{"table":"todos","filter":"# + filter + "}}"
    }

    @Test(arguments: [
        (#"{"column":"project_id","op":"in","query":{"table":"members","columns":["project_id"],"filter":{"column":"user_id","op":"=","value":"alice"}}}"#,
         membership),
        (#"{"exists":{"table":"comments","on":{"list_id":"list_id","id":"todo_id"},"filter":{"and":[{"column":"flagged","op":"=","value":true},"#
            + #"{"column":"project_id","op":"in","query":{"table":"members","columns":["project_id"],"filter":{"column":"user_id","op":"=","value":"alice"}}}]}}}"#,
         flagged),
        (#"{"not":{"column":"project_id","op":"in","query":{"table":"members","columns":["project_id"]}}}"#,
         .not(.column("project_id", in: "members", selecting: "project_id"))),
        (#"{"exists":{"table":"comments","on":{"id":"todo_id"}}}"#, .exists("comments", on: ["id": "todo_id"])),
        // A name given twice: the first counts, as everywhere in a message (and in JSONDecoder).
        (#"{"exists":{"table":"comments","on":{"id":"todo_id","id":"other"}}}"#, .exists("comments", on: ["id": "todo_id"])),
    ] as [(String, FilterDescription)])
    func theFormsReadAsTheirMeaningBothWays(json: String, filter: FilterDescription) throws {
        let expected = ClientMessage.subscribe(id: "s", query: QueryDescription(table: "todos", filter: filter), resume: nil)
        let frame = Self.subscribe(json)
        let read = try ClientMessage.read(json: Array(frame.utf8))
        #expect(read == expected)
        #expect(try JSONDecoder().decode(ClientMessage.self, from: Data(frame.utf8)) == expected)
        let written = try JSONEncoder().encode(expected)
        #expect(try ClientMessage.read(json: Array(written)) == expected, "as JSONEncoder writes it: \(String(decoding: written, as: UTF8.self))")
        #expect(try JSONDecoder().decode(ClientMessage.self, from: written) == expected)
    }

    @Test(arguments: [
        #"{"column":"p","op":"in","query":{"table":"members","columns":["a","b"]}}"#,
        #"{"column":"p","op":"in","query":{"table":"members","columns":[]}}"#,
        #"{"column":"p","op":"in","query":{"table":"members","columns":"a"}}"#,
        #"{"column":"p","op":"in","query":{"columns":["a"]}}"#,
        #"{"column":"p","op":"in","query":{"table":"members","columns":["a"],"filter":{"column":"x","op":"~","value":1}}}"#,
        #"{"column":"p","op":"in","query":5}"#,
        #"{"exists":{"table":"comments","on":{}}}"#,
        #"{"exists":{"table":"comments","on":["id","todo_id"]}}"#,
        #"{"exists":{"table":"comments","on":{"id":5}}}"#,
        #"{"exists":{"on":{"id":"todo_id"}}}"#,
        #"{"exists":"comments"}"#,
    ])
    func malformedOnesAreRefusedNamingTheSubscription(json: String) {
        let frame = Self.subscribe(json)
        do {
            let message = try ClientMessage.read(json: Array(frame.utf8))
            Issue.record("\(json) read as \(message)")
        } catch {
            #expect(error.code == .invalidQuery && error.id == "s", "\(json): \(error)")
        }
        #expect(throws: (any Error).self, "JSONDecoder refuses \(json) too") {
            try JSONDecoder().decode(ClientMessage.self, from: Data(frame.utf8))
        }
    }

    @Test func relatedTablesListsEveryTableOnceInOrder() {
        #expect(Self.flagged.relatedTables == ["comments", "members"])
        #expect(FilterDescription.and([Self.membership, .not(Self.flagged)]).relatedTables == ["members", "comments"])
        #expect(FilterDescription.compare(column: "a", op: .equal, value: .integer(1)).relatedTables.isEmpty)
    }

    @Test func filteredByAndsTheFilterIn() {
        let plain = QueryDescription(table: "todos")
        #expect(plain.filtered(by: Self.membership).filter == Self.membership)
        let open = QueryDescription(table: "todos", filter: .compare(column: "done", op: .equal, value: .bool(false)))
        #expect(open.filtered(by: Self.membership).filter == .and([.compare(column: "done", op: .equal, value: .bool(false)), Self.membership]))
    }
}
