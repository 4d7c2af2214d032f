import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// One request on its way through the pipeline, from the call to its response or its last
/// failure: what every attempt needs (the prepared request, the hooks, the sink, the reporters,
/// the observers) and what the attempts have come to (their number, the request the last one
/// sent, the transactions of those that failed).
///
/// A class, made once per request: the pipeline's async functions keep a reference to it in
/// their frames rather than copies of what it holds (Documentation/Costs.md, "What a
/// request costs").
final class InFlightRequest {
    let prepared: PreparedRequest
    let hooks: any SessionHooks
    let reporters: TransferReporters?
    /// Where the body goes instead of memory (downloads, byte streams).
    let sink: (any ResponseSink)?
    /// Given each transfer before it starts (task objects control it).
    let register: (@Sendable (any TransportTransfer) -> Void)?
    /// Nil when nothing observes the request (no monitor, no span, no metrics).
    let observers: RequestObservers?
    /// The call's own interceptors, its retry policy first (the session's are the pipeline's).
    let chain: [any RequestInterceptor]
    /// Whether a failed attempt may be tried again: interceptors apply, its body can be sent
    /// again, and its sink can take another response.
    let retryable: Bool
    /// The session's numbering of its requests (0 when neither interceptors nor observers
    /// are told it).
    let requestID: UInt64
    /// When the first attempt began; nil when no interceptor is told (see `context`).
    let started: ContinuousClock.Instant?
    /// When the call must be over: its resource timeout from when it began, or the caller's
    /// deadline if that comes first, for every wait (a place in the session's queue,
    /// interceptors, a credential, a route, a retry's delay, each transfer). nil without
    /// either.
    let deadline: ContinuousClock.Instant?
    /// The attempt under way, from 1.
    var number = 1
    /// The attempt's request as adapted, when anything adapted or heard of it.
    private var adaptedHead: HTTPRequest?
    /// The attempt's request as adapted (the prepared one, when nothing adapts it).
    var sent: HTTPRequest { adaptedHead ?? prepared.head }
    /// The attempt's response, when serialization refused it.
    var answered: RawResponse?
    /// What the sink asked the next attempt to add (a download's `Range` and `If-Range`).
    var continuation = HTTPFields()
    /// The transactions of the attempts before this one (see `TransferMetrics.transactions`).
    var history: [TransactionMetrics] = []

    init(
        _ prepared: PreparedRequest, hooks: any SessionHooks, reporters: TransferReporters?,
        sink: (any ResponseSink)?, register: (@Sendable (any TransportTransfer) -> Void)?,
        observers: RequestObservers?, chain: [any RequestInterceptor], retryable: Bool, requestID: UInt64,
        started: ContinuousClock.Instant?, deadline: ContinuousClock.Instant? = nil
    ) {
        self.deadline = deadline
        self.prepared = prepared
        self.hooks = hooks
        self.reporters = reporters
        self.sink = sink
        self.register = register
        self.observers = observers
        self.chain = chain
        self.retryable = retryable
        self.requestID = requestID
        self.started = started
    }

    /// Whether anything adapts the attempt's request or hears of it (interceptors, the hooks,
    /// observers, fields for the sink); when nothing does, the prepared head goes as it is,
    /// without an async call (Costs.md, "What a request costs").
    var isAdapted: Bool { started != nil || hooks.runsHooks || observers != nil || !continuation.isEmpty }

    /// What interceptors are told of the attempt; nil when none apply.
    var context: RequestContext? {
        started.map {
            var context = RequestContext(
                requestID: requestID, attempt: number, firstAttemptStarted: $0, deadline: deadline)
            context.body = prepared.body
            return context
        }
    }

    /// Keeps the attempt's request, adapted (`sent`): with the fields the sink asked for,
    /// announced.
    func adapted(_ head: HTTPRequest) {
        var head = head
        for field in continuation { head.headerFields[field.name] = field.value }
        observers?.adapted(head, attempt: number)
        adaptedHead = head
    }

    /// What the next transfer must add for the sink to take it (nothing without a sink); nil
    /// when the sink cannot take another.
    func fieldsForAnotherTransfer() async -> HTTPFields? {
        guard let sink else { return HTTPFields() }
        return await sink.prepareAnotherAttempt()
    }

    /// The error of a call whose deadline passed while it was `waiting` (says what for),
    /// after `failure` if an attempt had failed (its metrics are kept).
    func deadlinePassed(while waiting: String, after failure: (any Error)? = nil) -> CourierError {
        // The caller's deadline, when it came before the resource timeout would have.
        let limit = deadline != nil && prepared.call.options.deadline == deadline ? "deadline" : "resource timeout"
        var context = CourierError.Context(
            url: sent.url, message: "The request's \(limit) passed while it was \(waiting)")
        if let failure = failure as? CourierError {
            context.metrics = failure.context.metrics
            context.underlyingError = failure
            context.message += "; its last attempt failed: \(failure.context.description)"
        }
        return .timedOut(context)
    }

    /// The transactions of a retry's response numbered, after the earlier attempts'.
    @inline(never)
    func number(_ raw: inout RawResponse) {
        guard number > 1 else { return }
        for index in raw.metrics.transactions.indices { raw.metrics.transactions[index].attempt = number }
        raw.metrics.transactions = history + raw.metrics.transactions
    }

