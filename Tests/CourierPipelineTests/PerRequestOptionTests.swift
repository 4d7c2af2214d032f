import Courier
@_spi(CourierInternals) import CourierCore
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// What one request's `RequestOptions` (and its own header fields) change, on every kind of
/// task that takes them, against the session's settings: timeouts as the transport is given
/// them, redirects (off, a limit, a handler), the cache policy. Interceptors, retry policies
/// and credentials of one request have their own suites.
@Suite struct PerRequestOptionTests {
    /// The kinds of task, each run as a user writes it.
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case request, dataTask, verb, download, upload, bytes, stream

        var testDescription: String { rawValue }

        /// Runs a request of this kind to `path` with `options`; the status of the answer
        /// (nil when it failed without one) and its error.
        func run(
            _ api: HTTPSessionManager, _ path: String, options: RequestOptions
        ) async -> (status: Int?, error: CourierError?) {
            let serializer = DataResponseSerializer(acceptableStatusCodes: 200..<300)
            do {
                switch self {
                case .request:
                    return (
                        try await api.request(.get, path, options: options, serializer: serializer).status.code, nil
                    )
                case .dataTask:
                    let response = try await api.dataTask(.get, path, options: options, serializer: serializer).response
                    return (response.status.code, nil)
                case .verb:
                    _ = try await api.GET(path, options: options, serializer: serializer)
                    return (200, nil)
                case .download:
                    let file = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
                    defer { try? FileManager.default.removeItem(at: file) }
                    _ = try await api.downloadTask(path, requestOptions: options, to: file).value
                    return (200, nil)
                case .upload:
                    let response = try await api.uploadTask(
                        .put, path, body: .data(Data("sent".utf8)), options: options, serializer: serializer
                    ).response
                    return (response.status.code, nil)
                case .bytes:
                    for try await _ in api.bytes(.get, path, options: options) {}
                    return (200, nil)
                case .stream:
                    let (head, stream) = try await api.stream(.get, path, options: options)
                    for try await _ in stream {}
                    return (head.status.code, nil)
                }
            } catch {
                let failure = error as? CourierError
                return (failure?.response?.status.code, failure)
            }
        }

