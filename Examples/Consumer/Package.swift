// swift-tools-version: 6.1
// An app that depends on Courier by path, as a project of yours would by URL: `swift build`
// alone builds it (on a machine without libcurl's headers, SwiftPM says which apt package to
// install), and `swift run courier-consumer URL` makes one request.
import PackageDescription

let package = Package(
    name: "CourierConsumer",
    products: [.executable(name: "courier-consumer", targets: ["CourierConsumer"])],
    dependencies: [
        .package(name: "Courier", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "CourierConsumer",
            dependencies: [.product(name: "Courier", package: "Courier")]
        )
    ],
    swiftLanguageModes: [.v6]
)
