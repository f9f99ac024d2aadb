import Foundation

/// A lock shared by every writer of a stress run, across threads and processes (`flock` on two
/// files beside the database; each writer opens its own descriptors, so threads of one process
/// exclude each other too).
///
/// Writes that read their own base version inside their transaction hold it shared. A
/// collection method that opens its own write (`collection.insert(x)`) cannot read the version
/// inside, so it holds the gate exclusively and reads `currentVersion()` before and after: no
/// other stress writer can commit in between, and a version that appears anyway was taken by
/// something no writer did (a phantom).
///
/// A turnstile gives the exclusive side priority, so that overlapping shared holders cannot
/// starve it.
final class StressWriteGate {
    private let gate: Int32
    private let turnstile: Int32

    /// Opens (creating them if needed) the lock files in `directory`.
    init(directory: String) throws {
        gate = open(directory + "/stress.gate", O_RDWR | O_CREAT, 0o644)
        turnstile = open(directory + "/stress.turnstile", O_RDWR | O_CREAT, 0o644)
        guard gate >= 0, turnstile >= 0 else {
            throw StressError("cannot open the write gate's lock files in \(directory): errno \(errno)")
        }
    }

    deinit {
        close(gate)
        close(turnstile)
    }

    /// Runs `body` while holding the gate shared.
    func shared<T>(_ body: () throws -> T) rethrows -> T {
        Self.lock(turnstile, LOCK_EX)
        Self.lock(gate, LOCK_SH)
        Self.lock(turnstile, LOCK_UN)
        defer { Self.lock(gate, LOCK_UN) }
        return try body()
    }

    /// Runs `body` while no other holder of the gate runs.
    func exclusive<T>(_ body: () throws -> T) rethrows -> T {
        Self.lock(turnstile, LOCK_EX)
        Self.lock(gate, LOCK_EX)
        defer {
            Self.lock(gate, LOCK_UN)
            Self.lock(turnstile, LOCK_UN)
        }
        return try body()
    }

    private static func lock(_ descriptor: Int32, _ operation: Int32) {
        while flock(descriptor, operation) != 0 {
            precondition(errno == EINTR, "stress: flock failed with errno \(errno)")
        }
    }
}

/// A failure of the stress test's own machinery (not a finding about the store).
struct StressError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
