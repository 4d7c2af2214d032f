import Courier
@_spi(CourierInternals) import CourierCore
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// The HTTP cache of an ephemeral session (in memory) on the stub: what is answered without
/// the transport, what is revalidated and how a `304` is merged, `no-store` and `no-cache`,
/// the cache policies, and what the stub saw each time.
@Suite struct HTTPCacheBehaviourTests {
    static let etag = HTTPField.Name.eTag
    static let revalidated = HTTPField.Name("X-Revalidated")!

    /// Plays a server for `path` with validators: a request whose `If-None-Match` names
    /// `etag` is answered `304` (with `X-Revalidated: yes` and `cacheControl`), any other
    /// with `200`, `body` and `cacheControl`. Counts the `304`s.
    final class Validating: Sendable {
        let notModified = Locked(0)

        init(
            _ stub: StubTransport, path: String, etag: String = #""v1""#, body: String = "one",
            cacheControl: String = "max-age=0"
        ) {
            stub.stub(where: { $0.path == "/v1/" + path }) { [notModified] request in
                if request.request.headerFields[.ifNoneMatch] == etag {
                    notModified.withLock { $0 += 1 }
                    return .status(
                        .notModified,
                        headerFields: [
                            .eTag: etag, .cacheControl: cacheControl, HTTPCacheBehaviourTests.revalidated: "yes",
                        ])
                }
                return StubResponse(
                    headerFields: [
                        .eTag: etag, .cacheControl: cacheControl, .contentType: "text/plain",
                        HTTPCacheBehaviourTests.revalidated: "no",
                    ],
                    body: Data(body.utf8))
            }
        }
    }

    /// A `GET` of `path` whose body is taken as it is.
    static func fetch(
        _ api: HTTPSessionManager, _ path: String, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions()
    ) async throws -> DataResponse<String> {
        try await api.request(
            .get, path, headers: headers, options: options, serializer: StringResponseSerializer())
    }

    @Test func aFreshResponseIsAnsweredWithoutTheTransport() async throws {
        let stub = StubTransport()
        stub.stub(
            .get, "fresh", with: StubResponse(headerFields: [.cacheControl: "max-age=600"], body: Data("one".utf8)))
        let api = stubbedManager(stub)
        let first = try await Self.fetch(api, "fresh")
        #expect(first.source == .network)
        // The server's answer changes; the stored one is still fresh.
        stub.stub(.get, "fresh", with: .text("two"))
        let second = try await Self.fetch(api, "fresh")
        #expect(second.source == .cache)
        #expect(second.value == "one")
        #expect(second.status == .ok)
        #expect(second.response.headerFields[.cacheControl] == "max-age=600")
        // It says how old it is (whole seconds since it was received).
        #expect(second.response.headerFields[.age].flatMap { Int($0) }.map { $0 >= 0 } == true)
        #expect(stub.requests.count == 1)
        // The metrics say where the answer came from.
        #expect(second.metrics.transactions.map(\.source) == [.cache])
    }

    @Test func aStaleResponseIsRevalidatedWithItsETagAndThe304Merged() async throws {
        let stub = StubTransport()
        let server = Validating(stub, path: "doc")
        let api = stubbedManager(stub)
        let first = try await Self.fetch(api, "doc")
        #expect(first.source == .network)
        #expect(first.response.headerFields[Self.revalidated] == "no")
        let second = try await Self.fetch(api, "doc")
        #expect(second.source == .revalidatedCache)
        #expect(second.status == .ok)
        #expect(second.value == "one")
        // The 304's fields replace the stored ones; the rest stay.
        #expect(second.response.headerFields[Self.revalidated] == "yes")
        #expect(second.response.headerFields[.contentType] == "text/plain")
        #expect(server.notModified.withLock { $0 } == 1)
        let sent = stub.requests.map { $0.request.headerFields[.ifNoneMatch] }
        #expect(sent == [nil, #""v1""#])
        // Stale again at once (max-age=0): the next request is conditional too.
        _ = try await Self.fetch(api, "doc")
        #expect(stub.requests.last?.request.headerFields[.ifNoneMatch] == #""v1""#)
    }

