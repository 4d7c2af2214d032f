import CCurlShim
import CourierCore
import CourierStorage
import CourierTransport
import Foundation

extension Transfer {
    /// Sets the options of the current hop on the easy handle. Engine thread.
    ///
    /// A clean handle (see `EasyHandlePool`) already carries the session-wide options and
    /// gets only the per-request ones; any other handle is fresh or reset and gets all.
    func configure(_ easy: UnsafeMutableRawPointer) throws(CourierError) {
        EngineThread.check(engine, "Transfer.configure")
        // The options are read in place, through the shared object: a local copy of the set (or
        // of its TLS policy) would retain and release each of its dozen references, per request.
        let shared = current.sharedOptions
        // The TLS policy of this hop's host when the session has policies per host (per hop, as
        // a redirect may change hosts; such a handle is never kept clean: see `EasyHandlePool`);
        // nil when `shared.value.tls` applies.
        let hostTLS = shared.value.tls.hosts.isEmpty ? nil : shared.value.tls.forHost(HostName.of(current.url))
        if !handleIsClean {
            Self.configureCommonOptions(easy, shared.value, tls: hostTLS ?? shared.value.tls, engine: engine)
        }
        if passesTransferCodingsThrough {
            // Chunked framing aside, the body as it came (see Transfer.unknownTransferCoding).
            courier_easy_setopt_long(easy, CURLOPT_HTTP_TRANSFER_DECODING, 0)
            courier_easy_setopt_long(easy, CURLOPT_TRANSFER_ENCODING, 0)
        }
        if let callDeadline {
            // What is left of the call's time, for this hop (redirects share it). Such a handle
            // is never kept clean (`EasyHandlePool.giveBack`): the next transfer resets it.
            let now = courier_monotonic_nanoseconds()
            let left = callDeadline > now ? Int((callDeadline - now) / 1_000_000) : 0
            courier_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, min(max(1, left), Int(Int32.max)))
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        if let problem = shared.value.socket.source?.problem {
            throw .cannotConnect(.init(url: current.url, message: problem))
        }
        if shared.value.socket.opensItself || engine.limits.socket.opensItself {
            // Set for every hop: the callback's data is this transfer. (Also when only the
            // session's options ask for something at the opening: a call's own options replace
            // them, and the engine's callback knows only the session's.)
            courier_easy_setopt_opensocket_function(easy, transferOpenSocketCallback)
            courier_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, me)
        }
        if shared.value.httpVersion.involvesHTTP3 { try configureHTTP3(easy, current) }
        // `withCString` lends the string's own bytes; passing the `String` where a C string is
        // expected would copy it into a new array first (a malloc per request).
        try check(prepared.url.withCString { courier_easy_setopt_string(easy, CURLOPT_URL, $0) }, easy)
        // Set (or cleared) on every hop: a reused handle still points at its last transfer's.
        parsedURL = engine.parsedURL(for: prepared.url)
        courier_easy_setopt_curlu(easy, parsedURL?.handle)
        courier_easy_setopt_pointer(easy, CURLOPT_PRIVATE, me)
        courier_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        courier_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me)
        courier_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        // Wait for a connection that may multiplex (HTTP/2) rather than open another, but only
        // where HTTP/2 can happen: libcurl counts cleartext http as "may multiplex" too, and
        // would hold every request to a new host until the first response is over.
        courier_easy_setopt_long(easy, CURLOPT_PIPEWAIT, hop.mayMultiplex ? 1 : 0)
        // The stream weight, set on every hop as PIPEWAIT is (a reused handle keeps the last).
        if hop.mayMultiplex { courier_easy_setopt_long(easy, CURLOPT_STREAM_WEIGHT, current.priority.streamWeight) }
        // The response size limit is for bodies held in memory; files and streams have none.
        // The memory sink refuses a declared length over it when the head is complete, and
        // counts decoded bytes after. (Not libcurl's CURLOPT_MAXFILESIZE_LARGE: it would fail
        // a redirect that declares a long body too, before Courier could follow it.)
        Self.configurePins(easy, hostTLS?.pins ?? shared.value.tls.pins, url: current.url)
        // (`configureTrust` takes the whole policy: called only when there is an evaluator.)
        if hostTLS.map({ $0.evaluator != nil }) ?? (shared.value.tls.evaluator != nil) {
            trustContext = try Self.configureTrust(
                easy, hostTLS ?? shared.value.tls, url: current.url, stores: engine.shares.caStores,
                options: shared.value)
        } else {
            trustContext = nil
        }
        try configureMethodAndBody(easy)
        courier_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, prepared.headers.list)
        // libcurl answers a challenge itself (a 401 or 407, then a second request for Digest
        // and NTLM), or sends Basic at once when asked to.
        // (`current.url` builds a URL: only when there is a credential to look up.)
        if !current.credentials.isEmpty, let credential = current.credentials.credential(for: current.url) {
            Self.setCredential(
                credential, easy, user: CURLOPT_USERNAME, password: CURLOPT_PASSWORD, schemes: CURLOPT_HTTPAUTH)
        }
        if let credential = current.proxyCredential {
            Self.setCredential(
                credential, easy, user: CURLOPT_PROXYUSERNAME, password: CURLOPT_PROXYPASSWORD,
                schemes: CURLOPT_PROXYAUTH)
        }
    }

    static func setCredential(
        _ credential: Credential, _ easy: UnsafeMutableRawPointer, user: CURLoption, password: CURLoption,
        schemes: CURLoption
    ) {
        courier_easy_setopt_string(easy, user, credential.user)
        courier_easy_setopt_string(easy, password, credential.password)
        // CURLAUTH_ANY sets the top bit of an unsigned long: pass the bits, not the value.
        let allowed = credential.sendsPreemptively ? courier_auth_basic : courier_auth_any
        courier_easy_setopt_long(easy, schemes, Int(bitPattern: UInt(allowed)))
    }

    /// The options every transfer of the session shares (WebSocket connections too), with
    /// `tls`, the TLS policy for the host of the hop (`options.tls` when it has none per host).
    static func configureCommonOptions(
        _ easy: UnsafeMutableRawPointer, _ options: TransferOptions, tls: TLSPolicy, engine: CurlEngine
    ) {
        courier_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        let enginePointer = Unmanaged.passUnretained(engine).toOpaque()
        courier_easy_setopt_opensocket_function(easy, engineOpenSocketCallback)
        courier_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, enginePointer)
        courier_easy_setopt_closesocket_function(easy, engineCloseSocketCallback)
        courier_easy_setopt_pointer(easy, CURLOPT_CLOSESOCKETDATA, enginePointer)
        courier_easy_setopt_write_function(easy, transferWriteCallback)
        courier_easy_setopt_header_function(easy, transferHeaderCallback)

        // Only http and https, for requests and redirects alike (a redirect to file:// or any
        // other scheme is refused: see RedirectPolicy). Courier follows redirects itself (see
        // CurlEngine.finish), so libcurl never does.
        courier_easy_allow_http_only(easy)
        courier_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        // Courier takes content codings off itself (`BodyDecoder`): libcurl's decoding differs
        // between versions (from 8.5 it fails at once on a coding it does not know, which 7.x
        // and Courier hand on as it came). `Accept-Encoding` is in the header list.
        courier_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0)
        if CurlRuntime.asksForTransferDecoding { courier_easy_setopt_long(easy, CURLOPT_TRANSFER_ENCODING, 1) }
        courier_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, options.httpVersion.curlValue)

        // Timeouts are libcurl's own: no timer per chunk on our side.
        // Any `Duration` is accepted: each is clamped to what libcurl takes (see `curlMilliseconds`).
        courier_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeout.curlMilliseconds)
        courier_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        courier_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, options.idleTimeout.curlSeconds)
        if let total = options.totalTimeout {
            courier_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, total.curlMilliseconds)
        }
        courier_easy_setopt_long(easy, CURLOPT_MAXAGE_CONN, options.connectionIdleTimeout.curlSeconds)
        Self.configureSocket(easy, options.socket)
        // The age of an idle connection is libcurl's to check (7.80 on); the engine checks a
        // connection's age and requests as each transfer on it ends (`CurlEngine.retireIfSpent`).
        if let age = options.maximumConnectionAge {
            courier_easy_set_maximum_connection_lifetime(easy, age.curlSeconds)
        }
        if options.dnsCacheLifetime != .seconds(60) {
            // Zero (or less) caches nothing; anything else is at least a second.
            let lifetime = options.dnsCacheLifetime <= .zero ? 0 : options.dnsCacheLifetime.curlSeconds
            courier_easy_setopt_long(easy, CURLOPT_DNS_CACHE_TIMEOUT, lifetime)
        }

        // The cookie share or the TLS session share: either caches TLS sessions for resumption.
        if options.handlesCookies, let cookies = engine.cookies {
            cookies.attach(easy)
        } else {
            courier_easy_setopt_share(easy, engine.shares.connections)
        }
        Self.configureTLS(easy, tls, environment: options, stores: engine.shares.caStores)
        if options.isolatesConnections {
            // A call's own trust evaluator: a connection of its own, which no other request
            // reuses, and no TLS session resumed from another's (which would skip the check).
            courier_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1)
            courier_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1)
            courier_easy_setopt_long(easy, CURLOPT_SSL_SESSIONID_CACHE, 0)
        }
        if let path = options.unixSocketPath { courier_easy_setopt_string(easy, CURLOPT_UNIX_SOCKET_PATH, path) }
        if !options.addressOverrides.isEmpty {
            let lines = engine.overrideLines(options.addressOverrides)
            if let resolve = lines.resolve { courier_easy_setopt_slist(easy, CURLOPT_RESOLVE, resolve.list) }
            if let connect = lines.connect { courier_easy_setopt_slist(easy, CURLOPT_CONNECT_TO, connect.list) }
        }
        if let proxy = options.proxy {
            courier_easy_setopt_string(easy, CURLOPT_PROXY, proxy)
            if options.ignoresNoProxyVariable { courier_easy_setopt_string(easy, CURLOPT_NOPROXY, "") }
        } else if options.bypassesProxies {
            courier_easy_setopt_string(easy, CURLOPT_NOPROXY, "*")
        }
    }

    /// Trust, versions and the client identity: session-wide.
    /// The socket options libcurl applies itself; MPTCP and the user timeout are the open-socket
    /// callback's (`CurlEngine.openSocket`).
    private static func configureSocket(_ easy: UnsafeMutableRawPointer, _ socket: SocketOptions) {
        // Without libcurl's `host!` and `if!` prefixes: since it parses them apart (8.9, with
        // `ifhost!`), libcurl keeps a prefixed source out of the field it compares when choosing
        // a connection to reuse, and a request from one source would be sent on a connection
        // from another (as the tests saw on 8.21; 7.76 to 8.5 compare the whole text). Unprefixed,
        // libcurl tries the text as an interface name, then as an address; `configure` has made
        // sure it is the one the source says (`SocketOptions.Source.problem`).
        switch socket.source {
        case .address(let text), .interface(let text): courier_easy_setopt_string(easy, CURLOPT_INTERFACE, text)
        case nil: break
        }
        switch socket.addressFamily {
        case .ipv4: courier_easy_setopt_long(easy, CURLOPT_IPRESOLVE, Int(CURL_IPRESOLVE_V4))
        case .ipv6: courier_easy_setopt_long(easy, CURLOPT_IPRESOLVE, Int(CURL_IPRESOLVE_V6))
        case .any: break
        }
        if let keepAlive = socket.keepAlive {
            courier_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
            courier_easy_setopt_long(easy, CURLOPT_TCP_KEEPIDLE, keepAlive.idle.curlSeconds)
            courier_easy_setopt_long(easy, CURLOPT_TCP_KEEPINTVL, keepAlive.interval.curlSeconds)
        }
    }

    /// Verification, trust, versions, revocation, stapling and the client identity of `tls`;
    /// `environment`'s CA file and directory stand for the system's.
    private static func configureTLS(
        _ easy: UnsafeMutableRawPointer, _ tls: TLSPolicy, environment options: TransferOptions, stores: CAStores
    ) {
        // With an evaluator, OpenSSL's check of the chain and the host runs in Courier's
        // certificate check (`TrustContext.decide`), whose verdict libcurl reads as the peer's
        // verification: libcurl's own host check would refuse a chain the evaluator accepts.
        let verifiesPeer = tls.verifies || tls.evaluator != nil
        courier_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, verifiesPeer ? 1 : 0)
        courier_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, tls.verifies && tls.evaluator == nil ? 2 : 0)
        // A file or directory given replaces libcurl's built-in one of the same kind; without
        // the system's trust, the other built-in goes too. The environment's (`SSL_CERT_FILE`,
        // `SSL_CERT_DIR`) stand for the system's.
        let (file, directory) = CAStores.locations(for: tls, options: options)
        // With an evaluator, its check installs the store (`configureTrust`).
        if let store = stores.store(for: tls, options: options),
            tls.evaluator != nil || courier_easy_set_ca_store(easy, store.pointer) == CURLE_OK
        {
            // The same trust, parsed once for the session (see `CAStores`): no file for libcurl
            // to parse (or, where NULL brings its own file back, one certificate), and the
            // store's name where libcurl compares it.
            setNoCAFile(easy)
            courier_easy_setopt_string(easy, CURLOPT_CAPATH, store.name)
        } else {
            // No shared store's callback left from an earlier hop of this handle (an evaluator's
            // is set again by `configureTrust`).
            courier_easy_set_trust_context(easy, nil)
            // "None" is NULL, except where libcurl puts its built-in file or directory back
            // for NULL (see `CurlRuntime.restoresBuiltinCALocations`): there, a file of one
            // certificate nobody has the key of, and a directory that cannot exist.
            if let file {
                courier_easy_setopt_string(easy, CURLOPT_CAINFO, file)
            } else if !tls.trustsSystemCAs {
                setNoCAFile(easy)
            }
            if let directory {
                courier_easy_setopt_string(easy, CURLOPT_CAPATH, directory)
            } else if !tls.trustsSystemCAs || (file == nil && CurlRuntime.systemCAFile != nil) {
                // Only the system's trust: its bundle file alone, so that libcurl parses it once
                // per session rather than once per connection (see `CurlRuntime.systemCAFile`).
                if CurlRuntime.restoresBuiltinCALocations {
                    courier_easy_setopt_string(easy, CURLOPT_CAPATH, "/dev/null/courier-no-ca-directory")
                } else {
                    courier_easy_setopt_pointer(easy, CURLOPT_CAPATH, nil)
                }
            }
        }
        if tls.minimum != nil || tls.maximum != nil {
            let minimum = tls.minimum?.curlValue ?? Int(CURL_SSLVERSION_DEFAULT)
            let maximum = tls.maximum?.curlMaximumValue ?? Int(CURL_SSLVERSION_MAX_DEFAULT)
            courier_easy_setopt_long(easy, CURLOPT_SSLVERSION, minimum | maximum)
        }
        if let crl = tls.revocationListFile { courier_easy_setopt_string(easy, CURLOPT_CRLFILE, crl) }
        if tls.requiresStapledStatus { courier_easy_setopt_long(easy, CURLOPT_SSL_VERIFYSTATUS, 1) }
        if let identity = tls.clientIdentity {
            courier_easy_setopt_string(easy, CURLOPT_SSLCERT, identity.certificatePath)
            courier_easy_setopt_string(easy, CURLOPT_SSLCERTTYPE, identity.isPKCS12 ? "P12" : "PEM")
            if let key = identity.keyPath {
                courier_easy_setopt_string(easy, CURLOPT_SSLKEY, key)
                courier_easy_setopt_string(easy, CURLOPT_SSLKEYTYPE, "PEM")
            }
            if let password = identity.password { courier_easy_setopt_string(easy, CURLOPT_KEYPASSWD, password) }
        }
    }

    /// No CA file for libcurl: NULL, or, where libcurl puts its built-in file back for NULL
    /// (`CurlRuntime.restoresBuiltinCALocations`), the placeholder CA blob, which takes the
    /// file's place.
    private static func setNoCAFile(_ easy: UnsafeMutableRawPointer) {
        courier_easy_setopt_pointer(easy, CURLOPT_CAINFO, nil)
        if CurlRuntime.restoresBuiltinCALocations { courier_easy_set_placeholder_ca(easy) }
    }

    /// The server trust evaluation of this hop's new connections, when `tls` has an evaluator
    /// (set on every hop: the context names the hop's host), with the session's shared CA store
    /// for `tls` when there is one (the one `configureTLS` chose).
    static func configureTrust(
        _ easy: UnsafeMutableRawPointer, _ tls: TLSPolicy, url: @autoclosure () -> URL?,
        stores: CAStores, options: TransferOptions
    ) throws(CourierError) -> TrustContext? {
        guard let evaluator = tls.evaluator else { return nil }
        guard TrustContext.isAvailable else {
            throw .tls(
                .init(
                    url: url(),
                    message:
                        "A server trust evaluator needs libcurl built with OpenSSL; this one uses \(String(cString: courier_libcurl_ssl_version()))"
                ))
        }
        let context = TrustContext(
            evaluator: evaluator, host: HostName.of(url()) ?? "", caStore: stores.store(for: tls, options: options))
        courier_easy_set_trust_context(easy, Unmanaged.passUnretained(context).toOpaque())
        return context
    }

    /// The pins for this hop's host (per hop: a reused handle and a redirect may change hosts).
    static func configurePins(
        _ easy: UnsafeMutableRawPointer, _ pinsByHost: [String: [String]], url: @autoclosure () -> URL?
    ) {
        guard !pinsByHost.isEmpty else { return }
        if let host = HostName.of(url()), let pins = pinsByHost[host] {
            courier_easy_setopt_string(easy, CURLOPT_PINNEDPUBLICKEY, pins.joined(separator: ";"))
        } else {
            courier_easy_setopt_pointer(easy, CURLOPT_PINNEDPUBLICKEY, nil)
        }
    }

    /// The method, and the body if any, of `current` (read in place, not copied).
    private func configureMethodAndBody(_ easy: UnsafeMutableRawPointer) throws(CourierError) {
        let method = current.head.method
        let sendsBody = method != .get && method != .head
        // POST, PUT and PATCH always send a body: `Content-Length: 0` rather than none.
        let body =
            current.body ?? (method == .post || method == .put || method == .patch ? RequestBody(.data(Data())) : nil)
        switch method {
        case .get:
            courier_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case .head:
            courier_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case .post:
            courier_easy_setopt_long(easy, CURLOPT_POST, 1)
        default:
            // The name is sent as is; `POST`'s body machinery sends the body, if any.
            courier_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method.rawValue)
            if body != nil { courier_easy_setopt_long(easy, CURLOPT_POST, 1) }
        }
        if current.usesLargeBuffers {
            courier_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 256 << 10)
            courier_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 256 << 10)
        }
        guard sendsBody, let body else { return }
        if let data = body.smallData {
            courier_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(data.count))
            // COPYPOSTFIELDS copies `POSTFIELDSIZE` bytes; an empty body still needs a pointer.
            let code =
                data.isEmpty
                ? courier_easy_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, "")
                : data.withUnsafeBytes {
                    courier_easy_setopt_pointer(
                        easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress!))
                }
            try check(code, easy)
            return
        }
        // Larger bodies are read on demand; without a length libcurl sends them chunked.
        let reader = body.makeReader()
        reader.onReadable = { [weak self] in
            guard let self else { return }
            _ = self.engine.submit(.resumeSending(self))
        }
        bodyReader = reader
        let me = Unmanaged.passUnretained(self).toOpaque()
        courier_easy_setopt_read_function(easy, transferReadCallback)
        courier_easy_setopt_read_data(easy, me)
        courier_easy_setopt_seek_function(easy, transferSeekCallback)
        courier_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, me)
        courier_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.length ?? -1))
    }

    private func check(_ code: CURLcode, _ easy: UnsafeMutableRawPointer) throws(CourierError) {
        guard code != CURLE_OK else { return }
        throw CourierError.fromCurl(
            code, detail: errorBuffer.map { String(cString: $0) } ?? "", context: .init(url: current.url, message: ""))
    }
}

