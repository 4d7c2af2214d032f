import CCurlShim
import CourierCore
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

    /// `make()` (`curl_easy_init`, `curl_multi_init`, `curl_share_init`) after
    /// `curl_global_init`: every libcurl handle is made through this. The first handle made in
    /// a process would otherwise initialize libcurl itself, before Courier could install its
    /// allocator and tell OpenSSL to keep its state at exit (a session's cookie engine, made
    /// before its engines, did: one exit in about a hundred crashed in OpenSSL's exit handler).
    static func handle<Handle>(_ make: () -> Handle) -> Handle {
        _ = initialized
        return make()
    }

    /// Whether OpenSSL keeps its global state at exit (see `courier_global_init`): true with
    /// an OpenSSL libcurl, once libcurl is initialized.
    static var keepsOpenSSLAtExit: Bool {
        _ = initialized
        return courier_openssl_kept_at_exit_state()
    }

    /// libcurl's version string, e.g. `7.88.1`.
    package static let version = String(cString: courier_libcurl_version())

    /// What the loaded libcurl says of itself (`curl_version()`): its version and those of the
    /// libraries it was built with, e.g. `libcurl/7.88.1 OpenSSL/3.0.17 zlib/1.2.13 ...`.
    package static let description = String(cString: courier_libcurl_description())

    /// The TLS library the loaded libcurl was built with: what its certificate verification
    /// result (`CURLINFO_SSL_VERIFYRESULT`) means depends on it.
    enum TLSLibrary {
        /// OpenSSL (and its forks): the result is an `X509_V_ERR_*` code.
        case openSSL
        /// GnuTLS: the result is a set of `gnutls_certificate_status_t` bits.
        case gnuTLS
        case other
    }

    /// The loaded libcurl's TLS library, from `curl_version_info`'s `ssl_version`.
    static let tlsLibrary: TLSLibrary = {
        let name = String(cString: courier_libcurl_ssl_version()).lowercased()
        if name.hasPrefix("openssl") || name.hasPrefix("boringssl") || name.hasPrefix("libressl")
            || name.hasPrefix("quictls") || name.hasPrefix("awslc")
        {
            return .openSSL
        }
        return name.hasPrefix("gnutls") ? .gnuTLS : .other
    }()

    /// Whether the loaded libcurl speaks HTTP/3 (built with a QUIC stack: ngtcp2 and nghttp3,
    /// quiche or OpenSSL's QUIC).
    package static let supportsHTTP3 = courier_libcurl_has_http3()

    /// Whether `CURL_HTTP_VERSION_3` may fall back to TCP: HTTP/3 is there, and libcurl is
    /// 7.88 or newer (before, it meant HTTP/3 only).
    static let http3FallsBack = supportsHTTP3 && courier_http3_falls_back()

    /// The names of the loaded libcurl's features, as `curl -V` prints them (`HTTP2`, `HTTP3`,
    /// `brotli`...), from `curl_version_info`'s feature bits (whose meanings never change).
    package static let featureNames: [String] = {
        let names: [(Int32, String)] = [
            (1 << 0, "IPv6"), (1 << 2, "SSL"), (1 << 3, "libz"), (1 << 4, "NTLM"), (1 << 7, "AsynchDNS"),
            (1 << 8, "SPNEGO"), (1 << 9, "Largefile"), (1 << 10, "IDN"), (1 << 14, "TLS-SRP"),
            (1 << 16, "HTTP2"), (1 << 17, "GSS-API"), (1 << 18, "Kerberos"), (1 << 19, "UnixSockets"),
            (1 << 20, "PSL"), (1 << 21, "HTTPS-proxy"), (1 << 22, "MultiSSL"), (1 << 23, "brotli"),
            (1 << 24, "alt-svc"), (1 << 25, "HTTP3"), (1 << 26, "zstd"), (1 << 28, "HSTS"),
            (1 << 30, "threadsafe"),
        ]
        let features = courier_libcurl_features()
        return names.filter { features & $0.0 != 0 }.map(\.1).sorted { $0.lowercased() < $1.lowercased() }
    }()

    /// The loaded libcurl's version as `0xXXYYZZ` (`0x075801` for 7.88.1): what the engine
    /// decides version-dependent behaviour by, since a binary built on one version's headers
    /// may run with another's library.
    package static let versionNumber = Int(courier_libcurl_version_num())

    /// Whether transfers set `CURLOPT_TRANSFER_ENCODING`. From 8.1, libcurl looks at a
    /// transfer coding other than `chunked` only when asked to: without it, `Transfer-Encoding:
    /// gzip, chunked` loses its chunked framing (8.1 to 8.13: the chunk sizes arrive as body)
    /// or fails ("Unsolicited Transfer-Encoding", 8.14 on). Before 8.1 the option only adds a
    /// `TE` request header (which Courier removes: `HeaderList`).
    static let asksForTransferDecoding = courier_libcurl_at_least(0x08_01_00)

    /// Whether libcurl takes transfer codings other than `chunked` off itself. From 8.5 it does
    /// (when asked, see `asksForTransferDecoding`) whatever its content decoding; before, turning
    /// content decoding off, as Courier does (it decodes content itself: `BodyDecoder`), hands
    /// transfer-coded bodies on as they came, and Courier decodes those too.
    static let decodesTransferCodings = courier_libcurl_at_least(0x08_05_00)

    /// libcurl's built-in CA bundle file (`CURLINFO_CAINFO`, e.g.
    /// `/etc/ssl/certs/ca-certificates.crt`) when it exists; nil otherwise, and with a libcurl
    /// older than 7.84, which cannot say (it then parses its bundle and directory for every
    /// new TLS connection, as it always did).
    ///
    /// With the system's trust and nothing else, Courier's shared CA store is made from this
    /// file alone (`CAStores`); where that store is not used, Courier sets this file and no CA
    /// directory: libcurl 7.87 to 8.14 keep the parsed CA store of a file for a multi handle's
    /// connections (`CURLOPT_CA_CACHE_TIMEOUT`, 24 hours by default) only while no directory is
    /// set, and parse the whole bundle again for every new connection otherwise (about 20 ms of
    /// CPU for Debian's). The directory adds nothing on systems that build it from the same
    /// certificates as the bundle (Debian's `update-ca-certificates`).
    package static let systemCAFile: String? = {
        guard let easy = handle(curl_easy_init) else { return nil }
        defer { curl_easy_cleanup(easy) }
        guard let value = courier_builtin_ca_file(easy) else { return nil }
        let path = String(cString: value)
        return FileManager.default.isReadableFile(atPath: path) ? path : nil
    }()

    /// Whether libcurl puts its built-in CA file and directory back at the start of each
    /// transfer when `CURLOPT_CAINFO` or `CURLOPT_CAPATH` is NULL, rather than taking NULL for
    /// none: 8.21 does, 8.14 (which sets them once, when the handle is made) does not; the
    /// releases between are taken to do it (what Courier does about it works either way).
    static let restoresBuiltinCALocations = courier_libcurl_at_least(0x08_0f_00)

    /// libcurl's built-in CA directory (`CURLINFO_CAPATH`): `.some(nil)` when it has none, nil
    /// when the library cannot say (before 7.84).
    static let builtinCADirectory: String?? = {
        guard let easy = handle(curl_easy_init) else { return nil }
        defer { curl_easy_cleanup(easy) }
        var path: UnsafePointer<CChar>?
        guard courier_builtin_ca_path(easy, &path) else { return nil }
        return .some(path.map { String(cString: $0) })
    }()

    /// The system's CA bundle for Courier's shared CA store (`CAStores`): `systemCAFile`, or,
    /// with a libcurl older than 7.84 (which cannot name its own), the first of the bundles
    /// libcurl's `configure` looks for that exists here (Debian's and Ubuntu's, then RHEL's,
    /// ...): what those distributions build their libcurl with.
    static let systemCABundle: String? = {
        if let systemCAFile { return systemCAFile }
        guard builtinCADirectory == nil else { return nil }
        let candidates = [
            "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
            "/usr/share/ssl/certs/ca-bundle.crt", "/usr/local/share/certs/ca-root-nss.crt", "/etc/ssl/cert.pem",
        ]
        return candidates.first { FileManager.default.isReadableFile(atPath: $0) }
    }()
}
