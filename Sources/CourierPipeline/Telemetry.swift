@_spi(CourierInternals) import CourierCore
import CourierTransport
import HTTPTypes
import Instrumentation
import Metrics
import Synchronization
import Tracing

/// A session's tracing and metrics: spans through a tracer (the session's, or the one
/// `InstrumentationSystem` has), metrics through a factory (the session's, or
/// `MetricsSystem`'s).
///
/// `observe(_:)` decides per request whether there is anything to record at all. With nothing
/// bootstrapped and nothing configured, that is two task-local reads, two reader locks and two
/// type checks, and the answer is nil: the request has no observers unless the session has
/// monitors, as if this type did not exist. `records()` answers the same without starting
/// anything. The answer is not cached per session: a backend may be bootstrapped
/// after the session was made, and `withTracer(_:_:)` and `withMetricsFactory(_:_:)` bind one
/// for a task.
package final class SessionTelemetry: Sendable {
    private enum TracerChoice {
        /// `InstrumentationSystem`'s, looked up at each request.
        case system
        /// Tracing turned off for the session (`NoOpTracer`).
        case off
        case tracer(any Tracer)
    }

    private enum MetricsChoice {
        /// `MetricsSystem.factory`, looked up at each request.
        case system
        /// Metrics turned off for the session (`NOOPMetricsHandler`).
        case off
        case session(SessionMetrics)
    }

    private let tracer: TracerChoice
    private let metrics: MetricsChoice
    /// The metric objects of the last bootstrapped factory seen (a class instance), so that
    /// they are made once rather than per request.
    private let systemMetrics = Locked<SessionMetrics?>(nil)

    /// A session's choices: nil for the process's bootstrapped tracer or factory, a
    /// `NoOpTracer` or `NOOPMetricsHandler` to turn tracing or metrics off.
    package init(tracer: (any Tracer)?, metricsFactory: (any MetricsFactory)?) {
        switch tracer {
        case nil: self.tracer = .system
        case let tracer? where tracer is NoOpTracer: self.tracer = .off
        case let tracer?: self.tracer = .tracer(tracer)
        }
        switch metricsFactory {
        case nil: self.metrics = .system
        case let factory? where factory is NOOPMetricsHandler: self.metrics = .off
        case let factory?: self.metrics = .session(SessionMetrics(factory: factory))
        }
    }

    /// Whether a request would be recorded (see `observe(_:)`), without starting anything.
    package func records() -> Bool {
        let recorders = recorders()
        return recorders.tracer != nil || recorders.metrics != nil
    }

    /// What records `head`'s request (its span is started, the in-flight meter raised), or nil
    /// when nothing would be recorded: with nothing bootstrapped and nothing configured, two
    /// task-local reads, two reader locks and two type checks.
    @inline(never)
    package func observe(_ head: HTTPRequest) -> RequestTelemetry? {
        let (tracer, propagator, metrics) = recorders()
        guard tracer != nil || metrics != nil else { return nil }
        return RequestTelemetry(head, tracer: tracer, propagator: propagator, metrics: metrics)
    }

    /// The tracer that records a request now (with the instrument that injects its context)
    /// and the metrics; nil for each that does not record.
    private func recorders() -> (tracer: (any Tracer)?, propagator: (any Instrument)?, metrics: SessionMetrics?) {
        let tracer: (any Tracer)?
        let propagator: (any Instrument)?
        switch self.tracer {
        case .off:
            (tracer, propagator) = (nil, nil)
        case .tracer(let sessionTracer):
            (tracer, propagator) = (sessionTracer, sessionTracer)
        case .system:
            // A bootstrapped instrument that is no tracer (a propagator alone) still injects:
            // the spans are then no-op spans that carry the caller's context.
            let instrument = Self.systemInstrument()
            (tracer, propagator) = (instrument.map { _ in InstrumentationSystem.tracer }, instrument)
        }
        let metrics: SessionMetrics?
        switch self.metrics {
        case .off: metrics = nil
        case .session(let sessionMetrics): metrics = sessionMetrics
        case .system: metrics = Self.systemFactory().map(systemMetrics(for:))
        }
        return (tracer, propagator, metrics)
    }

    /// `InstrumentationSystem`'s instrument (the task's, or the bootstrapped one), unless it is
    /// the no-op one.
    private static func systemInstrument() -> (any Instrument)? {
        let instrument = InstrumentationSystem.instrument
        // The types compared, not cast to (`is` is a dynamic cast, for every request): both
        // no-op types are structs, so no subclass can hide behind them.
        let type = ObjectIdentifier(Swift.type(of: instrument))
        return type == ObjectIdentifier(NoOpTracer.self) || type == ObjectIdentifier(NoOpInstrument.self)
            ? nil : instrument
    }

    /// `MetricsSystem`'s factory (the task's, or the bootstrapped one), unless it is the no-op
    /// one.
    private static func systemFactory() -> (any MetricsFactory)? {
        let factory = MetricsSystem.factory
        // A final class: its type compared is the same test as a cast, without the cast.
        return ObjectIdentifier(type(of: factory)) == ObjectIdentifier(NOOPMetricsHandler.self) ? nil : factory
    }

    /// The metric objects for the bootstrapped `factory`: kept while it stays the same object.
    /// A factory that is a value type gets new ones per request (correct, only slower).
    private func systemMetrics(for factory: any MetricsFactory) -> SessionMetrics {
        guard type(of: factory) is AnyClass else { return SessionMetrics(factory: factory) }
        let identity = ObjectIdentifier(factory as AnyObject)
        return systemMetrics.withLock { cached in
            if let cached, cached.identity == identity { return cached }
            let made = SessionMetrics(factory: factory)
            cached = made
            return made
        }
    }
}

