import Foundation
@testable import Ripple
import RippleTesting
import Testing

/// Issue 12, defect 1: a collection's table says what its record type says (declared types,
/// `NOT NULL` for non-optional properties, `STRICT`), and `collection(_:of:)` compares an existing
/// table with the type: additive changes are applied, anything else is a typed error naming the
/// property, the column, what differs and the migration that fixes it.
@Suite struct TypedTableTests {
    let directory: TemporaryDirectory
    let store: Store

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(path: directory.path("typed.sqlite"))
    }

    struct V1: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
        var rank: Int
        var due: Date?
    }

    func seed() throws {
        try store.collection("todos", of: V1.self).insert(contentsOf: [
            V1(id: 1, title: "one", rank: 1, due: nil), V1(id: 2, title: "two", rank: 2, due: Date(timeIntervalSince1970: 5)),
        ])
    }

    func tableSQL() throws -> String {
        try store.read { db in try db.fetchValue("SELECT sql FROM sqlite_schema WHERE name = 'todos'", as: String.self) } ?? ""
    }

    @Test func aNewTableDeclaresTypesNotNullAndStrict() throws {
        try seed()
        let sql = try tableSQL()
        #expect(sql.hasSuffix("STRICT"), "\(sql)")
        #expect(sql.contains("\"title\" TEXT NOT NULL") && sql.contains("\"rank\" INTEGER NOT NULL"), "\(sql)")
        #expect(sql.contains("\"due\" ANY") && !sql.contains("\"due\" ANY NOT NULL"), "\(sql)")
    }

    /// Any writer, not only the collection: SQLite itself refuses a value of the wrong type or a NULL.
    @Test func badValuesAreRefusedAtWriteTimeFromAnyWriter() throws {
        try seed()
        let todos = try store.collection("todos", of: V1.self)
        let live = ListViewSubscriber<V1>()
        let subscription = live.subscribe(to: try todos.order(by: Column("id")).live())
        defer { subscription.cancel() }
        #expect(throws: DatabaseError.self) { try store.write { db in try db.execute("UPDATE todos SET rank = 'high' WHERE id = 1") } }
        #expect(throws: DatabaseError.self) { try store.write { db in try db.execute("UPDATE todos SET title = NULL WHERE id = 1") } }
        // The sqlite3 shell, another program: refused by the table.
        let message = try SQLiteShell.run("UPDATE todos SET title = NULL WHERE id = 2", on: store.path!).errors
        #expect(message.contains("NOT NULL constraint failed"), "\(message)")
        try store.noticeExternalWrites()
        #expect(live.error == nil)
        #expect(try todos.order(by: Column("id")).fetchAll().map(\.title) == ["one", "two"])
    }

    struct RankIsText: Codable, Sendable, Identifiable {
        var id: Int
        var title: String
        var rank: String
        var due: Date?
    }

    /// Inserts succeeded and wrote text into the INTEGER column; the old type then failed to decode.
    @Test func aPropertyWhoseTypeChangedIsATypedError() throws {
        try seed()
        let error = #expect(throws: StoreError.self) { try store.collection("todos", of: RankIsText.self) }
        #expect(error?.kind == .schemaMismatch)
        let message = error?.message ?? ""
        for part in ["\"rank\"", "RankIsText", "TEXT", "INTEGER", "ALTER TABLE \"todos\""] {
            #expect(message.contains(part), "\(part) in \(message)")
        }
        // The migration the message gives converts the column, and then the type opens.
        let sql = try #require(message.split(separator: "\n").first { $0.contains("RENAME COLUMN") }).trimmingCharacters(in: .whitespaces)
        var migrator = try Migrator(domain: "app")
        try migrator.register(name: "0001_rank_as_text", sql: sql)
        try store.migrate(migrator)
        #expect(try store.collection("todos", of: RankIsText.self).fetchAll().map(\.rank).sorted() == ["1", "2"])
        #expect(throws: DatabaseError.self) { try store.write { db in try db.execute("UPDATE todos SET rank = NULL") } }
    }

    struct NoRank: Codable, Sendable, Identifiable {
        var id: Int
        var title: String
        var due: Date?
    }

    /// Inserts wrote NULL into the column of the removed property.
    @Test func aRemovedPropertyIsATypedError() throws {
        try seed()
        let error = #expect(throws: StoreError.self) { try store.collection("todos", of: NoRank.self) }
        #expect(error?.kind == .schemaMismatch)
        #expect(error?.message.contains("\"rank\"") == true && error?.message.contains("DROP COLUMN") == true,
                "\(String(describing: error))")
    }

    struct WithNote: Codable, Sendable, Identifiable, Equatable {
        var id: Int
        var title: String
        var rank: Int
        var due: Date?
        var note: String?
    }

    /// A new optional property: applied for the user as a logged, versioned schema change.
    @Test func aNewOptionalPropertyIsAddedAsAVersionedSchemaChange() throws {
        try seed()
        let before = try store.currentVersion()
        let todos = try store.collection("todos", of: WithNote.self)
        #expect(try store.currentVersion() == before + 1)
        #expect(try store.changes(after: before).map(\.table) == ["*"])
        #expect(try todos.fetch(id: 1) == WithNote(id: 1, title: "one", rank: 1, due: nil, note: nil))
        try todos.update(WithNote(id: 1, title: "one", rank: 1, due: nil, note: "hello"))
        #expect(try todos.fetch(id: 1)?.note == "hello")
        // The old type still reads the table, and writing with it keeps the note.
        let old = try store.collection("todos", of: V1.self)
        try old.update(V1(id: 1, title: "uno", rank: 1, due: nil))
        #expect(try todos.fetch(id: 1) == WithNote(id: 1, title: "uno", rank: 1, due: nil, note: "hello"))
        #expect(try tableSQL().contains("\"note\" TEXT"))
    }

    struct WithPriority: Codable, Sendable, Identifiable {
        var id: Int
        var title: String
        var rank: Int
        var due: Date?
        var priority: Int
    }

    /// A new required property: existing rows have no value for it. The error says what to do.
    @Test func aNewRequiredPropertyIsATypedErrorThatSaysWhatToDo() throws {
        try seed()
        let error = #expect(throws: StoreError.self) { try store.collection("todos", of: WithPriority.self) }
        #expect(error?.kind == .schemaMismatch)
        let message = error?.message ?? ""
        for part in ["\"priority\"", "Int?", "ALTER TABLE \"todos\" ADD COLUMN \"priority\" INTEGER NOT NULL DEFAULT"] {
            #expect(message.contains(part), "\(part) in \(message)")
        }
        // The migration the message gives works, and then the type opens.
        let sql = try #require(message.split(separator: "\n").first { $0.contains("ADD COLUMN") }).trimmingCharacters(in: .whitespaces)
        try store.write { db in try db.executeScript(sql) }
        #expect(try store.collection("todos", of: WithPriority.self).fetchAll().map(\.priority) == [0, 0])
    }

    struct DueRequired: Codable, Sendable, Identifiable {
        var id: Int
        var title: String
        var rank: Int
        var due: Date
    }

    struct TitleOptional: Codable, Sendable, Identifiable {
        var id: Int
        var title: String?
        var rank: Int
        var due: Date?
    }

    /// Optional to required (rows may hold NULL), required to optional (the column refuses NULL).
    @Test func optionalityChangesAreTypedErrors() throws {
        try seed()
        let required = #expect(throws: StoreError.self) { try store.collection("todos", of: DueRequired.self) }
        #expect(required?.kind == .schemaMismatch && required?.message.contains("\"due\"") == true, "\(String(describing: required))")
        let optional = #expect(throws: StoreError.self) { try store.collection("todos", of: TitleOptional.self) }
        #expect(optional?.kind == .schemaMismatch && optional?.message.contains("\"title\"") == true, "\(String(describing: optional))")
    }

    /// Nothing was changed by a refused type.
    @Test func aRefusedTypeChangesNothing() throws {
        try seed()
        let sql = try tableSQL()
        let version = try store.currentVersion()
        _ = try? store.collection("todos", of: RankIsText.self)
        _ = try? store.collection("todos", of: NoRank.self)
        #expect(try tableSQL() == sql)
        #expect(try store.currentVersion() == version)
    }
}
