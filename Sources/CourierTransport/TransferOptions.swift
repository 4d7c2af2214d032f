import Foundation

/// Transfer options shared by reference: every request of a session carries the session's
/// (unless the call changes one), so a request, and each copy of it the pipeline and the
/// engine keep, holds a pointer instead of the 250-byte set and its dozen references.
/// Immutable.
package final class SharedTransferOptions: Sendable {
    /// The options.
    package let value: TransferOptions
    /// `value.limitsConnections`, worked out once: the engine asks at every transfer's end, and
    /// calling into the set would copy it (retaining each of its references) to ask.
    package let limitsConnections: Bool

    /// Shares `value`.
    package init(_ value: TransferOptions) {
        self.value = value
        self.limitsConnections = value.limitsConnections
    }

    /// Whether the two sets are equal: at once when they are the same object.
    package func isEqual(to other: SharedTransferOptions) -> Bool {
        self === other || value == other.value
    }
}

/// Per-transfer settings derived from the session configuration.
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
