@_spi(CourierInternals) import CourierCore
import CourierSerialization
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// What the HTTP cache can do for one request, before and after the network (RFC 9111).
struct CacheLookup: Sendable {
    private let cache: HTTPCache?
    private let policy: CachePolicy
    private let urlString: String
    private let request: HTTPRequest
    private let lifetime: Duration?
    private var entry: CachedResponse?
    /// Whether the cache may hold a response for `key` (it was not looked at, or it had one):
    /// only then does a `no-store` answer need to take the lock and remove it.
    private var mayHoldStored = false
    /// The request's own `Cache-Control: no-cache`: the stored entry must be validated, this
    /// time (the entry itself is not changed).
    private var requestsValidation = false

    /// What `cache` (the session's, if any) can do for `request` under `policy`; `lifetime`
    /// overrides the response's own.
    init(
        cache sessionCache: HTTPCache?, policy: CachePolicy, lifetime: Duration?, request: HTTPRequest,
        urlString: String, body: RequestBody?, sink: (any ResponseSink)?
    ) {
        self.policy = policy
        self.request = request
        self.urlString = urlString
        self.lifetime = lifetime
        // Only GETs of data tasks, without `Cache-Control: no-store` in the request; anything
        // else (and any session without a cache) pays for nothing more here.
        guard let sessionCache, sink == nil, body == nil, request.method == .get else {
            cache = nil
            return
        }
        let requestControl = CacheControl(request.headerFields[values: .cacheControl])
        cache = requestControl.noStore ? nil : sessionCache
        guard let cache else { return }
        guard policy != .reloadIgnoringCacheData else {
            mayHoldStored = true
            return
        }
        // An empty cache (every response `no-store`, say) costs no key and no lookup.
        if cache.count != 0, let stored = cache.entry(for: key) {
            mayHoldStored = true
            if stored.matchesVary(request) {
                entry = stored
                requestsValidation = requestControl.noCache
            }
        }
    }

    /// A response from the cache without any load, when the policy and freshness allow.
    func answerWithoutLoading() throws(CourierError) -> RawResponse? {
        guard cache != nil else { return nil }
        switch policy {
        case .returnCacheDataDontLoad:
            guard let entry else {
                throw .notCached(
                    .init(url: request.url, message: "Nothing stored for this request, and loading is not allowed"))
            }
            return raw(from: entry, source: .cache)
        case .returnCacheDataElseLoad:
            return entry.map { raw(from: $0, source: .cache) }
        case .useProtocolCachePolicy, .returnCacheDataOnError:
            guard let entry, !requestsValidation, entry.isFresh() else { return nil }
            return raw(from: entry, source: .cache)
        case .reloadIgnoringCacheData:
            return nil
        }
    }

    /// The entry's key in the cache: built only when the cache is consulted or changed.
    private var key: String { HTTPCache.key(method: request.method, url: urlString) }

    /// Whether the load is a revalidation of a stale entry.
    var revalidates: Bool {
        guard let entry, policy != .reloadIgnoringCacheData else { return false }
        let (etag, lastModified) = entry.validators
        return etag != nil || lastModified != nil
    }

    /// The request with `If-None-Match` / `If-Modified-Since` from the stored validators.
    var conditionalRequest: HTTPRequest {
        var request = self.request
        guard let entry else { return request }
        let (etag, lastModified) = entry.validators
        if let etag, request.headerFields[.ifNoneMatch] == nil { request.headerFields[.ifNoneMatch] = etag }
        if let lastModified, request.headerFields[.ifModifiedSince] == nil {
            request.headerFields[.ifModifiedSince] = lastModified
        }
        return request
    }

    /// A stored response instead of a failed load (`returnCacheDataOnError`), unless it said
    /// `must-revalidate`. (Not inlined, as `absorb`.)
    @inline(never)
    func fallback(after error: CourierError) -> RawResponse? {
        guard policy == .returnCacheDataOnError, let entry, !entry.control.mustRevalidate else { return nil }
        switch error {
        case .cannotConnect, .cannotResolveHost, .timedOut, .connectionLost, .tls, .transport, .invalidResponse:
            return raw(from: entry, source: .cache)
        default:
            return nil
        }
    }

    /// Whether the response will go through the cache (and needs the request's time).
    var usesCache: Bool { cache != nil }

    /// After the load: a 304 refreshes and returns the stored response; a storable response
    /// is stored (replacing an older one); anything else passes through. Not inlined: its
    /// temporaries would take room in the frame of the async attempt that calls it, which
    /// lives as long as the request.
    @inline(never)
    mutating func absorb(_ response: RawResponse, requestTime: Date) -> RawResponse {
        guard let cache else { return response }
        if response.status.code == 304, revalidates, let stored = entry {
            var entry = stored
            let now = Date()
            entry.update(with: response.response, requestTime: requestTime, responseTime: now)
            if entry.control.noStore {
                cache.remove(key)
            } else if entry.isFresh(now: now) || entry.validators != stored.validators {
                cache.store(entry)
            } else {
                // Stale again at once (`no-cache`, `max-age=0`): the next request revalidates
                // whichever copy it finds, so the file on disk is not rewritten every time.
                cache.refresh(entry)
            }
            var answer = raw(from: entry, source: .revalidatedCache)
            answer.metrics = response.metrics
            return answer
        }
        // Decided from the status and a few fields read from the recorded head: the whole
        // `HTTPResponse` is built only for a response that is stored (this runs for every GET).
        guard CachedResponse.storableStatuses.contains(response.status.code) else { return response }
        let head = response.head
        let control = CacheControl(head.values(of: .cacheControl))
        if control.noStore {
            if mayHoldStored { cache.remove(key) }  // an older stored answer goes too
            return response
        }
        let varyAll = CacheControl.varyNames(head.values(of: .vary)).contains("*")
        let authorized = request.headerFields[.authorization] != nil
        let hasFreshnessOrValidator =
            control.maxAge != nil || lifetime != nil || head.lastValue(of: .expires) != nil
            || head.lastValue(of: .eTag) != nil || head.lastValue(of: .lastModified) != nil
        guard !varyAll, !authorized || control.isPublic || control.mustRevalidate, hasFreshnessOrValidator else {
            return response
        }
        cache.store(
            CachedResponse(
                key: key, response: response.response, body: response.data, request: request, requestTime: requestTime,
                responseTime: Date(), lifetimeOverride: lifetime))
        return response
    }

    private func raw(from entry: CachedResponse, source: ResponseSource) -> RawResponse {
        var raw = RawResponse(request: request, response: entry.response, data: entry.body)
        raw.source = source
        return raw
    }
}
