@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// What the HTTP cache can do for one request, before and after the network (RFC 9111).
struct CacheLookup: Sendable {
    private let cache: HTTPCache?
    private let policy: CachePolicy
    private let urlString: String
    /// The request as the caller's side made it (adapted, HSTS applied): what is sent, and
    /// what a response from the cache answers.
    private let request: HTTPRequest
    /// The request as it goes out, as far as the cache must know it (see `OutgoingRequest`):
    /// `request` with the cookies and the credential the transport adds. `Vary` is matched
    /// and recorded against it, and it decides whether the request was authorized (RFC 9111
    /// sections 3.5 and 4.1).
    private var outgoing: HTTPRequest
    private let lifetime: Duration?
    private var entry: CachedResponse?
    /// Whether the cache may hold a response for `key` (it was not looked at, or it had one):
    /// only then does a `no-store` answer need to take the lock and remove it.
    private var mayHoldStored = false
    /// The request's own `Cache-Control` directives (`no-cache` also from `Pragma`): they
    /// decide, this time, whether the stored entry may be used without validation.
    private var requestControl: CacheControl?
    /// For a request with an unsafe method: the cache whose stored responses for the target
    /// URI (and the `Location` and `Content-Location` of the same origin) a successful
    /// response invalidates (RFC 9111 section 4.4).
    private var invalidating: HTTPCache?
    /// For a `HEAD`: the cache whose stored `GET` response a `200` updates (RFC 9111 section
    /// 4.3.5).
    private var updatingFromHead: HTTPCache?
    /// A stale entry served under `stale-while-revalidate`: the pipeline revalidates it in the
    /// background (RFC 5861 section 3).
    private(set) var revalidatesInBackground = false
    /// Why a load goes to the server, for the response's `CacheStatus` (RFC 9211).
    private var forwardReason: CacheStatus.ForwardReason = .uriMiss
    /// Whether responses carry their `CacheStatus` in a `Cache-Status` field too.
    private let addsStatusField: Bool

    /// What `cache` (the session's, if any) can do for `request` under `policy`; `lifetime`
    /// overrides the response's own. `additions` says what the transport adds to the request
    /// on its way out (read only when the cache is consulted).
    init(
        cache sessionCache: HTTPCache?, policy: CachePolicy, lifetime: Duration?, request: HTTPRequest,
        urlString: String, body: RequestBody?, sink: (any ResponseSink)?,
        additions: OutgoingRequest.Additions = .init(),
        addsStatusField: Bool = false
    ) {
        self.addsStatusField = addsStatusField
        self.policy = policy
        self.request = request
        self.urlString = urlString
        self.lifetime = lifetime
        outgoing = request
        // Only GETs of data tasks, without `Cache-Control: no-store` in the request; anything
        // else (and any session without a cache) pays for nothing more here, except that an
        // unsafe method may invalidate what is stored.
        guard let sessionCache, sink == nil, body == nil, request.method == .get else {
            cache = nil
            if let sessionCache, sessionCache.count != 0 {
                if !Self.safeMethods.contains(request.method) {
                    invalidating = sessionCache
                } else if request.method == .head, sink == nil, body == nil {
                    updatingFromHead = sessionCache
                    outgoing = additions.applied(to: request, urlString: urlString)
                }
            }
            return
        }
        var requestControl = CacheControl(request.headerFields[values: .cacheControl])
        cache = requestControl.noStore ? nil : sessionCache
        guard let cache else { return }
        outgoing = additions.applied(to: request, urlString: urlString)
        guard policy != .reloadIgnoringCacheData else {
            mayHoldStored = true
            forwardReason = .request
            return
        }
        // An empty cache (every response `no-store`, say) costs no key and no lookup.
        if cache.count != 0, let stored = cache.entry(for: key) {
            mayHoldStored = true
            forwardReason = .varyMiss
            if stored.matchesVary(outgoing) {
                entry = stored
                forwardReason = .stale
                if request.headerFields[.cacheControl] == nil,
                    request.headerFields[values: HTTPField.Name("Pragma")!].contains(where: {
                        $0.lowercased().contains("no-cache")
                    })
                {
                    requestControl.noCache = true  // RFC 9111 section 5.4
                }
                if requestControl.noCache || requestControl.maxAge == 0 { forwardReason = .request }
                self.requestControl = requestControl
            }
        }
    }

