@_spi(CourierInternals) import CourierCore
import CourierStorage
import Foundation
import HTTPTypes
import Testing

@testable import CourierPipeline

/// `CacheLookup` on its own, over an in-memory `HTTPCache`: what it answers before the load,
/// how it makes the request conditional, what `absorb` stores, merges, invalidates or passes
/// on, and the fallback after a failed load.
@Suite struct CacheLookupTests {
    static let url = "https://api.example.com/v1/doc"

    static let pragma = HTTPField.Name("Pragma")!

    static func request(
        _ method: HTTPRequest.Method = .get, authority: String = "api.example.com", path: String = "/v1/doc",
        _ fields: HTTPFields = [:]
    ) -> HTTPRequest {
        HTTPRequest(method: method, scheme: "https", authority: authority, path: path, headerFields: fields)
    }

    static func lookup(
        _ cache: HTTPCache?, _ request: HTTPRequest = request(), policy: CachePolicy = .useProtocolCachePolicy,
        lifetime: Duration? = nil, body: RequestBody? = nil
    ) -> CacheLookup {
        CacheLookup(
            cache: cache, policy: policy, lifetime: lifetime, request: request,
            urlString: "https://\(request.authority ?? "")\(request.path ?? "/")", body: body, sink: nil)
    }

    static func response(
        _ status: HTTPResponse.Status = .ok, _ fields: HTTPFields = [:], body: String = "stored",
        for request: HTTPRequest = request()
    ) -> RawResponse {
        RawResponse(
            request: request, response: HTTPResponse(status: status, headerFields: fields), data: Data(body.utf8))
    }

    /// A cache holding `fields` and `body` for `GET /v1/doc`, stored the way a response is.
    static func cache(storing fields: HTTPFields, body: String = "stored") -> HTTPCache {
        let cache = HTTPCache(directory: nil, capacity: 1 << 20)
        var lookup = lookup(cache)
        _ = lookup.absorb(response(.ok, fields, body: body), requestTime: Date())
        return cache
    }

    static let key = HTTPCache.key(method: .get, url: url)

    @Test func aSessionWithoutACacheLooksAtNothing() throws {
        var lookup = Self.lookup(nil)
        #expect(try lookup.answerWithoutLoading() == nil)
        #expect(!lookup.revalidates)
        #expect(!lookup.usesCache)
        let passed = lookup.absorb(Self.response(.ok, [.cacheControl: "max-age=600"]), requestTime: Date())
        #expect(passed.source == .network)
    }

    @Test func aFreshEntryAnswersWithItsAge() throws {
        let cache = Self.cache(storing: [.cacheControl: "max-age=600", .age: "30", .contentType: "text/plain"])
        var lookup = Self.lookup(cache)
        let answer = try #require(try lookup.answerWithoutLoading())
        #expect(answer.source == .cache)
        #expect(answer.status == .ok)
        #expect(answer.data == Data("stored".utf8))
        #expect(answer.headerFields[.contentType] == "text/plain")
        // It arrived 30 s old and has aged since: at least 30.
        #expect(answer.headerFields[.age].flatMap { Int($0) }.map { $0 >= 30 } == true)
        #expect(!lookup.revalidatesInBackground)
    }