// libcurl's headers spell these constants as enum members (7.76 to 8.5), `int` macros (8.14) or
// `long` macros (8.21), which Swift imports as `Int`, `Int32` and `Int`: `Int(...)` reads them all
// alike.
extension TLSVersion {
    /// `CURLOPT_SSLVERSION`'s minimum.
    var curlValue: Int {
        switch self {
        case .v1_0: Int(CURL_SSLVERSION_TLSv1_0)
        case .v1_1: Int(CURL_SSLVERSION_TLSv1_1)
        case .v1_2: Int(CURL_SSLVERSION_TLSv1_2)
        case .v1_3: Int(CURL_SSLVERSION_TLSv1_3)
        }
    }

    /// `CURLOPT_SSLVERSION`'s maximum (the high 16 bits).
    var curlMaximumValue: Int {
        switch self {
        case .v1_0: Int(CURL_SSLVERSION_MAX_TLSv1_0)
        case .v1_1: Int(CURL_SSLVERSION_MAX_TLSv1_1)
        case .v1_2: Int(CURL_SSLVERSION_MAX_TLSv1_2)
        case .v1_3: Int(CURL_SSLVERSION_MAX_TLSv1_3)
        }
    }
}

extension HTTPVersionPreference {
    /// `CURLOPT_HTTP_VERSION` for the session's handles; `.http3WhenAdvertised` hops set it
    /// again per origin (`Transfer.configureHTTP3`).
    var curlValue: Int {
        switch self {
        case .http1_1: Int(CURL_HTTP_VERSION_1_1)
        case .http2OverTLS, .http3WhenAdvertised: Int(CURL_HTTP_VERSION_2TLS)
        case .http2: Int(CURL_HTTP_VERSION_2_0)
        case .http2PriorKnowledge: Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
        case .http3: courier_http_version_3_only()
        case .http3WithFallback:
            CurlRuntime.http3FallsBack ? Int(CURL_HTTP_VERSION_3) : Int(CURL_HTTP_VERSION_2TLS)
        }
    }

