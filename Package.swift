// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Courier",
    products: [
        .library(name: "Courier", targets: ["Courier"]),
        .library(name: "CourierTesting", targets: ["CourierTesting"]),
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
        // The layers, bottom up. Each target imports only the ones below it, so a reference
        // that points up does not compile (Documentation/Architecture.md walks one request
        // through them).
        //
        // Messages, errors and small utilities every layer shares.
        .target(
            name: "CourierCore",
            dependencies: [
                "CCurlShim",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Leaves: request and response serializers, JSON; cookies, the HTTP cache, credentials.
        .target(
            name: "CourierSerialization",
            dependencies: ["CourierCore", .product(name: "HTTPTypes", package: "swift-http-types")]
        ),
        .target(
            name: "CourierStorage",
            dependencies: [
                "CourierCore", "CCurlShim",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The seam: what a transport is given and gives back, and the rules every transport
        // follows (redirects, body readers, the transfer state machine, progress).
        .target(
            name: "CourierTransport",
            dependencies: [
                "CourierCore", "CourierStorage", "CCurlShim",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The libcurl engine: the default transport.
        .target(
            name: "CourierEngine",
            dependencies: [
                "CourierCore", "CourierStorage", "CourierTransport", "CCurlShim",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The request pipeline: request building, interceptors, the HTTP cache lookup,
        // authentication challenges, event monitors.
        .target(
            name: "CourierPipeline",
            dependencies: [
                "CourierCore", "CourierSerialization", "CourierStorage", "CourierTransport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The public API: the session manager, its configuration, tasks, background sessions.
        .target(
            name: "Courier",
            dependencies: [
                "CourierCore", "CourierSerialization", "CourierStorage", "CourierTransport", "CourierEngine",
                "CourierPipeline",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A transport for users' tests: canned responses, recorded requests, injected failures.
        .target(
            name: "CourierTesting",
            dependencies: [
                "Courier", "CourierCore", "CourierTransport", "CourierStorage",
                .product(name: "HTTPTypes", package: "swift-http-types"),
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
                "Courier", "CourierTesting", "CourierTestHelper", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/CourierTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
