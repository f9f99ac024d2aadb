// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Ripple",
    products: [
        .library(name: "RippleDiff", targets: ["RippleDiff"]),
        .library(name: "RippleDiffTesting", targets: ["RippleDiffTesting"]),
        .library(name: "RippleTesting", targets: ["RippleTesting"]),
        .library(name: "Ripple", targets: ["Ripple"]),
        .library(name: "RippleSync", targets: ["RippleSync"]),
        .library(name: "RippleSyncClient", targets: ["RippleSyncClient"]),
        .library(name: "RippleServer", targets: ["RippleServer"]),
        // The sync side's testing kit: the throwaway PostgreSQL cluster and the sync stress checker
        // (for the benchmarks package, and for users' tests of their own nodes).
        .library(name: "RippleSyncTesting", targets: ["RippleSyncTesting"]),
        .executable(name: "ripple", targets: ["RippleCLI"]),
        .executable(name: "ripple-server", targets: ["RippleServerCLI"]),
    ],
    // Ripple Sync (the client, the node, their testing kit and their dependencies: SwiftNIO,
    // Hummingbird, PostgresNIO, …) is a trait, off by default: `swift run ripple demo` and apps
    // that use the store alone never resolve, fetch or build those packages. Apps that sync add
    // `traits: ["Sync"]` to their `.package` line; here, `swift build --traits Sync` builds it, and
    // a plain `swift test` runs the sync side's tests too (SyncSideTests builds them with the trait).
    traits: [
        .trait(name: "Sync", description: "Ripple Sync: RippleSyncClient, RippleServer, ripple-server and their dependencies."),
    ],
    dependencies: [
        // The command-line tool's argument parsing (the libraries depend on nothing).
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Ripple Sync's server only (never built by `swift run ripple demo`).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3" ..< "5.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Ripple Sync's Swift client: a WebSocket client that runs wherever SwiftNIO does.
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        // Ripple Sync's server: JSON Web Tokens from an app's identity provider (JWKS over HTTP).
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // TLS to PostgreSQL (`?sslmode=require` in the node's URL), as PostgresNIO takes it.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        // The Heckel diff engine: no dependency on SQLite or Foundation.
        .target(name: "RippleDiff"),
        // The system libsqlite3 (a unique module name: never `CSQLite`).
        .systemLibrary(name: "RippleSQLite", path: "Sources/RippleSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // The store's own schema: numbered `.sql` files bundled as resources (list each one here).
        .target(name: "RippleSchema", path: "Migrations", resources: [
            .copy("0001_store_schema.sql"),
            .copy("0002_history.sql"),
            .copy("0003_exact_keys.sql"),
            .copy("0004_compact_before_images.sql"),
            .copy("0005_commit_origin.sql"),
            .copy("0006_keys_written_once.sql"),
        ]),
        // The store: connections, migrations, collections, queries, change log.
        .target(name: "Ripple", dependencies: ["RippleDiff", "RippleSQLite", "RippleSchema"]),
        // What tests of the diff alone need, without SQLite: list-view models that check every
        // changeset and batch the way UIKit does, explaining what they refuse.
        .target(name: "RippleDiffTesting", dependencies: ["RippleDiff"]),
        // What users' tests of the store need: recorded transcripts, event recorders, the stress
        // checker (and RippleDiffTesting, re-exported).
        .target(name: "RippleTesting", dependencies: ["Ripple", "RippleDiff", "RippleDiffTesting"]),
        // The `ripple` command-line tool (`ripple demo`, …). The module is `RippleCLI`, not
        // `ripple`, so that it never collides with `Ripple` on a case-insensitive file system.
        .executableTarget(name: "RippleCLI", dependencies: [
            "Ripple", "RippleDiff", "RippleTesting",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], path: "Sources/ripple"),
        // Ripple Sync's protocol: its messages, the described query, the values and changesets
        // on the wire. Depends on the diff alone, so that any client can use it.
        .target(name: "RippleSync", dependencies: ["RippleDiff"]),
        // Ripple Sync's Swift client: a local store holding the rows of its subscriptions, kept
        // by the server's changesets. Never a dependency of the `ripple` tool.
        .target(name: "RippleSyncClient", dependencies: [
            "Ripple", "RippleSync", "RippleDiff",
            .product(name: "WSClient", package: "swift-websocket", condition: .when(traits: ["Sync"])),
            .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Sync"])),
        ]),
        // Ripple Sync's server: the feed from PostgreSQL's logical decoding into a replica
        // store, subscriptions, and the WebSocket protocol. Never a dependency of `ripple`.
        .target(name: "RippleServer", dependencies: [
            "Ripple", "RippleSync",
            .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Sync"])),
            .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Sync"])),
            .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["Sync"])),
            .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Sync"])),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket", condition: .when(traits: ["Sync"])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Sync"])),
            .product(name: "NIOWebSocket", package: "swift-nio", condition: .when(traits: ["Sync"])),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Sync"])),
            .product(name: "CoreMetrics", package: "swift-metrics", condition: .when(traits: ["Sync"])),
            .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Sync"])),
            .product(name: "JWTKit", package: "jwt-kit", condition: .when(traits: ["Sync"])),
            .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["Sync"])),
            .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["Sync"])),
        ], resources: [
            // The live-list web page the node serves, compiled into the binary (no bundle to find).
            .embedInCode("HTTP/live-list.html"), .embedInCode("HTTP/live-list.js"),
        ]),
        // The sync side's testing kit: the throwaway PostgreSQL cluster (which ends with the process
        // that started it), and the sync stress checker (clients, writers and faults against a
        // real Postgres and node).
        .target(name: "RippleSyncTesting", dependencies: [
            "RippleServer", "RippleSync", "RippleSyncClient", "RippleTesting", "Ripple", "RippleDiffTesting",
            .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Sync"])),
            .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Sync"])),
            .product(name: "WSClient", package: "swift-websocket", condition: .when(traits: ["Sync"])),
            // The identity provider of tests and of the stress checker: keys made and tokens
            // signed with swift-crypto, their JWKS served over HTTP by Hummingbird.
            .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Sync"])),
            .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["Sync"])),
            .product(name: "CryptoExtras", package: "swift-crypto", condition: .when(traits: ["Sync"])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Sync"])),
        ]),
        // The `ripple-server` command: a node, its demo, and a terminal subscriber.
        .executableTarget(name: "RippleServerCLI", dependencies: [
            "RippleServer", "RippleSync", "RippleSyncClient", "RippleTesting", "Ripple", "RippleDiffTesting", "RippleSyncTesting",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Sync"])),
            .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Sync"])),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Sync"])),
            .product(name: "UnixSignals", package: "swift-service-lifecycle", condition: .when(traits: ["Sync"])),
        ], path: "Sources/ripple-server"),
        .testTarget(name: "RippleDiffTests", dependencies: ["RippleDiff", "RippleDiffTesting"]),
        .testTarget(name: "RippleTestingTests", dependencies: ["Ripple", "RippleDiff", "RippleTesting"]),
        .testTarget(name: "RippleSyncTests", dependencies: ["RippleSync", "RippleDiff", "RippleDiffTesting", "RippleTesting"],
                    resources: [.copy("Golden")]),
        .testTarget(name: "RippleServerTests", dependencies: [
            "RippleServer", "RippleSync", "RippleSyncClient", "RippleTesting", "Ripple", "RippleDiffTesting", "RippleSyncTesting",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Sync"])),
            .product(name: "WSClient", package: "swift-websocket", condition: .when(traits: ["Sync"])),
            .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Sync"])),
            .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Sync"])),
            .product(name: "NIOEmbedded", package: "swift-nio", condition: .when(traits: ["Sync"])),
            .product(name: "NIOWebSocket", package: "swift-nio", condition: .when(traits: ["Sync"])),
            // The JWT tests: a JWKS served over HTTP, keys made and tokens signed with swift-crypto.
            .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Sync"])),
            .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["Sync"])),
            .product(name: "CryptoExtras", package: "swift-crypto", condition: .when(traits: ["Sync"])),
        ]),
        // The client's tests: its connection machine without sockets, and the client against a real node.
        .testTarget(name: "RippleSyncClientTests", dependencies: [
            "RippleSyncClient", "RippleServer", "RippleSync", "RippleSyncTesting", "RippleTesting", "Ripple", "RippleDiff",
            "RippleDiffTesting",
        ]),
        // Fixtures: store files written by earlier versions, which today's code must open.
        .testTarget(name: "RippleTests", dependencies: ["Ripple", "RippleTesting"], resources: [.copy("Fixtures")]),
    ],
    swiftLanguageModes: [.v6]
)
