@_spi(CourierInternals) import CourierCore
import CourierSerialization
import CourierStorage
import CourierTransport
import HTTPTypes

/// Per-request choices that differ from the session's configuration. Every kind of task
/// takes them: `request`, `dataTask`, the verbs, `downloadTask` (as `requestOptions:`),
/// `uploadTask` and `bytes`.
///
/// ```swift
/// let fresh = try await api.request(.get, "prices", options: .init(cachePolicy: .reloadIgnoringCacheData),
///                                   serializer: JSONResponseSerializer())
/// let report: JSON = try await api.GET("report", options: .init(requestTimeout: .seconds(120), redirects: .doNotFollow))
/// ```
public struct RequestOptions: Sendable {
    /// Send and store cookies for this request (nil: the configuration's `handlesCookies`).
    public var handlesCookies: Bool?
    /// How to use the HTTP cache for this request (nil: the configuration's policy).
    public var cachePolicy: CachePolicy?
    /// Keep the response in the cache for this long, whatever its headers say (it must still
    /// be storable: a `GET` answered 200, without `no-store`).
    public var cacheLifetime: Duration?
    /// Authenticate with this credential (Basic, Digest or NTLM, as the server asks).
    public var credential: Credential?
    /// Interceptors for this request: they adapt it after the session's interceptors, and are
    /// asked about a retry before them.
    public var interceptors: [any RequestInterceptor]
    /// Retry this request with this policy (asked before ``interceptors``); nil: only the
    /// session's interceptors decide.
    public var retryPolicy: RetryPolicy?
    /// No bytes received or sent for this long fails the request with `timedOut` (nil: the
    /// configuration's `requestTimeout`).
    public var requestTimeout: Duration?
    /// The whole call may take at most this long, counted from the call: every wait (a place
    /// in the session's queue, interceptors, a credential, a route, a retry's delay) and every
    /// transfer, redirects and retries included; then it fails with `timedOut` (nil: the
    /// configuration's `resourceTimeout`).
    public var resourceTimeout: Duration?
    /// Whether and how redirects are followed (nil: the configuration's `followsRedirects`
    /// and `maximumRedirects`).
    public var redirects: RedirectBehavior?
    /// Connect to this Unix-domain socket instead of the URL's host and port (nil: the
    /// configuration's `unixSocketPath`).
    public var unixSocketPath: String?
    /// How urgent the request is: its place in the session's queue when
    /// `maximumConcurrentTasks` holds requests back, and its HTTP/2 stream weight. Default
    /// `.normal`.
    public var priority: RequestPriority
    /// Whether a request that cannot connect because the system has no route to the host
    /// waits for one (nil: the configuration's `waitsForConnectivity`).
    public var waitsForConnectivity: Bool?
    /// The HTTP version to ask for (nil: the configuration's `httpVersion`), e.g. `.http3` for
    /// one call to a server known to speak it.
    public var httpVersion: HTTPVersionPreference?

    /// Creates options; every choice defaults to the session's.
    public init(
        handlesCookies: Bool? = nil, cachePolicy: CachePolicy? = nil, cacheLifetime: Duration? = nil,
        credential: Credential? = nil, interceptors: [any RequestInterceptor] = [], retryPolicy: RetryPolicy? = nil,
        requestTimeout: Duration? = nil, resourceTimeout: Duration? = nil, redirects: RedirectBehavior? = nil,
        unixSocketPath: String? = nil, priority: RequestPriority = .normal, waitsForConnectivity: Bool? = nil
    ) {
        self.waitsForConnectivity = waitsForConnectivity
        self.priority = priority
        self.unixSocketPath = unixSocketPath
        self.interceptors = interceptors
        self.handlesCookies = handlesCookies
        self.cachePolicy = cachePolicy
        self.cacheLifetime = cacheLifetime
        self.credential = credential
        self.retryPolicy = retryPolicy
        self.requestTimeout = requestTimeout
        self.resourceTimeout = resourceTimeout
        self.redirects = redirects
    }

    /// The request's interceptors, its retry policy first.
    var chain: [any RequestInterceptor] {
        guard let retryPolicy else { return interceptors }
        return [retryPolicy] + interceptors
    }

    /// Whether any option changes the transfer's settings.
    var changesTransfer: Bool {
        handlesCookies != nil || requestTimeout != nil || resourceTimeout != nil || redirects != nil
            || unixSocketPath != nil || waitsForConnectivity != nil || httpVersion != nil
    }
}

/// Whether and how one request follows redirects.
public struct RedirectBehavior: Sendable {
    /// Follow redirects at all.
    public var follows: Bool
    /// Redirects followed before failing with `tooManyRedirects`.
    public var maximum: Int
    /// Sees each hop before it is followed, and returns the request to send next (the one
    /// proposed, changed, or another) or nil to stop: the redirect response, without its body,
    /// is then the answer. It runs on the transfer's thread: keep it quick, and do not block.
    public var handler: (@Sendable (RedirectHop) -> HTTPRequest?)?

    /// Follow up to `maximum` redirects, each passed to `handler` if there is one.
    public static func follow(
        maximum: Int = 16, handler: (@Sendable (RedirectHop) -> HTTPRequest?)? = nil
    ) -> RedirectBehavior {
        RedirectBehavior(follows: true, maximum: maximum, handler: handler)
    }

    /// Follow up to 16 redirects.
    public static let follow = RedirectBehavior(follows: true, maximum: 16, handler: nil)
    /// Return the first response, redirect or not.
    public static let doNotFollow = RedirectBehavior(follows: false, maximum: 0, handler: nil)
}
