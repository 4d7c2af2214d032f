import Foundation
import HTTPTypes

/// One request as the driver runs it: head, absolute URL, body and per-transfer options, all
/// prepared (serialized, adapted, validated) before it reaches the driver thread.
struct TransferRequest: Sendable {
    /// The request head as the manager built and `adapt(_:)` returned it.
    var head: HTTPRequest
    /// The absolute http(s) URL as text, as libcurl takes it; `head`'s scheme, authority and
    /// path make it up.
    var urlString: String
    /// The request body, if any.
    var body: RequestBody?
    /// Large transfers (downloads, streams, uploads) get larger libcurl buffers.
    var usesLargeBuffers = false
    /// Credentials for the server, each with the origin it was given for. Each hop
    /// authenticates with the one for its own origin, if any (libcurl negotiates Basic, Digest
    /// or NTLM): a redirect may cross origins, a credential never does.
    var credentials: [ScopedCredential] = []
    /// Authenticate with the proxy with this (kept across redirects: the proxy stays the same).
    var proxyCredential: Credential?
    /// Limits, timeouts and protocol choices.
    var options: TransferOptions

    /// The URL, parsed on demand (error messages, redirects): the request path never parses it.
    var url: URL? { URL(string: urlString) }

    /// A GET or HEAD without body: the shape whose easy handle can be reused without a reset.
    var isPlain: Bool {
        body == nil && !usesLargeBuffers && credentials.isEmpty && proxyCredential == nil
            && (head.method == .get || head.method == .head)
    }
}

/// A credential for the server, and the origin (scheme, host and port) it may be sent to.
struct ScopedCredential: Sendable {
    var origin: ProtectionSpace
    var credential: Credential

    /// `credential` for the origin of `url`; nil when `url` has none.
    init?(_ credential: Credential, for url: URL?) {
        guard let url, let space = ProtectionSpace(url: url) else { return nil }
        self.origin = space.origin
        self.credential = credential
    }

    init(_ credential: Credential, for space: ProtectionSpace) {
        self.origin = space.origin
        self.credential = credential
    }
}

extension [ScopedCredential] {
    /// The credential given for the origin of `url`, if any.
    func credential(for url: URL?) -> Credential? {
        guard !isEmpty, let url, let origin = ProtectionSpace(url: url) else { return nil }
        return first { $0.origin == origin }?.credential
    }
}

/// Per-transfer settings derived from the session configuration.
struct TransferOptions: Sendable, Equatable {
    var connectTimeout: Duration = .seconds(30)
    /// No bytes in either direction for this long fails the transfer (`CURLOPT_LOW_SPEED_TIME`).
    var idleTimeout: Duration = .seconds(60)
    /// The whole transfer may take at most this long (`CURLOPT_TIMEOUT_MS`); nil for no limit.
    var totalTimeout: Duration?
    var followRedirects = true
    var maximumRedirects = 16
    /// Decoded body bytes allowed in memory (checked in the write callback), nil for no limit.
    /// Downloads to files and byte streams have no limit.
    var maximumResponseSize: Int64?
    var httpVersion: HTTPVersionPreference = .http2OverTLS
    /// Ask for and decode every content encoding libcurl has (`CURLOPT_ACCEPT_ENCODING` "").
    var acceptsCompressedResponses = true
    /// How long an idle pooled connection may be reused (`CURLOPT_MAXAGE_CONN`).
    var connectionIdleTimeout: Duration = .seconds(60)
    /// Whether to verify the server's TLS certificate and host name.
    var verifiesTLS = true
    /// A CA bundle (PEM) to trust instead of the system's.
    var caBundlePath: String?
    /// Send stored cookies and keep the ones the response sets.
    var handlesCookies = true
    /// The proxy (`CURLOPT_PROXY`); nil leaves the choice to libcurl's environment variables.
    var proxy: String?
    /// No proxy is configured and the environment named none when the session was made: libcurl
    /// is told so (`CURLOPT_NOPROXY` "*") rather than reading five environment variables for
    /// every request (`getenv` scans the whole environment each time).
    var bypassesProxies = false
}

/// Which HTTP version to ask libcurl for (`CURLOPT_HTTP_VERSION`).
public enum HTTPVersionPreference: Sendable, Hashable {
    /// HTTP/1.1 only.
    case http1_1
    /// HTTP/2 over TLS when the server offers it through ALPN, HTTP/1.1 otherwise (the default).
    case http2OverTLS
    /// HTTP/2 for http and https; cleartext http uses the `Upgrade` dance.
    case http2
    /// HTTP/2 without negotiation ("prior knowledge"): the server must speak it.
    case http2PriorKnowledge
}

/// What a finished transfer produced.
struct TransferOutput: Sendable {
    /// The request of the final hop (after redirects).
    var request: HTTPRequest
    /// The recorded response head; turned into an `HTTPResponse` on the caller's side.
    var head: ResponseHeadParser
    var body: Data
    var metrics: TransferMetrics
}