/// The names of the metrics a session records, and of their dimensions.
package enum MetricNames {
    /// Counter: finished requests, by `http.request.method` and `http.response.status_class`.
    package static let requests = "http.client.requests"
    /// Counter: failed requests, by `error.type` (the `CourierError` case).
    package static let failures = "http.client.failures"
    /// Timer: from the call to the response or the failure, by `http.request.method`.
    package static let duration = "http.client.request.duration"
    /// Counter: request body bytes sent.
    package static let bytesSent = "http.client.request.body.bytes"
    /// Counter: response body bytes received (as they came over the wire).
    package static let bytesReceived = "http.client.response.body.bytes"
    /// Meter: requests begun and not yet finished.
    package static let activeRequests = "http.client.active_requests"
}

/// The metric objects of one factory, made once: those with dimensions per value seen.
package final class SessionMetrics: Sendable {
    private struct Made {
        var requests: [String: Counter] = [:]
        var failures: [String: Counter] = [:]
        var durations: [String: Metrics.Timer] = [:]
    }

    let factory: any MetricsFactory
    /// The factory's identity, when it is a class instance (see `systemMetrics(for:)`).
    let identity: ObjectIdentifier?
    let bytesSent: Counter
    let bytesReceived: Counter
    let activeRequests: Meter
    private let made = Locked(Made())

    init(factory: any MetricsFactory) {
        self.factory = factory
        self.identity = type(of: factory) is AnyClass ? ObjectIdentifier(factory as AnyObject) : nil
        bytesSent = Counter(label: MetricNames.bytesSent, factory: factory)
        bytesReceived = Counter(label: MetricNames.bytesReceived, factory: factory)
        activeRequests = Meter(label: MetricNames.activeRequests, factory: factory)
    }

    func requests(method: String, statusClass: String) -> Counter {
        metric(\.requests, method + " " + statusClass) {
            Counter(
                label: MetricNames.requests,
                dimensions: [("http.request.method", method), ("http.response.status_class", statusClass)],
                factory: factory)
        }
    }

    func failures(errorType: String) -> Counter {
        metric(\.failures, errorType) {
            Counter(label: MetricNames.failures, dimensions: [("error.type", errorType)], factory: factory)
        }
    }

    func duration(method: String) -> Metrics.Timer {
        metric(\.durations, method) {
            Metrics.Timer(label: MetricNames.duration, dimensions: [("http.request.method", method)], factory: factory)
        }
    }

    /// The metric kept in `table` under `key`, made by `make` the first time.
    private func metric<Metric: Sendable>(
        _ table: WritableKeyPath<Made, [String: Metric]>, _ key: String, _ make: () -> Metric
    ) -> Metric {
        made.withLock { made in
            if let metric = made[keyPath: table][key] { return metric }
            let metric = make()
            made[keyPath: table][key] = metric
            return metric
        }
    }
}

