import CourierEngine
import CourierPipeline

/// Facts about the library.
public enum CourierInfo {
    /// The library version.
    public static let version = "1.0.0"
    /// The version of the libcurl Courier runs on.
    public static var libcurlVersion: String { CurlRuntime.version }
}

extension RequestBuilding {
    /// `User-Agent` naming Courier, its version and libcurl's.
    static let userAgent = "Courier/\(CourierInfo.version) (Linux) libcurl/\(CurlRuntime.version)"
}
