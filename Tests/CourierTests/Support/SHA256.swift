@_spi(CourierInternals) import CourierCore
import Foundation

/// SHA-256 in hex, for comparing what a server received with what was sent: the library's own
/// (checked against the standard vectors in `AWSSigV4SuiteTests`).
enum SHA256 {
    static func hex(_ data: Data) -> String {
        CourierCore.SHA256.hex(CourierCore.SHA256.hash(data))
    }
}
