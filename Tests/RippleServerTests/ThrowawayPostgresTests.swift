#if Sync
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RippleSyncTesting
import RippleTesting
import Testing

/// The throwaway PostgreSQL cluster that sync's tests, benchmarks and demos start. Without
/// PostgreSQL's binaries these tests skip, saying so in one line; with `CI=true` they run (and
/// fail, as a missing Postgres must fail CI).
@Suite(.enabled(if: ThrowawayPostgres.testsRun, "PostgreSQL 15 is not installed: sync tests skipped"), .timeLimit(.minutes(15)))
struct ThrowawayPostgresTests {
    @Test func aClusterStartsWithLogicalDecodingAndIsGoneAfterItsScope() async throws {
        let directory = try await withThrowawayPostgres { postgres in
            #expect(try await postgres.psql("SHOW wal_level").trimmingCharacters(in: .whitespacesAndNewlines) == "logical")
            #expect(try await postgres.psql("SHOW listen_addresses").trimmingCharacters(in: .whitespacesAndNewlines) == "127.0.0.1")
            try await postgres.psql("CREATE TABLE todos(id int PRIMARY KEY, title text); INSERT INTO todos VALUES (1, 'a|b')")
            #expect(try await postgres.psql("SELECT id, title FROM todos") == "1|a|b\n")
            return postgres.directory
        }
        #expect(!FileManager.default.fileExists(atPath: directory))
    }

    /// Two clusters at once: each its own port and directory.
    @Test func clustersAreIndependent() async throws {
        try await withThrowawayPostgres { first in
            try await withThrowawayPostgres { second in
                #expect(first.port != second.port && first.directory != second.directory)
                try await first.psql("CREATE TABLE only_here(x int)")
                await #expect(throws: ThrowawayPostgresError.self) { try await second.psql("SELECT * FROM only_here") }
            }
        }
    }

    /// A crash (immediate stop) and a start: committed rows survive, as Postgres recovers.
    @Test func aKilledClusterRecoversItsCommits() async throws {
        try await withThrowawayPostgres { postgres in
            try await postgres.psql("CREATE TABLE kept(x int); INSERT INTO kept VALUES (7)")
            try await postgres.kill()
            await #expect(throws: ThrowawayPostgresError.self) { try await postgres.psql("SELECT 1") }
            try await postgres.start()
            #expect(try await postgres.psql("SELECT x FROM kept") == "7\n")
        }
    }

    @Test func badSQLIsAnErrorThatSaysWhy() async throws {
        try await withThrowawayPostgres { postgres in
            let error = await #expect(throws: ThrowawayPostgresError.self) { try await postgres.psql("SELEC 1") }
            #expect(error?.description.contains("syntax error") == true)
        }
    }

    struct Thrown: Error {}

    /// A scope whose body throws stops its cluster before the error reaches the caller: no
    /// server of it runs, its directory is gone, and the error is the body's.
    @Test func aScopeWhoseBodyThrowsLeavesNoCluster() async throws {
        var seen: (directory: String, postmaster: Int32, port: Int)?
        do {
            try await withThrowawayPostgres { postgres in
                seen = (postgres.directory, try Self.postmaster(of: postgres), postgres.port)
                throw Thrown()
            }
            Issue.record("the body's error was not thrown")
        } catch is Thrown {
        }
        let (directory, postmaster, port) = try #require(seen)
        #expect(!FileManager.default.fileExists(atPath: directory))
        #expect(!Self.isRunning(postmaster), "the postmaster (pid \(postmaster)) still runs")
        #expect(!Self.acceptsConnections(port: port))
    }

    /// A process that ends without stopping its cluster leaves none behind: the cluster's
    /// watchdog, seeing the process gone, stops it and removes its directory. Here without any
    /// cleanup at all: `ripple-server demo` (which starts a cluster) is killed with SIGKILL.
    @Test func aClusterEndsWithTheProcessThatStartedIt() async throws {
        let executable = try #require(NodeDescriptorTests.serverExecutable, "ripple-server is not built beside the tests")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/stdbuf")   // its lines unbuffered, as it says them
        process.arguments = ["-oL", executable, "demo", "--port", "0", "--write-every", "0"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try ProcessLaunch.run(process)
        let reader = output.fileHandleForReading
        let said: String
        do {
            said = try await Wait.value("the demo to say its cluster's port") {
                try await onOwnThread("demo output") { () -> String in
                    var text = ""
                    while text.firstMatch(of: /psql -h 127\.0\.0\.1 -p \d+ -U/) == nil {
                        let data = reader.availableData
                        if data.isEmpty { break }
                        text += String(decoding: data, as: UTF8.self)
                    }
                    return text
                }
            }
        } catch {
            process.terminate()
            try await onOwnThread("demo exit") { try Wait.exit(of: process, "the demo") }
            throw error
        }
        kill(process.processIdentifier, SIGKILL)
        try await onOwnThread("demo exit") { try Wait.exit(of: process, "the killed demo") }
        let port = try #require(said.firstMatch(of: /psql -h 127\.0\.0\.1 -p (\d+) -U/).flatMap { Int($0.1) }, "\(said)")
        try await Wait.until("the killed demo's cluster (port \(port)) to stop") { !Self.acceptsConnections(port: port) }
    }

    /// The watchdog alone: told that its process ended, it stops the server and removes the
    /// directory.
    @Test func theWatchdogStopsTheClusterWhenItsProcessEnds() async throws {
        let postgres = try await ThrowawayPostgres.started()
        let postmaster = try Self.postmaster(of: postgres)
        postgres.endAsIfThisProcessEnded()
        #expect(!FileManager.default.fileExists(atPath: postgres.directory))
        try await Wait.until("the postmaster (pid \(postmaster)) to end") { !Self.isRunning(postmaster) }
        #expect(!Self.acceptsConnections(port: postgres.port))
    }

    /// The server's process id, from its `postmaster.pid`.
    static func postmaster(of postgres: ThrowawayPostgres) throws -> Int32 {
        let text = try String(contentsOfFile: postgres.dataDirectory + "/postmaster.pid", encoding: .utf8)
        return try #require(text.split(separator: "\n").first.flatMap { Int32($0) })
    }

    /// Whether process `pid` runs (a zombie, ended but not yet reaped, does not).
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return kill(pid, 0) == 0 }
        // "pid (name) state …": the state follows the name's closing parenthesis.
        guard let close = stat.lastIndex(of: ")") else { return true }
        return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// Whether anything accepts a TCP connection on 127.0.0.1:`port`.
    static func acceptsConnections(port: Int) -> Bool {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
#endif