    /// One of the HTTP/3 choices.
    var involvesHTTP3: Bool {
        switch self {
        case .http3, .http3WithFallback, .http3WhenAdvertised: true
        case .http1_1, .http2OverTLS, .http2, .http2PriorKnowledge: false
        }
    }
}

extension Transfer {
    /// The HTTP/3 part of a hop's options: `.http3` refused where it cannot work, before
    /// anything is sent; `.http3WhenAdvertised` asking for HTTP/3 (with TCP racing it) where
    /// the origin advertised it and has not fallen back lately. Engine thread.
    func configureHTTP3(_ easy: UnsafeMutableRawPointer, _ request: TransferRequest) throws(CourierError) {
        advertisedHTTP3Origin = nil
        let isHTTPS = request.urlString.hasPrefix("https:")
        switch request.sharedOptions.value.httpVersion {
        case .http3:
            guard CurlRuntime.supportsHTTP3 else {
                throw .unsupportedFeature(
                    .init(
                        url: request.url,
                        message: "HTTP/3 was asked for, but the libcurl Courier runs on was built without it "
                            + "(\(CurlRuntime.description))"))
            }
            guard isHTTPS else {
                throw .unsupportedFeature(
                    .init(url: request.url, message: "HTTP/3 needs an https URL: QUIC always runs over TLS"))
            }
        case .http3WhenAdvertised:
            var wanted = Int(CURL_HTTP_VERSION_2TLS)
            if isHTTPS, CurlRuntime.http3FallsBack, let store = request.altServices,
                let authority = request.head.authority, let origin = AltServiceStore.origin(authority: authority),
                store.prefersHTTP3(origin)
            {
                wanted = Int(CURL_HTTP_VERSION_3)
                advertisedHTTP3Origin = origin
            }
            courier_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, wanted)
        default:
            break
        }
    }

    /// What the hop that just ended tells the session's Alt-Svc store: the `Alt-Svc` its
    /// response carried, and whether a new connection asked for HTTP/3 got TCP instead.
    /// Engine thread.
    func noteAlternativeServices(_ store: AltServiceStore, _ easy: UnsafeMutableRawPointer) {
        guard current.urlString.hasPrefix("https:"), let authority = current.head.authority,
            let origin = AltServiceStore.origin(authority: authority)
        else { return }
        if head.isComplete {
            let values = head.values(of: "alt-svc")
            if !values.isEmpty { store.record(values.joined(separator: ", "), origin: origin) }
        }
        if advertisedHTTP3Origin == origin {
            var connects = 0
            var version = 0
            courier_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
            courier_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
            if connects > 0, version != Int(CURL_HTTP_VERSION_3) { store.noteFallback(origin) }
        }
    }
}

