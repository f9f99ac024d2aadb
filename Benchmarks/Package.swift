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
    ],
    targets: [
        .executableTarget(
            name: "ripple-bench",
            dependencies: [
                .product(name: "RippleDiff", package: "Ripple"),
                .product(name: "RippleTesting", package: "Ripple"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
