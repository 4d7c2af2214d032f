@_spi(CourierInternals) import CourierCore
import CourierStorage
import Foundation
import HTTPTypes

/// One request as the engine runs it: head, absolute URL, body and per-transfer options, all
/// prepared (serialized, adapted, validated) before it reaches the engine thread.
package struct TransferRequest: Sendable {
    /// The request head as the manager built and `adapt(_:)` returned it.
    package var head: HTTPRequest
    /// The absolute http(s) URL as text, as libcurl takes it; `head`'s scheme, authority and
    /// path make it up.
    package var urlString: String
    /// The request body, if any.
    package var body: RequestBody?
    /// Large transfers (downloads, streams, uploads) get larger libcurl buffers.
    package var usesLargeBuffers = false
    /// Credentials for the server, each with the origin it was given for. Each hop
    /// authenticates with the one for its own origin, if any (libcurl negotiates Basic, Digest
    /// or NTLM): a redirect may cross origins, a credential never does.
    package var credentials: [ScopedCredential] = []
    /// Authenticate with the proxy with this (kept across redirects: the proxy stays the same).
    package var proxyCredential: Credential?
    /// Limits, timeouts and protocol choices, shared by reference (see `SharedTransferOptions`).
    ///
    /// Read a field in place, `sharedOptions.value.idleTimeout`: there is no computed
    /// `options`, because from another module a `_read` accessor is a coroutine whose frame
    /// (a copy of the 250-byte set) is allocated on the heap at every read, and a getter copies
    /// the set and retains its references.
    package var sharedOptions: SharedTransferOptions
    /// Told about response heads and redirects (when the session has event monitors).
    package var observer: (any TransferObserver)?
    /// Whether a failure ends the progress streams. False when the pipeline may try the
    /// request again: the next attempt reports on the same streams, and the caller ends them
    /// after the last.
    package var failureEndsProgress = true
    /// Notes `Strict-Transport-Security` from verified https responses, and upgrades http
    /// redirects to hosts it knows; nil when the session does not honour it (or does not
    /// verify certificates).
    package var hsts: HSTSStore?
    /// What origins advertised of HTTP/3 (`Alt-Svc`): the engine consults and updates it for
    /// `.http3WhenAdvertised` hops; nil otherwise.
    package var altServices: AltServiceStore?
    /// Sees each redirect before it is followed (see `RedirectBehavior.handler`).
    package var redirectHandler: (@Sendable (RedirectHop) -> HTTPRequest?)?
    /// Where the transfer goes in the session's queue, and its HTTP/2 stream weight.
    package var priority: RequestPriority = .normal
    /// When the call this transfer belongs to must be over (its resource timeout, counted from
    /// the call's start): the transfer fails with `timedOut` then, whether it is still waiting
    /// for a place in the session's queue or running. nil: only the options' timeouts apply.
    package var deadline: ContinuousClock.Instant?

    /// A request with no credentials, buffers of the default size and no observer.
    package init(head: HTTPRequest, urlString: String, body: RequestBody?, options: SharedTransferOptions) {
        self.head = head
        self.urlString = urlString
        self.body = body
        self.sharedOptions = options
    }

    /// A request with options of its own.
    package init(head: HTTPRequest, urlString: String, body: RequestBody?, options: TransferOptions) {
        self.init(head: head, urlString: urlString, body: body, options: SharedTransferOptions(options))
    }

    /// The URL, parsed on demand (error messages, redirects): the request path never parses it.
    package var url: URL? { URL(string: urlString) }

    /// A GET or HEAD without body: the shape whose easy handle can be reused without a reset.
    package var isPlain: Bool {
        body == nil && !usesLargeBuffers && credentials.isEmpty && proxyCredential == nil
            && (head.method == .get || head.method == .head)
    }
}

/// A credential for the server, and the origin (scheme, host and port) it may be sent to.
package struct ScopedCredential: Sendable {
    package var origin: ProtectionSpace
    package var credential: Credential

    /// `credential` for the origin of `url`; nil when `url` has none.
    package init?(_ credential: Credential, for url: URL?) {
        guard let url, let space = ProtectionSpace(url: url) else { return nil }
        self.origin = space.origin
        self.credential = credential
    }

    package init(_ credential: Credential, for space: ProtectionSpace) {
        self.origin = space.origin
        self.credential = credential
    }
}

extension [ScopedCredential] {
    /// The credential given for the origin of `url`, if any.
    package func credential(for url: URL?) -> Credential? {
        guard !isEmpty, let url, let origin = ProtectionSpace(url: url) else { return nil }
        return first { $0.origin == origin }?.credential
    }
}

