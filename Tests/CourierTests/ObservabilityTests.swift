import CourierPipeline
import Foundation
import HTTPTypes
import InMemoryTracing
import Instrumentation
import Metrics
import MetricsTestKit
import Testing
import Tracing

@testable import Courier

/// Spans and metrics against the fault server, each session with a tracer and a metrics factory
/// of its own (nothing is bootstrapped for the whole test process).
@Suite struct ObservabilityTests {
    /// `InMemoryTracer` with W3C-shaped identifiers (32 and 16 hex digits), whose `inject` also
    /// writes a W3C `traceparent` for the span in the context, as a real tracer's propagator does.
    struct W3CTestTracer: Tracer {
        typealias Span = InMemorySpan
        let base = InMemoryTracer(
            idGenerator: .init(nextTraceID: { Self.hex(bytes: 16) }, nextSpanID: { Self.hex(bytes: 8) }))

        static func hex(bytes: Int) -> String {
            (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        }

        var finishedSpans: [FinishedInMemorySpan] { base.finishedSpans }

        func startSpan<Instant: TracerInstant>(
            _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
            at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
        ) -> InMemorySpan {
            base.startSpan(
                operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID,
                line: line)
        }

        func forceFlush() { base.forceFlush() }

        func inject<Carrier, Inject: Injector>(
            _ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject
        ) where Carrier == Inject.Carrier {
            base.inject(context, into: &carrier, using: injector)
            if let span = context.inMemorySpanContext {
                injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
            }
        }

        func extract<Carrier, Extract: Extractor>(
            _ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract
        ) where Carrier == Extract.Carrier {
            base.extract(carrier, into: &context, using: extractor)
        }
    }

    /// The `traceparent` that `span` would have sent.
    static func traceparent(of span: FinishedInMemorySpan) -> String {
        "00-\(span.traceID)-\(span.spanID)-01"
    }

    /// A request header as the fault server's `/echo` saw it.
    static func header(_ echo: JSON, _ name: String) -> String? {
        echo["headers"].objectValue?.first { $0.key.lowercased() == name }?.value.stringValue
    }

    static func string(_ span: FinishedInMemorySpan, _ key: String) -> String? {
        if case .string(let value) = span.attributes.get(key) { value } else { nil }
    }

    static func int(_ span: FinishedInMemorySpan, _ key: String) -> Int64? {
        if case .int64(let value) = span.attributes.get(key) { value } else { nil }
    }

    /// The request's span (the only one without a parent) and its children, in the order
    /// they were sent.
    static func tree(_ spans: [FinishedInMemorySpan]) throws -> (FinishedInMemorySpan, [FinishedInMemorySpan]) {
        let roots = spans.filter { $0.parentSpanID == nil }
        try #require(roots.count == 1)
        let children = spans.filter { $0.parentSpanID != nil }.sorted {
            (int($0, "http.request.resend_count") ?? 0) < (int($1, "http.request.resend_count") ?? 0)
        }
        return (roots[0], children)
    }

    @Test func aRequestHasAClientSpanAndAChildSpanForItsAttempt() async throws {
        let tracer = W3CTestTracer()
        let api = try await faultManager { $0.tracer = tracer }
        let base = try await TestServers.fault()
        let echo: JSON = try await api.GET("echo")
        let spans = tracer.finishedSpans
        #expect(spans.map(\.operationName) == ["GET", "GET"])
        #expect(spans.allSatisfy { $0.kind == .client })
        let (request, attempts) = try Self.tree(spans)
        try #require(attempts.count == 1)
        let attempt = attempts[0]
        #expect(attempt.parentSpanID == request.spanID)
        #expect(attempt.traceID == request.traceID)
        // What the server got is the attempt's context.
        #expect(Self.header(echo, "traceparent") == Self.traceparent(of: attempt))
        for span in [request, attempt] {
            #expect(Self.string(span, "http.request.method") == "GET")
            #expect(Self.string(span, "url.full") == base.absoluteString + "echo")
            #expect(Self.string(span, "server.address") == "127.0.0.1")
            #expect(Self.int(span, "server.port") == Int64(base.port!))
            #expect(Self.int(span, "http.response.status_code") == 200)
            #expect(Self.string(span, "network.protocol.version") == "1.1")
            #expect(span.attributes.get("error.type") == nil)
            #expect(span.attributes.get("http.request.resend_count") == nil)
            #expect(span.status == nil)
            #expect(span.errors.isEmpty)
        }
    }