/// One request's span and metrics, from the call to its response or failure. Made only when
/// something records (see `SessionTelemetry.observe(_:)`).
package final class RequestTelemetry: Sendable {
    private struct Tally {
        var bytesSent: Int64 = 0
        var bytesReceived: Int64 = 0
        /// The status and HTTP version of the current attempt's last response, if any.
        var status: Int?
        var version = ""
    }

    let tracer: (any Tracer)?
    let propagator: (any Instrument)?
    let metrics: SessionMetrics?
    /// The request's span (kind client); nil when only metrics record.
    let span: (any Span)?
    private let method: String
    private let started = ContinuousClock.now
    /// Spans begun for the request's sends so far (each attempt's, each redirect hop's, each
    /// challenge answer's): the next one's `http.request.resend_count`.
    private let sends = Atomic<Int>(0)
    private let tally = Locked(Tally())

    init(
        _ head: HTTPRequest, tracer: (any Tracer)?, propagator: (any Instrument)?, metrics: SessionMetrics?
    ) {
        self.tracer = tracer
        self.propagator = propagator
        self.metrics = metrics
        self.method = head.method.rawValue
        if let tracer {
            let span = tracer.startSpan(
                head.method.rawValue, context: InstrumentationContext.current ?? .topLevel, ofKind: .client)
            span.updateAttributes { HTTPAttributes.describe(head, in: &$0) }
            self.span = span
        } else {
            self.span = nil
        }
        metrics?.activeRequests.increment()
    }

    /// The telemetry of one attempt of `request`: its span started (a child of the
    /// request's), its context injected into the request's header fields, and the redirect
    /// handler wrapped so that each hop gets a span of its own.
    func attempt(for request: inout TransferRequest) -> AttemptTelemetry {
        tally.withLock {
            $0.status = nil
            $0.version = ""
        }
        let attempt = AttemptTelemetry(self)
        guard tracer != nil else { return attempt }
        attempt.beginHop(&request.head)
        let handler = request.redirectHandler
        request.redirectHandler = { hop in
            let chosen: HTTPRequest?
            if let handler { chosen = handler(hop) } else { chosen = hop.proposed }
            guard var next = chosen else { return nil }
            attempt.redirected(after: hop.response, to: &next)
            return next
        }
        return attempt
    }

    /// A span for one send of the request (an attempt, a redirect hop, a challenge answer),
    /// with `head`'s attributes, its context injected into `head`.
    func startSend(_ head: inout HTTPRequest) -> (any Span)? {
        guard let tracer, let span else { return nil }
        let resends = sends.add(1, ordering: .relaxed).oldValue
        let send = tracer.startSpan(head.method.rawValue, context: span.context, ofKind: .client)
        send.updateAttributes { attributes in
            HTTPAttributes.describe(head, in: &attributes)
            if resends > 0 { attributes["http.request.resend_count"] = resends }
        }
        if let propagator { propagator.inject(send.context, into: &head.headerFields, using: HTTPFieldsInjector()) }
        return send
    }

    /// A transfer's response: its status, version and body sizes count for the request.
    func received(_ raw: RawResponse) {
        tally.withLock {
            $0.bytesSent += raw.metrics.bytesSent
            $0.bytesReceived += raw.metrics.bytesReceived
            $0.status = raw.status.code
            $0.version = raw.metrics.httpVersion
        }
    }

    /// The request succeeded with `raw`.
    func finished(_ raw: RawResponse) {
        let version = raw.metrics.httpVersion.isEmpty ? tally.withLock(\.version) : raw.metrics.httpVersion
        let status = raw.status.code
        if let span {
            HTTPAttributes.end(span, status: status, version: version, error: nil)
        }
        record(status: status, failure: nil)
    }

    /// The request failed with `error` (after any retries), or was cancelled.
    func failed(_ error: any Error, cancelled: Bool) {
        let (lastStatus, version) = tally.withLock { ($0.status, $0.version) }
        guard !cancelled else {
            span?.end()
            metrics?.activeRequests.decrement()
            return
        }
        let status = (error as? CourierError)?.response?.status.code ?? lastStatus
        if let span {
            HTTPAttributes.end(span, status: status, version: version, error: error)
        }
        record(status: status, failure: HTTPAttributes.caseName(of: error))
    }

    private func record(status: Int?, failure: String?) {
        guard let metrics else { return }
        let (sent, received) = tally.withLock { ($0.bytesSent, $0.bytesReceived) }
        metrics.requests(method: method, statusClass: status.map { "\($0 / 100)xx" } ?? "none").increment()
        if let failure { metrics.failures(errorType: failure).increment() }
        metrics.duration(method: method).record(duration: ContinuousClock.now - started)
        if sent > 0 { metrics.bytesSent.increment(by: sent) }
        if received > 0 { metrics.bytesReceived.increment(by: received) }
        metrics.activeRequests.decrement()
    }
}

