import Courier
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// `RetryPolicy` on the stub: which statuses, failures and methods are retried, the waits it
/// chooses (read from the monitors' `retryDecided` events, never from a clock), `Retry-After`,
/// the deadline and the retry budget.
@Suite struct RetryPolicyTests {
    /// A policy whose waits are all zero (its backoff ceiling is zero), without a deadline or
    /// a budget unless a test is about them.
    static func immediate(maximumAttempts: Int = 3) -> RetryPolicy {
        RetryPolicy(maximumAttempts: maximumAttempts, initialDelay: .zero, deadline: nil, budget: nil)
    }

    /// A manager on `stub` whose requests retry with `policy`, and a recorder of its events.
    static func manager(_ stub: StubTransport, _ policy: RetryPolicy) -> (HTTPSessionManager, EventRecorder) {
        let recorder = EventRecorder()
        let api = stubbedManager(stub) {
            $0.interceptors = [policy]
            $0.eventMonitors = [recorder]
        }
        return (api, recorder)
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func aTransientStatusIsRetried(code: Int) async throws {
        let stub = StubTransport()
        stub.stub(.get, "flaky", with: .status(.init(code: code)), .json(#"{"ok": true}"#))
        let (api, _) = Self.manager(stub, Self.immediate())
        let response = try await api.request(.get, "flaky", serializer: JSONResponseSerializer())
        #expect(response.status == .ok)
        #expect(response.value["ok"] == true)
        #expect(stub.requests.count == 2)
        // The metrics have both attempts, numbered.
        #expect(response.metrics.transactions.map(\.attempt) == [1, 2])
        #expect(response.metrics.transactions.map { $0.response?.status.code } == [code, 200])
    }

    @Test(arguments: [400, 401, 403, 404, 409, 422, 501])
    func anotherStatusFailsAtOnce(code: Int) async throws {
        let stub = StubTransport()
        stub.stub(.get, "broken", with: .status(.init(code: code)), .json("{}"))
        let (api, recorder) = Self.manager(stub, Self.immediate())
        let error = await capturedError { let _: JSON = try await api.GET("broken") }
        #expect(isCourierError(error) { if case .unacceptableStatusCode = $0 { true } else { false } })
        #expect(statusCode(of: error) == code)
        #expect(stub.requests.count == 1)
        _ = await recorder.events()
        #expect(recorder.decisions.map(\.decision) == [.doNotRetry])
    }

    @Test func theTransportFailuresOfTheDefaultSetAreRetried() async throws {
        for failure in [StubFailure.cannotConnect, .timedOut, .connectionLost] {
            let stub = StubTransport()
            stub.stub(.get, "unreliable", with: .failure(failure), .text("back"))
            let (api, _) = Self.manager(stub, Self.immediate())
            let text = try await api.GET("unreliable", serializer: StringResponseSerializer())
            #expect(text == "back", "\(failure)")
            #expect(stub.requests.count == 2, "\(failure)")
        }
        // A body cut short after its head: retried, and the second answer is whole.
        let stub = StubTransport()
        stub.stub(
            .get, "cut", with: StubResponse(chunks: [Data("par".utf8)], failure: .connectionLost), .text("whole"))
        let (api, _) = Self.manager(stub, Self.immediate())
        #expect(try await api.GET("cut", serializer: StringResponseSerializer()) == "whole")
        #expect(stub.requests.count == 2)
    }

    @Test func aHostThatDoesNotResolveIsRetriedOnlyWhenThePolicySaysSo() async throws {
        let stub = StubTransport()
        stub.stub(.get, "dns", with: .failure(.cannotResolveHost), .text("found"))
        let (api, _) = Self.manager(stub, Self.immediate())
        let error = await capturedError { _ = try await api.GET("dns", serializer: StringResponseSerializer()) }
        #expect(isCourierError(error) { if case .cannotResolveHost = $0 { true } else { false } })
        #expect(stub.requests.count == 1)

        var policy = Self.immediate()
        policy.retryableFailures.insert(.cannotResolveHost)
        let willing = StubTransport()
        willing.stub(.get, "dns", with: .failure(.cannotResolveHost), .text("found"))
        let (retrying, _) = Self.manager(willing, policy)
        #expect(try await retrying.GET("dns", serializer: StringResponseSerializer()) == "found")
        #expect(willing.requests.count == 2)
    }

    @Test func aTLSFailureAndAnErrorOfTheAppAreNotRetried() async throws {
        struct Refused: Error {}
        let stub = StubTransport()
        stub.stub(.get, "tls", with: .failure(.tls), .text("never"))
        stub.stub(.get, "own", with: .failure(.error(Refused())), .text("never"))
        let (api, _) = Self.manager(stub, Self.immediate())
        let tls = await capturedError { _ = try await api.GET("tls", serializer: StringResponseSerializer()) }
        #expect(isCourierError(tls) { if case .tls = $0 { true } else { false } })
        let own = await capturedError { _ = try await api.GET("own", serializer: StringResponseSerializer()) }
        #expect(own is Refused)
        #expect(stub.requests.count == 2)
    }

    @Test(arguments: [
        (HTTPRequest.Method.get, true), (.head, true), (.put, true), (.delete, true), (.options, true), (.trace, true),
        (.post, false), (.patch, false),
    ])
    func onlyIdempotentMethodsAreRetriedByDefault(method: HTTPRequest.Method, retried: Bool) async throws {
        let stub = StubTransport()
        stub.stub(method, "thing", with: .status(.serviceUnavailable), .status(.ok))
        let (api, _) = Self.manager(stub, Self.immediate())
        if retried {
            let response = try await api.request(method, "thing", serializer: DataResponseSerializer())
            #expect(response.status == .ok)
            #expect(stub.requests.count == 2)
        } else {
            let error = await capturedError {
                _ = try await api.request(method, "thing", serializer: DataResponseSerializer())
            }
            #expect(statusCode(of: error) == 503)
            #expect(stub.requests.count == 1)
        }
        #expect(stub.requests.allSatisfy { $0.request.method == method })
    }

    @Test func aPOSTIsSentAgainWithTheSameBodyWhenThePolicyAllowsIt() async throws {
        let stub = StubTransport()
        stub.stub(.post, "orders", with: .status(.badGateway), .json(#"{"id": 7}"#, status: .created))
        var policy = Self.immediate()
        policy.retryableMethods.insert(.post)
        let (api, _) = Self.manager(stub, policy)
        api.requestSerializer = JSONRequestSerializer()
        let order: JSON = try await api.POST("orders", parameters: ["item": "tea", "count": 2])
        #expect(order["id"] == 7)
        let bodies = stub.requests.map(\.body)
        #expect(bodies.count == 2)
        #expect(bodies[0] != nil && bodies[0] == bodies[1])
        #expect(try JSON(parsing: bodies[1] ?? Data()) == ["item": "tea", "count": 2])
    }

    @Test func aStreamedBodyIsNeverSentTwice() async throws {
        let stub = StubTransport()
        stub.stub(.put, "upload", with: .status(.serviceUnavailable), .status(.ok))
        let (api, recorder) = Self.manager(stub, Self.immediate())
        let error = await capturedError {
            _ = try await api.uploadTask(
                .put, "upload", body: .stream([Data("abc".utf8)].async), serializer: DataResponseSerializer()
            ).value
        }
        #expect(statusCode(of: error) == 503)
        #expect(stub.requests.count == 1)
        #expect(stub.requests.first?.bodyText == "abc")
        // Not retryable at all: the policy is not even asked.
        _ = await recorder.events()
        #expect(recorder.decisions.isEmpty)
    }

    @Test(arguments: [1, 2, 4])
    func maximumAttemptsCountsTheFirstOne(maximum: Int) async throws {
        let stub = StubTransport()
        stub.stub(.get, "down", with: .status(.serviceUnavailable))
        let (api, recorder) = Self.manager(stub, Self.immediate(maximumAttempts: maximum))
        let error = await capturedError { let _: JSON = try await api.GET("down") }
        #expect(statusCode(of: error) == 503)
        #expect(stub.requests.count == maximum)
        _ = await recorder.events()
        #expect(recorder.decisions.map(\.attempt) == Array(1...maximum))
        #expect(recorder.decisions.map(\.decision).last == .doNotRetry)
        #expect(recorder.decisions.dropLast().allSatisfy { $0.decision == .retry })
        // The error carries every attempt's transactions.
        let transactions = (error as? CourierError)?.context.metrics?.transactions ?? []
        #expect(transactions.map(\.attempt) == Array(1...maximum))
    }

    @Test func theWaitsGrowWithEachAttemptUpToTheCap() async throws {
        // Ceilings of 2, 4, 5 and 5 ms: each wait is a random duration up to its ceiling.
        let policy = RetryPolicy(
            maximumAttempts: 5, initialDelay: .milliseconds(2), multiplier: 2, maximumDelay: .milliseconds(5),
            deadline: nil, budget: nil)
        let stub = StubTransport()
        stub.stub(.get, "down", with: .status(.serviceUnavailable))
        let (api, recorder) = Self.manager(stub, policy)
        _ = await capturedError { let _: JSON = try await api.GET("down") }
        _ = await recorder.events()
        let ceilings: [Duration] = [.milliseconds(2), .milliseconds(4), .milliseconds(5), .milliseconds(5)]
        let decisions = recorder.decisions.map(\.decision)
        try #require(decisions.count == 5)
        for (decision, ceiling) in zip(decisions, ceilings) {
            switch decision {
            case .retry: break  // a wait of zero
            case .retryAfter(let delay): #expect(delay > .zero && delay <= ceiling, "\(delay) over \(ceiling)")
            case .doNotRetry: Issue.record("attempts below the maximum were not retried: \(decisions)")
            }
        }
        #expect(decisions.last == .doNotRetry)
        #expect(stub.requests.count == 5)
    }

    @Test(.timeLimit(.minutes(10)))
    func theCapHoldsHoweverLargeTheBackoffGrows() async throws {
        // A backoff of up to an hour, capped at 1 ms: the waits in the events say so, and a cap
        // that did not hold would hang past the time limit (which only catches that hang: a
        // loaded machine, under a sanitizer, took over a minute for the whole suite's share).
        let policy = RetryPolicy(
            maximumAttempts: 4, initialDelay: .seconds(3600), maximumDelay: .milliseconds(1), deadline: nil,
            budget: nil)
        let stub = StubTransport()
        stub.stub(.get, "down", with: .status(.serviceUnavailable))
        let (api, recorder) = Self.manager(stub, policy)
        _ = await capturedError { let _: JSON = try await api.GET("down") }
        _ = await recorder.events()
        for decision in recorder.decisions.map(\.decision).dropLast() {
            if case .retryAfter(let delay) = decision { #expect(delay <= .milliseconds(1)) }
        }
        #expect(stub.requests.count == 4)
    }

    /// `Retry-After` in seconds or as an HTTP date, capped by `maximumRetryAfter`: the wait is
    /// the cap exactly (the backoff, zero here, would be `.retry`).
    @Test(arguments: ["120", "date"])
    func retryAfterIsWaitedUpToTheCap(_ value: String) async throws {
        let retryAfter = value == "date" ? Self.httpDate(Date(timeIntervalSinceNow: 600)) : value
        let stub = StubTransport()
        stub.stub(
            .get, "busy", with: .status(.tooManyRequests, headerFields: [.retryAfter: retryAfter]), .json("{}"))
        var policy = Self.immediate()
        policy.maximumRetryAfter = .milliseconds(3)
        let (api, recorder) = Self.manager(stub, policy)
        let _: JSON = try await api.GET("busy")
        _ = await recorder.events()
        #expect(recorder.decisions.map(\.decision) == [.retryAfter(.milliseconds(3))])
        #expect(stub.requests.count == 2)
    }

    @Test func aRetryAfterInThePastOrUnreadableWaitsTheBackoff() async throws {
        for retryAfter in [Self.httpDate(Date(timeIntervalSinceNow: -600)), "soon", "0"] {
            let stub = StubTransport()
            stub.stub(
                .get, "busy", with: .status(.serviceUnavailable, headerFields: [.retryAfter: retryAfter]),
                .json("{}"))
            let (api, recorder) = Self.manager(stub, Self.immediate())
            let _: JSON = try await api.GET("busy")
            _ = await recorder.events()
            #expect(recorder.decisions.map(\.decision) == [.retry], "Retry-After: \(retryAfter)")
        }
    }

    @Test func retryAfterOnAStatusThatIsNotRetriedChangesNothing() async throws {
        let stub = StubTransport()
        stub.stub(.get, "gone", with: .status(.notFound, headerFields: [.retryAfter: "1"]), .json("{}"))
        let (api, _) = Self.manager(stub, Self.immediate())
        let error = await capturedError { let _: JSON = try await api.GET("gone") }
        #expect(statusCode(of: error) == 404)
        #expect(stub.requests.count == 1)
    }

    /// A long `Retry-After` is waited, not skipped: the decision says so, and cancelling the
    /// call during the wait ends it without another request.
    @Test func cancellingDuringALongRetryAfterSendsNothingMore() async throws {
        let stub = StubTransport()
        stub.stub(.get, "busy", with: .status(.serviceUnavailable, headerFields: [.retryAfter: "120"]), .json("{}"))
        let (api, recorder) = Self.manager(stub, Self.immediate())
        let call = Task { () -> JSON in try await api.GET("busy") }
        await recorder.waitUntil { $0.contains { $0.name == "retryDecided" } }
        // The default cap is a minute.
        #expect(recorder.decisions.map(\.decision) == [.retryAfter(.seconds(60))])
        call.cancel()
        let error = await capturedError { _ = try await call.value }
        #expect(error is CancellationError)
        #expect(stub.requests.count == 1)
    }

    @Test func aWaitThatWouldEndPastTheDeadlineIsNotStarted() async throws {
        let stub = StubTransport()
        stub.stub(.get, "busy", with: .status(.serviceUnavailable, headerFields: [.retryAfter: "120"]), .json("{}"))
        let policy = RetryPolicy(
            initialDelay: .zero, deadline: .seconds(30), maximumRetryAfter: .seconds(300), budget: nil)
        let (api, recorder) = Self.manager(stub, policy)
        let error = await capturedError { let _: JSON = try await api.GET("busy") }
        #expect(statusCode(of: error) == 503)
        #expect(stub.requests.count == 1)
        _ = await recorder.events()
        #expect(recorder.decisions.map(\.decision) == [.doNotRetry])
    }

    /// With half a token per request and four at most, a failing request may retry while more
    /// than two tokens are left: three attempts from the full bucket, then two and one in
    /// turn as each request adds half a token.
    @Test func theBudgetStopsRetriesWhenMostRequestsFailAndRefills() async throws {
        let budget = RetryBudget(maximumTokens: 4, tokensPerRequest: 0.5)
        let policy = RetryPolicy(initialDelay: .zero, deadline: nil, budget: budget)
        let stub = StubTransport()
        stub.stub(.get, "down", with: .status(.serviceUnavailable))
        let (api, _) = Self.manager(stub, policy)
        var attempts: [Int] = []
        for _ in 0..<6 {
            let before = stub.requests.count
            _ = await capturedError { let _: JSON = try await api.GET("down") }
            attempts.append(stub.requests.count - before)
        }
        #expect(attempts == [3, 2, 1, 2, 1, 2])
        #expect(budget.available == 1.5)
    }

    @Test func copiesOfAPolicyShareItsBudgetAcrossSessions() async throws {
        let budget = RetryBudget(maximumTokens: 2, tokensPerRequest: 0)
        let policy = RetryPolicy(maximumAttempts: 10, initialDelay: .zero, deadline: nil, budget: budget)
        let first = StubTransport()
        first.stub(.get, "down", with: .status(.serviceUnavailable))
        let second = StubTransport()
        second.stub(.get, "down", with: .status(.serviceUnavailable))
        let (one, _) = Self.manager(first, policy)
        let (other, _) = Self.manager(second, policy)
        // Two tokens: one retry (more than half must be left), then none, in either session.
        _ = await capturedError { let _: JSON = try await one.GET("down") }
        _ = await capturedError { let _: JSON = try await other.GET("down") }
        #expect(first.requests.count == 2)
        #expect(second.requests.count == 1)
        #expect(budget.available == 1)
    }

    @Test func withoutABudgetOnlyTheAttemptsLimitRetries() async throws {
        let stub = StubTransport()
        stub.stub(.get, "down", with: .status(.serviceUnavailable))
        let (api, _) = Self.manager(stub, Self.immediate(maximumAttempts: 3))
        for _ in 0..<10 { _ = await capturedError { let _: JSON = try await api.GET("down") } }
        #expect(stub.requests.count == 30)
    }

    @Test func aRequestsOwnPolicyAppliesToThatRequestAlone() async throws {
        let stub = StubTransport()
        stub.stub(.get, "flaky", with: .status(.serviceUnavailable), .json("{}"))
        stub.stub(.get, "other", with: .status(.serviceUnavailable), .json("{}"))
        let api = stubbedManager(stub)
        let response = try await api.request(
            .get, "flaky", options: RequestOptions(retryPolicy: Self.immediate()), serializer: JSONResponseSerializer())
        #expect(response.status == .ok)
        let error = await capturedError { let _: JSON = try await api.GET("other") }
        #expect(statusCode(of: error) == 503)
        #expect(stub.requests.map(\.path) == ["/v1/flaky", "/v1/flaky", "/v1/other"])
    }

    /// An IMF-fixdate, as a server writes `Retry-After`.
    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
