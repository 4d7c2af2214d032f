import Courier
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// `CourierTesting`'s stub transport: what it answers, what it records, the failures it
/// injects, and that the features above the transport work on it as on the engine.
@Suite struct StubTransportTests {
    static let base = URL(string: "https://api.example.com/v1/")!

    func manager(
        _ stub: StubTransport, _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) -> HTTPSessionManager {
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        configure(&configuration)
        return HTTPSessionManager(baseURL: Self.base, configuration: configuration)
    }

    @Test func cannedResponsesByMethodAndPath() async throws {
        let stub = StubTransport()
        stub.stub(.get, "users/1", with: .json(#"{"id": 1, "name": "Ada"}"#))
        stub.stub(.delete, "/v1/users/1", with: .status(.noContent))
        let api = manager(stub)
        let user: JSON = try await api.GET("users/1")
        #expect(user["name"].stringValue == "Ada")
        try await api.DELETE("users/1")
        let error = await capturedError { let _: JSON = try await api.GET("users/2") }
        guard case .transport(let context) = error as? CourierError else {
            Issue.record("expected CourierError.transport, got \(String(describing: error))")
            return
        }
        #expect(context.message == "No stub answers GET https://api.example.com/v1/users/2")
        #expect(
            stub.requests.map { "\($0.request.method.rawValue) \($0.path)" } == [
                "GET /v1/users/1", "DELETE /v1/users/1", "GET /v1/users/2",
            ])
    }

    @Test func aClosureAnswersAndRequestsAreRecordedWithTheirBodies() async throws {
        let stub = StubTransport()
        stub.stub(where: { $0.request.method == .post }) { request in
            .json(#"{"received": \#(request.body?.count ?? 0)}"#, status: .created)
        }
        let api = manager(stub)
        api.requestSerializer = JSONRequestSerializer()
        let answer: JSON = try await api.POST("users", parameters: ["name": "Ada", "admin": false])
        #expect(answer["received"].intValue == stub.requests.first?.body?.count)
        let recorded = try #require(stub.requests.first)
        #expect(recorded.request.headerFields[.contentType] == "application/json")
        #expect(try JSON(parsing: recorded.body ?? Data()) == ["name": "Ada", "admin": false])

        var form = MultipartFormData(boundary: "stub-boundary")
        form.append(Data("hello".utf8), name: "greeting")
        let _: Data = try await api.POST("forms", serializer: DataResponseSerializer()) { $0 = form }
        let multipart = try #require(stub.requests.last?.bodyText)
        #expect(
            multipart.contains("--stub-boundary\r\nContent-Disposition: form-data; name=\"greeting\"\r\n\r\nhello\r\n"))
        #expect(multipart.hasSuffix("--stub-boundary--\r\n"))
    }

    @Test func injectedFailuresAreTheEnginesCourierErrors() async throws {
        // The engine's answer to a refused connection, for comparison: a closed loopback port.
        let closed = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:1/"), configuration: .ephemeral)
        let engineError = await capturedError { let _: JSON = try await closed.GET("x") }
        #expect(isCourierError(engineError) { if case .cannotConnect = $0 { true } else { false } })

        let stub = StubTransport()
        stub.stub(.get, "refused", with: .failure(.cannotConnect))
        stub.stub(.get, "slow", with: .failure(.timedOut))
        stub.stub(.get, "cut", with: StubResponse(chunks: [Data("partial".utf8)], failure: .connectionLost))
        stub.stub(.get, "dns", with: .failure(.cannotResolveHost))
        stub.stub(.get, "tls", with: .failure(.tls))
        let api = manager(stub)
        let refused = await capturedError { let _: JSON = try await api.GET("refused") }
        guard case .cannotConnect(let context) = refused as? CourierError else {
            Issue.record("expected cannotConnect, got \(String(describing: refused))")
            return
        }
        #expect(context.url?.absoluteString == "https://api.example.com/v1/refused")
        let slow = await capturedError { let _: JSON = try await api.GET("slow") }
        #expect(isCourierError(slow) { if case .timedOut = $0 { true } else { false } })
        let dns = await capturedError { let _: JSON = try await api.GET("dns") }
        #expect(isCourierError(dns) { if case .cannotResolveHost = $0 { true } else { false } })
        let tls = await capturedError { let _: JSON = try await api.GET("tls") }
        #expect(isCourierError(tls) { if case .tls = $0 { true } else { false } })
        let cut = await capturedError { let _: Data = try await api.GET("cut", serializer: DataResponseSerializer()) }
        guard case .connectionLost(let cutContext) = cut as? CourierError else {
            Issue.record("expected connectionLost, got \(String(describing: cut))")
            return
        }
        #expect(cutContext.body == Data("partial".utf8))
        #expect(cutContext.response?.status == .ok)
    }

    @Test func aDelayedResponseIsCancelledWithTheCallersTask() async throws {
        let stub = StubTransport()
        stub.stub(.get, "slow", with: StubResponse(body: Data("late".utf8), delay: .seconds(30)))
        let api = manager(stub)
        let call = Task { () -> Data in try await api.GET("slow", serializer: DataResponseSerializer()) }
        try await Task.sleep(for: .milliseconds(100))
        call.cancel()
        let error = await capturedError { _ = try await call.value }
        #expect(error is CancellationError)
    }

    @Test func chunkedBodiesReportProgressAndArriveWhole() async throws {
        let stub = StubTransport()
        let chunks = (0..<8).map { Data(repeating: UInt8($0), count: 1000) }
        stub.stub(.get, "chunks", with: StubResponse(chunks: chunks, chunkDelay: .milliseconds(20)))
        let api = manager(stub)
        let task = api.dataTask(.get, "chunks", serializer: DataResponseSerializer())
        var seen: [Int64] = []
        for await progress in task.downloadProgress { seen.append(progress.completedBytes) }
        let body = try await task.value
        #expect(body == chunks.reduce(Data(), +))
        #expect(seen.last == 8000)
        #expect(seen.count >= 3)  // intermediate values, not just the start and the end
        #expect(seen == seen.sorted())
    }

    @Test func redirectsFollowTheEnginesRules() async throws {
        let stub = StubTransport()
        stub.stub(.post, "old", with: .redirect(to: "/v1/new", status: .seeOther))
        stub.stub(.get, "/v1/new", with: .json(#"{"moved": true}"#))
        stub.stub(.get, "away", with: .redirect(to: "https://elsewhere.example.com/landing"))
        stub.stub(.get, "/landing", with: .json("{}"))
        stub.stub(.get, "loop", with: .redirect(to: "/v1/loop"))
        let api = manager(stub) { $0.maximumRedirects = 3 }
        let moved: JSON = try await api.POST("old", parameters: ["a": 1])
        #expect(moved["moved"] == true)
        let hops = stub.requests
        #expect(hops.map(\.request.method) == [.post, .get])
        #expect(hops[1].body == nil && hops[1].request.headerFields[.contentType] == nil)

        stub.clearRequests()
        let _: JSON = try await api.GET("away", headers: ["Authorization": "Bearer secret"])
        #expect(stub.requests.first?.request.headerFields[.authorization] == "Bearer secret")
        #expect(stub.requests.last?.url.host == "elsewhere.example.com")
        #expect(stub.requests.last?.request.headerFields[.authorization] == nil)

        let loop = await capturedError { let _: JSON = try await api.GET("loop") }
        #expect(isCourierError(loop) { if case .tooManyRedirects = $0 { true } else { false } })
    }

    @Test func theHTTPCacheAnswersFromStoredStubResponses() async throws {
        let stub = StubTransport()
        stub.stub(
            .get, "fresh", with: StubResponse(headerFields: [.cacheControl: "max-age=600"], body: Data("{}".utf8)))
        let api = manager(stub) { $0.cacheCapacity = 1 << 20 }
        let first = try await api.request(.get, "fresh", serializer: DataResponseSerializer())
        let second = try await api.request(.get, "fresh", serializer: DataResponseSerializer())
        #expect(first.source == .network)
        #expect(second.source == .cache)
        #expect(stub.requests.count == 1)
    }

    @Test func validationAndTheSizeLimitApply() async throws {
        let stub = StubTransport()
        stub.stub(.get, "missing", with: .status(.notFound))
        stub.stub(.get, "big", with: StubResponse(body: Data(count: 2048)))
        let api = manager(stub) { $0.maximumResponseSize = 1024 }
        let missing = await capturedError { let _: JSON = try await api.GET("missing") }
        #expect(isCourierError(missing) { if case .unacceptableStatusCode = $0 { true } else { false } })
        let big = await capturedError { let _: Data = try await api.GET("big", serializer: DataResponseSerializer()) }
        #expect(isCourierError(big) { if case .responseTooLarge = $0 { true } else { false } })
    }

    @Test func downloadsAndByteStreamsRunOnTheStub() async throws {
        let stub = StubTransport()
        let body = Data((0..<50_000).map { UInt8($0 % 251) })
        stub.stub(.get, "file", with: StubResponse(chunks: [body.prefix(20_000), body.dropFirst(20_000)]))
        let api = manager(stub)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try await api.downloadTask("file", to: directory.appendingPathComponent("file.bin")).value
        #expect(try Data(contentsOf: file) == body)
        var streamed = Data()
        for try await chunk in api.bytes(.get, "file") { streamed.append(chunk) }
        #expect(streamed == body)
    }

    @Test func aChallengeIsAnsweredAndTheRequestSentAgain() async throws {
        let stub = StubTransport()
        stub.stub(where: { $0.path == "/v1/private" }) { request in
            request.request.headerFields[.authorization] == nil
                ? .status(.unauthorized, headerFields: [.wwwAuthenticate: #"Basic realm="stub""#])
                : .json(#"{"ok": true}"#)
        }
        let api = manager(stub)
        api.challengeHandler = { challenge in
            challenge.protectionSpace.realm == "stub" ? Credential(user: "ada", password: "pw") : nil
        }
        let answer: JSON = try await api.GET("private")
        #expect(answer["ok"] == true)
        #expect(stub.requests.map { $0.request.headerFields[.authorization] } == [nil, "Basic YWRhOnB3"])
    }
}

extension StubTransportTests {
    @Test func taskControlWorksOnTheStub() async throws {
        let stub = StubTransport()
        stub.stub(.get, "held", with: .json("{}"))
        let api = manager(stub)
        let task = api.dataTask(.get, "held", serializer: DataResponseSerializer())
        task.suspend()
        try await Task.sleep(for: .milliseconds(100))
        #expect(stub.requests.isEmpty)
        task.resume()
        #expect(try await task.value == Data("{}".utf8))
        task.resume()  // after the end: nothing is sent again
        try await Task.sleep(for: .milliseconds(50))
        #expect(stub.requests.count == 1)
    }

    /// The stub runs a transfer's lifecycle by the engine's state machine: one cancelled while
    /// suspended before it ran finishes cancelled and never reaches the stub.
    @Test func aTaskCancelledWhileSuspendedSendsNothing() async throws {
        let stub = StubTransport()
        stub.stub(.get, "held", with: .json("{}"))
        let api = manager(stub)
        let task = api.dataTask(.get, "held", serializer: DataResponseSerializer())
        task.suspend()
        task.cancel()
        let error = await capturedError { _ = try await task.value }
        #expect(error is CancellationError)
        task.resume()  // after the end: nothing starts
        #expect(stub.requests.isEmpty)
        // The session's next request runs as usual.
        #expect(try await api.GET("held", serializer: DataResponseSerializer()) == Data("{}".utf8))
        #expect(stub.requests.count == 1)
    }
}
