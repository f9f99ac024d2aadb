#if Sync
import RippleSync
import RippleTesting

/// The todos and tags the protocol's and the client's tests sync: 40 todos of alice and bob,
/// rules that let each read their own, and alice's first ten open todos as a query.
package enum TodosFixture {
    package static let rules = #"{"tables": {"todos": {"read": {"column": "owner", "op": "=", "value": {"user": true}}}, "tags": {"read": true}}}"#

    package static func prepare(_ postgres: ThrowawayPostgres) async throws {
        try await postgres.psql("""
            CREATE TABLE todos(id int8 PRIMARY KEY, owner text NOT NULL, title text NOT NULL, rank int4 NOT NULL,
                               done bool NOT NULL DEFAULT false);
            CREATE TABLE tags(id int8 PRIMARY KEY, name text NOT NULL);
            INSERT INTO todos SELECT n, CASE WHEN n % 2 = 0 THEN 'alice' ELSE 'bob' END, 'todo ' || n, n, false
            FROM generate_series(1, 40) AS n;
            INSERT INTO tags VALUES (1, 'home'), (2, 'work');
            """)
    }

    package static let aliceOpen = QueryDescription(table: "todos", filter: .compare(column: "done", op: .equal, value: .bool(false)),
                                            order: [OrderDescription(column: "rank")], limit: 10)
    package static let aliceOpenSQL = "SELECT id, owner, title, rank, done FROM todos WHERE owner = 'alice' AND NOT done ORDER BY rank, id LIMIT 10"
}
#endif