    @Test func aStaleResponseIsRevalidatedWithItsDate() async throws {
        let stub = StubTransport()
        let lastModified = "Tue, 15 Nov 1994 12:45:26 GMT"
        stub.stub(where: { $0.path == "/v1/dated" }) { request in
            request.request.headerFields[.ifModifiedSince] == lastModified
                ? .status(.notModified)
                : StubResponse(
                    headerFields: [.lastModified: lastModified, .cacheControl: "max-age=0"], body: Data("old".utf8))
        }
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "dated")
        let second = try await Self.fetch(api, "dated")
        #expect(second.source == .revalidatedCache)
        #expect(second.value == "old")
        let conditional = try #require(stub.requests.last?.request)
        #expect(conditional.headerFields[.ifModifiedSince] == lastModified)
        #expect(conditional.headerFields[.ifNoneMatch] == nil)
    }

    @Test func aNewRepresentationReplacesTheStoredOne() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc", etag: #""v1""#, body: "one")
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "doc")
        // The server has a new version: the conditional request gets a 200 with it.
        _ = Validating(stub, path: "doc", etag: #""v2""#, body: "two")
        let second = try await Self.fetch(api, "doc")
        #expect(second.source == .network)
        #expect(second.value == "two")
        let third = try await Self.fetch(api, "doc")
        #expect(third.source == .revalidatedCache)
        #expect(third.value == "two")
        #expect(stub.requests.map { $0.request.headerFields[.ifNoneMatch] } == [nil, #""v1""#, #""v2""#])
    }

    @Test func noStoreIsNeitherStoredNorAnswered() async throws {
        let stub = StubTransport()
        stub.stub(
            .get, "secret",
            with: StubResponse(headerFields: [.cacheControl: "no-store, max-age=600"], body: Data("s".utf8)))
        let api = stubbedManager(stub)
        for _ in 0..<2 { #expect(try await Self.fetch(api, "secret").source == .network) }
        #expect(stub.requests.count == 2)
        #expect(api.cache?.count == 0)
    }

    @Test func aNoStoreAnswerRemovesTheStoredResponse() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc")
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "doc")
        #expect(api.cache?.count == 1)
        stub.stub(
            .get, "doc", with: StubResponse(headerFields: [.cacheControl: "no-store"], body: Data("private".utf8)))
        #expect(try await Self.fetch(api, "doc").value == "private")
        #expect(api.cache?.count == 0)
    }

    @Test func aRequestThatSaysNoStoreBypassesTheCache() async throws {
        let stub = StubTransport()
        stub.stub(
            .get, "fresh", with: StubResponse(headerFields: [.cacheControl: "max-age=600"], body: Data("one".utf8)))
        let api = stubbedManager(stub)
        let bypassing = try await Self.fetch(api, "fresh", headers: ["Cache-Control": "no-store"])
        #expect(bypassing.source == .network)
        #expect(api.cache?.count == 0)  // nor is its answer stored
        _ = try await Self.fetch(api, "fresh")
        let again = try await Self.fetch(api, "fresh", headers: ["Cache-Control": "no-store"])
        #expect(again.source == .network)
        #expect(stub.requests.count == 3)
    }

    @Test func noCacheIsStoredButRevalidatedBeforeEveryUse() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc", cacheControl: "no-cache, max-age=600")
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "doc")
        for _ in 0..<2 {
            #expect(try await Self.fetch(api, "doc").source == .revalidatedCache)
        }
        #expect(stub.requests.count == 3)
    }

    @Test(arguments: [["Cache-Control": "no-cache"], ["Cache-Control": "max-age=0"], ["Pragma": "no-cache"]])
    func theRequestsOwnDirectivesRevalidateAFreshResponse(headers: [String: String]) async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc", cacheControl: "max-age=600")
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "doc")
        #expect(try await Self.fetch(api, "doc").source == .cache)
        let checked = try await Self.fetch(api, "doc", headers: headers)
        #expect(checked.source == .revalidatedCache)
        #expect(checked.value == "one")
        #expect(stub.requests.count == 2)
        #expect(stub.requests.last?.request.headerFields[.ifNoneMatch] == #""v1""#)
    }

    @Test func returnCacheDataDontLoadNeverSendsARequest() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc")
        let api = stubbedManager(stub)
        let offline = RequestOptions(cachePolicy: .returnCacheDataDontLoad)
        let error = await capturedError { _ = try await Self.fetch(api, "doc", options: offline) }
        #expect(isCourierError(error) { if case .notCached = $0 { true } else { false } })
        #expect(stub.requests.isEmpty)
        _ = try await Self.fetch(api, "doc")
        // Stale, and answered as it is.
        let stale = try await Self.fetch(api, "doc", options: offline)
        #expect(stale.source == .cache)
        #expect(stale.value == "one")
        #expect(stub.requests.count == 1)
    }

    @Test func returnCacheDataElseLoadTakesAStaleResponseAndLoadsOnlyWhatIsMissing() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc")
        let api = stubbedManager(stub) { $0.cachePolicy = .returnCacheDataElseLoad }
        #expect(try await Self.fetch(api, "doc").source == .network)
        #expect(try await Self.fetch(api, "doc").source == .cache)
        #expect(stub.requests.count == 1)
    }

    @Test func reloadIgnoringCacheDataLoadsUnconditionallyAndStores() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc", cacheControl: "max-age=600")
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "doc")
        let reloaded = try await Self.fetch(api, "doc", options: RequestOptions(cachePolicy: .reloadIgnoringCacheData))
        #expect(reloaded.source == .network)
        #expect(stub.requests.count == 2)
        #expect(stub.requests.last?.request.headerFields[.ifNoneMatch] == nil)
        #expect(try await Self.fetch(api, "doc").source == .cache)
    }

    @Test func returnCacheDataOnErrorAnswersAFailedLoadFromTheCache() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc")
        let api = stubbedManager(stub) { $0.cachePolicy = .returnCacheDataOnError }
        _ = try await Self.fetch(api, "doc")
        stub.stub(.get, "doc", with: .failure(.cannotConnect))
        let fallback = try await Self.fetch(api, "doc")
        #expect(fallback.source == .cache)
        #expect(fallback.value == "one")
        // The protocol's own rules do not take a stale answer: the failure comes through.
        let error = await capturedError {
            _ = try await Self.fetch(api, "doc", options: RequestOptions(cachePolicy: .useProtocolCachePolicy))
        }
        #expect(isCourierError(error) { if case .cannotConnect = $0 { true } else { false } })
    }

    @Test func mustRevalidateRefusesTheFallback() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc", cacheControl: "max-age=0, must-revalidate")
        let api = stubbedManager(stub) { $0.cachePolicy = .returnCacheDataOnError }
        _ = try await Self.fetch(api, "doc")
        stub.stub(.get, "doc", with: .failure(.connectionLost))
        let error = await capturedError { _ = try await Self.fetch(api, "doc") }
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
    }

    @Test func staleIfErrorAnswersAServerErrorWithTheStoredResponse() async throws {
        let stub = StubTransport()
        _ = Validating(stub, path: "doc", cacheControl: "max-age=0, stale-if-error=600")
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "doc")
        stub.stub(.get, "doc", with: .status(.serviceUnavailable))
        let answer = try await Self.fetch(api, "doc")
        #expect(answer.source == .cache)
        #expect(answer.status == .ok)
        #expect(answer.value == "one")
    }

    @Test func staleWhileRevalidateAnswersAtOnceAndRevalidatesBehind() async throws {
        let stub = StubTransport()
        let server = Validating(stub, path: "doc", cacheControl: "max-age=0, stale-while-revalidate=600")
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "doc")
        let answer = try await Self.fetch(api, "doc")
        #expect(answer.source == .cache)
        #expect(answer.value == "one")
        // Nobody waits for the revalidation: it is a request of its own, conditional.
        #expect(await eventually { server.notModified.withLock { $0 } == 1 })
        #expect(stub.requests.count == 2)
        #expect(stub.requests.last?.request.headerFields[.ifNoneMatch] == #""v1""#)
    }

    @Test func aPerRequestLifetimeStoresAResponseWithoutFreshness() async throws {
        let stub = StubTransport()
        stub.stub(.get, "plain", with: .text("one"), .text("two"), .text("three"))
        let api = stubbedManager(stub)
        #expect(try await Self.fetch(api, "plain").value == "one")
        #expect(try await Self.fetch(api, "plain").value == "two")  // nothing said it may be stored
        let kept = try await Self.fetch(api, "plain", options: RequestOptions(cacheLifetime: .seconds(60)))
        #expect(kept.value == "three")
        let cached = try await Self.fetch(api, "plain")
        #expect(cached.source == .cache)
        #expect(cached.value == "three")
        #expect(stub.requests.count == 3)
    }

    @Test func varyKeepsResponsesApartByTheFieldsItNames() async throws {
        let stub = StubTransport()
        stub.stub(where: { $0.path == "/v1/menu" }) { request in
            let flavour = request.request.headerFields[HTTPField.Name("X-Flavour")!] ?? "none"
            return StubResponse(
                headerFields: [.cacheControl: "max-age=600", .vary: "X-Flavour"], body: Data(flavour.utf8))
        }
        let api = stubbedManager(stub)
        var sources: [ResponseSource] = []
        for flavour in ["oat", "oat", "rye", "rye"] {
            let response = try await Self.fetch(api, "menu", headers: ["X-Flavour": flavour])
            #expect(response.value == flavour)
            sources.append(response.source)
        }
        #expect(sources == [.network, .cache, .network, .cache])
        #expect(stub.requests.count == 2)
    }

    @Test func aSuccessfulUnsafeRequestInvalidatesTheStoredResponse() async throws {
        let stub = StubTransport()
        stub.stub(
            .get, "items", with: StubResponse(headerFields: [.cacheControl: "max-age=600"], body: Data("[]".utf8)))
        stub.stub(.post, "items", with: .status(.internalServerError), .status(.created))
        let api = stubbedManager(stub)
        _ = try await Self.fetch(api, "items")
        // A failed POST leaves the entry; a successful one removes it.
        _ = try await api.request(
            .post, "items", serializer: DataResponseSerializer(acceptableStatusCodes: [201, 500]))
        #expect(try await Self.fetch(api, "items").source == .cache)
        _ = try await api.request(.post, "items", serializer: DataResponseSerializer())
        #expect(try await Self.fetch(api, "items").source == .network)
        #expect(stub.requests.map(\.request.method) == [.get, .post, .post, .get])
    }

    @Test func onlyGETResponsesAreStored() async throws {
        let stub = StubTransport()
        stub.stub(.post, "echo", with: StubResponse(headerFields: [.cacheControl: "max-age=600"], body: Data("x".utf8)))
        let api = stubbedManager(stub)
        for _ in 0..<2 { _ = try await api.request(.post, "echo", serializer: DataResponseSerializer()) }
        #expect(stub.requests.count == 2)
        #expect(api.cache?.count == 0)
    }

    @Test func aSessionWithoutACacheLoadsEveryTime() async throws {
        let stub = StubTransport()
        stub.stub(
            .get, "fresh", with: StubResponse(headerFields: [.cacheControl: "max-age=600"], body: Data("one".utf8)))
        let api = stubbedManager(stub) { $0.cacheCapacity = 0 }
        #expect(api.cache == nil)
        for _ in 0..<2 { #expect(try await Self.fetch(api, "fresh").source == .network) }
        #expect(stub.requests.count == 2)
    }
}