    /// `serialize(raw)`; a response it refuses is kept as the attempt's answer (for the
    /// failure's metrics), and a `CourierError` it throws carries the response's metrics.
    @inline(never)
    func accept(_ raw: RawResponse, _ serialize: (RawResponse) throws -> Void) throws {
        do {
            try serialize(raw)
        } catch {
            answered = raw
            guard let failure = error as? CourierError, failure.context.metrics == nil else { throw error }
            throw failure.withContext { $0.metrics = raw.metrics }
        }
    }

    /// A failed attempt's transactions added to `history` (its response's when serialization
    /// refused it, the transfer's as its error has them, or the request alone), and `error`
    /// with every attempt's transactions in its metrics.
    @inline(never)
    func recordFailure(_ error: any Error) -> any Error {
        defer { answered = nil }
        guard let failure = error as? CourierError else { return error }
        if let answered {
            history = answered.metrics.transactions  // numbered after the history already
        } else {
            var transactions = failure.context.metrics?.transactions ?? []
            if transactions.isEmpty {
                var transaction = TransactionMetrics(request: sent, response: failure.context.response)
                transaction.failure = failure.context.description
                transactions = [transaction]
            }
            for index in transactions.indices { transactions[index].attempt = number }
            history += transactions
        }
        return failure.withContext { context in
            var metrics = context.metrics ?? answered?.metrics ?? TransferMetrics()
            metrics.transactions = history
            context.metrics = metrics
        }
    }
}

/// One attempt's transfer, across its suspension points: its request (credentials, validators
/// and trace context added), the cache's view of it, and what its send got back.
final class Attempt {
    let inFlight: InFlightRequest
    var request: TransferRequest
    var cacheLookup: CacheLookup
    let authentication: RequestPipeline.CredentialPair
    /// When the request went out, for the cache's age calculation (RFC 9111 section 4.2.3).
    let requestTime: Date
    /// The transport's shared form of the session's header fields, when the request sends
    /// exactly those.
    let sharedHeaders: (any Sendable)?
    /// The spans of the attempt's sends, when the session records any.
    let telemetry: AttemptTelemetry?
    /// The response of the last transfer (set by `send`).
    var response: RawResponse?
    /// The transactions of the send before this one (the challenged request).
    var earlierTransactions: [TransactionMetrics] = []

    init(
        inFlight: InFlightRequest, request: TransferRequest, cacheLookup: CacheLookup,
        authentication: RequestPipeline.CredentialPair, requestTime: Date, sharedHeaders: (any Sendable)?,
        telemetry: AttemptTelemetry?
    ) {
        self.inFlight = inFlight
        self.request = request
        self.cacheLookup = cacheLookup
        self.authentication = authentication
        self.requestTime = requestTime
        self.sharedHeaders = sharedHeaders
        self.telemetry = telemetry
    }

    /// Whether the response asks for credentials (401 or 407).
    var isChallenged: Bool {
        guard let code = response?.status.code else { return false }
        return code == 401 || code == 407
    }

    /// The transfer's output as the attempt's response; its HSTS policy noted.
    @inline(never)
    func keep(_ output: TransferOutput) {
        var raw = RawResponse(output)
        if !earlierTransactions.isEmpty {
            raw.metrics.transactions = earlierTransactions + raw.metrics.transactions
        }
        if let hsts = request.hsts { HSTSStore.note(raw.head, of: raw.request, in: hsts) }
        telemetry?.received(raw)
        response = consume raw  // moved: a copy would retain each of its references
    }

    /// The response after the cache has seen it (see `CacheLookup.absorb`); called once, after
    /// a `send` that returned. The response moves out of the attempt.
    @inline(never)
    func absorbed() -> RawResponse {
        guard let response = response.take() else { preconditionFailure("absorbed() before a response") }
        return cacheLookup.absorb(response, requestTime: requestTime)
    }

    /// A stored response instead of a failed load, when the cache policy allows one (see
    /// `CacheLookup.fallback`); `error` otherwise.
    @inline(never)
    func recover(from error: any Error) throws -> RawResponse {
        telemetry?.failed(error)
        guard let error = error as? CourierError, let fallback = cacheLookup.fallback(after: error) else {
            throw error
        }
        return CacheLookup.fromCache(fallback, for: request.head, after: error.context.metrics)
    }

    /// The request again, with the credentials an authentication challenge asked for and
    /// the fields the sink needs to take another transfer.
    func prepareAnotherTry(with credentials: RequestPipeline.CredentialPair, adding fields: HTTPFields) {
        earlierTransactions = response?.metrics.transactions ?? []
        request.credentials = credentials.server
        request.proxyCredential = credentials.proxy
        if let credential = credentials.server.credential(for: request.head.url) {
            cacheLookup.noteCredential(credential)
        }
        for field in fields { request.head.headerFields[field.name] = field.value }
        telemetry?.beginHop(&request.head)
    }
}

/// What an attempt does after adapting: answer from the cache, or send. Both cases hold a
/// reference (Costs.md, "What a request costs").
enum AttemptPlan {
    case answered(CachedAnswer)
    case send(Attempt)
}

/// A response from the cache, without loading.
final class CachedAnswer {
    let response: RawResponse
    init(_ response: RawResponse) { self.response = response }
}
