@_spi(CourierInternals) import CourierCore
import CourierSerialization
import CourierStorage
import CourierTransport

/// Per-request choices that differ from the session's configuration.
///
/// ```swift
/// let fresh = try await api.request(.get, "prices", options: .init(cachePolicy: .reloadIgnoringCacheData),
///                                   serializer: JSONResponseSerializer())
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

    /// Creates options; every choice defaults to the session's.
    public init(
        handlesCookies: Bool? = nil, cachePolicy: CachePolicy? = nil, cacheLifetime: Duration? = nil,
        credential: Credential? = nil, interceptors: [any RequestInterceptor] = []
    ) {
        self.interceptors = interceptors
        self.handlesCookies = handlesCookies
        self.cachePolicy = cachePolicy
        self.cacheLifetime = cacheLifetime
        self.credential = credential
    }
}
