import Foundation

/// Where this package's tests find the built `ripple` executable (they run it as another
/// process): beside the running test bundle, else in the package's `.build/debug`.
/// (`swift build --build-tests`, as CI runs it, builds it; so does `swift test`.)
package enum RippleExecutable {
    /// The executable, or `nil` when it is not built.
    package static func url() -> URL? {
        var directories: [URL] = []
        #if os(Linux)
        if let runner = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: runner).deletingLastPathComponent())
        }
        #endif
        for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
            directories.append(bundle.bundleURL.deletingLastPathComponent())
        }
        directories.append(Bundle.main.bundleURL)
        // This file is Sources/RippleTesting/RippleExecutable.swift: three levels below the package.
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        directories.append(package.appendingPathComponent(".build/debug"))
        return directories.map { $0.appendingPathComponent("ripple") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
}
