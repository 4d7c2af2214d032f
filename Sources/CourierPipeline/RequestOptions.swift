import CourierStorage
import CourierTransport
import Foundation
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
    // The choices live in a box shared by copies until one of them changes (copy on write):
    // every call passes its options down through several async functions, each of whose frames
    // would otherwise hold room for all of them (about 300 bytes) for as long as the request
    // lives, and every copy would retain each reference among them. The options of a call
    // that changes nothing (`RequestOptions()`) share one box.
    private var storage: Storage

    private final class Storage: @unchecked Sendable {
        // Changed only through `RequestOptions.unique()`, when no other value shares the box:
        // the box is never mutated while another thread can see it.
        // Not checked for exclusive access at run time: a box is written only while no other
        // value shares it (above), so no read of it can overlap a write, and each read of a
        // field would otherwise cost the runtime a check (several per request).
        @exclusivity(unchecked) var fields: Fields

        init(_ fields: Fields) {
            self.fields = fields
        }

        /// The box of `RequestOptions()`.
        static let defaults = Storage(Fields())
    }

    /// The fields, as a value: a new box copies them at once.
    private struct Fields {
        var handlesCookies: Bool? = nil
        var cachePolicy: CachePolicy? = nil
        var cacheLifetime: Duration? = nil
        var credential: Credential? = nil
        var interceptors: [any RequestInterceptor] = []
        var retryPolicy: RetryPolicy? = nil
        var requestTimeout: Duration? = nil
        var resourceTimeout: Duration? = nil
        var redirects: RedirectBehavior? = nil
        var unixSocketPath: String? = nil
        var priority: RequestPriority = .normal
        var waitsForConnectivity: Bool? = nil
        var httpVersion: HTTPVersionPreference? = nil
        var deadline: ContinuousClock.Instant? = nil
        var eventMonitors: [any EventMonitor] = []
        var socket: SocketOptions? = nil
        var maximumResponseSize: Int64? = nil
        var maximumDecompressionRatio: Int? = nil
        var proxy: URL? = nil
        var connectTimeout: Duration? = nil
        var coalescing: Bool? = nil
        var tlsConfiguration: (any Sendable)? = nil
        var tlsPolicy: TLSPolicy? = nil
    }

    /// The box, made this value's own first if another value shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return storage
    }

    /// Send and store cookies for this request (nil: the configuration's `handlesCookies`).
    public var handlesCookies: Bool? {
        get { storage.fields.handlesCookies }
        set { unique().fields.handlesCookies = newValue }
    }

    /// How to use the HTTP cache for this request (nil: the configuration's policy).
    public var cachePolicy: CachePolicy? {
        get { storage.fields.cachePolicy }
        set { unique().fields.cachePolicy = newValue }
    }

    /// Keep the response in the cache for this long, whatever its headers say (it must still
    /// be storable: a `GET` answered 200, without `no-store`).
    public var cacheLifetime: Duration? {
        get { storage.fields.cacheLifetime }
        set { unique().fields.cacheLifetime = newValue }
    }

    /// Authenticate with this credential (Basic, Digest or NTLM, as the server asks).
    public var credential: Credential? {
        get { storage.fields.credential }
        set { unique().fields.credential = newValue }
    }

    /// Interceptors for this request: they adapt it after the session's interceptors, and are
    /// asked about a retry before them.
    public var interceptors: [any RequestInterceptor] {
        get { storage.fields.interceptors }
        set { unique().fields.interceptors = newValue }
    }

    /// Retry this request with this policy (asked before ``interceptors``); nil: only the
    /// session's interceptors decide.
    public var retryPolicy: RetryPolicy? {
        get { storage.fields.retryPolicy }
        set { unique().fields.retryPolicy = newValue }
    }

    /// No bytes received or sent for this long fails the request with `timedOut` (nil: the
    /// configuration's `requestTimeout`).
    public var requestTimeout: Duration? {
        get { storage.fields.requestTimeout }
        set { unique().fields.requestTimeout = newValue }
    }

    /// The whole call may take at most this long, counted from the call: every wait (a place
    /// in the session's queue, interceptors, a credential, a route, a retry's delay) and every
    /// transfer, redirects and retries included; then it fails with `timedOut` (nil: the
    /// configuration's `resourceTimeout`).
    public var resourceTimeout: Duration? {
        get { storage.fields.resourceTimeout }
        set { unique().fields.resourceTimeout = newValue }
    }

    /// Whether and how redirects are followed (nil: the configuration's `followsRedirects`
    /// and `maximumRedirects`).
    public var redirects: RedirectBehavior? {
        get { storage.fields.redirects }
        set { unique().fields.redirects = newValue }
    }

    /// Connect to this Unix-domain socket instead of the URL's host and port (nil: the
    /// configuration's `unixSocketPath`).
    public var unixSocketPath: String? {
        get { storage.fields.unixSocketPath }
        set { unique().fields.unixSocketPath = newValue }
    }

    /// How urgent the request is: its place in the session's queue when
    /// `maximumConcurrentTasks` holds requests back, and its HTTP/2 stream weight. Default
    /// `.normal`.
    public var priority: RequestPriority {
        get { storage.fields.priority }
        set { unique().fields.priority = newValue }
    }

    /// Whether a request that cannot connect because the system has no route to the host
    /// waits for one (nil: the configuration's `waitsForConnectivity`).
    public var waitsForConnectivity: Bool? {
        get { storage.fields.waitsForConnectivity }
        set { unique().fields.waitsForConnectivity = newValue }
    }

    /// The HTTP version to ask for (nil: the configuration's `httpVersion`), e.g. `.http3` for
    /// one call to a server known to speak it.
    public var httpVersion: HTTPVersionPreference? {
        get { storage.fields.httpVersion }
        set { unique().fields.httpVersion = newValue }
    }

    /// The instant by which the whole call must be over, as gRPC and httpx callers pass one
    /// deadline down through the calls they make: every wait (a place in the session's queue,
    /// interceptors, a credential, a route, a retry's delay) and every transfer, redirects and
    /// retries included. Then the call fails with `timedOut`, saying what it was waiting for;
    /// one already past fails at once, before anything is sent. With a resource timeout too
    /// (this request's or the configuration's), the earlier of the two ends the call. nil (the
    /// default): the resource timeout alone.
    ///
    /// ```swift
    /// let deadline = ContinuousClock.now + .seconds(2)
    /// let user = try await api.GET("users/1", options: .init(deadline: deadline), as: User.self)
    /// let avatar = try await api.GET("users/1/avatar", options: .init(deadline: deadline),
    ///                                serializer: DataResponseSerializer())
    /// ```
    public var deadline: ContinuousClock.Instant? {
        get { storage.fields.deadline }
        set { unique().fields.deadline = newValue }
    }

    /// Monitors that hear of this call only: every event of it, from `created` to `finished`
    /// or `failed` (redirects, retries and response heads included), after the session's
    /// monitors have been handed it. Each runs on a task of its own, as the session's do, and
    /// the call's last event is queued for them before it returns. Empty (the default): only
    /// the session's monitors.
    ///
    /// ```swift
    /// let counter = HopCounter()  // an EventMonitor that counts `.redirected` events
    /// let page = try await api.GET("short/abc", options: .init(eventMonitors: [counter]),
    ///                              serializer: DataResponseSerializer())
    /// ```
    public var eventMonitors: [any EventMonitor] {
        get { storage.fields.eventMonitors }
        set { unique().fields.eventMonitors = newValue }
    }

    /// How this call's connections are opened (nil: the configuration's `socket`; a value
    /// replaces the configuration's whole, so start from it to change one field): sent from
    /// another address or interface, over one IP version, with other keep-alive or timeout
    /// settings, for connections opened for it. With a `source`, it is only sent on a
    /// connection from that source; the other options do not keep it off a connection to its
    /// server opened with different ones.
    ///
    /// ```swift
    /// var options = RequestOptions()
    /// options.socket = SocketOptions()
    /// options.socket?.source = .address("10.1.0.5")    // this tenant's egress address
    /// let report = try await api.GET("report", options: options, serializer: DataResponseSerializer())
    /// ```
    public var socket: SocketOptions? {
        get { storage.fields.socket }
        set { unique().fields.socket = newValue }
    }

    /// The most body bytes (after content decoding) this call takes, whatever it is: a body in
    /// memory, a byte stream, a download. More fail it with `responseTooLarge`, at once when
    /// the response's `Content-Length` says so, else as the bytes arrive (a download keeps what
    /// it has for resuming). nil: the configuration's `maximumResponseSize` for bodies in
    /// memory, no limit for streams and downloads.
    public var maximumResponseSize: Int64? {
        get { storage.fields.maximumResponseSize }
        set { unique().fields.maximumResponseSize = newValue }
    }

    /// Decoded bytes allowed per compressed byte received for this call (nil: the
    /// configuration's `maximumDecompressionRatio`).
    public var maximumDecompressionRatio: Int? {
        get { storage.fields.maximumDecompressionRatio }
        set { unique().fields.maximumDecompressionRatio = newValue }
    }

    /// The proxy this call goes through (nil: the configuration's `proxy`, or the
    /// environment's). Its credentials come from the session's credential store under the
    /// proxy's protection space (`isProxy`), from the URL's user info, or from the challenge
    /// handler on a 407, as a session's proxy's do. A call through another proxy than an open
    /// connection's does not reuse it.
    public var proxy: URL? {
        get { storage.fields.proxy }
        set { unique().fields.proxy = newValue }
    }

    /// Whether this call may share another identical call's request while it is in flight
    /// (nil: the configuration's `coalescesRequests`). Only `GET` and `HEAD` calls without a
    /// body, made with the async calls and data tasks, that change none of the session's
    /// transfer settings, with the same URL, fields and credential, are coalesced; each gets the
    /// same response, and the metrics of the calls that waited name the call that sent it
    /// (`TransferMetrics.coalescedFrom`).
    public var coalescing: Bool? {
        get { storage.fields.coalescing }
        set { unique().fields.coalescing = newValue }
    }

    /// Making this call's connection (and its TLS handshake) may take at most this long (nil:
    /// the configuration's `connectTimeout`).
    public var connectTimeout: Duration? {
        get { storage.fields.connectTimeout }
        set { unique().fields.connectTimeout = newValue }
    }

    /// The call's TLS configuration, as `Courier`'s `tls` property holds it (it is declared
    /// there, beside `TLSConfiguration`), and the policy the engine applies for it.
    package var tlsConfiguration: (any Sendable)? { storage.fields.tlsConfiguration }
    package var tlsPolicy: TLSPolicy? { storage.fields.tlsPolicy }

    /// Sets the call's TLS configuration and its policy together.
    package mutating func setTLS(_ configuration: (any Sendable)?, policy: TLSPolicy?) {
        let storage = unique()
        storage.fields.tlsConfiguration = configuration
        storage.fields.tlsPolicy = policy
    }

    /// Options that change only the call's event monitors (see ``eventMonitors``).
    public init(eventMonitors: [any EventMonitor]) {
        var fields = Fields()
        fields.eventMonitors = eventMonitors
        storage = Storage(fields)
    }

    /// Options that change only whether the call may share an identical call's request (see
    /// ``coalescing``).
    public init(coalescing: Bool) {
        var fields = Fields()
        fields.coalescing = coalescing
        storage = Storage(fields)
    }

    /// Options that change only the call's deadline (see ``deadline``).
    public init(deadline: ContinuousClock.Instant) {
        var fields = Fields()
        fields.deadline = deadline
        storage = Storage(fields)
    }

    /// Creates options; every choice defaults to the session's.
    public init(
        handlesCookies: Bool? = nil, cachePolicy: CachePolicy? = nil, cacheLifetime: Duration? = nil,
        credential: Credential? = nil, interceptors: [any RequestInterceptor] = [], retryPolicy: RetryPolicy? = nil,
        requestTimeout: Duration? = nil, resourceTimeout: Duration? = nil, redirects: RedirectBehavior? = nil,
        unixSocketPath: String? = nil, priority: RequestPriority = .normal, waitsForConnectivity: Bool? = nil
    ) {
        let changesNothing =
            handlesCookies == nil && cachePolicy == nil && cacheLifetime == nil && credential == nil
            && interceptors.isEmpty && retryPolicy == nil && requestTimeout == nil && resourceTimeout == nil
            && redirects == nil && unixSocketPath == nil && priority == .normal && waitsForConnectivity == nil
        storage =
            changesNothing
            ? .defaults
            : Storage(
                Fields(
                    handlesCookies: handlesCookies, cachePolicy: cachePolicy, cacheLifetime: cacheLifetime,
                    credential: credential, interceptors: interceptors, retryPolicy: retryPolicy,
                    requestTimeout: requestTimeout, resourceTimeout: resourceTimeout, redirects: redirects,
                    unixSocketPath: unixSocketPath, priority: priority, waitsForConnectivity: waitsForConnectivity))
    }

    /// The request's interceptors, its retry policy first.
    var chain: [any RequestInterceptor] {
        guard let retryPolicy else { return interceptors }
        return [retryPolicy] + interceptors
    }

    /// Whether any option changes the transfer's settings.
    var changesTransfer: Bool {
        guard storage !== Storage.defaults else { return false }
        return handlesCookies != nil || requestTimeout != nil || resourceTimeout != nil || redirects != nil
            || unixSocketPath != nil || waitsForConnectivity != nil || httpVersion != nil || socket != nil
            || maximumResponseSize != nil || maximumDecompressionRatio != nil || proxy != nil || connectTimeout != nil
            || tlsPolicy != nil
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
