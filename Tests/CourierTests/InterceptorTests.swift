import Courier
@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

/// Interceptors end to end, against httpbin and the fault server: the chain as the server
/// receives it, and a retry after a connection the server cut. The chain's rules in detail
/// (adapt order, which interceptor decides a retry, contexts) are tested on the stub:
/// CourierPipelineTests' `InterceptorOrderTests`.
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
}
