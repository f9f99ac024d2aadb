#if Sync
import Foundation
import Logging
import PostgresNIO
import Ripple
import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// Described queries: their JSON, what the compiler refuses, and — against Postgres itself as
/// the oracle — that the replica's result of a compiled query is Postgres's result of the same
/// query, on seeded random data and queries.
@Suite struct QueryCompilerTests {
    static let table = SyncedTableSchema(name: "items", columns: [
        .init(name: "id", typeOID: PostgresTypes.OID.int8), .init(name: "a", typeOID: PostgresTypes.OID.int4),
        .init(name: "b", typeOID: PostgresTypes.OID.text), .init(name: "c", typeOID: PostgresTypes.OID.float8),
        .init(name: "d", typeOID: PostgresTypes.OID.bool), .init(name: "n", typeOID: PostgresTypes.OID.numeric),
        .init(name: "t", typeOID: PostgresTypes.OID.timestamptz), .init(name: "dt", typeOID: PostgresTypes.OID.date),
        .init(name: "ch", typeOID: PostgresTypes.OID.bpchar), .init(name: "j", typeOID: PostgresTypes.OID.json),
    ], key: [0])
    /// The columns the oracle compares values of (the others' text forms depend on the session;
    /// their meaning shows in which rows come, in which order).
    static let comparedColumns = 6

