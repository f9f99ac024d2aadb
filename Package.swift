// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Ripple",
    products: [
        .library(name: "RippleDiff", targets: ["RippleDiff"]),
        .library(name: "RippleTesting", targets: ["RippleTesting"]),
        .library(name: "Ripple", targets: ["Ripple"]),
    ],
    targets: [
        // The Heckel diff engine: no dependency on SQLite or Foundation.
        .target(name: "RippleDiff"),
        // The system libsqlite3 (a unique module name: never `CSQLite`).
        .systemLibrary(name: "RippleSQLite", path: "Sources/RippleSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // The store's own schema: numbered `.sql` files bundled as resources (list each one here).
        .target(name: "RippleSchema", path: "Migrations", resources: [.copy("0001_store_schema.sql")]),
        // The store: connections, migrations, collections, queries, change log.
        .target(name: "Ripple", dependencies: ["RippleDiff", "RippleSQLite", "RippleSchema"]),
        // What users' tests need: the batch-update list-view model.
        .target(name: "RippleTesting", dependencies: ["RippleDiff"]),
        .testTarget(name: "RippleDiffTests", dependencies: ["RippleDiff", "RippleTesting"]),
        .testTarget(name: "RippleTestingTests", dependencies: ["RippleDiff", "RippleTesting"]),
        .testTarget(name: "RippleTests", dependencies: ["Ripple", "RippleTesting"]),
    ],
    swiftLanguageModes: [.v6]
)
