import CCurlShim
@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation

/// Process-wide libcurl facts and one-time initialisation.
package enum CurlRuntime {
    /// `curl_global_init` runs once, before the first handle is made (thread-safe in libcurl 7.84+
    /// builds with the `threadsafe` feature, which Debian's has; Swift's lazy `static let` is
    /// itself once-only). libcurl's large buffers are page-aligned (`courier_global_init`).
    static let initialized: Bool = {
        courier_global_init() == CURLE_OK
    }()

    /// libcurl's version string, e.g. `7.88.1`.
    package static let version = String(cString: courier_libcurl_version())

    /// The content encodings libcurl decodes, as it lists them in `Accept-Encoding`
    /// (`deflate, gzip, br, zstd` for Debian's); empty when none.
    static let contentEncodings = String(cString: courier_content_encodings())
}