    @Test func aDescriptionReadsFromItsJSON() throws {
        let json = """
            {"table": "items", "filter": {"and": [{"column": "d", "op": "=", "value": false},
             {"or": [{"column": "b", "op": "like", "value": "%milk%"}, {"not": {"column": "a", "op": "is null"}}]},
             {"column": "id", "op": "in", "values": [1, "9007199254740993"]}]},
             "order": [{"column": "a", "descending": true, "nulls_first": false}, {"column": "b"}], "limit": 5, "offset": 2}
            """
        let query = try JSONDecoder().decode(QueryDescription.self, from: Data(json.utf8))
        #expect(query == QueryDescription(table: "items", filter: .and([
            .compare(column: "d", op: .equal, value: .bool(false)),
            .or([.like(column: "b", pattern: "%milk%"), .not(.isNull(column: "a"))]),
            .isIn(column: "id", values: [.integer(1), .text("9007199254740993")]),
        ]), order: [OrderDescription(column: "a", descending: true, nullsFirst: false), OrderDescription(column: "b")],
            limit: 5, offset: 2))
        let again = try JSONDecoder().decode(QueryDescription.self, from: try JSONEncoder().encode(query))
        #expect(again == query)
    }

    @Test(arguments: [
        (#"{"table": "items", "filter": {"column": "a", "op": "~", "value": 1}}"#, "unknown operator"),
        (#"{"table": "items", "filter": {"column": "a", "op": "like", "value": 1}}"#, "pattern is a string"),
        (#"{"filter": {}}"#, "table"),
    ])
    func malformedDescriptionsAreRefused(json: String, expected: String) {
        let error = #expect(throws: DecodingError.self) { try JSONDecoder().decode(QueryDescription.self, from: Data(json.utf8)) }
        #expect("\(String(describing: error))".contains(expected))
    }

    @Test(arguments: [
        (QueryDescription(table: "other"), "not items"),
        (QueryDescription(table: "items", filter: .compare(column: "zz", op: .equal, value: .integer(1))), "no column zz"),
        (QueryDescription(table: "items", columns: ["id", "zz"]), "no column zz"),
        (QueryDescription(table: "items", filter: .compare(column: "a", op: .equal, value: .text("1; DROP TABLE items"))), "not a value"),
        (QueryDescription(table: "items", filter: .compare(column: "d", op: .equal, value: .integer(2))), "not a value"),
        (QueryDescription(table: "items", filter: .like(column: "a", pattern: "1%")), "text column"),
        (QueryDescription(table: "items", filter: .like(column: "b", pattern: "x\\")), "ends with an escape"),
        (QueryDescription(table: "items", filter: .compare(column: "j", op: .less, value: .text("{}"))), "cannot be compared"),
        (QueryDescription(table: "items", order: [OrderDescription(column: "j")]), "cannot be ordered"),
        (QueryDescription(table: "items", filter: .compare(column: "n", op: .less, value: .text("1.5x"))), "not a number"),
        (QueryDescription(table: "items", filter: .compare(column: "t", op: .less, value: .text("2024-03-05 12:00:00+02"))), "UTC"),
        (QueryDescription(table: "items", limit: -1), "negative"),
    ])
    func queriesTheReplicaCannotRunAreRefusedSayingWhy(query: QueryDescription, expected: String) {
        let error = #expect(throws: QueryError.self) { try QueryCompiler.compile(query, for: Self.table) }
        #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
    }

    @Test func valuesAreBoundNeverSpliced() throws {
        let hostile = "x'); DROP TABLE items; --"
        let compiled = try QueryCompiler.compile(QueryDescription(table: "items", filter: .compare(column: "b", op: .equal,
                                                                                                    value: .text(hostile))),
                                                 for: Self.table)
        #expect(!compiled.sql.contains("DROP") && compiled.arguments == [.text(hostile)])
    }
}

/// Postgres is the oracle: a compiled query on the replica returns what the same query returns
/// on Postgres under `COLLATE "C"` — NULL order, case-sensitive LIKE, byte order, NaN.
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: the Postgres oracle tests skipped"), .timeLimit(.minutes(15)))
struct QueryMeaningTests {
    /// The same description as Postgres SQL with its values bound: the oracle's query.
    static func postgresQuery(_ query: QueryDescription, _ table: SyncedTableSchema) -> PostgresQuery {
        var translator = PostgresFilterTranslator(tables: [table.name: table])
        func column(_ name: String) -> String {
            let type = table.columns.first { $0.name == name }!.typeOID
            return [PostgresTypes.OID.text, PostgresTypes.OID.bpchar].contains(type) ? "\"\(name)\" COLLATE \"C\"" : "\"\(name)\""
        }
        let list = table.columns.prefix(QueryCompilerTests.comparedColumns).map { "CASE WHEN \"\($0.name)\" IS NULL THEN NULL ELSE concat(\"\($0.name)\") END" }
        var sql = "SELECT \(list.joined(separator: ", ")) FROM items"
        if let filter = query.filter { sql += " WHERE " + translator.condition(filter, over: table, as: table.name, client: true) }
        let terms = query.order.map { term in
            "\(column(term.column)) \(term.descending ? "DESC" : "ASC")"
                + (term.nullsFirst.map { $0 ? " NULLS FIRST" : " NULLS LAST" } ?? "")
        } + ["id ASC"]
        sql += " ORDER BY " + terms.joined(separator: ", ")
        if let limit = query.limit { sql += " LIMIT \(limit)" }
        if let offset = query.offset { sql += " OFFSET \(offset)" }
        return PostgresQuery(unsafeSQL: sql, binds: translator.bindings)
    }

    static let texts: [String?] = [nil, "a", "A", "b", "ab", "abc", "%", "_", "a_c", "é", "e\u{301}", "", "Z", "a%b", "[x]", "*"]
    static let floats: [String?] = [nil, "NaN", "Infinity", "-Infinity", "0", "1.5", "-2", "1e308", "3"]
    static let numerics: [String?] = [nil, "1.50", "1.5", "10", "9", "-2.25", "-10", "0", "0.000", "NaN", "Infinity", "-Infinity",
                                      "123456789012345678901234567890.123", "-0.001", "-0.0010", "0.1"]
    static let times: [String?] = [nil, "2024-03-05 12:00:00+00", "2024-03-05 12:00:00.5+00", "2024-03-05 12:00:00.25+00",
                                   "1999-12-31 23:59:59+00", "infinity", "-infinity", "0044-03-15 10:00:00+00 BC",
                                   "0001-01-01 00:00:00+00 BC", "12000-01-01 00:00:00+00"]
    static let dates: [String?] = [nil, "2024-03-05", "2024-03-04", "infinity", "-infinity", "0044-03-15 BC", "0001-01-01 BC",
                                   "10000-01-01", "0001-01-01"]
    static let chars: [String?] = [nil, "a", "a  ", "ab", "b", "", " a"]

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aCompiledQueryMeansWhatItMeansOnPostgres(seed: UInt64) async throws {
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        let directory = try TemporaryDirectory()
        var random = SeededGenerator(seed: seed)
        try await postgres.psql("SET timezone = 'UTC'; "
                          + "CREATE TABLE items(id int8 PRIMARY KEY, a int4, b text, c float8, d bool, n numeric, t timestamptz, dt date, "
                          + "ch char(4), j json)")
        var values: [String] = []
        for id in 1...60 {
            func literal(_ text: String?) -> String { text.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL" }
            let a = Int.random(in: 0..<6, using: &random) == 0 ? "NULL" : String(Int.random(in: -3...3, using: &random))
            let d = ["NULL", "true", "false"].randomElement(using: &random)!
            values.append("(\(id), \(a), \(literal(Self.texts.randomElement(using: &random)!)), "
                          + "\(literal(Self.floats.randomElement(using: &random)!)), \(d), \(literal(Self.numerics.randomElement(using: &random)!)), "
                          + "\(literal(Self.times.randomElement(using: &random)!)), \(literal(Self.dates.randomElement(using: &random)!)), "
                          + "\(literal(Self.chars.randomElement(using: &random)!)), '{}')")
        }
        try await postgres.psql("INSERT INTO items VALUES " + values.joined(separator: ", "))
        let table = QueryCompilerTests.table
        let client = postgres.makeClient()
        let store = try Store(path: directory.path("replica.sqlite"))
        var queries: [QueryDescription] = []
        for _ in 0..<150 { queries.append(Self.randomQuery(&random)) }
        let planned = queries
        let compared = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                await client.run()
                return 0
            }
            defer { group.cancelAll() }
            let feed = ReplicaFeed(store: store, client: client, configuration: FeedConfiguration(tables: ["items"]))
            try await feed.prepare()
            var rows = 0
            for query in planned {
                let compiled = try QueryCompiler.compile(query, for: table)
                let replica = try store.read { db in
                    try db.fetchAll(compiled.sql, compiled.arguments).map { row in
                        table.columns.prefix(QueryCompilerTests.comparedColumns).map { row[$0.name] ?? .null }
                    }
                }
                var oracle: [[SQLValue]] = []
                for try await row in try await client.query(Self.postgresQuery(query, table)) {
                    let texts = try row.map { try $0.decode(String?.self) }
                    oracle.append(try zip(texts, table.columns.prefix(QueryCompilerTests.comparedColumns)).map { text, column in
                        try text.map { try PostgresTypes.replicaValue($0, of: column.typeOID) } ?? .null
                    })
                }
                #expect(replica == oracle, "\(query)\n\(compiled.sql)")
                if replica != oracle { return rows }
                rows += oracle.count
            }
            return rows
        }
        // The queries found rows: the comparison is not between empty results.
        #expect(compared > 1000, "\(compared) rows compared")
    }

    static func randomQuery(_ random: inout SeededGenerator) -> QueryDescription {
        func value(for column: String) -> WireValue {
            switch column {
            case "a": return Int.random(in: 0..<8, using: &random) == 0 ? .null : .integer(Int64.random(in: -3...3, using: &random))
            case "b": return texts.randomElement(using: &random)!.map(WireValue.text) ?? .null
            case "c":
                return [.real(1.5), .real(.infinity), .real(-.infinity), .real(.nan), .text("NaN"), .integer(3), .real(0), .null]
                    .randomElement(using: &random)!
            case "d": return [.bool(true), .bool(false), .null].randomElement(using: &random)!
            case "n":
                return [.text("1.5"), .integer(10), .real(9), .text("-2.250"), .text("NaN"), .text("Infinity"), .null, .text("0"),
                        .text("-0.001"), .real(0.1)].randomElement(using: &random)!
            case "t":
                return [.text("2024-03-05 12:00:00+00"), .text("2024-03-05T12:00:00.50Z"), .text("infinity"), .text("-infinity"),
                        .text("1999-12-31 23:59:59+00"), .text("0044-03-15 10:00:00+00 BC"), .null].randomElement(using: &random)!
            case "dt":
                return [.text("2024-03-05"), .text("-infinity"), .text("0044-03-15 BC"), .text("10000-01-01"), .null]
                    .randomElement(using: &random)!
            case "ch": return [.text("a"), .text("a "), .text("b"), .text(""), .null].randomElement(using: &random)!
            default: return .integer(Int64.random(in: 0...61, using: &random))
            }
        }
        func filter(_ depth: Int) -> FilterDescription {
            let column = ["id", "a", "b", "c", "d", "n", "t", "dt", "ch"].randomElement(using: &random)!
            switch Int.random(in: 0..<(depth > 2 ? 6 : 9), using: &random) {
            case 0, 1: return .compare(column: column, op: FilterDescription.Comparison.allCases.randomElement(using: &random)!,
                                       value: value(for: column))
            case 2: return Bool.random(using: &random) ? .isNull(column: column) : .isNotNull(column: column)
            case 3: return .isIn(column: column, values: (0..<Int.random(in: 0...3, using: &random)).map { _ in value(for: column) })
            case 4, 5:
                let pattern = ["a%", "%b%", "_", "a\\%b", "%\\_%", "A%", "%", "", "[x]", "*", "é%", "e_"].randomElement(using: &random)!
                return .like(column: "b", pattern: pattern)
            case 6: return .and((0..<Int.random(in: 0...3, using: &random)).map { _ in filter(depth + 1) })
            case 7: return .or((0..<Int.random(in: 0...3, using: &random)).map { _ in filter(depth + 1) })
            default: return .not(filter(depth + 1))
            }
        }
        var query = QueryDescription(table: "items")
        if Int.random(in: 0..<5, using: &random) > 0 { query.filter = filter(0) }
        for _ in 0..<Int.random(in: 0...2, using: &random) {
            let nulls: Bool? = [nil, true, false].randomElement(using: &random)!
            query.order.append(OrderDescription(column: ["a", "b", "c", "d", "n", "t", "dt", "ch"].randomElement(using: &random)!,
                                                descending: Bool.random(using: &random), nullsFirst: nulls))
        }
        if Bool.random(using: &random) { query.limit = Int.random(in: 0...20, using: &random) }
        if Int.random(in: 0..<4, using: &random) == 0 { query.offset = Int.random(in: 0...10, using: &random) }
        return query
    }
}
#endif
