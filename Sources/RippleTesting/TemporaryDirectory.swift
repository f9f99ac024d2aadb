import Foundation

/// A directory under the system's temporary directory, removed when released (for this
/// package's tests: they write real database files).
package final class TemporaryDirectory: Sendable {
    package let url: URL

    /// A new directory named `prefix-` and a UUID.
    package init(prefix: String = "ripple-tests") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path for a file in the directory.
    package func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}
