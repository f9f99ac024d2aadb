// swift-tools-version: 6.0
import PackageDescription

// Benchmarks for Ripple, kept out of the main package so that its users never resolve
// the benchmark-only dependencies.
//
//     swift run -c release --package-path Benchmarks ripple-bench diff
let package = Package(
    name: "RippleBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "Ripple", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // The peer the store is compared with (benchmarks only: the main package never depends on it).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // The system libsqlite3, for the C-API floor.
        .systemLibrary(name: "BenchSQLite", path: "Sources/BenchSQLite", pkgConfig: "sqlite3"),
        .executableTarget(
            name: "ripple-bench",
            dependencies: [
                .product(name: "RippleDiff", package: "Ripple"),
                .product(name: "RippleTesting", package: "Ripple"),
                .product(name: "Ripple", package: "Ripple"),
                .product(name: "GRDB", package: "GRDB.swift"),
                "BenchSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