    @Test func aRetriedRequestHasTwoAttemptSpansUnderOneParent() async throws {
        let tracer = W3CTestTracer()
        let api = try await faultManager {
            $0.tracer = tracer
            $0.interceptors = [RetryPolicy(initialDelay: .milliseconds(1), deadline: nil)]
        }
        let name = "trace-retry-\(UUID().uuidString.prefix(8))"
        let reply: JSON = try await api.GET("flaky/\(name)", parameters: ["fail": 1, "status": 503])
        #expect(reply["attempt"] == 2)
        let spans = tracer.finishedSpans
        #expect(spans.count == 3)
        #expect(spans.map(\.operationName) == ["GET", "GET", "GET"])
        let (request, attempts) = try Self.tree(spans)
        try #require(attempts.count == 2)
        #expect(attempts.allSatisfy { $0.parentSpanID == request.spanID && $0.traceID == request.traceID })
        #expect(attempts[0].spanID != attempts[1].spanID)
        // The first attempt: a 503, no resend count; the second: resend 1, a 200.
        #expect(Self.int(attempts[0], "http.request.resend_count") == nil)
        #expect(Self.int(attempts[0], "http.response.status_code") == 503)
        #expect(Self.string(attempts[0], "error.type") == "503")
        #expect(attempts[0].status?.code == .error)
        #expect(Self.int(attempts[1], "http.request.resend_count") == 1)
        #expect(Self.int(attempts[1], "http.response.status_code") == 200)
        #expect(attempts[1].attributes.get("error.type") == nil)
        #expect(Self.int(request, "http.response.status_code") == 200)
        #expect(request.status == nil)
    }

    @Test func aRedirectGivesEachHopASpan() async throws {
        let tracer = W3CTestTracer()
        let api = try await faultManager { $0.tracer = tracer }
        let base = try await TestServers.fault()
        let echo: JSON = try await api.GET("redirect", parameters: ["to": "/echo"])
        #expect(echo["path"] == "/echo")
        let (request, hops) = try Self.tree(tracer.finishedSpans)
        try #require(hops.count == 2)
        #expect(hops.allSatisfy { $0.parentSpanID == request.spanID })
        #expect(Self.string(hops[0], "url.full") == base.absoluteString + "redirect?to=/echo")
        #expect(Self.int(hops[0], "http.response.status_code") == 302)
        #expect(hops[0].status == nil)
        #expect(Self.string(hops[1], "url.full") == base.absoluteString + "echo")
        #expect(Self.int(hops[1], "http.request.resend_count") == 1)
        #expect(Self.int(hops[1], "http.response.status_code") == 200)
        // The hop that reached /echo sent its own context, not the first hop's.
        #expect(Self.header(echo, "traceparent") == Self.traceparent(of: hops[1]))
        #expect(Self.int(request, "http.response.status_code") == 200)
    }

    @Test func anAnsweredChallengeIsASendOfItsOwn() async throws {
        let tracer = W3CTestTracer()
        let api = try await faultManager { $0.tracer = tracer }
        api.challengeHandler = { _ in Credential(user: "user", password: "secret") }
        let reply: JSON = try await api.GET("auth-required/trace-\(UUID().uuidString.prefix(8))")
        #expect(reply["authenticated"] == true)
        let (request, sends) = try Self.tree(tracer.finishedSpans)
        try #require(sends.count == 2)
        #expect(sends.allSatisfy { $0.parentSpanID == request.spanID })
        #expect(Self.int(sends[0], "http.response.status_code") == 401)
        #expect(Self.string(sends[0], "error.type") == "401")
        #expect(Self.int(sends[1], "http.request.resend_count") == 1)
        #expect(Self.int(sends[1], "http.response.status_code") == 200)
        #expect(Self.int(request, "http.response.status_code") == 200)
        #expect(request.status == nil)
    }

