import Courier
@_spi(CourierInternals) import CourierCore
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// The interceptor chain on the stub: the order requests are adapted in (the session's, the
/// request's, the subclass's `adapt(_:)`), the order retry decisions are asked in (the
/// request's retry policy, its interceptors, then the session's; the first that retries
/// decides), each attempt adapted afresh, and what the interceptors are told.
@Suite struct InterceptorOrderTests {
    static let chain = HTTPField.Name("X-Chain")!

    /// Appends its name to `X-Chain`, and answers every retry question with `decision`,
    /// noting the question in `asked`.
    struct Tagger: RequestInterceptor {
        let name: String
        var decision: RetryDecision = .doNotRetry
        let asked: Locked<[String]>

        func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
            var request = request
            request.headerFields[InterceptorOrderTests.chain] =
                request.headerFields[InterceptorOrderTests.chain].map { "\($0),\(name)" } ?? name
            return request
        }

        func retry(_ request: HTTPRequest, dueTo error: any Error, context: RequestContext) async -> RetryDecision {
            asked.withLock { $0.append("\(name)#\(context.attempt)") }
            return decision
        }
    }

    /// A subclass whose `adapt(_:)` comes last in the chain, and whose `process(_:)` counts
    /// the responses it sees.
    final class ChainAPI: HTTPSessionManager {
        var processed: [Int] = []

        override func adapt(_ request: HTTPRequest) async throws -> HTTPRequest {
            var request = request
            request.headerFields[InterceptorOrderTests.chain] =
                (request.headerFields[InterceptorOrderTests.chain].map { $0 + "," } ?? "") + "subclass"
            return request
        }

        override func process(_ response: RawResponse) async throws -> RawResponse {
            processed.append(response.status.code)
            return response
        }
    }

    static func chainAPI(_ stub: StubTransport, interceptors: [any RequestInterceptor]) -> ChainAPI {
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.interceptors = interceptors
        return ChainAPI(baseURL: stubBaseURL, configuration: configuration)
    }

    @Test func theSessionsAdaptFirstThenTheRequestsThenTheSubclass() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.get, "x", with: .json("{}"))
        let api = Self.chainAPI(
            stub, interceptors: [Tagger(name: "session-1", asked: asked), Tagger(name: "session-2", asked: asked)])
        let options = RequestOptions(
            interceptors: [Tagger(name: "request-1", asked: asked), Tagger(name: "request-2", asked: asked)],
            retryPolicy: RetryPolicy())
        let _: JSON = try await api.GET("x", options: options)
        #expect(
            stub.requests.map { $0.request.headerFields[Self.chain] } == [
                "session-1,session-2,request-1,request-2,subclass"
            ])
        #expect(await api.processed == [200])
        #expect(asked.withLock { $0 }.isEmpty)  // nothing failed
    }

    @Test func eachAttemptIsAdaptedAfreshFromTheRequestAsBuilt() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.get, "x", with: .status(.serviceUnavailable), .failure(.connectionLost), .json("{}"))
        let api = Self.chainAPI(stub, interceptors: [Tagger(name: "session", decision: .retry, asked: asked)])
        let _: JSON = try await api.GET("x")
        // The chain does not grow from one attempt to the next.
        #expect(
            stub.requests.map { $0.request.headerFields[Self.chain] } == Array(repeating: "session,subclass", count: 3))
        #expect(asked.withLock { $0 } == ["session#1", "session#2"])
        // process(_:) sees every response that came (the lost connection brought none).
        #expect(await api.processed == [503, 200])
    }

    @Test func theRequestsInterceptorsAreAskedBeforeTheSessionsAndTheFirstToRetryDecides() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.get, "x", with: .status(.serviceUnavailable), .json("{}"))
        let api = stubbedManager(stub) {
            $0.interceptors = [
                Tagger(name: "session-1", decision: .retry, asked: asked),
                Tagger(name: "session-2", decision: .retry, asked: asked),
            ]
        }
        let options = RequestOptions(interceptors: [
            Tagger(name: "request-1", asked: asked), Tagger(name: "request-2", asked: asked),
        ])
        let _: JSON = try await api.GET("x", options: options)
        #expect(asked.withLock { $0 } == ["request-1#1", "request-2#1", "session-1#1"])
        #expect(stub.requests.count == 2)
    }

    @Test func whenNoneRetriesEveryOneIsAskedAndTheErrorIsThrown() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.get, "x", with: .status(.serviceUnavailable), .json("{}"))
        let api = stubbedManager(stub) {
            $0.interceptors = [Tagger(name: "session-1", asked: asked), Tagger(name: "session-2", asked: asked)]
        }
        let options = RequestOptions(interceptors: [Tagger(name: "request", asked: asked)])
        let error = await capturedError { let _: JSON = try await api.GET("x", options: options) }
        #expect(statusCode(of: error) == 503)
        #expect(asked.withLock { $0 } == ["request#1", "session-1#1", "session-2#1"])
        #expect(stub.requests.count == 1)
    }

    @Test func theRequestsRetryPolicyIsAskedBeforeItsInterceptors() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.get, "x", with: .status(.serviceUnavailable), .status(.serviceUnavailable), .json("{}"))
        let api = stubbedManager(stub)
        let policy = RetryPolicy(maximumAttempts: 2, initialDelay: .zero, deadline: nil, budget: nil)
        let options = RequestOptions(
            interceptors: [Tagger(name: "request", decision: .retry, asked: asked)], retryPolicy: policy)
        let _: JSON = try await api.GET("x", options: options)
        // Attempt 1: the policy retried, the tagger was not asked. Attempt 2: the policy had
        // reached its maximum, so the tagger was asked, and retried.
        #expect(asked.withLock { $0 } == ["request#2"])
        #expect(stub.requests.count == 3)
    }

    @Test func theContextNumbersRequestsAndAttempts() async throws {
        let contexts = Locked<[RequestContext]>([])
        let recorder = Interceptor(
            adapt: { request, context in
                contexts.withLock { $0.append(context) }
                var request = request
                request.headerFields[HTTPField.Name("X-Attempt")!] = String(context.attempt)
                return request
            },
            retry: { _, _, context in context.attempt < 3 ? .retry : .doNotRetry })
        let stub = StubTransport()
        stub.stub(.get, "x", with: .status(.serviceUnavailable), .status(.serviceUnavailable), .json("{}"))
        stub.stub(.get, "y", with: .json("{}"))
        let api = stubbedManager(stub) { $0.interceptors = [recorder] }
        let _: JSON = try await api.GET("x")
        let _: JSON = try await api.GET("y")
        let seen = contexts.withLock { $0 }
        #expect(seen.map(\.requestID) == [1, 1, 1, 2])
        #expect(seen.map(\.attempt) == [1, 2, 3, 1])
        // Deadlines count from the first attempt of each request.
        #expect(seen[0].firstAttemptStarted == seen[1].firstAttemptStarted)
        #expect(seen[1].firstAttemptStarted == seen[2].firstAttemptStarted)
        #expect(seen[3].firstAttemptStarted > seen[0].firstAttemptStarted)
        #expect(stub.requests.map { $0.request.headerFields[HTTPField.Name("X-Attempt")!] } == ["1", "2", "3", "1"])
    }

    @Test func aResponseTheSerializerRefusesIsRetriedToo() async throws {
        let errors = Locked<[any Error]>([])
        let stub = StubTransport()
        stub.stub(.get, "x", with: .json("not json"), .json(#"{"ok": true}"#))
        let api = stubbedManager(stub) {
            $0.interceptors = [
                Interceptor(retry: { _, error, context in
                    errors.withLock { $0.append(error) }
                    return context.attempt < 2 ? .retry : .doNotRetry
                })
            ]
        }
        let value: JSON = try await api.GET("x")
        #expect(value["ok"] == true)
        #expect(stub.requests.count == 2)
        let first = errors.withLock { $0.first }
        let error = try #require(first)
        #expect(isCourierError(error) { if case .serializationFailed = $0 { true } else { false } })
    }

    struct NotYet: Error {}

    /// A subclass whose `process(_:)` refuses the first response.
    final class Picky: HTTPSessionManager {
        var refused = 0

        override func process(_ response: RawResponse) async throws -> RawResponse {
            if refused == 0 {
                refused += 1
                throw NotYet()
            }
            return response
        }
    }

    @Test func anErrorFromProcessIsRetriedToo() async throws {
        let stub = StubTransport()
        stub.stub(.get, "x", with: .json("{}"))
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.interceptors = [
            Interceptor(retry: { _, error, _ in error is NotYet ? .retry : .doNotRetry })
        ]
        let api = Picky(baseURL: stubBaseURL, configuration: configuration)
        let _: JSON = try await api.GET("x")
        #expect(await api.refused == 1)
        #expect(stub.requests.count == 2)
    }

    @Test func anAdapterThatThrowsFailsTheRequestBeforeAnythingIsSent() async throws {
        struct Refusal: Error {}
        let stub = StubTransport()
        stub.stub(.get, "x", with: .json("{}"))
        let api = stubbedManager(stub) { $0.interceptors = [Interceptor(adapt: { _, _ in throw Refusal() })] }
        let error = await capturedError { let _: JSON = try await api.GET("x") }
        #expect(error is Refusal)
        #expect(stub.requests.isEmpty)
    }

    @Test func aRetryAfterAThrowingAdapterSendsTheNextAttempt() async throws {
        struct Flaky: Error {}
        let stub = StubTransport()
        stub.stub(.get, "x", with: .json("{}"))
        let api = stubbedManager(stub) {
            $0.interceptors = [
                Interceptor(
                    adapt: { request, context in
                        if context.attempt == 1 { throw Flaky() }
                        return request
                    },
                    retry: { _, error, _ in error is Flaky ? .retry : .doNotRetry })
            ]
        }
        let _: JSON = try await api.GET("x")
        #expect(stub.requests.count == 1)
    }
}

extension InterceptorOrderTests {
    /// A retried data task reports progress on one stream, which ends once, with the last
    /// attempt.
    @Test func progressGoesOnAcrossARetryAndEndsOnce() async throws {
        let stub = StubTransport()
        let body = Data(repeating: 7, count: 4000)
        stub.stub(
            .get, "/file",
            with: StubResponse(chunks: [body.prefix(1000)], failure: .connectionLost),
            StubResponse(chunks: [body.prefix(2000), body.dropFirst(2000)], chunkDelay: .milliseconds(20)))
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.interceptors = [
            Interceptor(retry: { _, _, context in context.attempt < 2 ? .retry : .doNotRetry })
        ]
        let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/"), configuration: configuration)
        let task = api.dataTask(.get, "file", serializer: DataResponseSerializer())
        var last: TransferProgress?
        for await progress in task.downloadProgress { last = progress }
        #expect(try await task.value == body)
        // The stream did not end with the failed first attempt: its last value is the whole body.
        #expect(last?.completedBytes == 4000)
        #expect(last?.totalBytes == 4000)
        #expect(stub.requests.count == 2)
    }
}