/// One attempt's spans: the current hop's, ended when its response or failure comes, or when a
/// redirect or a challenge answer starts the next. Redirects are followed on the transport's
/// thread, hence the lock.
package final class AttemptTelemetry: Sendable {
    let request: RequestTelemetry
    /// The span of the send in progress; nil once it ended, or when only metrics record.
    private let hop = Locked<(any Span)?>(nil)

    init(_ request: RequestTelemetry) {
        self.request = request
    }

    /// Starts the span of a send of `head` (the first, or a challenge answer), injected into it.
    func beginHop(_ head: inout HTTPRequest) {
        let span = request.startSend(&head)
        let previous = hop.withLock { current in
            defer { current = span }
            return current
        }
        previous?.end()
    }

    /// The transport follows a redirect (`response`) to `next`: the hop's span ends with the
    /// redirect's status, and `next` gets a span of its own.
    func redirected(after response: HTTPResponse, to next: inout HTTPRequest) {
        if let span = hop.withLock({ $0.take() }) {
            HTTPAttributes.end(span, status: response.status.code, version: "", error: nil)
        }
        beginHop(&next)
    }

    /// A transfer of the attempt returned `raw`.
    func received(_ raw: RawResponse) {
        request.received(raw)
        if let span = hop.withLock({ $0.take() }) {
            HTTPAttributes.end(span, status: raw.status.code, version: raw.metrics.httpVersion, error: nil)
        }
    }

    /// A transfer of the attempt failed with `error` (cancellation included).
    func failed(_ error: any Error) {
        guard let span = hop.withLock({ $0.take() }) else { return }
        if error is CancellationError || Task.isCancelled {
            span.end()
        } else {
            HTTPAttributes.end(span, status: (error as? CourierError)?.response?.status.code, version: "", error: error)
        }
    }
}

/// OpenTelemetry's HTTP client attributes.
enum HTTPAttributes {
    /// `http.request.method`, `url.full` (without user information), `server.address` and
    /// `server.port`.
    static func describe(_ head: HTTPRequest, in attributes: inout SpanAttributes) {
        attributes["http.request.method"] = head.method.rawValue
        guard let scheme = head.scheme, var authority = head.authority else { return }
        if let at = authority.lastIndex(of: "@") { authority = String(authority[authority.index(after: at)...]) }
        attributes["url.full"] = scheme + "://" + authority + (head.path ?? "")
        var host = Substring(authority)
        var port: Int?
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let rest = host[host.index(after: close)...]
            port = rest.hasPrefix(":") ? Int(rest.dropFirst()) : nil
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            port = Int(host[host.index(after: colon)...])
            host = host[..<colon]
        }
        attributes["server.address"] = String(host)
        if let port = port ?? HostName.defaultPort(forScheme: scheme) {
            attributes["server.port"] = port
        }
    }

    /// Ends `span` with the response's status and HTTP version, and the error: a status of 400
    /// or more marks the span failed (error.type is the code), an error names its case.
    static func end(_ span: any Span, status: Int?, version: String, error: (any Error)?) {
        let errorType: String?
        if let status, status >= 400, error == nil || isStatusFailure(error) {
            errorType = String(status)
        } else {
            errorType = error.map(caseName(of:))
        }
        span.updateAttributes { attributes in
            if let status { attributes["http.response.status_code"] = status }
            if !version.isEmpty { attributes["network.protocol.version"] = version }
            if let errorType { attributes["error.type"] = errorType }
        }
        if let error { span.recordError(error) }
        if errorType != nil { span.setStatus(SpanStatus(code: .error, message: error.map { "\($0)" })) }
        span.end()
    }

    /// The `CourierError` case (`timedOut`, `cannotConnect`...), or the error's type.
    static func caseName(of error: any Error) -> String {
        (error as? CourierError)?.kind ?? String(reflecting: type(of: error))
    }

    /// Whether `error` is the response's status refused: error.type is then the status code.
    private static func isStatusFailure(_ error: (any Error)?) -> Bool {
        if case .unacceptableStatusCode = error as? CourierError { return true }
        return false
    }
}

/// Writes what an instrument injects (`traceparent`, `tracestate`...) into request header
/// fields, replacing a field of the same name.
package struct HTTPFieldsInjector: Injector {
    package init() {}

    package func inject(_ value: String, forKey key: String, into carrier: inout HTTPFields) {
        guard let name = HTTPField.Name(key) else { return }
        carrier[name] = value
    }
}
