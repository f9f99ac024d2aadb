#if Sync
import RippleServer
import RippleTesting

/// The notes, counters and a read-only table the write tests sync: rules that let each user
/// read and write their own notes, and anyone read and write the counters (a trigger counts
/// each application of a change to a counter).
package enum NotesFixture {
    package static let rules = #"""
        {"tables": {
            "notes": {"read": {"column": "owner", "op": "=", "value": {"user": true}},
                      "write": {"column": "owner", "op": "=", "value": {"user": true}}},
            "counters": {"read": true, "write": true},
            "readonly": {"read": true}
        }}
        """#

    package static func prepare(_ postgres: ThrowawayPostgres) async throws {
        try await postgres.psql("""
            CREATE TABLE notes(id int8 PRIMARY KEY, owner text NOT NULL, title text NOT NULL UNIQUE, body text, done bool NOT NULL DEFAULT false);
            CREATE TABLE counters(id int8 PRIMARY KEY, tags text, total int8 NOT NULL CHECK (total >= 0), applied int8 NOT NULL DEFAULT 0);
            CREATE TABLE readonly(id int8 PRIMARY KEY);
            CREATE FUNCTION count_applications() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN NEW.applied := COALESCE(OLD.applied, 0) + 1; RETURN NEW; END $$;
            CREATE TRIGGER counters_applied BEFORE UPDATE ON counters FOR EACH ROW EXECUTE FUNCTION count_applications();
            INSERT INTO notes VALUES (1, 'alice', 'milk', 'two litres', false), (2, 'bob', 'bread', NULL, false);
            INSERT INTO counters VALUES (1, 'a', 10, 0);
            INSERT INTO readonly VALUES (1);
            """)
    }

    /// A throwaway Postgres with the tables above and a node following them (with `resolvers`,
    /// after `adjust`), for `body`; both stopped after it, also when it throws.
    package static func withNode(resolvers: ResolverMode = .none, adjust: (inout SyncServerConfiguration) -> Void = { _ in },
                                 isolation: isolated (any Actor)? = #isolation,
                                 _ body: (ThrowawayPostgres, TestNode) async throws -> Void) async throws {
        try await withThrowawayPostgres { postgres in
            try await Self.prepare(postgres)
            let directory = try TemporaryDirectory()
            try await TestNode.with(postgres, tables: ["notes", "counters", "readonly"], rules: Self.rules,
                                    directory: directory, adjust: { configuration in
                                        adjust(&configuration)
                                        resolvers.install(in: &configuration)
                                    }) { node in
                try await body(postgres, node)
            }
        }
    }
}
#endif
