import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Prepares, adapts, sends (or answers from the cache) and processes one call: the
    /// response before serialization.
    nonisolated func performRaw(
        _ call: Call, reporters: TransferReporters? = nil, sink: ResponseSink? = nil,
        register: (@Sendable (Transfer) -> Void)? = nil
    ) async throws -> RawResponse {
        let (head, body, sessionHeaders) = try prepare(call)
        if let background {
            try background.checkIdentifier()
            guard sink is DownloadSink || body?.isFile == true else {
                throw CourierError.unsupportedInBackgroundSession(
                    .init(message: "A background session runs downloads and uploads from files only, not data tasks"))
            }
        }
        let adapted = runsHooks ? try await adapt(head) : head
        let urlString = try RequestBuilding.urlString(of: adapted)
        var cacheLookup = CacheLookup(
            manager: self, call: call, request: adapted, urlString: urlString, body: body, sink: sink)
        if let answer = try cacheLookup.answerWithoutLoading() {
            return try await finishRaw(answer)
        }
        var authentication = storedCredentials(for: urlString)
        if let credential = call.options.credential, let scoped = ScopedCredential(credential, for: adapted.url) {
            authentication.server = [scoped]
        }
        let conditionalHead = cacheLookup.conditionalRequest
        let send = { (authentication: CredentialPair, conditional: Bool) async throws -> RawResponse in
            var request = TransferRequest(
                head: conditional ? conditionalHead : adapted, urlString: urlString, body: body,
                options: self.options(for: call))
            request.usesLargeBuffers = call.usesLargeBuffers
            request.credentials = authentication.server
            request.proxyCredential = authentication.proxy
            // Most requests send exactly the session's headers: share its prebuilt header list.
            let sharesHeaders = body == nil && !conditional && adapted.headerFields == sessionHeaders.fields
            let transfer = Transfer(
                request: request, driver: self.driver, reporters: reporters,
                sharedHeaders: sharesHeaders ? sessionHeaders.list : nil, sink: sink,
                maximumBytesPerSecond: call.maximumBytesPerSecond)
            register?(transfer)
            transfer.start()
            return RawResponse(try await transfer.value())
        }
        // The clock is read only when the cache will use the time (RFC 9111 age calculation).
        let requestTime = cacheLookup.usesCache ? Date() : .distantPast
        var raw: RawResponse
        do {
            raw = try await send(authentication, cacheLookup.revalidates)
            if let retry = try await challengeRetry(after: raw, used: authentication, body: body) {
                raw = try await send(retry, cacheLookup.revalidates)
            }
        } catch let error as CourierError {
            guard let fallback = cacheLookup.fallback(after: error) else { throw error }
            return try await finishRaw(fallback)
        }
        raw = cacheLookup.absorb(raw, requestTime: requestTime)
        return try await finishRaw(raw)
    }

    private nonisolated func finishRaw(_ raw: RawResponse) async throws -> RawResponse {
        runsHooks ? try await process(raw) : raw
    }

    /// The transfer options of one call: the session's, with the call's cookie choice.
    nonisolated func options(for call: Call) -> TransferOptions {
        guard let handlesCookies = call.options.handlesCookies, handlesCookies != transferOptions.handlesCookies else {
            return transferOptions
        }
        var options = transferOptions
        options.handlesCookies = handlesCookies
        return options
    }

    /// The credentials of a request: for the server (each for one origin: the request's own,
    /// and any a redirect led to that asked for one), and for the proxy it goes through.
    struct CredentialPair: Sendable {
        var server: [ScopedCredential] = []
        var proxy: Credential?
    }

    /// What the credential store has for a request to `urlString` and for its proxy. An empty
    /// store (the common case) costs no URL parsing.
    private nonisolated func storedCredentials(for urlString: String) -> CredentialPair {
        guard !credentials.isEmpty, let url = URL(string: urlString) else { return CredentialPair() }
        let server = ProtectionSpace(url: url).flatMap { space in
            credentials.credential(for: space).map { ScopedCredential($0, for: space) }
        }
        return CredentialPair(
            server: server.map { [$0] } ?? [],
            proxy: proxies.protectionSpace(for: url).flatMap { credentials.credential(for: $0) })
    }

    /// After a 401 (or a 407 from the proxy) that no credential answered: takes the session's
    /// credential for that protection space or asks ``credential(for:)`` once, keeps the answer
    /// when it is for the session, and returns the credentials for one more try. A request whose
    /// body cannot be sent again is not retried.
    ///
    /// The 401 may come from another origin than the request's, after a redirect: the new
    /// credential is then scoped to that origin, and the retry, which starts again at the
    /// request's own URL, sends it there only.
    private nonisolated func challengeRetry(
        after raw: RawResponse, used: CredentialPair, body: RequestBody?
    ) async throws -> CredentialPair? {
        let status = raw.status.code
        guard body?.isReplayable ?? true else { return nil }
        let (schemes, realm): ([String], String?)
        var space: ProtectionSpace
        switch status {
        case 401 where used.server.credential(for: raw.url) == nil:
            (schemes, realm) = AuthenticateHeader.parse(raw.response.headerFields[values: .wwwAuthenticate])
            guard let server = ProtectionSpace(url: raw.url) else { return nil }
            space = server
        case 407 where used.proxy == nil:
            (schemes, realm) = AuthenticateHeader.parse(raw.response.headerFields[values: .proxyAuthenticate])
            guard let proxy = proxies.protectionSpace(for: raw.url) else { return nil }
            space = proxy
        default:
            return nil
        }
        space.realm = realm
        let challenge = AuthenticationChallenge(
            protectionSpace: space, schemes: schemes, response: raw.response, url: raw.url)
        let credential: Credential
        if !space.isProxy, let stored = credentials.credential(for: space) {
            credential = stored
        } else {
            guard let answer = await self.credential(for: challenge) else { return nil }
            if answer.persistence == .forSession { credentials.set(answer, for: space) }
            credential = answer
        }
        var retry = used
        if space.isProxy {
            retry.proxy = credential
        } else {
            retry.server.append(ScopedCredential(credential, for: space))
        }
        return retry
    }
}

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

    init(
        manager: HTTPSessionManager, call: HTTPSessionManager.Call, request: HTTPRequest, urlString: String,
        body: RequestBody?, sink: ResponseSink?
    ) {
        policy = call.options.cachePolicy ?? manager.configuration.cachePolicy
        self.request = request
        self.urlString = urlString
        lifetime = call.options.cacheLifetime
        // Only GETs of data tasks, without `Cache-Control: no-store` in the request; anything
        // else (and any session without a cache) pays for nothing more here.
        guard let sessionCache = manager.cache, sink == nil, body == nil, request.method == .get else {
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
    /// `must-revalidate`.
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
    /// is stored (replacing an older one); anything else passes through.
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