    @Test func aCancelledRequestEndsItsSpansWithoutAnError() async throws {
        let tracer = W3CTestTracer()
        let metrics = TestMetrics()
        let api = try await faultManager {
            $0.tracer = tracer
            $0.metricsFactory = metrics
        }
        let task = Task { try await api.GET("silent", serializer: DataResponseSerializer()) }
        // Cancelled once the attempt is under way (its span started), while the server is silent.
        let deadline = ContinuousClock.now + .seconds(10)
        while tracer.base.activeSpans.count < 2, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        let (request, attempts) = try Self.tree(tracer.finishedSpans)
        try #require(attempts.count == 1)
        for span in [request, attempts[0]] {
            #expect(span.status == nil)
            #expect(span.errors.isEmpty)
            #expect(span.attributes.get("error.type") == nil)
        }
        #expect(tracer.base.activeSpans.isEmpty)
        // Out of flight, and counted nowhere else.
        #expect(try metrics.expectMeter("http.client.active_requests").values == [1, 0])
        #expect(metrics.counters(label: "http.client.requests").isEmpty)
        #expect(metrics.counters(label: "http.client.failures").isEmpty)
        #expect(metrics.counters.allSatisfy { $0.totalValue == 0 })
        #expect(metrics.timers.isEmpty)
    }

    @Test func failuresNameTheirErrorType() async throws {
        let tracer = W3CTestTracer()
        let api = try await faultManager { $0.tracer = tracer }
        let refused = HTTPSessionManager(
            baseURL: URL(string: "http://127.0.0.1:\(try unusedPort())/"),
            configuration: {
                var configuration = HTTPSessionConfiguration.ephemeral
                configuration.tracer = tracer
                return configuration
            }())

        // A 404 that the serializer refuses: error.type is the status code.
        let notFound = await capturedError {
            _ = try await api.POST("status/404", parameters: ["a": "b"], serializer: DataResponseSerializer())
        }
        #expect(isCourierError(notFound) { if case .unacceptableStatusCode = $0 { true } else { false } })
        let (request, attempts) = try Self.tree(tracer.base.popFinishedSpans())
        #expect(request.operationName == "POST")
        try #require(attempts.count == 1)
        for span in [request, attempts[0]] {
            #expect(Self.string(span, "error.type") == "404")
            #expect(Self.int(span, "http.response.status_code") == 404)
            #expect(span.status?.code == .error)
        }
        #expect(request.errors.count == 1)
        #expect(
            isCourierError(request.errors.first?.error) { if case .unacceptableStatusCode = $0 { true } else { false } }
        )

        // No connection: the CourierError case, no status code.
        let error = await capturedError { _ = try await refused.GET("x") }
        #expect(isCourierError(error) { if case .cannotConnect = $0 { true } else { false } })
        let (failed, failedAttempts) = try Self.tree(tracer.base.popFinishedSpans())
        try #require(failedAttempts.count == 1)
        for span in [failed, failedAttempts[0]] {
            #expect(Self.string(span, "error.type") == "cannotConnect")
            #expect(span.attributes.get("http.response.status_code") == nil)
            #expect(span.status?.code == .error)
            #expect(span.errors.count == 1)
        }
    }