    /// The methods that change nothing on the server (RFC 9110 section 9.2.1).
    private static let safeMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace]

    /// A response from the cache without any load, when the policy and freshness allow; a
    /// stale one within its `stale-while-revalidate` window sets `revalidatesInBackground`.
    mutating func answerWithoutLoading() throws(CourierError) -> RawResponse? {
        let answer = try storedAnswer()
        if answer == nil, policy == .useProtocolCachePolicy || policy == .returnCacheDataOnError, let entry,
            requestControl?.noCache != true, requestControl?.maxAge == nil, revalidates,
            let window = entry.control.staleWhileRevalidate, !entry.control.mustRevalidate,
            entry.staleness() <= window
        {
            revalidatesInBackground = true
            return raw(from: entry, source: .cache, detail: "stale-while-revalidate")
        }
        return answer
    }

    private func storedAnswer() throws(CourierError) -> RawResponse? {
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
            guard let entry, requestControl?.noCache != true else { return nil }
            return entry.isUsable(for: requestControl) ? raw(from: entry, source: .cache) : nil
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
        guard let entry, !entry.control.mustRevalidate, policy == .returnCacheDataOnError || withinStaleIfError(entry)
        else { return nil }
        switch error {
        case .cannotConnect, .cannotResolveHost, .timedOut, .connectionLost, .tls, .transport, .invalidResponse:
            return raw(
                from: entry, source: .cache,
                detail: policy == .returnCacheDataOnError ? "served after a failed load" : "stale-if-error")
        default:
            return nil
        }
    }

    /// Whether the response said `stale-if-error` and is stale by no more than it allows
    /// (RFC 5861 section 4): then a failed load, or a 500, 502, 503 or 504, gets the stored
    /// response under the default policy too.
    private func withinStaleIfError(_ entry: CachedResponse) -> Bool {
        guard policy == .useProtocolCachePolicy, let window = entry.control.staleIfError else { return false }
        return entry.staleness() <= window
    }

    /// The transfer is sent again with `credential` (it answers an authentication challenge):
    /// its response is an authorized one.
    mutating func noteCredential(_ credential: Credential) {
        guard outgoing.headerFields[.authorization] == nil else { return }
        outgoing.headerFields[.authorization] = OutgoingRequest.authorizationStandIn(for: credential)
    }

    /// Whether the response will go through the cache (and needs the request's time).
    var usesCache: Bool { cache != nil || updatingFromHead != nil }

    /// After the load: a 304 refreshes and returns the stored response; a storable response
    /// is stored (replacing an older one); anything else passes through. Not inlined: its
    /// temporaries would take room in the frame of the async attempt that calls it, which
    /// lives as long as the request.
    @inline(never)
    mutating func absorb(_ response: consuming RawResponse, requestTime: Date) -> RawResponse {
        if let invalidating {
            invalidate(in: invalidating, after: response)
            return response
        }
        if let updatingFromHead {
            update(in: updatingFromHead, from: response, requestTime: requestTime)
            return response
        }
        guard let cache else { return response }
        let code = response.status.code
        if code == 304, revalidates, let stored = entry {
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
        if [500, 502, 503, 504].contains(code), let entry, !entry.control.mustRevalidate, withinStaleIfError(entry) {
            var answer = raw(from: entry, source: .cache, detail: "stale-if-error")
            answer.cacheStatus?.forwardStatus = code
            return answer
        }
        // Decided from the status and a few fields read from the recorded head: the whole
        // `HTTPResponse` is built only for a response that is stored (this runs for every GET).
        guard code >= 200, code != 206, code != 304 else { return forwarded(response, stored: false) }
        let head = response.head
        // The values are read as bytes from the recorded head: no array or string is made.
        var control = CacheControl()
        head.forEachValue(of: .cacheControl) { control.add($0) }
        if control.noStore, !control.mustUnderstand || !CachedResponse.understoodStatuses.contains(code) {
            if mayHoldStored { cache.remove(key) }  // an older stored answer goes too
            return forwarded(response, stored: false)
        }
        var varyAll = false
        head.forEachValue(of: .vary) { varyAll = varyAll || FieldList.hasWildcardItem($0) }
        let authorized = outgoing.headerFields[.authorization] != nil
        let explicitFreshness = control.maxAge != nil || lifetime != nil || head.lastValue(of: .expires) != nil
        let storable =
            explicitFreshness
            || (CachedResponse.heuristicStatuses.contains(code)
                && (head.lastValue(of: .eTag) != nil || head.lastValue(of: .lastModified) != nil))
        guard !varyAll, !authorized || control.isPublic || control.mustRevalidate, storable else {
            return forwarded(response, stored: false)
        }
        let stored = CachedResponse(
            key: key, response: CachedResponse.storedHead(of: response.response, control: control),
            body: response.data, request: outgoing, requestTime: requestTime, responseTime: Date(),
            lifetimeOverride: lifetime)
        cache.store(stored)
        return forwarded(response, stored: true, ttl: Int((-stored.staleness()).rounded(.down)))
    }

    /// A response from the server, marked with why the request went there and whether the
    /// response was stored (with its freshness, when it was).
    private func forwarded(_ response: consuming RawResponse, stored: Bool, ttl: Int? = nil) -> RawResponse {
        // Marked in place: a `var` copy of the parameter would retain each of its references.
        let status = CacheStatus(forward: forwardReason, forwardStatus: response.status.code, ttl: ttl, stored: stored)
        mark(&response, status)
        return consume response
    }

    /// Sets the response's cache status, and adds it to its `Cache-Status` field when the
    /// session asks for that (after the members of caches nearer the server, RFC 9211 section 2).
    private func mark(_ response: inout RawResponse, _ status: CacheStatus) {
        response.cacheStatus = status
        guard addsStatusField else { return }
        var head = response.response
        let name = HTTPField.Name("Cache-Status")!
        let earlier = head.headerFields[values: name].joined(separator: ", ")
        head.headerFields[name] = earlier.isEmpty ? status.description : earlier + ", " + status.description
        response.response = head
    }

    /// RFC 9111 section 4.4: a non-error response to an unsafe method invalidates the stored
    /// responses of the target URI, and of its `Location` and `Content-Location` when they
    /// have the target's origin (another origin's entries are not the server's to drop).
    private func invalidate(in cache: HTTPCache, after response: RawResponse) {
        guard (200..<400).contains(response.status.code) else { return }
        cache.remove(HTTPCache.key(method: .get, url: urlString))
        guard let target = URL(string: urlString) else { return }
        let head = response.head
        for reference in [head.lastValue(of: .location), head.lastValue(of: .contentLocation)] {
            guard let reference, let url = URL(string: reference, relativeTo: target)?.absoluteURL,
                url.scheme?.lowercased() == target.scheme?.lowercased(),
                HostName.of(url) == HostName.of(target), url.port == target.port
            else { continue }
            cache.remove(HTTPCache.key(method: .get, url: url.absoluteString))
        }
    }

    /// RFC 9111 section 4.3.5: a `200` to a `HEAD` updates the stored `GET` response's fields
    /// as a `304` would, unless its validators or length say it describes another
    /// representation; then the stored one is out of date and goes.
    private func update(in cache: HTTPCache, from response: RawResponse, requestTime: Date) {
        guard response.status.code == 200 else { return }
        let key = HTTPCache.key(method: .get, url: urlString)
        guard var entry = cache.entry(for: key), entry.matchesVary(outgoing) else { return }
        let head = response.response.headerFields
        let stored = entry.response.headerFields
        for name in [HTTPField.Name.eTag, .lastModified, .contentLength] {
            if let new = head[name], let old = stored[name], new != old {
                cache.remove(key)
                return
            }
        }
        entry.update(with: response.response, requestTime: requestTime, responseTime: Date())
        if entry.control.noStore { cache.remove(key) } else { cache.store(entry) }
    }

    /// The stored response as an answer, with its current `Age` (RFC 9111 section 4.2.3: a
    /// response from the cache says how old it is).
    private func raw(from entry: CachedResponse, source: ResponseSource, detail: String? = nil) -> RawResponse {
        var response = entry.response
        response.headerFields[.age] = String(Int(max(0, entry.currentAge()).rounded(.down)))
        var raw = RawResponse(request: request, response: response, data: entry.body)
        raw.source = source
        let ttl = Int((-entry.staleness()).rounded(.down))
        // A hit, stale or not; a revalidation (fwd=stale, 304); or a stored response served
        // after the load failed (fwd as the load's reason, with the detail).
        let hit = source == .cache && (detail == nil || detail == "stale-while-revalidate")
        let status =
            source == .revalidatedCache
            ? CacheStatus(forward: .stale, forwardStatus: 304, ttl: ttl, stored: true)
            : CacheStatus(hit: hit, forward: hit ? nil : forwardReason, ttl: ttl, detail: detail)
        mark(&raw, status)
        return raw
    }

    /// `answer`, a stored response given for `request` without loading (or after a failed
    /// load, whose transactions `failed` has), with a transaction from the cache in its metrics.
    static func fromCache(
        _ answer: RawResponse, for request: HTTPRequest, after failed: TransferMetrics? = nil
    )
        -> RawResponse
    {
        var answer = answer
        var transaction = TransactionMetrics(request: request, response: answer.response)
        transaction.source = .cache
        answer.metrics.transactions = (failed?.transactions ?? []) + [transaction]
        return answer
    }
}

