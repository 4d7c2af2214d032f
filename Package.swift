// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Courier",
    products: [
        .library(name: "Courier", targets: ["Courier"]),
        .executable(name: "courier", targets: ["CourierCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        .target(
            name: "CCurlShim",
            linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("z")]
        ),
        .target(
            name: "Courier",
            dependencies: [
                "CCurlShim",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "CourierCLI",
            dependencies: [
                "Courier",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // A child process for the tests (a new process to restore a background session in, one
        // to kill part way, one with an empty HOME); the tests find it next to their bundle.
        .executableTarget(
            name: "CourierTestHelper",
            dependencies: ["Courier"],
            path: "Tests/Support/CourierTestHelper"
        ),
        .testTarget(
            name: "CourierTests",
            dependencies: [
                "Courier", "CourierTestHelper", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/CourierTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