    @Test func metricsAfterAKnownSequenceOfRequests() async throws {
        let metrics = TestMetrics()
        let api = try await faultManager { $0.metricsFactory = metrics }
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.metricsFactory = metrics
        let refused = HTTPSessionManager(
            baseURL: URL(string: "http://127.0.0.1:\(try unusedPort())/"), configuration: configuration)

        for size in [100, 200, 300] {
            let body = try await api.GET("bytes", parameters: ["n": .int(size)], serializer: DataResponseSerializer())
            #expect(body.count == size)
        }
        _ = await capturedError {
            // A 3-byte form body (a=b); the answer is `status 404`, 10 bytes.
            _ = try await api.POST("status/404", parameters: ["a": "b"], serializer: DataResponseSerializer())
        }
        _ = await capturedError { _ = try await refused.GET("x") }

        func requests(_ method: String, _ statusClass: String) throws -> Int64 {
            try metrics.expectCounter(
                "http.client.requests", [("http.request.method", method), ("http.response.status_class", statusClass)]
            ).totalValue
        }
        #expect(try requests("GET", "2xx") == 3)
        #expect(try requests("POST", "4xx") == 1)
        #expect(try requests("GET", "none") == 1)
        #expect(metrics.counters(label: "http.client.requests").count == 3)
        #expect(
            try metrics.expectCounter("http.client.failures", [("error.type", "unacceptableStatusCode")]).totalValue
                == 1)
        #expect(try metrics.expectCounter("http.client.failures", [("error.type", "cannotConnect")]).totalValue == 1)
        #expect(metrics.counterTotal(label: "http.client.failures") == 2)
        let gets = try metrics.expectTimer("http.client.request.duration", [("http.request.method", "GET")]).values
        let posts = try metrics.expectTimer("http.client.request.duration", [("http.request.method", "POST")]).values
        #expect(gets.count == 4)
        #expect(posts.count == 1)
        #expect((gets + posts).allSatisfy { $0 > 0 })
        #expect(try metrics.expectCounter("http.client.request.body.bytes").totalValue == 3)
        #expect(try metrics.expectCounter("http.client.response.body.bytes").totalValue == 100 + 200 + 300 + 10)
        let inFlight = try metrics.expectMeter("http.client.active_requests")
        #expect(inFlight.values == [1, 0, 1, 0, 1, 0, 1, 0, 1, 0])
        #expect(inFlight.lastValue == 0)
    }

    @Test func nothingIsRecordedUnlessATracerOrAFactoryIsThere() async throws {
        let api = try await faultManager()
        let head = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1", path: "/echo")
        // Nothing is bootstrapped in the test process: the session finds nothing to record, so
        // its requests take the pipeline's fast path.
        #expect(!api.pipeline.telemetry.records())
        #expect(api.pipeline.telemetry.observe(head) == nil)
        let plain: JSON = try await api.GET("echo")
        #expect(Self.header(plain, "traceparent") == nil)

        // The same session uses whatever InstrumentationSystem and MetricsSystem have: here the
        // tracer and factory bound for this task, as a bootstrapped backend would be for all.
        let tracer = W3CTestTracer()
        let metrics = TestMetrics()
        let traced: JSON = try await withTracer(tracer) {
            try await withMetricsFactory(metrics) {
                #expect(api.pipeline.telemetry.records())
                return try await api.GET("echo")
            }
        }
        let (_, attempts) = try Self.tree(tracer.finishedSpans)
        try #require(attempts.count == 1)
        #expect(Self.header(traced, "traceparent") == Self.traceparent(of: attempts[0]))
        #expect(metrics.counterTotal(label: "http.client.requests") == 1)

        // A session whose tracer is NoOpTracer and factory NOOPMetricsHandler records nothing,
        // even then.
        let off = try await faultManager {
            $0.tracer = NoOpTracer()
            $0.metricsFactory = NOOPMetricsHandler.instance
        }
        let quiet: JSON = try await withTracer(tracer) {
            try await withMetricsFactory(metrics) {
                #expect(!off.pipeline.telemetry.records())
                #expect(off.pipeline.telemetry.observe(head) == nil)
                return try await off.GET("echo")
            }
        }
        #expect(Self.header(quiet, "traceparent") == nil)
        #expect(tracer.finishedSpans.count == 2)
        #expect(metrics.counterTotal(label: "http.client.requests") == 1)
    }

    @Test func aProcessWideBootstrappedTracerIsUsedAndInjects() async throws {
        // A process of its own (CourierTestHelper): InstrumentationSystem.bootstrap is once per
        // process, and the parallel tests here must not all be traced.
        let echo = try await TestServers.fault().appendingPathComponent("echo")
        let helper = try HelperProcess(["bootstrapped-trace", echo.absoluteString])
        var lines: [String] = []
        while let line = await helper.nextLine() { lines.append(line) }
        #expect(await helper.exitStatus() == 0)
        let server = try #require(lines.first { $0.hasPrefix("server ") }).split(separator: " ").map(String.init)
        let spans = lines.filter { $0.hasPrefix("span ") }.map { $0.split(separator: " ").map(String.init) }
        try #require(spans.count == 2, "spans: \(lines)")
        // The send ends before the request: [span, name, trace, span id, parent].
        let (send, request) = (spans[0], spans[1])
        #expect(send[1] == "GET" && request[1] == "GET")
        #expect(request[4] == "-")
        #expect(send[4] == request[3])
        #expect(send[2] == request[2])
        // What the bootstrapped instrument injected reached the server: the send's context.
        #expect(server == ["server", send[2], send[3]])
    }
}