/// A redirect about to be followed, as a redirect handler sees it.
public struct RedirectHop: Sendable {
    /// The request that was answered with a redirect.
    public var request: HTTPRequest
    /// The redirect response (its body is not kept).
    public var response: HTTPResponse
    /// The request Courier would send next: the `Location` resolved, the method and body
    /// changed as RFC 9110 says for 301, 302 and 303, credentials and cookies dropped for
    /// another origin.
    public var proposed: HTTPRequest
    /// Redirects followed before this one.
    public var count: Int
}

/// Per-transfer settings derived from the session configuration.
/// Transfer options shared by reference: every request of a session carries the session's
/// (unless the call changes one), so a request, and each copy of it the pipeline and the
/// engine keep, holds a pointer instead of the 250-byte set and its dozen references.
/// Immutable.
package final class SharedTransferOptions: Sendable {
    /// The options.
    package let value: TransferOptions

    /// Shares `value`.
    package init(_ value: TransferOptions) {
        self.value = value
    }

    /// Whether the two sets are equal: at once when they are the same object.
    package func isEqual(to other: SharedTransferOptions) -> Bool {
        self === other || value == other.value
    }
}

package struct TransferOptions: Sendable, Equatable {
    /// libcurl's defaults, as Courier sets them.
    package init() {}

    package var connectTimeout: Duration = .seconds(30)
    /// No bytes in either direction for this long fails the transfer (`CURLOPT_LOW_SPEED_TIME`).
    package var idleTimeout: Duration = .seconds(60)
    /// The whole transfer may take at most this long (`CURLOPT_TIMEOUT_MS`); nil for no limit.
    package var totalTimeout: Duration?
    package var followRedirects = true
    package var maximumRedirects = 16
    /// Decoded body bytes allowed in memory (checked in the write callback), nil for no limit.
    /// Downloads to files and byte streams have no limit.
    package var maximumResponseSize: Int64?
    /// Decoded body bytes allowed whatever the sink (memory, a stream, a file), checked as they
    /// are handed to it; nil for no limit (a request's `maximumResponseSize`).
    package var maximumBodySize: Int64?
    /// Decoded bytes allowed per coded byte received, past the first 64 KiB decoded; nil for no
    /// limit.
    package var maximumDecompressionRatio: Int?
    package var httpVersion: HTTPVersionPreference = .http2OverTLS
    /// Ask for and decode every content encoding libcurl has (`CURLOPT_ACCEPT_ENCODING` "").
    package var acceptsCompressedResponses = true
    /// How long an idle pooled connection may be reused (`CURLOPT_MAXAGE_CONN`).
    package var connectionIdleTimeout: Duration = .seconds(60)
    /// A connection open this long carries no further request; nil: no limit. Whole seconds,
    /// rounded up (libcurl's `CURLOPT_MAXLIFETIME_CONN` counts seconds).
    package var maximumConnectionAge: Duration?
    /// How long resolved addresses are used (`CURLOPT_DNS_CACHE_TIMEOUT`, whole seconds).
    package var dnsCacheLifetime: Duration = .seconds(60)
    /// An HTTP/1 connection that has carried this many requests carries no further one; nil: no
    /// limit.
    package var maximumRequestsPerConnection: Int?
    /// Whether connections have a limit of age or requests.
    package var limitsConnections: Bool { maximumConnectionAge != nil || maximumRequestsPerConnection != nil }
    /// Trust, TLS versions, pins, the client certificate, and all of these per host.
    package var tls = TLSPolicy()
    /// The call's TLS has a trust evaluator of its own (not the session's): its connections are
    /// its own, neither reused from nor left for other requests, and resume no TLS session.
    package var isolatesConnections = false
    /// Connect to this Unix-domain socket instead of the URL's host and port.
    package var unixSocketPath: String?
    /// Where requests for some hosts and ports connect instead of where DNS says.
    package var addressOverrides: [AddressOverride] = []
    /// Send stored cookies and keep the ones the response sets.
    package var handlesCookies = true
    /// A request that cannot connect because there is no route to its host waits for one
    /// (the pipeline does; the transport does not look at it).
    package var waitsForConnectivity = false
    /// The proxy (`CURLOPT_PROXY`); nil leaves the choice to libcurl's environment variables.
    package var proxy: String?
    /// No proxy is configured and the environment named none when the session was made: libcurl
    /// is told so (`CURLOPT_NOPROXY` "*") rather than reading five environment variables for
    /// every request (`getenv` scans the whole environment each time).
    package var bypassesProxies = false
    /// The proxy is the configuration's and the environment is not trusted: libcurl is told
    /// that no host goes direct (`CURLOPT_NOPROXY` ""), rather than reading `NO_PROXY`.
    package var ignoresNoProxyVariable = false
    /// What the environment says of the system's trust (`SSL_CERT_FILE`, `SSL_CERT_DIR`), read
    /// when the session was made: in place of libcurl's built-in CA bundle and directory while
    /// the system's CAs are trusted.
    package var environmentCAFile: String?
    package var environmentCADirectory: String?
    /// How connections are opened (source, IP version, keep-alive, user timeout, MPTCP).
    package var socket = SocketOptions()
}

