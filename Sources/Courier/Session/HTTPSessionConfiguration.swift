import CCourierSystem
import CourierCore
import CourierPipeline
import CourierStorage
import CourierTransport
import Foundation
import Metrics
import Tracing

/// How a session behaves: timeouts, headers, connection limits, protocol choices.
///
/// Start from ``default``, ``ephemeral`` or ``background(identifier:)`` and adjust:
///
/// ```swift
/// var configuration = HTTPSessionConfiguration.default
/// configuration.requestTimeout = .seconds(10)
/// configuration.additionalHeaders["X-Client"] = "example"
/// let api = HTTPSessionManager(baseURL: url, configuration: configuration)
/// ```
public struct HTTPSessionConfiguration: Sendable {
    /// Which of the three standard configurations this one started from.
    public enum Kind: Sendable, Hashable {
        /// Persistent storage under the session's directory.
        case `default`
        /// Everything in memory; nothing written to disk.
        case ephemeral
        /// Tasks owned by the session and restored after the process restarts.
        case background(identifier: String)
    }

    /// The kind this configuration started from.
    public var kind: Kind

    /// No bytes received or sent for this long fails the request with `timedOut`
    /// (URLSession's `timeoutIntervalForRequest`; libcurl's `CURLOPT_LOW_SPEED_TIME`, so
    /// whole seconds, rounded up). Default 60 seconds.
    public var requestTimeout: Duration = .seconds(60)
    /// A call may take at most this long, counted from the call: waiting for a place under
    /// ``maximumConcurrentTasks``, for interceptors (a token refresh), for a credential, for
    /// connectivity and for retries' delays, and every transfer, redirects included. Then it
    /// fails with `CourierError.timedOut`, saying what it was waiting for. nil for no limit
    /// (URLSession's `timeoutIntervalForResource`). Default nil.
    public var resourceTimeout: Duration?
    /// Making the TCP connection (and TLS handshake) may take at most this long. Default 30 seconds.
    public var connectTimeout: Duration = .seconds(30)
    /// A pooled connection idle for longer than this is not reused. Default 60 seconds.
    public var connectionIdleTimeout: Duration = .seconds(60)
    /// A connection open for this long carries no further request: the next request opens a
    /// new one, to the addresses its host name resolves to then. Keeps a long-lived pool moving
    /// after a DNS or load-balancer change. Counted in whole seconds, rounded up (at least
    /// one). An HTTP/1.1 connection is closed as the request during which it reaches the age
    /// ends; an idle connection of any HTTP version past its age is not reused (with libcurl
    /// 7.80 and newer; before 7.80, an idle HTTP/1.1 connection past its age carries one more
    /// request and is then closed). An HTTP/2 connection busy without pause is never idle, so
    /// never retired. nil (the default, as in URLSession and AsyncHTTPClient): no limit.
    public var maximumConnectionAge: Duration?
    /// How long a host name's addresses, once resolved, are used for new connections before
    /// it is resolved again. Default 60 seconds (libcurl's). Zero resolves for every new
    /// connection; shorter keeps new connections following a DNS change sooner (pair it with
    /// ``maximumConnectionAge`` to move open ones too). Whole seconds, rounded up.
    public var dnsCacheLifetime: Duration = .seconds(60)
    /// An HTTP/1.1 connection that has carried this many requests (each redirect hop counts)
    /// is closed as the last of them ends (AsyncHTTPClient's `maximumUsesPerConnection`).
    /// HTTP/2 and HTTP/3 connections are not counted: libcurl gives a multiplexed connection
    /// new streams while others run. nil (the default): no limit. Values below 1 count as 1.
    public var maximumRequestsPerConnection: Int?
    /// Headers sent with every request of the session (the manager's `additionalHeaders`
    /// starts from these).
    public var additionalHeaders: [String: String] = [:]
    /// Connections open to one host at once; further requests wait for one. Default 6.
    public var maximumConnectionsPerHost = 6
    /// HTTP/2 streams (requests) at once on one connection, at most; the server's own limit
    /// (its `SETTINGS_MAX_CONCURRENT_STREAMS`, 128 for nginx) applies too. Default 1000, so
    /// that the server's limit is the one that counts; libcurl's own default would be 100.
    /// Values outside 1...2,147,483,647 are clamped to that range.
    public var maximumStreamsPerConnection = 1000
    /// Connections open at once in total; 0 for no limit. Default 0.
    public var maximumConnections = 0
    /// The engines that run the session's transfers. Each is a libcurl multi handle on a
    /// thread of its own, with its own connections; a request runs on one of them, as a rule the
    /// one that already holds its origin's connections, or a less busy one its origin may use.
    /// More engines spread TLS handshakes, encryption and each request's engine work over more
    /// cores, at the cost of a thread and a connection pool apiece (an HTTP/2 origin gets one
    /// connection per engine it uses). The connection limits above stay the session's: they
    /// are divided among the engines. Default ``defaultEngineCount``; values below 1 count as
    /// 1 and above 64 as 64. A background session always runs one.
    ///
    /// Keep the default for a client that talks to many hosts or does much TLS; 1 for a small
    /// tool, where one thread is plenty and one pool reuses connections best.
    public var engineCount = HTTPSessionConfiguration.defaultEngineCount
    /// The processors this process may run on (`sched_getaffinity`, so a container's or
    /// `taskset`'s limit counts), at most 8: the default ``engineCount``.
    public static let defaultEngineCount = min(Int(courier_available_processors()), 8)
    /// Tasks running at once; further ones wait their turn (first come, first served). nil for
    /// no limit. Default nil.
    public var maximumConcurrentTasks: Int?
    /// Bytes per second shared by every transfer of the session, downloads and uploads
    /// together; nil for no limit. Default nil. Tasks can also be limited one by one
    /// (`setMaximumBytesPerSecond(_:)`).
    public var maximumBytesPerSecond: Int64?
    /// Which HTTP version to ask for. Default: HTTP/2 over TLS when offered, else HTTP/1.1.
    /// HTTP/3 (`.http3`, `.http3WithFallback`, `.http3WhenAdvertised`) needs a libcurl built
    /// with it (``CourierInfo/supportsHTTP3``); a request can choose with `RequestOptions`.
    public var httpVersion: HTTPVersionPreference = .http2OverTLS
    /// Whether redirects are followed. Default true.
    public var followsRedirects = true
    /// Redirects followed before failing with `tooManyRedirects`. Default 16.
    public var maximumRedirects = 16
    /// Response bodies held in memory larger than this (after content decoding) fail with
    /// `responseTooLarge`; nil for no limit. Default 512 MiB. This also bounds decompression
    /// bombs.
    public var maximumResponseSize: Int64? = 512 << 20
    /// A compressed response that decodes to more than this many bytes per byte received fails
    /// with `responseTooLarge` (AsyncHTTPClient's `.ratio`), whatever it goes to: memory, a
    /// byte stream, a file. Counted once 64 KiB are decoded, since a small body may shrink by
    /// more than a large one should. nil (the default): no ratio; bodies in memory still have
    /// ``maximumResponseSize``. A service that fetches URLs its users give sets it (with a
    /// request's `maximumResponseSize` for streams and downloads); see the guide for the
    /// trade-off.
    public var maximumDecompressionRatio: Int?
    /// Whether to ask for compressed responses (`Accept-Encoding` with the codings libcurl
    /// decodes: gzip, deflate, br, zstd) and decode them. Default true. A response in a coding
    /// libcurl cannot decode (`Content-Encoding: foo`, or an unknown `Transfer-Encoding`) is
    /// handed on as it came, with its `Content-Encoding` kept, as browsers do; with false,
    /// nothing is asked for and no content coding is decoded.
    public var acceptsCompressedResponses = true
    /// Where a default or background session keeps its files (cookie jar, HTTP cache,
    /// background journal). nil: `$XDG_CACHE_HOME/<process name>/courier/` (or
    /// `~/.cache/<process name>/courier/`). An ephemeral session writes nothing anywhere.
    public var storageDirectory: URL?
    /// Whether requests send stored cookies and store the cookies responses set. Default true;
    /// a request can opt out with `RequestOptions.handlesCookies`.
    public var handlesCookies = true
    /// Whether a request that cannot connect because the system has no route to its host
    /// (the link is down, no address, no default route) waits for one, as URLSession's
    /// `waitsForConnectivity`: it is sent when a path appears, or fails with its error after
    /// the resource timeout (the request timeout when there is none). Event monitors see
    /// `waitingForConnectivity`. A request can choose with `RequestOptions`. Default false.
    public var waitsForConnectivity = false
    /// Which cookies responses may set. Default `.always`.
    public var cookieAcceptPolicy: CookieAcceptPolicy = .always
    /// How requests use the HTTP cache. Default `.useProtocolCachePolicy` (RFC 9111).
    public var cachePolicy: CachePolicy = .useProtocolCachePolicy
    /// Whether a response the HTTP cache answered or forwarded carries what the cache did in a
    /// `Cache-Status` field too (RFC 9211; Courier's entry after those of caches nearer the
    /// server), as a proxy cache would write it. Default false: the response's `cacheStatus`
    /// says the same without changing the fields the server sent.
    public var addsCacheStatusField = false
    /// Whether identical `GET` and `HEAD` calls in flight at once share one request (request
    /// coalescing): twenty views asking for the same profile send one request and each gets
    /// the response. A call can choose for itself (`RequestOptions.coalescing`). Default false:
    /// a server may count or vary every request, and a caller may rely on its own (on the
    /// transfer's timeouts and its progress, which are the first caller's).
    public var coalescesRequests = false
    /// The HTTP cache's size in bytes (on disk for a default session, in memory for an
    /// ephemeral one); 0 for no cache. Default 64 MiB for default sessions, 8 MiB for
    /// ephemeral ones, 0 for background ones (which run no data tasks).
    public var cacheCapacity: Int64 = 0
    /// The proxy every request goes through (`http://host:port`; libcurl also takes `https://`
    /// and `socks5://` proxies). nil: the environment's (`http_proxy`, `HTTPS_PROXY`,
    /// `ALL_PROXY`, with `NO_PROXY`), as the curl tool reads them, while
    /// ``trustsEnvironment`` is true; none otherwise. Credentials for it come from the
    /// session's credential store (a protection space with `isProxy`) or, on a 407, from the
    /// challenge handler.
    public var proxy: URL?
    /// Whether the process's environment configures the session, as it does curl, Go's
    /// `net/http`, Python's requests and httpx: the proxy variables (`http_proxy`,
    /// `HTTPS_PROXY`/`https_proxy`, `ALL_PROXY`/`all_proxy`, and `NO_PROXY`/`no_proxy` for the
    /// hosts that go direct) when ``proxy`` is nil, and OpenSSL's `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` in place of the system's CA bundle and directory while
    /// `tls.trustsSystemCertificates` is true. Read once, when the manager is made. Default
    /// true: containers and corporate networks set these for every program in them. False: none
    /// is read, so a session's trust and route are exactly its configuration (a service that
    /// fetches URLs users give it, or one that must not follow a variable set for something
    /// else).
    public var trustsEnvironment = true
    /// How connections are opened: the local address or interface they are sent from, the IP
    /// version, TCP keep-alive, the kernel's user timeout, Multipath TCP. Default: as the
    /// system does (`SocketOptions()`). A request may have its own
    /// (`RequestOptions.socket`).
    public var socket = SocketOptions()
    /// How TLS connections are checked: trust, versions, pins, the client certificate.
    public var tls = TLSConfiguration()
    /// Whether the server's TLS certificate and host name are verified (``tls``'s
    /// `verifiesCertificates`). Default true.
    public var verifiesTLSCertificates: Bool {
        get { tls.verifiesCertificates }
        set { tls.verifiesCertificates = newValue }
    }
    /// A PEM bundle of CA certificates to trust instead of the system's: ``tls``'s
    /// `certificateAuthorityFile`, with `trustsSystemCertificates` off (on again when set to nil).
    public var certificateAuthorityBundle: URL? {
        get { tls.certificateAuthorityFile }
        set {
            tls.certificateAuthorityFile = newValue
            tls.trustsSystemCertificates = newValue == nil
        }
    }
    /// Honour `Strict-Transport-Security` (RFC 6797): after an https response that carries it,
    /// http requests to that host (and its subdomains, with `includeSubDomains`) go over https
    /// until it expires. Kept on disk in default sessions, in memory in ephemeral ones.
    /// Default true.
    public var usesHSTS = true
    /// Connect every request to this Unix-domain socket instead of its host and port (the
    /// URL still names the host: `http://localhost/containers/json` to the Docker socket).
    public var unixSocketPath: String?
    /// Hosts and ports sent somewhere else without asking DNS (curl's `--resolve` and
    /// `--connect-to`).
    public var addressOverrides: [AddressOverride] = []
    /// Interceptors for every request of the session, in order: they adapt each attempt's
    /// request (before a request's own interceptors and before the manager's `adapt(_:)`) and
    /// are asked about a retry after a failure (after the request's own). Empty by default.
    public var interceptors: [any RequestInterceptor] = []
    /// Monitors that hear about every request of the session, each on a task of its own. A
    /// manager whose `logger` logs at `debug` or `trace` adds one that writes to it.
    public var eventMonitors: [any EventMonitor] = []
    /// What sends the requests, instead of the libcurl engine: for tests, a `StubTransport`
    /// from `CourierTesting`. Nil (the default) is the engine.
    public var transport: HTTPTransport?
    /// The tracer of the session's requests: a client span per request, a child span per send
    /// (each attempt, redirect hop and answer to an authentication challenge), its context
    /// injected into the request's header fields (`traceparent` for a W3C tracer). Nil (the
    /// default): `InstrumentationSystem`'s, looked up at each request (the bootstrapped
    /// instrument, or the one a `withTracer(_:_:)` scope binds), which costs nothing when none
    /// is bootstrapped. `NoOpTracer()` turns tracing off for this session.
    public var tracer: (any Tracer)?
    /// Where the session's metrics go (requests, failures, durations, bytes, requests in
    /// flight). Nil (the default): `MetricsSystem.factory`, looked up at each request.
    /// `NOOPMetricsHandler.instance` turns metrics off for this session.
    public var metricsFactory: (any MetricsFactory)?

