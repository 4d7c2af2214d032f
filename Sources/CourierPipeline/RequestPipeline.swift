@_spi(CourierInternals) import CourierCore
import CourierSerialization
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes
import Synchronization

/// Everything a call says about its request.
package struct RequestCall: Sendable {
    package var method: HTTPRequest.Method
    package var path: String
    package var parameters: JSON?
    package var headers: [String: String]
    /// Header fields given as fields (repeated names kept, in order), after `headers`: each
    /// name here replaces the session's fields of that name. For requests built elsewhere
    /// (generated OpenAPI clients).
    package var fields: HTTPFields?
    /// A body given as is: the request serializer is skipped.
    package var body: RequestBody?
    /// The `Content-Type` of `body`, unless the call's headers set one.
    package var contentType: String?
    /// Downloads, streams and large uploads: larger libcurl buffers.
    package var usesLargeBuffers = false
    package var maximumBytesPerSecond: Int64?
    /// The call's own cookie, cache, credential and interceptor choices.
    package var options: RequestOptions

    package init(
        method: HTTPRequest.Method, path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        body: RequestBody? = nil, contentType: String? = nil, options: RequestOptions = RequestOptions()
    ) {
        self.method = method
        self.path = path
        self.parameters = parameters
        self.headers = headers
        self.body = body
        self.contentType = contentType
        self.options = options
    }
}

/// A call turned into a request head and body by the manager's serializer, not yet adapted.
///
/// A class: it is handed down through several `async` functions, and a reference is cheaper
/// to keep in their frames than the copies of a large value.
package final class PreparedRequest: Sendable {
    package let call: RequestCall
    package let head: HTTPRequest
    package let body: RequestBody?
    /// The session's own header fields, and the transport's shared form of them: a request
    /// that sends exactly those (the common case) reuses it.
    package let sessionFields: HTTPFields
    package let sharedHeaders: (any Sendable)?

    package init(
        call: RequestCall, head: HTTPRequest, body: RequestBody?, sessionFields: HTTPFields,
        sharedHeaders: (any Sendable)?
    ) {
        self.call = call
        self.head = head
        self.body = body
        self.sessionFields = sessionFields
        self.sharedHeaders = sharedHeaders
    }
}

