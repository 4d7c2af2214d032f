import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes
import Synchronization

/// The layer between a session's calls and its transport. For one request, each attempt:
///
/// 1. adapt: the session's interceptors, the request's, then the manager's `adapt(_:)`;
/// 2. the HTTP cache: answer from it, or add validators to the request;
/// 3. credentials for the origin and the proxy; the transfer on the transport (which follows
///    redirects); one more transfer after a 401 or 407 that a credential answers;
/// 4. the cache again (store, refresh on 304, or fall back on a failure), the manager's
///    `process(_:)`, and the caller's serialization.
///
/// A failed attempt asks the interceptors whether to try again. The request's observers
/// (`RequestObservers`: event monitors, and a span and metrics when a tracer or a metrics
/// factory records) hear about each step.
///
/// A request's state lives in one `InFlightRequest`, an attempt's transfer in one `Attempt`.
/// The functions are cut where an async frame would otherwise grow for every request: see
/// Documentation/Costs.md, "What a request costs", before moving code between them.
package final class RequestPipeline: Sendable {
    package let transport: any Transport
    package let cache: HTTPCache?
    package let cachePolicy: CachePolicy
    package let credentials: CredentialStore
    package let proxies: ProxySettings
    /// The session's transfer options, shared by every request that does not change them.
    let sharedTransferOptions: SharedTransferOptions
    /// The session's transfer options.
    package var transferOptions: TransferOptions { sharedTransferOptions.value }
    package let interceptors: [any RequestInterceptor]
    package let monitors: EventMonitorGroup?
    /// Hosts reached over https only (`Strict-Transport-Security`); nil when the session
    /// does not honour it.
    package let hsts: HSTSStore?
    /// What origins advertised of HTTP/3 (`Alt-Svc`), for `.http3WhenAdvertised` requests.
    package let altServices: AltServiceStore
    /// The last request number given out (see `RequestContext.requestID`).
    let lastRequestID = Atomic<UInt64>(0)
    /// Spans and metrics, when a tracer or a metrics factory records them.
    package let telemetry: SessionTelemetry
    /// The longest resource timeout that is a deadline: a longer one is no limit.
    static let longestDeadline = Duration.seconds(10 * 365 * 86_400)
    /// The `stale-while-revalidate` revalidations under way.
    let backgroundRevalidations = BackgroundRevalidations()
    /// Responses the cache touched carry their `CacheStatus` in a `Cache-Status` field too.
    let addsCacheStatusField: Bool
    /// Whether identical calls in flight share one transfer unless a call says otherwise.
    let coalescesRequests: Bool
    /// The transfers identical calls share (`RequestOptions.coalescing`).
    package let coalescing = CoalescedTransfers()

    package init(
        transport: any Transport, cache: HTTPCache?, cachePolicy: CachePolicy, credentials: CredentialStore,
        proxies: ProxySettings, transferOptions: TransferOptions, interceptors: [any RequestInterceptor],
        monitors: [any EventMonitor], hsts: HSTSStore? = nil, altServices: AltServiceStore = AltServiceStore(file: nil),
        telemetry: SessionTelemetry = SessionTelemetry(tracer: nil, metricsFactory: nil),
        addsCacheStatusField: Bool = false, coalescesRequests: Bool = false
    ) {
        self.addsCacheStatusField = addsCacheStatusField
        self.coalescesRequests = coalescesRequests
        self.telemetry = telemetry
        self.hsts = hsts
        self.altServices = altServices
        self.transport = transport
        self.cache = cache
        self.cachePolicy = cachePolicy
        self.credentials = credentials
        self.proxies = proxies
        self.sharedTransferOptions = SharedTransferOptions(transferOptions)
        self.interceptors = interceptors
        self.monitors = EventMonitorGroup(monitors)
    }

    /// Runs `prepared` to a response that `serialize` accepts (it keeps the value it makes;
    /// what it throws fails the attempt), retrying as the interceptors decide.
    ///
    /// `sink` receives the body instead of memory (downloads, byte streams); `register` is
    /// given each transfer before it starts (task objects control it). A request with a body
    /// that cannot be sent again is not retried, nor is one whose sink cannot take another
    /// attempt (a byte stream's); a download's sink continues from the bytes it has.
    package func perform(
        _ prepared: PreparedRequest, hooks: any SessionHooks, reporters: TransferReporters? = nil,
        sink: (any ResponseSink)? = nil, register: (@Sendable (any TransportTransfer) -> Void)? = nil,
        serialize: (RawResponse) throws -> Void
    ) async throws -> RawResponse {
        let request = begin(prepared, hooks: hooks, reporters: reporters, sink: sink, register: register)
        while true {
            do {
                let raw = try await attempt(request)
                try request.accept(raw, serialize)
                await request.observers?.finished(raw)
                return raw
            } catch {
                try await retryOrThrow(error, request)
            }
        }
    }

    /// The request's state: whether it may be retried, its number, its observers (told that it
    /// was created).
    @inline(never)
    private func begin(
        _ prepared: PreparedRequest, hooks: any SessionHooks, reporters: TransferReporters?,
        sink: (any ResponseSink)?, register: (@Sendable (any TransportTransfer) -> Void)?
    ) -> InFlightRequest {
        let chain = prepared.call.options.chain
        let interceptorsApply = !interceptors.isEmpty || !chain.isEmpty
        let telemetry = telemetry.observe(prepared.head)
        // Checked here: a failable class initializer allocates its object before it can fail.
        let callMonitors = prepared.call.options.eventMonitors
        let ownMonitors = callMonitors.isEmpty ? nil : EventMonitorGroup(callMonitors)
        let observed = monitors != nil || ownMonitors != nil || telemetry != nil
        // Numbered when something tells the number, or when another call's metrics may name it.
        let numbered = interceptorsApply || observed || (prepared.call.options.coalescing ?? coalescesRequests)
        let requestID = numbered ? nextRequestID() : 0
        let observers =
            observed
            ? RequestObservers(
                requestID: requestID, monitors: monitors, ownMonitors: ownMonitors, telemetry: telemetry) : nil
        observers?.created(prepared.head)
        let retryable =
            interceptorsApply && (sink?.takesAnotherAttempt ?? true) && (prepared.body?.isReplayable ?? true)
        // A resource timeout of decades is none (and keeps every clock's arithmetic in range).
        let resourceTimeout = prepared.call.options.resourceTimeout ?? transferOptions.totalTimeout
        var deadline = resourceTimeout.flatMap { $0 < Self.longestDeadline ? ContinuousClock.now + $0 : nil }
        if let given = prepared.call.options.deadline { deadline = min(deadline ?? given, given) }
        return InFlightRequest(
            prepared, hooks: hooks, reporters: reporters, sink: sink, register: register, observers: observers,
            chain: chain, retryable: retryable, requestID: requestID, started: interceptorsApply ? .now : nil,
            deadline: deadline)
    }

    /// One attempt: adapted; answered from the cache, or sent (once more after an
    /// authentication challenge that a credential answers) and seen by the cache; then the
    /// manager's `process(_:)`.
    @inline(never)
    private func attempt(_ request: InFlightRequest) async throws -> RawResponse {
        // The adapted head is kept by the request (`sent`), not in this frame: it would take
        // room in it for as long as the request lives.
        if request.isAdapted { try await adapt(request) }
        let plan = try plan(request, adapted: request.sent)
        var failure: (any Error)?
        if case .send(let attempt) = plan {
            do {
                try await send(attempt)
                if attempt.isChallenged { try await answerChallenge(attempt) }
            } catch {
                failure = error
            }
        }
        // No `RawResponse` is a local of this frame: `outcome` writes it straight into the
        // caller's, and it is returned as it is, not through `process`, which would copy it
        // (twenty retains).
        guard request.hooks.runsHooks else { return try outcome(plan, failure, request) }
        return try await processed(plan, failure, request)
    }

    /// The attempt's outcome through the manager's `process(_:)`; its own frame, so that the
    /// response handed to `process` takes room only when a manager processes responses.
    @inline(never)
    private func processed(
        _ plan: AttemptPlan, _ failure: (any Error)?, _ request: InFlightRequest
    ) async throws -> RawResponse {
        try await process(try outcome(plan, failure, request), request.hooks)
    }

    /// The attempt's response: the cache's answer, or what the transfer brought (after the
    /// cache has seen it), or the cache's stand-in for a failed load; numbered after the
    /// earlier attempts'. Throws the failure otherwise.
    @inline(never)
    private func outcome(_ plan: AttemptPlan, _ failure: (any Error)?, _ request: InFlightRequest) throws -> RawResponse
    {
        var raw: RawResponse
        switch plan {
        case .answered(let answer):
            raw = answer.response
        case .send(let attempt):
            raw = try failure.map { try attempt.recover(from: $0) } ?? attempt.absorbed()
        }
        request.number(&raw)
        return raw
    }

    /// Adapts the attempt's request (interceptors and the hooks, with the fields the sink asked
    /// for), announces it and keeps it as `request.sent`.
    @inline(never)
    private func adapt(_ request: InFlightRequest) async throws {
        let (prepared, hooks, context, chain) = (request.prepared, request.hooks, request.context, request.chain)
        guard request.deadline != nil else {
            request.adapted(try await adapt(prepared, hooks: hooks, context: context, chain: chain))
            return
        }
        request.adapted(
            try await withinDeadline(request, "waiting for its interceptors to adapt it (a token refresh, say)") {
                try await self.adapt(prepared, hooks: hooks, context: context, chain: chain)
            })
    }

    /// The manager's `process(_:)`.
    @inline(never)
    private func process(_ raw: RawResponse, _ hooks: any SessionHooks) async throws -> RawResponse {
        try await hooks.process(raw)
    }

    /// After a 401 or 407: the transfer once more with the credentials the challenge asks for,
    /// when there are any (see `challengeRetry`).
    @inline(never)
    private func answerChallenge(_ attempt: Attempt) async throws {
        guard let challenge = attempt.response else { return }
        let (used, body, hooks) = (attempt.authentication, attempt.request.body, attempt.inFlight.hooks)
        let proxy = attempt.inFlight.prepared.call.options.proxy
        let retry = try await withinDeadline(attempt.inFlight, "waiting for a credential to answer a challenge") {
            try await self.challengeRetry(after: challenge, used: used, body: body, hooks: hooks, proxy: proxy)
        }
        guard let retry, let fields = await attempt.inFlight.fieldsForAnotherTransfer() else { return }
        attempt.prepareAnotherTry(with: retry, adding: fields)
        try await send(attempt)
    }

    /// After a failed attempt: returns when the interceptors try the request again (after the
    /// delay one asked for, with the sink readied for another response); throws the error,
    /// with every attempt's transactions in its metrics, when they do not.
    @inline(never)
    private func retryOrThrow(_ failure: any Error, _ request: InFlightRequest) async throws {
        var error = request.recordFailure(failure)
        var cancelled = error is CancellationError || Task.isCancelled
        var decision = RetryDecision.doNotRetry
        if request.retryable, !cancelled, let context = request.context {
            let (recorded, chain, sent) = (error, request.chain, request.sent)
            do {
                decision = try await withinDeadline(request, "waiting for its interceptors to decide on a retry") {
                    await self.retryDecision(recorded, chain: chain, sent: sent, context: context)
                }
            } catch let stopped {
                // The caller was cancelled, or the call's deadline came first.
                cancelled = stopped is CancellationError
                error = cancelled ? stopped : request.deadlinePassed(while: "deciding on a retry", after: recorded)
            }
        }
        if case .retryAfter(let delay) = decision, let deadline = request.deadline, .now + delay > deadline {
            // The next attempt would start after the call is over: fail now, not at the deadline.
            error = request.deadlinePassed(while: "waiting \(delay) to try again (a retry's delay)", after: error)
            decision = .doNotRetry
        }
        if decision != .doNotRetry {
            if let fields = await request.fieldsForAnotherTransfer() {
                request.continuation = fields
            } else {
                decision = .doNotRetry
            }
        }
        if request.retryable, !cancelled {
            request.observers?.retryDecided(attempt: request.number, error: error, decision: decision)
        }
        if case .retryAfter(let delay) = decision {
            do {
                try await Task.sleep(for: delay)
            } catch {
                request.sink?.abandonAnotherAttempt(cancelled: true)
                await request.observers?.failed(request.sent, error, attempts: request.number, cancelled: true)
                throw error
            }
        } else if decision == .doNotRetry {
            await request.observers?.failed(request.sent, error, attempts: request.number, cancelled: cancelled)
            request.sink?.abandonAnotherAttempt(cancelled: cancelled)
            throw error
        }
        request.number += 1
    }

    /// The request of one attempt: the session's interceptors, the call's, then the hooks.
    func adapt(
        _ prepared: PreparedRequest, hooks: any SessionHooks, context: RequestContext?,
        chain: [any RequestInterceptor]
    ) async throws -> HTTPRequest {
        var request = prepared.head
        if let context {
            for interceptor in interceptors { request = try await interceptor.adapt(request, context: context) }
            for interceptor in chain { request = try await interceptor.adapt(request, context: context) }
        }
        if hooks.runsHooks { request = try await hooks.adapt(request) }
        return request
    }

    /// The call's interceptors first, then the session's: the first that retries decides.
    private func retryDecision(
        _ error: any Error, chain: [any RequestInterceptor], sent: HTTPRequest, context: RequestContext
    ) async -> RetryDecision {
        for interceptor in chain + interceptors {
            let decision = await interceptor.retry(sent, dueTo: error, context: context)
            if decision != .doNotRetry { return decision }
        }
        return .doNotRetry
    }

    /// The next request number (1, 2, ...): every kind of request of the session draws from it.
    func nextRequestID() -> UInt64 {
        lastRequestID.add(1, ordering: .relaxed).newValue
    }

    /// An adapted head as it is sent, for requests and WebSocket handshakes alike: an http URL
    /// of a host known for `Strict-Transport-Security` made https, the URL text libcurl takes,
    /// and the credentials for it: the store's for its protection space and its proxy's, and
    /// the call's own (or its URL's user info), which belongs to the origin the call named, not
    /// to wherever an interceptor sends the attempt.
    func addressed(
        _ adapted: HTTPRequest, for prepared: PreparedRequest
    ) throws(CourierError) -> (head: HTTPRequest, urlString: String, credentials: CredentialPair) {
        var adapted = adapted
        if let upgraded = upgradedByHSTS(adapted) { adapted.url = upgraded }
        let urlString = try RequestBuilding.urlString(of: adapted)
        var credentials = storedCredentials(for: urlString, proxy: prepared.call.options.proxy)
        // The call's origin as HSTS makes it: `http://host` of an HSTS host is `https://host`.
        if let credential = prepared.call.options.credential,
            let scoped = ScopedCredential(credential, for: upgradedByHSTS(prepared.head) ?? prepared.head.url)
        {
            credentials.server = [scoped]
        }
        return (adapted, urlString, credentials)
    }

    /// The URL of `request` made https when it is http to a host known for
    /// `Strict-Transport-Security`; nil when it stays as it is (no URL is built then).
    private func upgradedByHSTS(_ request: HTTPRequest) -> URL? {
        guard let hsts, !hsts.isEmpty, request.scheme == "http", let url = request.url else { return nil }
        return hsts.upgrade(url)
    }

    /// The synchronous part of an attempt: HSTS, the URL, the cache lookup, credentials, the
    /// transfer request, its span.
    @inline(never)
    func plan(_ inFlight: InFlightRequest, adapted: HTTPRequest, inBackground: Bool = false) throws -> AttemptPlan {
        let prepared = inFlight.prepared
        let (adapted, urlString, authentication) = try addressed(adapted, for: prepared)
        let callOptions = options(for: prepared.call)
        // What the transport adds, as the cache must see the request (OutgoingRequest).
        let additions = OutgoingRequest.Additions(
            cookies: callOptions.value.handlesCookies ? transport : nil,
            credential: authentication.server.isEmpty ? nil : authentication.server.credential(for: adapted.url))
        var cacheLookup = CacheLookup(
            cache: cache, policy: prepared.call.options.cachePolicy ?? cachePolicy,
            lifetime: prepared.call.options.cacheLifetime, request: adapted, urlString: urlString,
            body: prepared.body, sink: inFlight.sink, additions: additions, addsStatusField: addsCacheStatusField)
        if !inBackground, let answer = try cacheLookup.answerWithoutLoading() {
            inFlight.observers?.attemptStarted(adapted, attempt: inFlight.number)
            if cacheLookup.revalidatesInBackground {
                revalidateInBackground(inFlight, adapted: adapted, urlString: urlString)
            }
            return .answered(CachedAnswer(CacheLookup.fromCache(answer, for: adapted)))
        }
        if let deadline = inFlight.deadline, deadline <= .now {
            throw inFlight.deadlinePassed(while: "being prepared, before it was sent")
        }
        var request = TransferRequest(
            head: adapted, urlString: urlString, body: prepared.body, options: callOptions)
        request.deadline = inFlight.deadline
        request.usesLargeBuffers = prepared.call.usesLargeBuffers
        request.failureEndsProgress = !inFlight.retryable
        request.redirectHandler = prepared.call.options.redirects?.handler
        request.priority = prepared.call.options.priority
        if callOptions.value.tls.verifies { request.hsts = hsts }
        // Alt-Svc is believed only from verified https responses, as HSTS is.
        if callOptions.value.httpVersion == .http3WhenAdvertised, callOptions.value.tls.verifies {
            request.altServices = altServices
        }
        request.observer = inFlight.observers?.transferObserver
        request.credentials = authentication.server
        request.proxyCredential = authentication.proxy
        let revalidates = cacheLookup.revalidates
        if revalidates { request.head = cacheLookup.conditionalRequest }
        // The attempt's span, its context injected into the head (`traceparent`).
        let telemetry = inFlight.observers?.attempt(for: &request)
        // Most requests send exactly the session's headers: share the transport's form of them.
        let sharedHeaders =
            prepared.body == nil && !revalidates && request.head.headerFields == prepared.sessionFields
            ? prepared.sharedHeaders : nil
        // The clock is read only when the cache will use the time.
        let requestTime = cacheLookup.usesCache ? Date() : .distantPast
        // The cache lookup moves in, not copied (it holds a dozen references).
        return .send(
            Attempt(
                inFlight: inFlight, request: request, cacheLookup: consume cacheLookup,
                authentication: authentication, requestTime: requestTime, sharedHeaders: sharedHeaders,
                telemetry: telemetry))
    }

    /// One transfer of the attempt's request on the transport, sent again when a route to its
    /// host appears if it waits for connectivity.
    @inline(never)
    func send(_ attempt: Attempt) async throws {
        if let key = coalescingKey(attempt) {
            try await sendCoalesced(attempt, key: key)
            return
        }
        while true {
            let transfer = start(attempt)
            do {
                attempt.keep(try await transfer.value(cancelsWithCaller: true))
                return
            } catch {
                guard attempt.request.sharedOptions.value.waitsForConnectivity else { throw error }
                try await waitForConnectivity(after: error, attempt)
            }
        }
    }

    /// The key under which identical calls share a transfer: the method, the URL, the fields
    /// as they go out and the credentials the transport adds; nil for a call that is not
    /// coalesced (it asked not to be, has a body or a sink, changes the session's transfer
    /// settings, decides its own redirects, or waits for connectivity).
    private func coalescingKey(_ attempt: Attempt) -> String? {
        let inFlight = attempt.inFlight
        guard inFlight.prepared.call.options.coalescing ?? coalescesRequests else { return nil }
        let request = attempt.request
        guard request.head.method == .get || request.head.method == .head, request.body == nil, inFlight.sink == nil,
            request.sharedOptions === sharedTransferOptions, request.redirectHandler == nil,
            !request.sharedOptions.value.waitsForConnectivity
        else { return nil }
        var key = request.head.method.rawValue + " " + request.urlString
        for field in request.head.headerFields { key += "\n\(field.name.canonicalName): \(field.value)" }
        for scoped in request.credentials {
            let credential = scoped.credential
            key += "\n\u{0}\(scoped.origin) \(credential.user) \(credential.password) \(credential.sendsPreemptively)"
        }
        if let proxy = request.proxyCredential { key += "\n\u{1}\(proxy.user) \(proxy.password)" }
        return key
    }

    /// The attempt's transfer shared with identical calls in flight: the first one makes and
    /// starts it, every one waits for it as a member of its group (cancelling one leaves the
    /// group; the transfer stops when the last has left).
    @inline(never)
    private func sendCoalesced(_ attempt: Attempt, key: String) async throws {
        let inFlight = attempt.inFlight
        let (group, leads, member) = coalescing.join(key, leaderID: inFlight.requestID)
        if leads {
            let transfer = transport.makeTransfer(
                attempt.request, reporters: inFlight.reporters, sharedHeaders: attempt.sharedHeaders, sink: nil,
                maximumBytesPerSecond: inFlight.prepared.call.maximumBytesPerSecond)
            inFlight.observers?.attemptStarted(attempt.request.head, attempt: inFlight.number)
            transfer.start()
            group.run(transfer)
        }
        inFlight.register?(member)
        let output = try await member.value(cancelsWithCaller: true)
        attempt.keep(leads ? output : output.coalesced(from: group.leaderID))
    }

    /// The attempt's transfer, made, registered, announced and started.
    @inline(never)
    private func start(_ attempt: Attempt) -> any TransportTransfer {
        let inFlight = attempt.inFlight
        let transfer = transport.makeTransfer(
            attempt.request, reporters: inFlight.reporters, sharedHeaders: attempt.sharedHeaders, sink: inFlight.sink,
            maximumBytesPerSecond: inFlight.prepared.call.maximumBytesPerSecond)
        inFlight.register?(transfer)
        inFlight.observers?.attemptStarted(attempt.request.head, attempt: inFlight.number)
        transfer.start()
        return transfer
    }
}