    /// Creates a configuration of the given kind with default settings.
    public init(kind: Kind) {
        self.kind = kind
        switch kind {
        case .default: cacheCapacity = 64 << 20
        case .ephemeral: cacheCapacity = 8 << 20
        case .background: cacheCapacity = 0
        }
    }

    /// Cookies, cache and credentials persist under the session's directory.
    public static var `default`: HTTPSessionConfiguration { HTTPSessionConfiguration(kind: .default) }

    /// Cookies, cache and credentials are kept in memory only; the session writes nothing to disk.
    public static var ephemeral: HTTPSessionConfiguration { HTTPSessionConfiguration(kind: .ephemeral) }

    /// Download and upload-from-file tasks owned by the session, journaled and restored when a
    /// new manager with the same identifier starts.
    public static func background(identifier: String) -> HTTPSessionConfiguration {
        HTTPSessionConfiguration(kind: .background(identifier: identifier))
    }

    /// The directory this session's files go in; nil for an ephemeral session.
    var resolvedStorageDirectory: URL? {
        let base: URL
        switch kind {
        case .ephemeral:
            return nil
        case .default, .background:
            if let storageDirectory {
                base = storageDirectory
            } else {
                let environment = ProcessInfo.processInfo.environment
                let cache =
                    environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
                    ?? URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory()).appendingPathComponent(".cache")
                base = cache.appendingPathComponent(ProcessInfo.processInfo.processName).appendingPathComponent(
                    "courier")
            }
        }
        if case .background(let identifier) = kind {
            return base.appendingPathComponent("background").appendingPathComponent(Self.safeName(identifier))
        }
        return base
    }

    /// An identifier reduced to a safe directory name.
    static func safeName(_ identifier: String) -> String {
        let allowed = identifier.unicodeScalars.map { scalar -> Character in
            CharacterSet.alphanumerics.contains(scalar) || scalar == "." || scalar == "-" || scalar == "_"
                ? Character(scalar) : "_"
        }
        let name = String(allowed).trimmingCharacters(in: CharacterSet(charactersIn: "."))
        return name.isEmpty ? "session" : name
    }

    /// What is wrong with the configuration, before any request is sent.
    func validate() throws(CourierError) {
        try tls.validate()
        for override in addressOverrides where !override.isValid {
            throw .invalidURL(.init(message: "The address override \(override) is not a host, a port and a target"))
        }
    }

    var transferOptions: TransferOptions {
        var options = TransferOptions()
        options.connectTimeout = connectTimeout
        options.idleTimeout = requestTimeout
        options.totalTimeout = resourceTimeout
        options.followRedirects = followsRedirects
        options.maximumRedirects = maximumRedirects
        options.maximumResponseSize = maximumResponseSize
        options.maximumDecompressionRatio = maximumDecompressionRatio
        options.httpVersion = httpVersion
        options.acceptsCompressedResponses = acceptsCompressedResponses
        options.connectionIdleTimeout = connectionIdleTimeout
        options.maximumConnectionAge = maximumConnectionAge
        options.dnsCacheLifetime = dnsCacheLifetime
        options.socket = socket
        options.maximumRequestsPerConnection = maximumRequestsPerConnection.map { max($0, 1) }
        options.tls = tls.policy
        options.unixSocketPath = unixSocketPath
        options.addressOverrides = addressOverrides
        options.handlesCookies = handlesCookies
        options.waitsForConnectivity = waitsForConnectivity
        options.proxy = proxy?.absoluteString
        return options
    }
}
