import CCurlShim
@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation

/// The CA stores of a session's TLS connections: each trust configuration's CA file parsed
/// once, and the parsed store handed to every new connection.
///
/// libcurl's OpenSSL backend builds a store for each new connection and parses its CA file
/// into it, unless it kept one for the multi handle: from 7.87 on, and only when no CA
/// directory is set (and the 8.21 build here parses again anyway). Debian's bundle is about
/// 140 certificates: 20 to 50 ms of CPU for every new connection otherwise. So where OpenSSL
/// does libcurl's TLS, the engine parses the file into a store of its own once and installs it
/// in each connection's `SSL_CTX` (`courier_easy_set_ca_store`), and libcurl gets no CA file
/// and, as its CA directory, the store's name: a path under `/dev/null`, so no directory that
/// can exist, which libcurl compares (connections and TLS sessions are matched to requests by
/// it, so a request never reuses a connection verified against another store) and adds as a
/// lookup to the store it sets up. From 7.88 to 8.2 libcurl sets a connection's store up after
/// the `SSL_CTX` callback, so into the shared one: that store has the lookup from the start,
/// with the flags libcurl sets, and libcurl finds them there and adds nothing.
///
/// The files are parsed by the first connection that takes the store (in its `SSL_CTX`
/// callback, on an engine thread), not when a request is configured: a session that only
/// speaks plain HTTP parses nothing. A revocation list is loaded into the store with the CA
/// file, and the store checks every certificate of a chain against it, as libcurl's would. A
/// file that cannot be read gets no store (libcurl is given it, and reports it); one that
/// does not parse fails each connection that would take the store, with the error libcurl
/// gives for such a file.
///
/// With a server trust evaluator, the evaluator's check (`TrustContext`) installs the store
/// together with itself, and OpenSSL's verification that the evaluator sees uses it.
///
/// Not used (libcurl builds its stores as before) with another TLS library, for requests that
/// may go through an HTTPS proxy (libcurl 8 hands the proxy's `SSL_CTX` to the same
/// callback), when a file cannot be read, and when libcurl's own file or
/// directory is part of the trust and it cannot name them (before 7.84).
final class CAStores: @unchecked Sendable {
    /// One shared store (`courier_ca_store_new`'s) and the name libcurl knows it by.
    struct Store: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
        let name: String
    }

    private struct Key: Hashable {
        let file: String?
        let directory: String?
        var revocationList: String?
    }

    /// The stores made so far (nil: a file of the configuration cannot be read).
    private let stores = Locked<[Key: Store?]>([:])
    private static let serial = Locked(0)

    /// Whether shared stores can be used at all: libcurl does TLS with OpenSSL itself.
    static let isAvailable = String(cString: courier_libcurl_ssl_version()).lowercased().hasPrefix("openssl")

    /// The store for the trust of `tls` (with `options`' environment), made the first time;
    /// nil where libcurl builds its own (see the type's description).
    func store(for tls: TLSPolicy, options: TransferOptions) -> Store? {
        guard Self.isAvailable, tls.verifies || tls.evaluator != nil, !Self.mayUseHTTPSProxy(options),
            var key = Self.key(for: tls, options: options)
        else { return nil }
        key.revocationList = tls.revocationListFile
        return stores.withLock { stores in
            if let known = stores[key] { return known }
            // Microseconds: the files are parsed by the first connection that takes the store.
            let name = "/dev/null/courier-ca-store-\(Self.serial.withLock { $0 += 1; return $0 })"
            let made = courier_ca_store_new(key.file, key.directory, key.revocationList, name).map {
                Store(pointer: $0, name: name)
            }
            stores[key] = made
            return made
        }
    }

    /// Releases the stores (the session's last engine has ended; connections that are still
    /// somewhere keep their own references).
    func release() {
        stores.withLock { stores in
            for case let store? in stores.values { courier_ca_store_free(store.pointer) }
            stores.removeAll()
        }
    }

    /// The CA file and directory `tls` names for libcurl (nil: libcurl's built-in one, or none
    /// without the system's trust): its own, or with the system's trust the environment's
    /// (`SSL_CERT_FILE`, `SSL_CERT_DIR`, in `options`), which stand for the system's.
    static func locations(for tls: TLSPolicy, options: TransferOptions) -> (file: String?, directory: String?) {
        (
            tls.caFile ?? (tls.trustsSystemCAs ? options.environmentCAFile : nil),
            tls.caDirectory ?? (tls.trustsSystemCAs ? options.environmentCADirectory : nil)
        )
    }

    /// The file and directory libcurl would trust for `tls`: `locations`, with libcurl's
    /// built-in ones where it leaves them (nil when it cannot name them).
    private static func key(for tls: TLSPolicy, options: TransferOptions) -> Key? {
        let (file, directory) = locations(for: tls, options: options)
        guard tls.trustsSystemCAs else {
            return file == nil && directory == nil ? nil : Key(file: file, directory: directory)
        }
        if file == nil && directory == nil {
            // The system's trust alone: its bundle (see `CurlRuntime.systemCAFile`).
            return CurlRuntime.systemCABundle.map { Key(file: $0, directory: nil) }
        }
        // Beside libcurl's own file or directory, which it names from 7.84 on.
        guard let builtinDirectory = CurlRuntime.builtinCADirectory else { return nil }
        if file == nil {
            guard let systemFile = CurlRuntime.systemCAFile else { return nil }
            return Key(file: systemFile, directory: directory)
        }
        return Key(file: file, directory: directory ?? builtinDirectory)
    }

    /// Whether libcurl may send the request through an HTTPS proxy: one that is set, or one
    /// libcurl reads from the environment itself.
    private static func mayUseHTTPSProxy(_ options: TransferOptions) -> Bool {
        if let proxy = options.proxy { return proxy.lowercased().hasPrefix("https://") }
        return !options.bypassesProxies && environmentNamesHTTPSProxy
    }

    private static let environmentNamesHTTPSProxy: Bool = {
        let environment = ProcessInfo.processInfo.environment
        return ["https_proxy", "HTTPS_PROXY", "http_proxy", "all_proxy", "ALL_PROXY"].contains {
            environment[$0]?.lowercased().hasPrefix("https://") == true
        }
    }()
}
