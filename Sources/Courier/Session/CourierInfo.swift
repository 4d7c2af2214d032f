import CourierEngine
import CourierPipeline

/// Facts about the library.
public enum CourierInfo {
    /// The library version.
    public static let version = "1.0.0"
    /// The version of the libcurl Courier runs on.
    public static var libcurlVersion: String { CurlRuntime.version }
    /// What the libcurl Courier runs on says of itself: its version and those of the libraries
    /// it was built with (`libcurl/8.21.0 GnuTLS/3.7.9 ... ngtcp2/1.23.0 nghttp3/1.16.0`).
    public static var libcurlDescription: String { CurlRuntime.description }
    /// The features of the libcurl Courier runs on, named as `curl -V` names them (`HTTP2`,
    /// `HTTP3`, `brotli`, `zstd`...).
    public static var libcurlFeatures: [String] { CurlRuntime.featureNames }
    /// Whether requests can ask for HTTP/3 (`HTTPVersionPreference.http3`): the libcurl Courier
    /// runs on was built with a QUIC stack. Debian's and Ubuntu's are not; see
    /// `Documentation/AdvancedUsage.md`, "HTTP/3".
    public static var supportsHTTP3: Bool { CurlRuntime.supportsHTTP3 }
}

extension RequestBuilding {
    /// `User-Agent` naming Courier, its version and libcurl's.
    static let userAgent = "Courier/\(CourierInfo.version) (Linux) libcurl/\(CurlRuntime.version)"
}
