// swift-tools-version: 6.1
//
// Courier side by side with its peers. A separate package so that the
// library's own build and tests never pull in AsyncHTTPClient and SwiftNIO.
// Driven by ../scripts/bench, which also builds CMulti/multi_get.c.
import PackageDescription

let package = Package(
    name: "CourierBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Courier", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession.git", from: "1.4.0"),
        .package(url: "https://github.com/vapor/websocket-kit.git", from: "2.16.2"),
    ],
    targets: [
        // Options, the worker pool, the RESULT line, the decoded shape.
        .target(
            name: "BenchSupport",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser")
            ]
        ),
        .executableTarget(
            name: "bench-courier",
            dependencies: [
                "BenchSupport",
                .product(name: "Courier", package: "Courier"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // JSON(parsing:) on its own, no network: a 348-byte object and an 87 KB array of them.
        .executableTarget(
            name: "bench-json",
            dependencies: [.product(name: "Courier", package: "Courier")]
        ),
        .executableTarget(
            name: "bench-ahc",
            dependencies: [
                "BenchSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "bench-urlsession",
            dependencies: [
                "BenchSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The client swift-openapi-generator made for the tests (Sources/bench-openapi/Generated
        // is a symlink to Tests/CourierTests/OpenAPI/Generated) over Courier, AsyncHTTPClient or
        // URLSession.
        .executableTarget(
            name: "bench-openapi",
            dependencies: [
                "BenchSupport",
                .product(name: "Courier", package: "Courier"),
                .product(name: "CourierOpenAPI", package: "Courier"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The ws-echo row's server: SwiftNIO's WebSocket upgrader over NIOSSL, echoing every
        // message (scripts/bench starts it).
        .executableTarget(
            name: "bench-wsserver",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The ws-echo row's peer: vapor/websocket-kit's WebSocket client.
        .executableTarget(
            name: "bench-wskit",
            dependencies: [
                "BenchSupport",
                .product(name: "WebSocketKit", package: "websocket-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