/// The layer between a session's calls and its transport. For one request, each attempt:
///
/// 1. adapt: the session's interceptors, the request's, then the manager's `adapt(_:)`;
/// 2. the HTTP cache: answer from it, or add validators to the request;
/// 3. credentials for the origin and the proxy; the transfer on the transport (which follows
///    redirects); one more transfer after a 401 or 407 that a credential answers;
/// 4. the cache again (store, refresh on 304, or fall back on a failure), the manager's
///    `process(_:)`, and the caller's serialization.
///
/// A failed attempt asks the interceptors whether to try again. Monitors hear about each step.
/// When a tracer or a metrics factory records (the session's, or a bootstrapped one), the
/// request has a span, each send of it a child span, and the session's metrics count it
/// (`Observability.swift`).
package final class RequestPipeline: Sendable {
    package let transport: any Transport
    package let cache: HTTPCache?
    package let cachePolicy: CachePolicy
    package let credentials: CredentialStore
    package let proxies: ProxySettings
    /// The session's transfer options, shared by every request that does not change them.
    private let sharedTransferOptions: SharedTransferOptions
    /// The session's transfer options.
    package var transferOptions: TransferOptions { sharedTransferOptions.value }
    package let interceptors: [any RequestInterceptor]
    package let monitors: EventMonitorGroup?
    /// Hosts reached over https only (`Strict-Transport-Security`); nil when the session
    /// does not honour it.
    package let hsts: HSTSStore?
    /// The last request number given out (see `RequestContext.requestID`).
    let lastRequestID = Atomic<UInt64>(0)
    /// Spans and metrics, when a tracer or a metrics factory records them.
    package let observability: SessionObservability

    package init(
        transport: any Transport, cache: HTTPCache?, cachePolicy: CachePolicy, credentials: CredentialStore,
        proxies: ProxySettings, transferOptions: TransferOptions, interceptors: [any RequestInterceptor],
        monitors: [any EventMonitor], hsts: HSTSStore? = nil,
        observability: SessionObservability = SessionObservability(tracer: nil, metricsFactory: nil)
    ) {
        self.observability = observability
        self.hsts = hsts
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
    ///
    /// Not generic, so that it is compiled once, optimized, in this module.
    package func perform(
        _ prepared: PreparedRequest, hooks: any SessionHooks, reporters: TransferReporters? = nil,
        sink: (any ResponseSink)? = nil, register: (@Sendable (any TransportTransfer) -> Void)? = nil,
        serialize: (RawResponse) throws -> Void
    ) async throws -> RawResponse {
        let chain = prepared.call.options.chain
        let interceptorsApply = !interceptors.isEmpty || !chain.isEmpty
        // Whether a tracer or a metrics factory records (with nothing bootstrapped, a type check).
        // A Bool, not the observation: this frame keeps its size.
        guard interceptorsApply || monitors != nil || observability.records() else {
            // No interceptor, no monitor, nothing recorded (the common case): one attempt,
            // nothing to tell.
            let adapted = hooks.runsHooks ? try await hooks.adapt(prepared.head) : prepared.head
            let raw = try await attemptOnce(
                prepared, adapted: adapted, hooks: hooks, requestID: 0, attempt: 1, retryable: false,
                reporters: reporters, sink: sink, register: register, observation: nil)
            try Self.serialize(raw, with: serialize)
            return raw
        }
        return try await performWithInterceptors(
            prepared, hooks: hooks, reporters: reporters, sink: sink, register: register, serialize: serialize)
    }

    /// `perform` with interceptors, monitors, or spans and metrics to record: the retry loop,
    /// the events, the request's span (each attempt's is `attemptOnce`'s) and its metrics.
    ///
    /// Not inlined into `perform`: an async function's frame is allocated whole when it is
    /// entered, and this loop's (its locals, the requests and errors it keeps, the events it
    /// builds) is about 6 KB, which a request without interceptors or monitors would
    /// otherwise allocate for nothing.
    @inline(never)
    private func performWithInterceptors(
        _ prepared: PreparedRequest, hooks: any SessionHooks, reporters: TransferReporters?,
        sink: (any ResponseSink)?, register: (@Sendable (any TransportTransfer) -> Void)?,
        serialize: (RawResponse) throws -> Void
    ) async throws -> RawResponse {
        // The request's span and metrics, if anything records them.
        let observation = observability.observe(prepared.head)
        let chain = prepared.call.options.chain
        let interceptorsApply = !interceptors.isEmpty || !chain.isEmpty
        let requestID = lastRequestID.add(1, ordering: .relaxed).newValue
        monitors?.emit(requestID, .created(prepared.head))
        let retryable =
            (sink?.takesAnotherAttempt ?? true) && (prepared.body?.isReplayable ?? true) && interceptorsApply
        let started = ContinuousClock.now
        var attempt = 1
        var lastRequest = prepared.head
        // The transactions of the attempts before this one (see `TransferMetrics.transactions`).
        var history: [TransactionMetrics] = []
        // What a sink asked the next attempt to add (a download's `Range` and `If-Range`).
        var continuation = HTTPFields()
        while true {
            let context = RequestContext(requestID: requestID, attempt: attempt, firstAttemptStarted: started)
            var answered: RawResponse?
            do {
                var adapted = try await adapt(prepared, hooks: hooks, context: context, chain: chain)
                for field in continuation { adapted.headerFields[field.name] = field.value }
                lastRequest = adapted
                monitors?.emit(requestID, .adapted(adapted, attempt: attempt))
                var raw = try await attemptOnce(
                    prepared, adapted: adapted, hooks: hooks, requestID: requestID, attempt: attempt,
                    retryable: retryable, reporters: reporters, sink: sink, register: register,
                    observation: observation)
                if attempt > 1 { Self.record(&raw.metrics, attempt: attempt, after: history) }
                answered = raw
                try Self.serialize(raw, with: serialize)
                await monitors?.emitFinished(requestID, raw)
                observation?.finished(raw)
                return raw
            } catch var error {
                error = Self.recordFailure(
                    error, of: lastRequest, answered: answered, attempt: attempt, history: &history)
                let cancelled = error is CancellationError || Task.isCancelled
                var decision: RetryDecision =
                    retryable && !cancelled
                    ? await retryDecision(lastRequest, error: error, context: context, chain: chain) : .doNotRetry
                if decision != .doNotRetry, let sink {
                    if let fields = await sink.prepareAnotherAttempt() {
                        continuation = fields
                    } else {
                        decision = .doNotRetry
                    }
                }
                if let monitors, retryable, !cancelled {
                    monitors.emit(
                        requestID,
                        .retryDecided(attempt: attempt, error: error, decision: decision))
                }
                switch decision {
                case .doNotRetry:
                    if let monitors, !cancelled {
                        await monitors.emitFailed(requestID, lastRequest, error, attempts: attempt)
                    }
                    sink?.abandonAnotherAttempt(cancelled: cancelled)
                    observation?.failed(error, cancelled: cancelled)
                    throw error
                case .retry:
                    break
                case .retryAfter(let delay):
                    do {
                        try await Task.sleep(for: delay)
                    } catch {
                        sink?.abandonAnotherAttempt(cancelled: true)
                        observation?.failed(error, cancelled: true)
                        throw error
                    }
                }
                attempt += 1
            }
        }
    }

    /// `serialize(raw)`; a `CourierError` it throws carries the response's metrics.
    @inline(never)
    private static func serialize(_ raw: RawResponse, with serialize: (RawResponse) throws -> Void) throws {
        do {
            try serialize(raw)
        } catch let error as CourierError where error.context.metrics == nil {
            throw error.withContext { $0.metrics = raw.metrics }
        }
    }

    /// The metrics of attempt `attempt` (a retry): its transactions numbered, after those of
    /// the attempts before it.
    private static func record(_ metrics: inout TransferMetrics, attempt: Int, after history: [TransactionMetrics]) {
        for index in metrics.transactions.indices { metrics.transactions[index].attempt = attempt }
        metrics.transactions = history + metrics.transactions
    }

    /// A failed attempt's transactions added to `history` (the response's when it failed
    /// validation, the transfer's as its error has them, or the request alone), and the error
    /// with every attempt's transactions in its metrics.
    @inline(never)
    private static func recordFailure(
        _ error: any Error, of request: HTTPRequest, answered: RawResponse?, attempt: Int,
        history: inout [TransactionMetrics]
    ) -> any Error {
        guard let failure = error as? CourierError else { return error }
        if let answered {
            // Already numbered and after the history (see `record`).
            history = answered.metrics.transactions
        } else {
            var metrics = failure.context.metrics ?? TransferMetrics()
            if metrics.transactions.isEmpty {
                var transaction = TransactionMetrics(request: request, response: failure.context.response)
                transaction.failure = failure.context.description
                metrics.transactions = [transaction]
            }
            record(&metrics, attempt: attempt, after: history)
            history = metrics.transactions
        }
        return failure.withContext { context in
            var metrics = context.metrics ?? answered?.metrics ?? TransferMetrics()
            metrics.transactions = history
            context.metrics = metrics
        }
    }

    /// After a 401 or 407: the transfer once more with the credentials the challenge asks for,
    /// when there are any (see `challengeRetry`). Not inlined, so that its frame exists only
    /// for the responses that need it.
    @inline(never)
    private func answerChallenge(_ state: Attempt, hooks: any SessionHooks, sink: (any ResponseSink)?) async throws {
        guard let challenge = state.response,
            let retry = try await challengeRetry(
                after: challenge, used: state.authentication, body: state.request.body, hooks: hooks),
            let continuation = await Self.fieldsForAnotherAttempt(sink)
        else { return }
        state.earlierTransactions = challenge.metrics.transactions
        state.prepareAnotherTry(with: retry, adding: continuation)
        try await send(state)
    }

    /// The request of one attempt: the session's interceptors, the call's, then the hooks.
    func adapt(
        _ prepared: PreparedRequest, hooks: any SessionHooks, context: RequestContext,
        chain: [any RequestInterceptor]
    ) async throws -> HTTPRequest {
        var request = prepared.head
        for interceptor in interceptors { request = try await interceptor.adapt(request, context: context) }
        for interceptor in chain { request = try await interceptor.adapt(request, context: context) }
        if hooks.runsHooks { request = try await hooks.adapt(request) }
        return request
    }

    /// The call's interceptors first, then the session's: the first that retries decides.
    private func retryDecision(
        _ request: HTTPRequest, error: any Error, context: RequestContext, chain: [any RequestInterceptor]
    ) async -> RetryDecision {
        for interceptor in chain + interceptors {
            let decision = await interceptor.retry(request, dueTo: error, context: context)
            if decision != .doNotRetry { return decision }
        }
        return .doNotRetry
    }

    /// One attempt: the cache, the transfer (and one more after an authentication challenge),
    /// the cache again, `process(_:)`.
    ///
    /// What the attempt needs across its suspension points lives in one `Attempt` object built
    /// synchronously (`plan`), and the work before and after each wait is in functions of its
    /// own: an async function's frame holds every value that lives across an `await`, and the
    /// temporaries of what is inlined into it. With all of it inline this frame was over
    /// 10 KB, allocated anew for every request's task; it is about 1.6 KB.
    @inline(never)
    private func attemptOnce(
        _ prepared: PreparedRequest, adapted: HTTPRequest, hooks: any SessionHooks, requestID: UInt64,
        attempt: Int, retryable: Bool, reporters: TransferReporters?, sink: (any ResponseSink)?,
        register: (@Sendable (any TransportTransfer) -> Void)?, observation: RequestObservation?
    ) async throws -> RawResponse {
        let raw: RawResponse
        switch try plan(
            prepared, adapted: adapted, requestID: requestID, attempt: attempt, retryable: retryable,
            reporters: reporters, sink: sink, register: register, observation: observation)
        {
        case .answered(let answer):
            raw = answer.response
        case .send(let state):
            do {
                try await send(state)
                if state.isChallenged { try await answerChallenge(state, hooks: hooks, sink: sink) }
                raw = state.absorbed()
            } catch {
                raw = try state.recover(from: error)
            }
        }
        return try await finish(raw, hooks: hooks)
    }

    /// An attempt's state across its suspension points (see `attemptOnce`).
    private final class Attempt {
        var request: TransferRequest
        let exchange: Exchange
        var cacheLookup: CacheLookup
        let authentication: CredentialPair
        let requestTime: Date

        init(
            request: TransferRequest, exchange: Exchange, cacheLookup: CacheLookup,
            authentication: CredentialPair, requestTime: Date
        ) {
            self.request = request
            self.exchange = exchange
            self.cacheLookup = cacheLookup
            self.authentication = authentication
            self.requestTime = requestTime
        }

        /// The response of the last transfer (set by `send`).
        var response: RawResponse?
        /// The spans of the attempt's sends, when the session records any.
        var observation: AttemptObservation?
        /// The transactions of the send before this one (the challenged request).
        var earlierTransactions: [TransactionMetrics] = []

        /// Whether the response asks for credentials (401 or 407).
        var isChallenged: Bool {
            guard let code = response?.status.code else { return false }
            return code == 401 || code == 407
        }

        /// The response after the cache has seen it (see `CacheLookup.absorb`); called after a
        /// `send` that returned.
        @inline(never)
        func absorbed() -> RawResponse {
            guard let response else { preconditionFailure("absorbed() before a response") }
            return cacheLookup.absorb(response, requestTime: requestTime)
        }

        /// A stored response instead of a failed load, when the cache policy allows one (see
        /// `CacheLookup.fallback`); `error` otherwise.
        @inline(never)
        func recover(from error: any Error) throws -> RawResponse {
            observation?.failed(error)
            guard let error = error as? CourierError, let fallback = cacheLookup.fallback(after: error) else {
                throw error
            }
            return CacheLookup.fromCache(fallback, for: request.head, after: error.context.metrics)
        }

        /// The request again, with the credentials an authentication challenge asked for and
        /// the fields the sink needs to take another transfer.
        @inline(never)
        func prepareAnotherTry(with credentials: CredentialPair, adding fields: HTTPFields) {
            request.credentials = credentials.server
            request.proxyCredential = credentials.proxy
            for field in fields { request.head.headerFields[field.name] = field.value }
            observation?.beginHop(&request.head)
        }
    }

    /// What an attempt does first: answer from the cache, or send.
    ///
    /// Both cases hold a reference: the enum is copied and destroyed on every request's path,
    /// and a `RawResponse` held inline made each copy and destroy an outlined walk over the
    /// response's fields.
    private enum AttemptPlan {
        case answered(Answer)
        case send(Attempt)
    }

    /// A response from the cache, without loading.
    private final class Answer {
        let response: RawResponse
        init(_ response: RawResponse) { self.response = response }
    }

    /// The synchronous part of an attempt: HSTS, the URL, the cache lookup, credentials, and
    /// the transfer request. Not inlined, so that its temporaries stay out of `attemptOnce`'s
    /// frame.
    @inline(never)
    private func plan(
        _ prepared: PreparedRequest, adapted: HTTPRequest, requestID: UInt64, attempt: Int, retryable: Bool,
        reporters: TransferReporters?, sink: (any ResponseSink)?,
        register: (@Sendable (any TransportTransfer) -> Void)?, observation: RequestObservation?,
        inBackground: Bool = false
    ) throws -> AttemptPlan {
        let body = prepared.body
        var adapted = adapted
        if let hsts, !hsts.isEmpty, adapted.scheme == "http", let url = adapted.url, let upgraded = hsts.upgrade(url) {
            adapted.url = upgraded
        }
        let urlString = try RequestBuilding.urlString(of: adapted)
        var cacheLookup = CacheLookup(
            cache: cache, policy: prepared.call.options.cachePolicy ?? cachePolicy,
            lifetime: prepared.call.options.cacheLifetime,
            request: adapted, urlString: urlString, body: body, sink: sink)
        if !inBackground, let answer = try cacheLookup.answerWithoutLoading() {
            monitors?.emit(requestID, .attemptStarted(adapted, attempt: attempt))
            if cacheLookup.revalidatesInBackground { revalidateInBackground(prepared, adapted: adapted) }
            return .answered(Answer(CacheLookup.fromCache(answer, for: adapted)))
        }
        var authentication = storedCredentials(for: urlString)
        // The call's credential (or the URL's user info) belongs to the origin the call named,
        // not to wherever an interceptor sends the attempt.
        if let credential = prepared.call.options.credential,
            let scoped = ScopedCredential(credential, for: prepared.head.url)
        {
            authentication.server = [scoped]
        }
        var request = TransferRequest(
            head: adapted, urlString: urlString, body: body, options: self.options(for: prepared.call))
        request.usesLargeBuffers = prepared.call.usesLargeBuffers
        request.failureEndsProgress = !retryable
        request.redirectHandler = prepared.call.options.redirects?.handler
        request.priority = prepared.call.options.priority
        if transferOptions.verifiesTLS { request.hsts = hsts }
        request.observer = monitors.map { MonitoringObserver(group: $0, requestID: requestID) }
        let revalidates = cacheLookup.revalidates
        if revalidates { request.head = cacheLookup.conditionalRequest }
        // The attempt's span, its context injected into the head (`traceparent`).
        let observed = observation?.attempt(for: &request)
        // Most requests send exactly the session's headers: share the transport's form of them.
        let sharedHeaders =
            body == nil && !revalidates && request.head.headerFields == prepared.sessionFields
            ? prepared.sharedHeaders : nil
        let exchange = Exchange(
            reporters: reporters, sink: sink, register: register, sharedHeaders: sharedHeaders,
            maximumBytesPerSecond: prepared.call.maximumBytesPerSecond, requestID: requestID, attempt: attempt)
        // The clock is read only when the cache will use the time (RFC 9111 age calculation).
        let requestTime = cacheLookup.usesCache ? Date() : .distantPast
        request.credentials = authentication.server
        request.proxyCredential = authentication.proxy
        let state = Attempt(
            request: request, exchange: exchange, cacheLookup: cacheLookup, authentication: authentication,
            requestTime: requestTime)
        state.observation = observed
        return .send(state)
    }

    /// Revalidates a stale response that was just served under `stale-while-revalidate`
    /// (RFC 5861 section 3): a conditional request of its own, whose answer updates or
    /// replaces the stored response. Nobody waits for it; a failure leaves the entry as it was.
    private func revalidateInBackground(_ prepared: PreparedRequest, adapted: HTTPRequest) {
        Task {
            let requestID = lastRequestID.add(1, ordering: .relaxed).newValue
            guard
                case .send(let state) = try self.plan(
                    prepared, adapted: adapted, requestID: requestID, attempt: 1, retryable: false, reporters: nil,
                    sink: nil, register: nil, observation: nil, inBackground: true)
            else { return }
            try await self.send(state)
            _ = state.absorbed()
        }
    }

    /// What the next transfer must add for `sink` to take it (nothing without a sink); nil
    /// when the sink cannot take another.
    @inline(never)
    private static func fieldsForAnotherAttempt(_ sink: (any ResponseSink)?) async -> HTTPFields? {
        guard let sink else { return HTTPFields() }
        return await sink.prepareAnotherAttempt()
    }

    /// What every transfer of one attempt shares.
    private struct Exchange {
        var reporters: TransferReporters?
        var sink: (any ResponseSink)?
        var register: (@Sendable (any TransportTransfer) -> Void)?
        var sharedHeaders: (any Sendable)?
        var maximumBytesPerSecond: Int64?
        var requestID: UInt64
        var attempt: Int
    }

    /// One transfer of the attempt's request on the transport. Not inlined: `attemptOnce` calls
    /// it in two places. Its frame lives as long as the transfer, so what is done before and
    /// after the wait is done in synchronous functions, whose temporaries stay on the stack.
    @inline(never)
    private func send(_ state: Attempt) async throws {
        while true {
            let transfer = start(state)
            do {
                Self.keep(try await transfer.value(cancelsWithCaller: true), in: state)
                return
            } catch {
                guard state.request.options.waitsForConnectivity else { throw error }
                try await waitForConnectivity(after: error, state)
            }
        }
    }

    /// After a send that failed: returns when the request should be sent again because it
    /// failed for want of a route to its host and one has appeared (`waitsForConnectivity`);
    /// throws `error` otherwise, or when the wait outlasts the request's timeout (the
    /// resource timeout, or the request timeout without one).
    @inline(never)
    private func waitForConnectivity(after error: any Error, _ state: Attempt) async throws {
        guard let failure = error as? CourierError, let url = state.request.url, let host = url.host,
            state.request.options.unixSocketPath == nil
        else { throw error }
        switch failure {
        case .cannotConnect, .cannotResolveHost: break
        default: throw error
        }
        let monitor = ReachabilityMonitor(host: host)
        guard await !monitor.currentStatus().isReachable else { throw error }
        monitors?.emit(state.exchange.requestID, .waitingForConnectivity(state.request.head))
        let limit = state.request.options.totalTimeout ?? state.request.options.idleTimeout
        let found = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await monitor.waitUntilReachable()
                return true
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        guard found else {
            throw failure.withContext {
                $0.message += " (no route to \(host); waited \(limit) for one)"
            }
        }
        guard let fields = await Self.fieldsForAnotherAttempt(state.exchange.sink) else { throw error }
        for field in fields { state.request.head.headerFields[field.name] = field.value }
    }

    /// The attempt's transfer, made, registered, announced and started.
    @inline(never)
    private func start(_ state: Attempt) -> any TransportTransfer {
        let exchange = state.exchange
        let transfer = transport.makeTransfer(
            state.request, reporters: exchange.reporters, sharedHeaders: exchange.sharedHeaders, sink: exchange.sink,
            maximumBytesPerSecond: exchange.maximumBytesPerSecond)
        exchange.register?(transfer)
        monitors?.emit(exchange.requestID, .attemptStarted(state.request.head, attempt: exchange.attempt))
        transfer.start()
        return transfer
    }

    /// The transfer's output as the attempt's response; its HSTS policy noted.
    @inline(never)
    private static func keep(_ output: TransferOutput, in state: Attempt) {
        var raw = RawResponse(output)
        if !state.earlierTransactions.isEmpty {
            raw.metrics.transactions = state.earlierTransactions + raw.metrics.transactions
        }
        if let hsts = state.request.hsts { HSTSStore.note(raw.head, of: raw.request, in: hsts) }
        state.observation?.received(raw)
        state.response = raw
    }

    @inline(never)
    private func finish(_ raw: RawResponse, hooks: any SessionHooks) async throws -> RawResponse {
        hooks.runsHooks ? try await hooks.process(raw) : raw
    }

    /// The transfer options of one call: the session's, with the call's own choices.
    package func options(for call: RequestCall) -> SharedTransferOptions {
        let choices = call.options
        guard choices.changesTransfer else { return sharedTransferOptions }
        var options = transferOptions
        if let handlesCookies = choices.handlesCookies { options.handlesCookies = handlesCookies }
        if let timeout = choices.requestTimeout { options.idleTimeout = timeout }
        if let timeout = choices.resourceTimeout { options.totalTimeout = timeout }
        if let path = choices.unixSocketPath { options.unixSocketPath = path }
        if let waits = choices.waitsForConnectivity { options.waitsForConnectivity = waits }
        if let redirects = choices.redirects {
            options.followRedirects = redirects.follows
            options.maximumRedirects = redirects.maximum
        }
        return SharedTransferOptions(options)
    }

    /// The credentials of a request: for the server (each for one origin: the request's own,
    /// and any a redirect led to that asked for one), and for the proxy it goes through.
    package struct CredentialPair: Sendable {
        package var server: [ScopedCredential] = []
        package var proxy: Credential?
    }

    /// What the credential store has for a request to `urlString` and for its proxy. An empty
    /// store (the common case) costs no URL parsing.
    func storedCredentials(for urlString: String) -> CredentialPair {
        guard !credentials.isEmpty, let url = URL(string: urlString) else { return CredentialPair() }
        let server = ProtectionSpace(url: url).flatMap { space in
            credentials.credential(for: space).map { ScopedCredential($0, for: space) }
        }
        return CredentialPair(
            server: server.map { [$0] } ?? [],
            proxy: proxies.protectionSpace(for: url).flatMap { credentials.credential(for: $0) })
    }

    /// After a 401 (or a 407 from the proxy) that no credential answered: takes the session's
    /// credential for that protection space or asks the hooks' `credential(for:)` once, keeps
    /// the answer when it is for the session, and returns the credentials for one more try. A
    /// request whose body cannot be sent again is not retried.
    ///
    /// The 401 may come from another origin than the request's, after a redirect: the new
    /// credential is then scoped to that origin, and the retry, which starts again at the
    /// request's own URL, sends it there only.
    ///
    /// Not inlined: its frame (the challenge, the protection space) is allocated only for the
    /// responses that need it (401 and 407), not in every attempt's.
    @inline(never)
    private func challengeRetry(
        after raw: RawResponse, used: CredentialPair, body: RequestBody?, hooks: any SessionHooks
    ) async throws -> CredentialPair? {
        let status = raw.status.code
        guard body?.isReplayable ?? true else { return nil }
        let (schemes, realm): ([String], String?)
        var space: ProtectionSpace
        switch status {
        case 401 where used.server.credential(for: raw.url)?.sendsPreemptively == true:
            // A credential sent with Basic up front (the URL's user info, or one marked so) to
            // a server that asks for another scheme (Digest): the same credential once more,
            // answering the challenge instead (libcurl then picks the scheme the server named).
            // A server that asks for Basic again has refused the credential.
            let schemes = AuthenticateHeader.parse(raw.response.headerFields[values: .wwwAuthenticate]).schemes
            guard !schemes.isEmpty, !schemes.contains(where: { $0.lowercased() == "basic" }),
                var credential = used.server.credential(for: raw.url), let space = ProtectionSpace(url: raw.url)
            else { return nil }
            credential.sendsPreemptively = false
            var retry = used
            retry.server = [ScopedCredential(credential, for: space)] + used.server.filter { $0.origin != space.origin }
            return retry
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
            guard let answer = await hooks.credential(for: challenge) else { return nil }
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