    @Test func aStaleEntryWithValidatorsMakesTheRequestConditional() throws {
        let lastModified = "Tue, 15 Nov 1994 12:45:26 GMT"
        let cache = Self.cache(storing: [.cacheControl: "max-age=0", .eTag: #""v1""#, .lastModified: lastModified])
        var lookup = Self.lookup(cache)
        #expect(try lookup.answerWithoutLoading() == nil)
        #expect(lookup.revalidates)
        let conditional = lookup.conditionalRequest
        #expect(conditional.headerFields[.ifNoneMatch] == #""v1""#)
        #expect(conditional.headerFields[.ifModifiedSince] == lastModified)
        // A request with validators of its own keeps them.
        let own = Self.lookup(cache, Self.request(.get, [.ifNoneMatch: #""mine""#]))
        #expect(own.conditionalRequest.headerFields[.ifNoneMatch] == #""mine""#)
        #expect(own.conditionalRequest.headerFields[.ifModifiedSince] == lastModified)
    }

    @Test func aStaleEntryWithoutValidatorsIsLoadedAgainPlainly() throws {
        let cache = Self.cache(storing: [.cacheControl: "max-age=0"])
        var lookup = Self.lookup(cache)
        #expect(try lookup.answerWithoutLoading() == nil)
        #expect(!lookup.revalidates)
        #expect(lookup.conditionalRequest.headerFields[.ifNoneMatch] == nil)
    }

    @Test func a304RefreshesTheStoredResponseAndIsAnsweredWithIt() throws {
        let cache = Self.cache(
            storing: [.cacheControl: "max-age=0", .eTag: #""v1""#, .contentType: "text/plain"], body: "body")
        var lookup = Self.lookup(cache)
        #expect(try lookup.answerWithoutLoading() == nil)
        let merged = lookup.absorb(
            Self.response(
                .notModified, [.cacheControl: "max-age=600", .eTag: #""v1""#, HTTPField.Name("X-New")!: "1"], body: ""),
            requestTime: Date())
        #expect(merged.source == .revalidatedCache)
        #expect(merged.status == .ok)
        #expect(merged.data == Data("body".utf8))
        #expect(merged.headerFields[.contentType] == "text/plain")
        #expect(merged.headerFields[HTTPField.Name("X-New")!] == "1")
        // Fresh now, by the 304's max-age.
        var next = Self.lookup(cache)
        #expect(try next.answerWithoutLoading()?.source == .cache)
    }

    @Test func a304WithoutAStoredResponseIsPassedOn() throws {
        let cache = HTTPCache(directory: nil, capacity: 1 << 20)
        var lookup = Self.lookup(cache)
        let passed = lookup.absorb(Self.response(.notModified, [.eTag: #""v1""#], body: ""), requestTime: Date())
        #expect(passed.status == .notModified)
        #expect(passed.source == .network)
    }

    @Test func whatIsStored() {
        func stored(_ status: HTTPResponse.Status, _ fields: HTTPFields, request: HTTPRequest = Self.request()) -> Bool
        {
            let cache = HTTPCache(directory: nil, capacity: 1 << 20)
            var lookup = Self.lookup(cache, request)
            _ = lookup.absorb(Self.response(status, fields), requestTime: Date())
            return cache.count == 1
        }
        #expect(stored(.ok, [.cacheControl: "max-age=60"]))
        #expect(stored(.ok, [.expires: "Thu, 01 Jan 2099 00:00:00 GMT"]))
        #expect(stored(.ok, [.eTag: #""v""#]))  // a validator: stored, stale at once
        #expect(!stored(.ok, [:]))  // nothing says it may be
        #expect(!stored(.ok, [.cacheControl: "no-store, max-age=60"]))
        #expect(!stored(.ok, [.cacheControl: "max-age=60", .vary: "*"]))
        #expect(!stored(.partialContent, [.cacheControl: "max-age=60"]))
        // A 404 may be stored heuristically; a 201 only with explicit freshness.
        #expect(stored(.notFound, [.lastModified: "Tue, 15 Nov 1994 12:45:26 GMT"]))
        #expect(!stored(.created, [.lastModified: "Tue, 15 Nov 1994 12:45:26 GMT"]))
        #expect(stored(.created, [.cacheControl: "max-age=60"]))
        // must-understand stores a status Courier knows despite no-store.
        #expect(stored(.ok, [.cacheControl: "no-store, must-understand, max-age=60"]))
        // An authorized request's answer only when the response allows it.
        let authorized = Self.request(.get, [.authorization: "Bearer t"])
        #expect(!stored(.ok, [.cacheControl: "max-age=60"], request: authorized))
        #expect(stored(.ok, [.cacheControl: "public, max-age=60"], request: authorized))
        #expect(stored(.ok, [.cacheControl: "must-revalidate, max-age=60"], request: authorized))
    }

    @Test func aPerRequestLifetimeStoresAndKeepsFresh() throws {
        let cache = HTTPCache(directory: nil, capacity: 1 << 20)
        var lookup = Self.lookup(cache, lifetime: .seconds(60))
        _ = lookup.absorb(Self.response(.ok, [:]), requestTime: Date())
        var next = Self.lookup(cache)
        #expect(try next.answerWithoutLoading()?.source == .cache)
    }

    @Test func hopByHopFieldsAreNotStored() throws {
        let cache = Self.cache(storing: [
            .cacheControl: "max-age=600", .connection: "X-Hop", HTTPField.Name("X-Hop")!: "1",
            HTTPField.Name("Keep-Alive")!: "timeout=5", .contentType: "text/plain",
        ])
        var lookup = Self.lookup(cache)
        let answer = try #require(try lookup.answerWithoutLoading())
        #expect(answer.headerFields[.connection] == nil)
        #expect(answer.headerFields[HTTPField.Name("X-Hop")!] == nil)
        #expect(answer.headerFields[HTTPField.Name("Keep-Alive")!] == nil)
        #expect(answer.headerFields[.contentType] == "text/plain")
    }

    @Test func theRequestsOwnDirectivesDecideThisTime() throws {
        let cache = Self.cache(storing: [.cacheControl: "max-age=600", .eTag: #""v1""#])
        for fields: HTTPFields in [
            [.cacheControl: "no-cache"], [.cacheControl: "max-age=0"], [Self.pragma: "no-cache"],
        ] {
            var lookup = Self.lookup(cache, Self.request(.get, fields))
            #expect(try lookup.answerWithoutLoading() == nil, "\(fields)")
            #expect(lookup.revalidates, "\(fields)")
        }
        // Pragma counts only without Cache-Control.
        var both = Self.lookup(cache, Self.request(.get, [.cacheControl: "max-stale", Self.pragma: "no-cache"]))
        #expect(try both.answerWithoutLoading() != nil)
        // no-store: the cache is neither read nor written.
        var bypass = Self.lookup(cache, Self.request(.get, [.cacheControl: "no-store"]))
        #expect(try bypass.answerWithoutLoading() == nil)
        #expect(!bypass.usesCache)
    }

    @Test func maxStaleTakesAStaleEntryUnlessItMustRevalidate() throws {
        let stale = Self.cache(storing: [.cacheControl: "max-age=0", .eTag: #""v1""#])
        var lenient = Self.lookup(stale, Self.request(.get, [.cacheControl: "max-stale=600"]))
        #expect(try lenient.answerWithoutLoading()?.source == .cache)
        let strict = Self.cache(storing: [.cacheControl: "max-age=0, must-revalidate", .eTag: #""v1""#])
        var refused = Self.lookup(strict, Self.request(.get, [.cacheControl: "max-stale=600"]))
        #expect(try refused.answerWithoutLoading() == nil)
    }

    @Test func thePolicies() throws {
        let empty = HTTPCache(directory: nil, capacity: 1 << 20)
        var offline = Self.lookup(empty, policy: .returnCacheDataDontLoad)
        #expect {
            try offline.answerWithoutLoading()
        } throws: { error in
            if case CourierError.notCached = error { true } else { false }
        }
        let stale = Self.cache(storing: [.cacheControl: "max-age=0", .eTag: #""v1""#])
        var offlineStale = Self.lookup(stale, policy: .returnCacheDataDontLoad)
        #expect(try offlineStale.answerWithoutLoading()?.source == .cache)
        var elseLoad = Self.lookup(stale, policy: .returnCacheDataElseLoad)
        #expect(try elseLoad.answerWithoutLoading()?.source == .cache)
        var elseLoadEmpty = Self.lookup(empty, policy: .returnCacheDataElseLoad)
        #expect(try elseLoadEmpty.answerWithoutLoading() == nil)
        let fresh = Self.cache(storing: [.cacheControl: "max-age=600", .eTag: #""v1""#])
        var reload = Self.lookup(fresh, policy: .reloadIgnoringCacheData)
        #expect(try reload.answerWithoutLoading() == nil)
        #expect(!reload.revalidates)
        #expect(reload.conditionalRequest.headerFields[.ifNoneMatch] == nil)
    }

    @Test func theFallbackAfterAFailedLoad() {
        let failure = CourierError.cannotConnect(.init(message: "refused"))
        let stale = Self.cache(storing: [.cacheControl: "max-age=0", .eTag: #""v1""#])
        #expect(Self.lookup(stale, policy: .returnCacheDataOnError).fallback(after: failure)?.source == .cache)
        #expect(Self.lookup(stale).fallback(after: failure) == nil)
        // Not for an error that is the response's own, nor past must-revalidate.
        let refused = CourierError.unacceptableStatusCode(.init(message: "404"))
        #expect(Self.lookup(stale, policy: .returnCacheDataOnError).fallback(after: refused) == nil)
        let strict = Self.cache(storing: [.cacheControl: "max-age=0, must-revalidate", .eTag: #""v1""#])
        #expect(Self.lookup(strict, policy: .returnCacheDataOnError).fallback(after: failure) == nil)
        // stale-if-error allows it under the default policy, within its window.
        let lenient = Self.cache(storing: [.cacheControl: "max-age=0, stale-if-error=600", .eTag: #""v1""#])
        #expect(Self.lookup(lenient).fallback(after: failure)?.source == .cache)
    }

    @Test func staleWhileRevalidateAnswersAndAsksForABackgroundRevalidation() throws {
        let cache = Self.cache(storing: [.cacheControl: "max-age=0, stale-while-revalidate=600", .eTag: #""v1""#])
        var lookup = Self.lookup(cache)
        #expect(try lookup.answerWithoutLoading()?.source == .cache)
        #expect(lookup.revalidatesInBackground)
        // Not when the request insists on a validation.
        var insisting = Self.lookup(cache, Self.request(.get, [.cacheControl: "no-cache"]))
        #expect(try insisting.answerWithoutLoading() == nil)
        #expect(!insisting.revalidatesInBackground)
    }

    @Test func aSuccessfulUnsafeMethodInvalidatesTheTargetAndItsSameOriginLocations() {
        let cache = HTTPCache(directory: nil, capacity: 1 << 20)
        let targets = [
            ("api.example.com", "/v1/doc"), ("api.example.com", "/v1/other"), ("elsewhere.example.com", "/x"),
        ]
        for (authority, path) in targets {
            let get = Self.request(.get, authority: authority, path: path)
            var lookup = Self.lookup(cache, get)
            _ = lookup.absorb(Self.response(.ok, [.cacheControl: "max-age=600"], for: get), requestTime: Date())
        }
        #expect(cache.count == 3)
        // A failed POST invalidates nothing.
        var failed = Self.lookup(cache, Self.request(.post))
        _ = failed.absorb(Self.response(.internalServerError, [:], for: Self.request(.post)), requestTime: Date())
        #expect(cache.count == 3)
        var post = Self.lookup(cache, Self.request(.post))
        _ = post.absorb(
            Self.response(
                .created, [.location: "/v1/other", .contentLocation: "https://elsewhere.example.com/x"],
                for: Self.request(.post)),
            requestTime: Date())
        #expect(cache.entry(for: Self.key) == nil)
        #expect(cache.entry(for: HTTPCache.key(method: .get, url: "https://api.example.com/v1/other")) == nil)
        // Another origin's entry is not the server's to drop.
        #expect(cache.entry(for: HTTPCache.key(method: .get, url: "https://elsewhere.example.com/x")) != nil)
        #expect(cache.count == 1)
    }

    @Test func aHeadResponseUpdatesTheStoredGetOrDropsAnotherVersion() {
        let cache = Self.cache(storing: [.cacheControl: "max-age=600", .eTag: #""v1""#])
        var head = Self.lookup(cache, Self.request(.head))
        _ = head.absorb(
            Self.response(
                .ok, [.eTag: #""v1""#, HTTPField.Name("X-Updated")!: "yes"], body: "", for: Self.request(.head)),
            requestTime: Date())
        #expect(cache.entry(for: Self.key)?.response.headerFields[HTTPField.Name("X-Updated")!] == "yes")
        var changed = Self.lookup(cache, Self.request(.head))
        _ = changed.absorb(
            Self.response(.ok, [.eTag: #""v2""#], body: "", for: Self.request(.head)), requestTime: Date())
        #expect(cache.entry(for: Self.key) == nil)
    }

    @Test func onlyAGETWithoutABodyIsLookedUp() throws {
        let cache = Self.cache(storing: [.cacheControl: "max-age=600"])
        var withBody = Self.lookup(cache, body: RequestBody(.data(Data("x".utf8))))
        #expect(try withBody.answerWithoutLoading() == nil)
        var options = Self.lookup(cache, Self.request(.options))
        #expect(try options.answerWithoutLoading() == nil)
    }
}
