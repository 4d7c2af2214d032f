import Courier
@_spi(CourierInternals) import CourierCore
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// Interceptors: the order of the chain, per request over per session, the subclass hooks'
/// place in it, and retry decisions. Against httpbin and the fault server; the chain-order
/// details on the stub transport too.
@Suite struct InterceptorTests {
    /// Appends `name` to the `X-Chain` header and records each retry question.
    struct Tagger: RequestInterceptor {
        let name: String
        var retries: RetryDecision = .doNotRetry
        let asked: Locked<[String]>

        func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
            var request = request
            let chain = request.headerFields[Self.chain].map { "\($0),\(name)" } ?? name
            request.headerFields[Self.chain] = chain
            return request
        }

        func retry(_ request: HTTPRequest, dueTo error: any Error, context: RequestContext) async -> RetryDecision {
            asked.withLock { $0.append("\(name)#\(context.attempt)") }
            return retries
        }

        static let chain = HTTPField.Name("X-Chain")!
    }

    /// A subclass whose `adapt(_:)` appends itself to the chain, and whose `process(_:)`
    /// counts the responses it sees.
    final class ChainAPI: HTTPSessionManager {
        var processed = 0

        override func adapt(_ request: HTTPRequest) async throws -> HTTPRequest {
            var request = request
            request.headerFields[Tagger.chain] =
                (request.headerFields[Tagger.chain].map { $0 + "," } ?? "") + "subclass"
            return request
        }

        override func process(_ response: RawResponse) async throws -> RawResponse {
            processed += 1
            return response
        }
    }

    @Test func theChainRunsSessionThenRequestThenTheSubclassAgainstHttpbin() async throws {
        let asked = Locked<[String]>([])
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.interceptors = [Tagger(name: "session-1", asked: asked), Tagger(name: "session-2", asked: asked)]
        let api = ChainAPI(baseURL: try await TestServers.httpbin(), configuration: configuration)
        let response = try await api.request(
            .get, "headers", options: RequestOptions(interceptors: [Tagger(name: "request", asked: asked)]),
            serializer: JSONResponseSerializer())
        // httpbin echoes the header as it arrived.
        #expect(response.value["headers"]["X-Chain"].stringValue == "session-1,session-2,request,subclass")
        #expect(await api.processed == 1)
        #expect(asked.withLock { $0 }.isEmpty)
    }

    @Test func aRetriedRequestIsAdaptedAgainAndSucceedsWithTheWholeBody() async throws {
        // The fault server drops the first response after 100 of 5000 bytes, then answers whole.
        let base = try await TestServers.fault()
        let name = "interceptor-retry-\(UUID().uuidString)"
        let asked = Locked<[String]>([])
        let retryOnLostConnection = Interceptor(retry: { _, error, context in
            asked.withLock { $0.append("attempt \(context.attempt): \(error)") }
            guard context.attempt < 3, case .connectionLost = error as? CourierError else { return .doNotRetry }
            return .retryAfter(.milliseconds(10))
        })
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.interceptors = [retryOnLostConnection]
        let api = HTTPSessionManager(baseURL: base, configuration: configuration)
        let data = try await api.GET(
            "file/\(name)", parameters: ["n": 5000, "drop-after": 100], serializer: DataResponseSerializer())
        #expect(data == faultBytes(5000))
        #expect(asked.withLock { $0.count } == 1)
        let stats: JSON = try await api.GET("stats/\(name)")
        #expect(stats["requests"].intValue == 2)
    }

    @Test func withoutAnInterceptorThatRetriesTheFailureIsThrown() async throws {
        let api = try await faultManager()
        let name = "no-retry-\(UUID().uuidString)"
        let error = await capturedError {
            _ = try await api.GET(
                "file/\(name)", parameters: ["n": 5000, "drop-after": 100], serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
        let stats: JSON = try await api.GET("stats/\(name)")
        #expect(stats["requests"].intValue == 1)
    }

    @Test func theRequestsInterceptorsAreAskedAboutARetryBeforeTheSessions() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.get, "/flaky", with: .failure(.timedOut), .json("{}"))
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.interceptors = [Tagger(name: "session", retries: .retry, asked: asked)]
        let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/"), configuration: configuration)
        let requestLevel = Tagger(name: "request", retries: .doNotRetry, asked: asked)
        _ = try await api.request(
            .get, "flaky", options: RequestOptions(interceptors: [requestLevel]), serializer: JSONResponseSerializer())
        #expect(asked.withLock { $0 } == ["request#1", "session#1"])
        // Both attempts went out, each adapted afresh (the chain does not grow).
        #expect(stub.requests.map { $0.request.headerFields[Tagger.chain] } == ["session,request", "session,request"])
    }

    @Test func theFirstInterceptorThatRetriesDecides() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.get, "/flaky", with: .status(.serviceUnavailable), .json("{}"))
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.interceptors = [
            Tagger(name: "first", retries: .retryAfter(.milliseconds(1)), asked: asked),
            Tagger(name: "second", retries: .retry, asked: asked),
        ]
        let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/"), configuration: configuration)
        // The 503 fails validation in the serializer: that failure is retried too.
        let value: JSON = try await api.GET("flaky")
        #expect(value == [:])
        #expect(asked.withLock { $0 } == ["first#1"])
        #expect(stub.requests.count == 2)
    }

    @Test func aStreamBodyIsNeverRetried() async throws {
        let asked = Locked<[String]>([])
        let stub = StubTransport()
        stub.stub(.post, "/upload", with: .failure(.connectionLost), .json("{}"))
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.interceptors = [Tagger(name: "session", retries: .retry, asked: asked)]
        let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/"), configuration: configuration)
        let chunks = [Data("abc".utf8)].async
        let error = await capturedError {
            _ = try await api.uploadTask(.post, "upload", body: .stream(chunks), serializer: DataResponseSerializer())
                .value
        }
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
        #expect(asked.withLock { $0 }.isEmpty)
        #expect(stub.requests.count == 1)
    }

    @Test func anAdapterThatThrowsFailsTheRequestBeforeAnythingIsSent() async throws {
        struct Refusal: Error {}
        let stub = StubTransport()
        stub.stub(.get, "/x", with: .json("{}"))
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configuration.interceptors = [Interceptor(adapt: { _, _ in throw Refusal() })]
        let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/"), configuration: configuration)
        let error = await capturedError { let _: JSON = try await api.GET("x") }
        #expect(error is Refusal)
        #expect(stub.requests.isEmpty)
    }
}

extension InterceptorTests {
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