/// The session's revalidations under `stale-while-revalidate` in flight, by cache key: one per
/// stored response at a time, and a few at most in all, so that a crowd of requests for a stale
/// entry sends one conditional request and background work never queues ahead of what callers
/// wait for (the session's connections and its limit on transfers at once are theirs).
final class BackgroundRevalidations: Sendable {
    /// Revalidations in flight at once, in the whole session; a stale hit beyond that is
    /// served without one (a later hit revalidates).
    static let limit = 4

    private let keys = Locked(Set<String>())

    /// Takes the revalidation of `key`; false when it is under way or the session has `limit`
    /// already.
    func begin(_ key: String) -> Bool {
        keys.withLock { keys in
            guard keys.count < Self.limit else { return false }
            return keys.insert(key).inserted
        }
    }

    func end(_ key: String) {
        _ = keys.withLock { $0.remove(key) }
    }
}

extension RequestPipeline {
    /// Revalidates a stale response that was just served under `stale-while-revalidate`
    /// (RFC 5861 section 3): a conditional request of its own, whose answer updates or
    /// replaces the stored response. Nobody waits for it; a failure leaves the entry as it was.
    /// Skipped while the same response is being revalidated, or while the session has
    /// `BackgroundRevalidations.limit` under way.
    func revalidateInBackground(_ inFlight: InFlightRequest, adapted: HTTPRequest, urlString: String) {
        let key = HTTPCache.key(method: adapted.method, url: urlString)
        guard backgroundRevalidations.begin(key) else { return }
        let revalidation = InFlightRequest(
            inFlight.prepared, hooks: inFlight.hooks, reporters: nil, sink: nil, register: nil, observers: nil,
            chain: inFlight.chain, retryable: false, requestID: nextRequestID(),
            started: nil)
        Task {
            defer { self.backgroundRevalidations.end(key) }
            guard case .send(let attempt) = try self.plan(revalidation, adapted: adapted, inBackground: true) else {
                return
            }
            try await self.send(attempt)
            _ = attempt.absorbed()
        }
    }
}