extension Duration {
    /// The longest timeout handed to libcurl: `Int32.max` milliseconds, about 24.8 days. Longer
    /// ones (`.seconds(Int64.max)` means "never") are clamped to it; libcurl's own timer
    /// arithmetic, and the engine's in nanoseconds, stay far from overflowing.
    static let longestCurlTimeout = Duration.milliseconds(Int32.max)

    /// Whole milliseconds, saturating at `Int.min` and `Int.max` instead of trapping.
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        let (sum, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        guard !overflowAgain else { return seconds < 0 ? .min : .max }
        return Int(sum)
    }

    /// Milliseconds for a libcurl timeout option: at least 1 (zero or negative means "at
    /// once"; libcurl would read 0 as its own default) and at most `longestCurlTimeout`.
    var curlMilliseconds: Int {
        min(max(milliseconds, 1), Int(Int32.max))
    }

    /// Whole seconds, rounded up, for libcurl's options in seconds: at least 1, at most
    /// `longestCurlTimeout`.
    var curlSeconds: Int {
        let limit = Int(Int32.max) / 1000
        let (seconds, attoseconds) = components
        guard seconds < limit else { return limit }
        return min(max(Int(seconds) + (attoseconds > 0 ? 1 : 0), 1), limit)
    }

    init(microseconds: Int64) {
        self = .microseconds(microseconds)
    }
}
