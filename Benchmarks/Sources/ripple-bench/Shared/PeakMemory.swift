import Foundation

/// Peak (and current) memory of a process, and of this executable run as a child process.
enum PeakMemory {
    /// This process's peak resident set size in kB (KiB): `VmHWM` in `/proc/self/status`.
    /// `nil` where there is no such file (not Linux).
    static func ofThisProcess() -> Int? {
        statusField("VmHWM")
    }

    /// This process's resident set size now, in kB (KiB): `VmRSS` in `/proc/self/status`.
    /// `nil` where there is no such file (not Linux).
    static func residentNow() -> Int? {
        statusField("VmRSS")
    }

    /// The value in kB of the line `name:` of `/proc/self/status`.
    private static func statusField(_ name: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else {
            return nil
        }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            // "VmHWM:     123456 kB"
            return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first
                .flatMap { Int($0) }
        }
        return nil
    }

    /// What a `diff-memory` child prints: one JSON line.
    struct ChildReport: Decodable {
        var peakRSSKilobytes: Int

        enum CodingKeys: String, CodingKey {
            case peakRSSKilobytes = "peak_rss_kb"
        }
    }

    /// Runs this executable with `arguments` and decodes the last line it prints on stdout.
    /// The child's stderr goes to ours.
    static func runChild(_ arguments: [String]) throws -> ChildReport {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw ChildError(description: "child \(arguments.joined(separator: " ")) failed "
                             + "(status \(process.terminationStatus))")
        }
        guard let line = data.split(separator: UInt8(ascii: "\n")).last else {
            throw ChildError(description: "child \(arguments.joined(separator: " ")) printed nothing")
        }
        return try JSONDecoder().decode(ChildReport.self, from: Data(line))
    }

    /// A child process that failed or printed something unexpected.
    struct ChildError: Error, CustomStringConvertible {
        var description: String
    }
}