/// Which HTTP version to ask libcurl for (`CURLOPT_HTTP_VERSION`).
///
/// Minor releases may add cases: a `switch` over it ends with `default`.
public enum HTTPVersionPreference: Sendable, Hashable {
    /// HTTP/1.1 only.
    case http1_1
    /// HTTP/2 over TLS when the server offers it through ALPN, HTTP/1.1 otherwise (the default).
    case http2OverTLS
    /// HTTP/2 for http and https; cleartext http uses the `Upgrade` dance.
    case http2
    /// HTTP/2 without negotiation ("prior knowledge"): the server must speak it.
    case http2PriorKnowledge
    /// HTTP/3 (over QUIC) only, for https URLs: no fallback to TCP. Fails with
    /// `CourierError.unsupportedFeature` before anything is sent when the libcurl Courier runs
    /// on was built without HTTP/3 (`CourierInfo.supportsHTTP3`) or the URL is not https.
    case http3
    /// HTTP/3 first, for https URLs: QUIC and TCP race ("happy eyeballs"; TCP starts after
    /// libcurl's `CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS`, 200 ms by default, or at once when QUIC
    /// fails) and the first connection made wins. URLSession's `assumesHTTP3Capable`. With a
    /// libcurl without HTTP/3 (or older than 7.88, whose HTTP/3 could not fall back), the same
    /// as ``http2OverTLS``.
    case http3WithFallback
    /// HTTP/3 where the server has said it speaks it (`Alt-Svc: h3` on an earlier https
    /// response, RFC 7838), ``http2OverTLS`` elsewhere. What servers advertise is remembered
    /// per session (on disk for sessions with storage, in memory for ephemeral ones); a new
    /// connection to an advertising origin is made as ``http3WithFallback`` makes it, and an
    /// origin whose QUIC attempt fell back to TCP is asked over TCP only for five minutes.
    /// An open HTTP/2 connection to the origin is still reused: the switch comes with the next
    /// new connection.
    case http3WhenAdvertised
}

/// What a finished transfer produced.
///
/// A reference, not a struct: the output (the final request, the head, the body, the metrics:
/// about 600 bytes) travels through the continuation that the engine resumes and the async
/// frames of every caller up to the pipeline, and each of those frames would otherwise hold
/// room for it (memory per request in flight, and task-allocator slabs `malloc`ed per request).
package final class TransferOutput: Sendable {
    /// The request of the final hop (after redirects).
    let request: HTTPRequest
    /// The recorded response head; turned into an `HTTPResponse` on the caller's side.
    package let head: RecordedHead
    let body: Data
    let metrics: TransferMetrics

    /// The output of a finished transfer.
    package init(request: HTTPRequest, head: RecordedHead, body: Data, metrics: TransferMetrics) {
        self.request = request
        self.head = head
        self.body = body
        self.metrics = metrics
    }

    /// The same output for a call that waited for another call's transfer (request
    /// coalescing): its metrics name the call that sent it.
    package func coalesced(from requestID: UInt64) -> TransferOutput {
        var metrics = metrics
        metrics.coalescedFrom = requestID
        return TransferOutput(request: request, head: head, body: body, metrics: metrics)
    }
}

/// How urgent a request is, as URLSession's task priority and ASIHTTPRequest's queue priority:
/// when the session's `maximumConcurrentTasks` holds requests back, higher ones start first
/// (in arrival order within one priority); over HTTP/2 it is the stream's weight (low 4,
/// normal 16, libcurl's and the protocol's default, high 128), which the server may use to
/// share the connection.
public enum RequestPriority: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// After normal and high requests.
    case low = 0
    /// The default.
    case normal = 1
    /// Before normal and low requests.
    case high = 2

    /// Lower first.
    public static func < (lhs: RequestPriority, rhs: RequestPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The HTTP/2 stream weight (`CURLOPT_STREAM_WEIGHT`, 1 to 256).
    package var streamWeight: Int {
        switch self {
        case .low: 4
        case .normal: 16
        case .high: 128
        }
    }
}
