import Foundation
import RippleTesting
import Testing

/// The README's Swift code and the tours' compile, without warnings, as a reader would paste
/// them: each README `##` section's ```swift blocks, in order, into one file of a fresh package
/// depending on Ripple, and each tour article's blocks (``tours``), all of them in order, into one
/// file. The blocks are type-checked with the toolchain's compiler against the modules this
/// package just built (a fraction of a second per file, so the check stays in every `swift test`).
@Suite(.timeLimit(.minutes(15))) struct ReadmeCompilesTests {
    /// The package's root: this file is Tests/RippleTestingTests/ReadmeCompilesTests.swift.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The DocC articles whose code is whole (each says so): every ```swift block of one, in
    /// order, is one program.
    static let tours = [
        "Sources/RippleDiff/RippleDiff.docc/DiffTour.md",
        "Sources/Ripple/Ripple.docc/StoreTour.md",
        "Sources/Ripple/Ripple.docc/LiveQueryTour.md",
        "Sources/RippleTesting/RippleTesting.docc/TestingWithTranscripts.md",
    ]

    /// The Swift blocks of the README's sections (one program per `##` section) and of each tour
    /// (one program per article), with the title of each.
    static func programs() throws -> [(title: String, code: String)] {
        var programs = try sections(of: "README.md").map { (title: "README: \($0.title)", code: $0.code) }
        for tour in tours {
            let blocks = try sections(of: tour).map(\.code)
            programs.append((tour, blocks.joined(separator: "\n\n")))
        }
        return programs
    }

    /// The sections of the Markdown file at `path` that hold Swift code: each section's title and
    /// its blocks, in order.
    static func sections(of path: String) throws -> [(title: String, code: String)] {
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        var sections: [(title: String, blocks: [String])] = []
        var title = "(before the first section)"
        var block: [String]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if var lines = block {
                if line.hasPrefix("```") {
                    if sections.last?.title != title { sections.append((title, [])) }
                    sections[sections.count - 1].blocks.append(lines.joined(separator: "\n"))
                    block = nil
                } else {
                    lines.append(String(line))
                    block = lines
                }
            } else if line.hasPrefix("## ") {
                title = String(line.dropFirst(3))
            } else if line == "```swift" {
                block = []
            }
        }
        return sections.map { ($0.title, $0.blocks.joined(separator: "\n\n")) }
    }

    @Test func everySectionsSwiftCompilesAsPasted() async throws {
        let modules = try #require(RippleExecutable.url()?.deletingLastPathComponent().appendingPathComponent("Modules"),
                                   "the package is not built")
        let sections = try Self.programs()
        #expect(sections.count >= 1 + Self.tours.count, "\(sections.map(\.title))")
        for tour in Self.tours {
            #expect(sections.contains { $0.title == tour && !$0.code.isEmpty }, "\(tour) holds no Swift code")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ripple-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (index, section) in sections.enumerated() {
            let file = directory.appendingPathComponent("section\(index).swift")
            try section.code.write(to: file, atomically: true, encoding: .utf8)
            let result = try await Self.typecheck(file, modules: modules)
            #expect(result.status == 0 && result.errors.isEmpty,
                    "\(section.title) does not compile cleanly:\n\(result.errors)")
        }
    }

    /// Runs the compiler's type checker on `file` (as a program's main file, Swift 6 mode).
    static func typecheck(_ file: URL, modules: URL) async throws -> (status: Int32, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var arguments = ["swiftc", "-typecheck", "-swift-version", "6", "-I", modules.path,
                         "-I", root.appendingPathComponent("Sources/RippleSQLite").path, file.path]
        #if os(macOS)
        arguments.insert("xcrun", at: 0)
        #endif
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let errorHandle = errors.fileHandleForReading
        let output = try await Wait.run(process, "swiftc -typecheck of \(file.lastPathComponent)", within: .seconds(600)) {
            String(decoding: errorHandle.readToEndRetryingInterrupts(), as: UTF8.self)
        }
        // Errors, and warnings too: pasted code should build without any.
        let lines = output.split(separator: "\n").filter { $0.contains("error:") || $0.contains("warning:") }
        return (process.terminationStatus, lines.prefix(20).joined(separator: "\n"))
    }
}
