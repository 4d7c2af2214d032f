// swift-tools-version: 6.1
// Fuzz targets for Courier's hand-written parsers, built with libFuzzer (scripts/fuzz). A
// package of its own, so that the library gains no dependency: the multipart target checks
// Courier's writer against multipart-kit's parser.
import PackageDescription

let package = Package(
    name: "CourierFuzz",
    dependencies: [
        .package(name: "Courier", path: ".."),
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
    ],
    targets: [
        .target(name: "CFuzzDriver"),
        .executableTarget(
            name: "CourierFuzz",
            dependencies: [
                "CFuzzDriver",
                .product(name: "Courier", package: "Courier"),
                .product(name: "MultipartKit", package: "multipart-kit"),
            ],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        )
    ],
    swiftLanguageModes: [.v6]
)
