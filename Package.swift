// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Ripple",
    products: [
        .library(name: "RippleDiff", targets: ["RippleDiff"]),
        .library(name: "RippleTesting", targets: ["RippleTesting"]),
    ],
    targets: [
        // The Heckel diff engine: no dependency on SQLite or Foundation.
        .target(name: "RippleDiff"),
        // What users' tests need: the batch-update list-view model.
        .target(name: "RippleTesting", dependencies: ["RippleDiff"]),
        .testTarget(name: "RippleDiffTests", dependencies: ["RippleDiff", "RippleTesting"]),
        .testTarget(name: "RippleTestingTests", dependencies: ["RippleDiff", "RippleTesting"]),
    ],
    swiftLanguageModes: [.v6]
)