        var method: HTTPRequest.Method { self == .upload ? .put : .get }
    }

    @Test(arguments: Kind.allCases)
    func timeoutsOfOneRequestOverTheSessions(_ kind: Kind) async throws {
        let stub = StubTransport()
        stub.stub(kind.method, "slow", with: .text("ok"))
        let api = stubbedManager(stub) {
            $0.requestTimeout = .seconds(20)
            $0.resourceTimeout = .seconds(300)
        }
        let options = RequestOptions(requestTimeout: .seconds(5), resourceTimeout: .seconds(30))
        #expect(await kind.run(api, "slow", options: options).status == 200)
        #expect(await kind.run(api, "slow", options: RequestOptions()).status == 200)
        let sent = stub.requests
        try #require(sent.count == 2)
        #expect(sent[0].requestTimeout == .seconds(5))
        #expect(sent[0].resourceTimeout == .seconds(30))
        #expect(sent[1].requestTimeout == .seconds(20))
        #expect(sent[1].resourceTimeout == .seconds(300))
    }

    @Test(arguments: Kind.allCases)
    func redirectsTurnedOffForOneRequest(_ kind: Kind) async throws {
        let stub = StubTransport()
        stub.stub(kind.method, "old", with: .redirect(to: "/v1/new", status: .temporaryRedirect))
        stub.stub(kind.method, "new", with: .text("moved"))
        let api = stubbedManager(stub)
        let stopped = await kind.run(api, "old", options: RequestOptions(redirects: .doNotFollow))
        #expect(stopped.status == 307)
        #expect(isCourierError(stopped.error) { if case .unacceptableStatusCode = $0 { true } else { false } })
        #expect(stub.requests.map(\.path) == ["/v1/old"])
        let followed = await kind.run(api, "old", options: RequestOptions())
        #expect(followed.status == 200)
        #expect(stub.requests.map(\.path) == ["/v1/old", "/v1/old", "/v1/new"])
    }

    @Test(arguments: Kind.allCases)
    func aRedirectLimitForOneRequest(_ kind: Kind) async throws {
        let stub = StubTransport()
        stub.stub(kind.method, "loop", with: .redirect(to: "/v1/loop", status: .temporaryRedirect))
        let api = stubbedManager(stub)
        let outcome = await kind.run(api, "loop", options: RequestOptions(redirects: .follow(maximum: 2)))
        #expect(isCourierError(outcome.error) { if case .tooManyRedirects = $0 { true } else { false } })
        #expect(outcome.error?.context.message == "Stopped after 2 redirects")
        #expect(stub.requests.count == 3)
    }

    @Test func aRedirectHandlerChangesTheNextHopOrStops() async throws {
        let stub = StubTransport()
        stub.stub(.get, "old", with: .redirect(to: "/v1/new"))
        stub.stub(.get, "new", with: .text("new"))
        stub.stub(.get, "elsewhere", with: .text("elsewhere"))
        let api = stubbedManager(stub)
        let hops = Locked<[RedirectHop]>([])
        let changing = RedirectBehavior.follow { hop in
            hops.withLock { $0.append(hop) }
            var next = hop.proposed
            next.path = "/v1/elsewhere?from=\(hop.response.status.code)"
            next.headerFields[HTTPField.Name("X-Redirected")!] = "yes"
            return next
        }
        let changed = try await api.GET(
            "old", options: RequestOptions(redirects: changing), serializer: StringResponseSerializer())
        #expect(changed == "elsewhere")
        let sent = try #require(stub.requests.last)
        #expect(sent.path == "/v1/elsewhere")
        #expect(sent.queryItems == [URLQueryItem(name: "from", value: "302")])
        #expect(sent.request.headerFields[HTTPField.Name("X-Redirected")!] == "yes")
        let first = hops.withLock { $0.first }
        let hop = try #require(first)
        #expect(hop.request.path == "/v1/old")
        #expect(hop.proposed.path == "/v1/new")
        #expect(hop.count == 0)

        // A handler that returns nil: the redirect, without its body, is the answer.
        stub.clearRequests()
        let stopped = try await api.request(
            .get, "old", options: RequestOptions(redirects: .follow(handler: { _ in nil })),
            serializer: DataResponseSerializer(acceptableStatusCodes: [302]))
        #expect(stopped.status == .found)
        #expect(stopped.response.headerFields[.location] == "/v1/new")
        #expect(stub.requests.count == 1)
    }

    @Test func theSessionsRedirectSettingsApplyWhenTheRequestHasNone() async throws {
        let stub = StubTransport()
        stub.stub(.get, "old", with: .redirect(to: "/v1/new"))
        stub.stub(.get, "new", with: .text("new"))
        let limited = stubbedManager(stub) { $0.maximumRedirects = 0 }
        let error = await capturedError { _ = try await limited.GET("old", serializer: StringResponseSerializer()) }
        #expect((error as? CourierError)?.context.message == "Stopped after 0 redirects")
        let allowed = try await limited.GET(
            "old", options: RequestOptions(redirects: .follow(maximum: 1)), serializer: StringResponseSerializer())
        #expect(allowed == "new")

        let unfollowing = stubbedManager(stub) { $0.followsRedirects = false }
        let response = try await unfollowing.request(
            .get, "old", serializer: DataResponseSerializer(acceptableStatusCodes: [302]))
        #expect(response.status == .found)
        let followed = try await unfollowing.GET(
            "old", options: RequestOptions(redirects: .follow), serializer: StringResponseSerializer())
        #expect(followed == "new")
        #expect(stub.requests.map(\.path) == ["/v1/old", "/v1/old", "/v1/new", "/v1/old", "/v1/old", "/v1/new"])
    }

    @Test func theCallsHeaderFieldsGoOverTheSessions() async throws {
        let stub = StubTransport()
        stub.stub(.get, "x", with: .json("{}"))
        let api = stubbedManager(stub)
        api.additionalHeaders = ["X-Client": "session", "X-Kept": "kept"]
        let _: JSON = try await api.GET("x", headers: ["X-Client": "call", "X-Extra": "1"])
        let _: JSON = try await api.GET("x")
        let fields = stub.requests.map(\.request.headerFields)
        try #require(fields.count == 2)
        let client = HTTPField.Name("X-Client")!
        let kept = HTTPField.Name("X-Kept")!
        let extra = HTTPField.Name("X-Extra")!
        #expect(fields[0][values: client] == ["call"])
        #expect(fields[0][kept] == "kept")
        #expect(fields[0][extra] == "1")
        #expect(fields[1][client] == "session")
        #expect(fields[1][extra] == nil)
    }

    @Test func theCachePolicyOfOneRequestOverTheSessions() async throws {
        let stub = StubTransport()
        stub.stub(.get, "fresh", with: .json("{}", headerFields: [.cacheControl: "max-age=600"]))
        let api = stubbedManager(stub) { $0.cachePolicy = .reloadIgnoringCacheData }
        let _: JSON = try await api.GET("fresh")
        let _: JSON = try await api.GET("fresh")
        #expect(stub.requests.count == 2)  // the session's policy never answers from the cache
        let cached = try await api.request(
            .get, "fresh", options: RequestOptions(cachePolicy: .useProtocolCachePolicy),
            serializer: JSONResponseSerializer())
        #expect(cached.source == .cache)
        #expect(stub.requests.count == 2)
    }
}
