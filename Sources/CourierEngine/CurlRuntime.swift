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

    /// Whether OpenSSL keeps its global state at exit (see `courier_global_init`): true with
    /// an OpenSSL libcurl, once libcurl is initialized.
    static var keepsOpenSSLAtExit: Bool {
        _ = initialized
        return courier_openssl_kept_at_exit_state()
    }

    /// libcurl's version string, e.g. `7.88.1`.
    package static let version = String(cString: courier_libcurl_version())

    /// The content encodings libcurl decodes, as it lists them in `Accept-Encoding`
    /// (`deflate, gzip, br, zstd` for Debian's); empty when none.
    static let contentEncodings = String(cString: courier_content_encodings())

    /// The codings of `Content-Encoding` and `Transfer-Encoding` that libcurl decodes (lower
    /// case): its content encodings, their aliases, `identity` and `chunked`. A response in
    /// any other coding is handed on undecoded (see `Transfer.passesCodingsThroughIfUnknown`).
    static let decodableCodings: Set<String> = {
        var names = Set(FieldList.lowercasedItems([contentEncodings]))
        if names.contains("gzip") { names.insert("x-gzip") }
        names.formUnion(["identity", "chunked"])
        return names
    }()

    /// libcurl's built-in CA bundle file (`CURLINFO_CAINFO`, e.g.
    /// `/etc/ssl/certs/ca-certificates.crt`) when it exists; nil otherwise.
    ///
    /// With the system's trust and nothing else, Courier sets this file and no CA directory.
    /// libcurl keeps the parsed CA store of a file for a multi handle's connections
    /// (`CURLOPT_CA_CACHE_TIMEOUT`, 24 hours by default) only while no directory is set; with
    /// its built-in directory also set, it parses the whole bundle again for every new
    /// connection (about 20 ms of CPU for Debian's). The directory adds nothing on systems that
    /// build it from the same certificates as the bundle (Debian's `update-ca-certificates`).
    package static let systemCAFile: String? = {
        _ = initialized
        guard let easy = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(easy) }
        var value: UnsafePointer<CChar>?
        guard courier_easy_getinfo_string(easy, CURLINFO_CAINFO, &value) == CURLE_OK, let value else { return nil }
        let path = String(cString: value)
        return FileManager.default.isReadableFile(atPath: path) ? path : nil
    }()
}
