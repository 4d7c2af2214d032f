import Courier
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// The events a monitor gets for one request, in order, on the stub: a plain request, a
/// redirect, a retried request, a failure, an answer from the cache, a revalidation, an
/// answered challenge.
@Suite struct EventOrderTests {
    /// A manager on `stub` with a recorder, and `configure`'s changes.
    static func manager(
        _ stub: StubTransport, _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) -> (HTTPSessionManager, EventRecorder) {
        let recorder = EventRecorder()
        let api = stubbedManager(stub) {
            $0.eventMonitors = [recorder]
            configure(&$0)
        }
        return (api, recorder)
    }

    @Test func aPlainRequest() async throws {
        let stub = StubTransport()
        stub.stub(.get, "items", with: .json("[]"))
        let (api, recorder) = Self.manager(stub)
        let _: JSON = try await api.GET("items", headers: ["X-Call": "1"])
        let events = await recorder.events()
        #expect(events.map(\.name) == ["created", "adapted", "attemptStarted", "responseHead", "finished"])
        #expect(Set(events.map(\.requestID)) == [1])
        guard case .created(let created) = events[0].kind, case .responseHead(let head, let headFor) = events[3].kind,
            case .finished(let request, let response, let metrics, let source) = events[4].kind
        else {
            Issue.record("unexpected events: \(events.map(\.kind))")
            return
        }
        #expect(created.path == "/v1/items")
        #expect(created.headerFields[HTTPField.Name("X-Call")!] == "1")
        #expect(head.status == .ok)
        #expect(headFor.path == "/v1/items")
        #expect(request.path == "/v1/items")
        #expect(response.status == .ok)
        #expect(response.headerFields[.contentType] == "application/json")
        #expect(metrics.bytesReceived == 2)
        #expect(source == .network)
    }

