import Foundation
import RippleTesting
import Testing

/// The throwaway PostgreSQL cluster that sync's tests, benchmarks and demos start. Without
/// PostgreSQL's binaries these tests skip, saying so in one line; with `CI=true` they run (and
/// fail, as a missing Postgres must fail CI).
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync tests skipped"), .timeLimit(.minutes(15)))
struct ThrowawayPostgresTests {
    @Test func aClusterStartsWithLogicalDecodingAndIsGoneAfterStop() async throws {
        let postgres = try await ThrowawayPostgres.started()
        #expect(try await postgres.psql("SHOW wal_level").trimmingCharacters(in: .whitespacesAndNewlines) == "logical")
        #expect(try await postgres.psql("SHOW listen_addresses").trimmingCharacters(in: .whitespacesAndNewlines) == "127.0.0.1")
        try await postgres.psql("CREATE TABLE todos(id int PRIMARY KEY, title text); INSERT INTO todos VALUES (1, 'a|b')")
        #expect(try await postgres.psql("SELECT id, title FROM todos") == "1|a|b\n")
        let directory = postgres.directory
        try postgres.stop()
        #expect(!FileManager.default.fileExists(atPath: directory))
    }

    /// Two clusters at once: each its own port and directory.
    @Test func clustersAreIndependent() async throws {
        let first = try await ThrowawayPostgres.started()
        let second = try await ThrowawayPostgres.started()
        defer {
            try? first.stop()
            try? second.stop()
        }
        #expect(first.port != second.port && first.directory != second.directory)
        try await first.psql("CREATE TABLE only_here(x int)")
        await #expect(throws: ThrowawayPostgresError.self) { try await second.psql("SELECT * FROM only_here") }
    }

    /// A crash (immediate stop) and a start: committed rows survive, as Postgres recovers.
    @Test func aKilledClusterRecoversItsCommits() async throws {
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        try await postgres.psql("CREATE TABLE kept(x int); INSERT INTO kept VALUES (7)")
        try await postgres.kill()
        await #expect(throws: ThrowawayPostgresError.self) { try await postgres.psql("SELECT 1") }
        try await postgres.start()
        #expect(try await postgres.psql("SELECT x FROM kept") == "7\n")
    }

    @Test func badSQLIsAnErrorThatSaysWhy() async throws {
        let postgres = try await ThrowawayPostgres.started()
        defer { try? postgres.stop() }
        let error = await #expect(throws: ThrowawayPostgresError.self) { try await postgres.psql("SELEC 1") }
        #expect(error?.description.contains("syntax error") == true)
    }
}
