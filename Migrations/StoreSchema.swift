import Foundation

/// The store's own schema: the numbered `.sql` files of this folder, bundled as resources so
/// an installed binary needs no source tree.
///
/// Each file must also be listed in this target's `resources` in `Package.swift`; a test
/// (`MigrationTests.everySchemaFileIsBundled`) checks that the bundle holds every file here.
package enum StoreSchema {
    /// The bundled migration files, by file name (`0001_store_schema.sql`), in no given order.
    package static func migrationFiles() throws -> [(name: String, sql: String)] {
        guard let directory = Bundle.module.resourceURL else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: Bundle.module.bundlePath])
        }
        let urls = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        return try urls.filter { $0.pathExtension == "sql" }.map { url in
            (name: url.lastPathComponent, sql: try String(contentsOf: url, encoding: .utf8))
        }
    }
}