    @Test func aRedirectedRequest() async throws {
        let stub = StubTransport()
        stub.stub(.get, "old", with: .redirect(to: "/v1/new", status: .movedPermanently))
        stub.stub(.get, "new", with: .json("{}"))
        let (api, recorder) = Self.manager(stub)
        let _: JSON = try await api.GET("old")
        let events = await recorder.events()
        #expect(
            events.map(\.name) == [
                "created", "adapted", "attemptStarted", "responseHead", "redirected", "responseHead", "finished",
            ])
        guard case .redirected(let from, let to, let redirect) = events[4].kind,
            case .finished(let request, _, let metrics, _) = events[6].kind
        else {
            Issue.record("unexpected events: \(events.map(\.kind))")
            return
        }
        #expect(from.path == "/v1/old")
        #expect(to.path == "/v1/new")
        #expect(redirect.status == .movedPermanently)
        #expect(request.path == "/v1/new")
        #expect(metrics.redirectCount == 1)
    }

    @Test func aRetriedRequest() async throws {
        let stub = StubTransport()
        stub.stub(.get, "flaky", with: .status(.serviceUnavailable), .json("{}"))
        let policy = RetryPolicy(initialDelay: .zero, deadline: nil, budget: nil)
        let (api, recorder) = Self.manager(stub) { $0.interceptors = [policy] }
        let _: JSON = try await api.GET("flaky")
        let events = await recorder.events()
        #expect(
            events.map(\.name) == [
                "created", "adapted", "attemptStarted", "responseHead", "retryDecided", "adapted", "attemptStarted",
                "responseHead", "finished",
            ])
        let attempts = events.compactMap { event -> Int? in
            switch event.kind {
            case .adapted(_, let attempt), .attemptStarted(_, let attempt): attempt
            default: nil
            }
        }
        #expect(attempts == [1, 1, 2, 2])
        let heads = events.compactMap { event -> Int? in
            if case .responseHead(let head, _) = event.kind { head.status.code } else { nil }
        }
        #expect(heads == [503, 200])
        #expect(recorder.decisions.map(\.attempt) == [1])
        #expect(recorder.decisions.map(\.decision) == [.retry])
        #expect(statusCode(of: recorder.decisions.first?.error) == 503)
    }

    @Test func aRequestThatFailsAfterItsRetries() async throws {
        let stub = StubTransport()
        stub.stub(.get, "gone", with: .failure(.connectionLost))
        let policy = RetryPolicy(maximumAttempts: 2, initialDelay: .zero, deadline: nil, budget: nil)
        let (api, recorder) = Self.manager(stub) { $0.interceptors = [policy] }
        _ = await capturedError { let _: JSON = try await api.GET("gone") }
        let events = await recorder.events()
        #expect(
            events.map(\.name) == [
                "created", "adapted", "attemptStarted", "retryDecided", "adapted", "attemptStarted", "retryDecided",
                "failed",
            ])
        #expect(recorder.decisions.map(\.decision) == [.retry, .doNotRetry])
        guard case .failed(let request, let error, let attempts) = events.last?.kind else {
            Issue.record("expected failed, got \(String(describing: events.last?.kind))")
            return
        }
        #expect(request.path == "/v1/gone")
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
        #expect(attempts == 2)
    }

    @Test func aFailureWithoutInterceptorsHasNoRetryDecision() async throws {
        let stub = StubTransport()
        stub.stub(.get, "missing", with: .status(.notFound))
        let (api, recorder) = Self.manager(stub)
        _ = await capturedError { let _: JSON = try await api.GET("missing") }
        #expect(
            await recorder.names() == ["created", "adapted", "attemptStarted", "responseHead", "failed"])
    }

    @Test func anAnswerFromTheCache() async throws {
        let stub = StubTransport()
        stub.stub(.get, "fresh", with: .json("{}", headerFields: [.cacheControl: "max-age=600"]))
        let (api, recorder) = Self.manager(stub)
        let _: JSON = try await api.GET("fresh")
        let _: JSON = try await api.GET("fresh")
        let second = await recorder.events(afterEndings: 2).filter { $0.requestID == 2 }
        // Nothing reached the transport: no head, no redirect.
        #expect(second.map(\.name) == ["created", "adapted", "attemptStarted", "finished"])
        guard case .finished(_, let response, let metrics, let source) = second.last?.kind else {
            Issue.record("expected finished, got \(String(describing: second.last?.kind))")
            return
        }
        #expect(source == .cache)
        #expect(response.status == .ok)
        #expect(metrics.transactions.map(\.source) == [.cache])
    }

    @Test func aRevalidatedAnswer() async throws {
        let stub = StubTransport()
        stub.stub(where: { $0.path == "/v1/doc" }) { request in
            request.request.headerFields[.ifNoneMatch] == #""v1""#
                ? .status(.notModified, headerFields: [.eTag: #""v1""#])
                : .json("{}", headerFields: [.eTag: #""v1""#, .cacheControl: "max-age=0"])
        }
        let (api, recorder) = Self.manager(stub)
        let _: JSON = try await api.GET("doc")
        let _: JSON = try await api.GET("doc")
        let second = await recorder.events(afterEndings: 2).filter { $0.requestID == 2 }
        #expect(second.map(\.name) == ["created", "adapted", "attemptStarted", "responseHead", "finished"])
        guard case .attemptStarted(let sent, _) = second[2].kind, case .responseHead(let head, _) = second[3].kind,
            case .finished(_, let response, _, let source) = second[4].kind
        else {
            Issue.record("unexpected events: \(second.map(\.kind))")
            return
        }
        // The attempt as sent, conditional; the 304 as it came; the stored 200 as the answer.
        #expect(sent.headerFields[.ifNoneMatch] == #""v1""#)
        #expect(head.status == .notModified)
        #expect(response.status == .ok)
        #expect(source == .revalidatedCache)
    }

    @Test func anAnsweredChallenge() async throws {
        let stub = StubTransport()
        ChallengeTests.protect(stub, "me")
        let (api, recorder) = Self.manager(stub)
        api.challengeHandler = { _ in ChallengeTests.ada }
        let _: JSON = try await api.GET("me")
        let events = await recorder.events()
        // One attempt, two sends: the challenged one and the answer.
        #expect(
            events.map(\.name) == [
                "created", "adapted", "attemptStarted", "responseHead", "attemptStarted", "responseHead", "finished",
            ])
        let heads = events.compactMap { event -> Int? in
            if case .responseHead(let head, _) = event.kind { head.status.code } else { nil }
        }
        #expect(heads == [401, 200])
    }

    @Test func requestsAreNumberedAndSeveralMonitorsGetTheSameEvents() async throws {
        let stub = StubTransport()
        stub.stub(.get, "items", with: .json("[]"))
        let other = EventRecorder()
        let (api, recorder) = Self.manager(stub) { $0.eventMonitors.append(other) }
        for _ in 0..<3 { let _: JSON = try await api.GET("items") }
        let events = await recorder.events(afterEndings: 3)
        #expect(events.filter { $0.name == "created" }.map(\.requestID) == [1, 2, 3])
        let otherEvents = await other.events(afterEndings: 3)
        #expect(otherEvents.map(\.name) == events.map(\.name))
        #expect(otherEvents.map(\.requestID) == events.map(\.requestID))
    }
}
