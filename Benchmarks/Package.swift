// swift-tools-version: 6.1
import PackageDescription

// Benchmarks for Ripple, kept out of the main package so that its users never resolve
// the benchmark-only dependencies.
//
//     swift run -c release --package-path Benchmarks ripple-bench diff
let package = Package(
    name: "RippleBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "Ripple", path: "..", traits: ["Sync"]),   // the sync side too: `ripple-bench sync`
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // The peer the store is compared with (benchmarks only: the main package never depends on it).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // `ripple-bench sync`: a raw WebSocket client for the wire's bytes, and a bare Postgres
        // client for the floors (a bare peek loop, NOTIFY) and the writers.
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // N1–N3: a lean WebSocket load generator and the fan-out floor, on bare NIO channels.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
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
                .product(name: "RippleSync", package: "Ripple"),
                .product(name: "RippleSyncClient", package: "Ripple"),
                .product(name: "RippleServer", package: "Ripple"),
                // The throwaway PostgreSQL cluster of `ripple-bench sync`.
                .product(name: "RippleSyncTesting", package: "Ripple"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                "BenchSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
