import Courier
import Foundation
import HTTPTypes
import Testing

/// What the HTTP cache does with what servers send (RFC 9111, RFC 5861), against the fault
/// server's `/cache-probe/<name>` route: each response says in its body which request it
/// answered (`response N`), so a stored answer is told from a new one by its bytes.
@Suite struct CacheSemanticsTests {
    /// Any status is a response here, not an error.
    private let anyStatus = DataResponseSerializer(acceptableStatusCodes: 100..<600)

    private func probe(_ fields: [String], _ more: String = "") -> String {
        let name = "probe-\(UUID().uuidString.prefix(8))"
        return probe(named: name, fields, more)
    }

    private func probe(named name: String, _ fields: [String], _ more: String = "") -> String {
        let query = fields.map { "h=" + encoded($0) }.joined(separator: "&")
        return "cache-probe/\(name)?\(query)\(more.isEmpty ? "" : "&" + more)"
    }

    private func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }

    private func get(_ api: HTTPSessionManager, _ path: String) async throws -> DataResponse<Data> {
        try await api.request(.get, path, serializer: anyStatus)
    }

    private func body(_ response: DataResponse<Data>) -> String { String(decoding: response.data, as: UTF8.self) }

    @Test(arguments: ["POST", "PUT", "DELETE", "M-SEARCH"])
    func anUnsafeMethodInvalidatesTheStoredResponse(method: String) async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: max-age=3600"])
        #expect(body(try await get(api, path)) == "response 1")
        #expect(body(try await get(api, path)) == "response 1")  // stored
        let unsafe = try #require(HTTPRequest.Method(method))
        #expect(body(try await api.request(unsafe, path, serializer: anyStatus)) == "response 2")
        let after = try await get(api, path)
        #expect(after.source == .network)
        #expect(body(after) == "response 3")
    }

    @Test func aFailedUnsafeRequestInvalidatesNothing() async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: max-age=3600"], "unsafe-status=500")
        _ = try await get(api, path)
        let failed = try await api.request(.post, path, serializer: anyStatus)
        #expect(failed.status.code == 500)
        #expect(body(try await get(api, path)) == "response 1")
    }

    @Test func locationAndContentLocationOfTheSameOriginAreInvalidatedOthersAreNot() async throws {
        let api = try await faultManager()
        let server = try await TestServers.fault()
        let port = try #require(server.port)
        let stored = probe(["Cache-Control: max-age=3600"])
        let kept = probe(["Cache-Control: max-age=3600"])
        let elsewhere = probe(["Cache-Control: max-age=3600"])
        for path in [stored, kept, elsewhere] { #expect(body(try await get(api, path)) == "response 1") }
        // Content-Location of the same origin, Location on another origin (the same server
        // under another name), and `kept` named nowhere.
        let post = probe([
            "Content-Location: /\(stored)", "Location: http://localhost:\(port)/\(elsewhere)",
        ])
        _ = try await api.request(.post, post, serializer: anyStatus)
        #expect(try await get(api, stored).source == .network)
        #expect(try await get(api, kept).source == .cache)
        #expect(try await get(api, elsewhere).source == .cache)
    }

    @Test func aBodyInAnUnknownCodingIsHandedOnUndecoded() async throws {
        let api = try await faultManager { $0.engineCount = 1 }
        let response = try await get(api, probe([], "enc=arizona&body=as%20sent"))
        #expect(response.status == .ok)
        #expect(body(response) == "as sent")
        #expect(response.response.headerFields[.contentEncoding] == "arizona")
        // The same engine's next response in a coding libcurl knows is decoded again.
        let gzip = try await api.request(
            .get, try await TestServers.httpbin().appendingPathComponent("gzip").absoluteString,
            serializer: JSONResponseSerializer())
        #expect(gzip.value["gzipped"] == true)
    }

    @Test(arguments: [
        ["Expires: Thu, 18 Aug 50 02:01:18 GMT"], ["Expires: Thu, 18 Aug 2050 02:01:18 UTC"],
        ["Expires: Thu 18 Aug 2050 02:01:18 GMT"], ["Expires: Thu, 18-Aug-2050 02:01:18 GMT"],
        ["Expires: Thu, 18 Aug 2050 2:01:18 GMT"], ["Expires: 0"],
        ["Expires: Thu, 18 Aug 2050 02:01:18 GMT", "Expires: Thu, 18 Aug 2050 02:01:19 GMT"],
    ])
    func anInvalidExpiresMeansAlreadyExpired(fields: [String]) async throws {
        let api = try await faultManager()
        let path = probe(fields)
        _ = try await get(api, path)
        let second = try await get(api, path)
        #expect(second.source == .network)
        #expect(body(second) == "response 2")
    }

    @Test(arguments: [
        "Expires: Thu, 18 Aug 2050 02:01:18 GMT", "Expires: THU, 18 AUG 2050 02:01:18 gmt",
        "Expires: Thursday, 18-Aug-50 02:01:18 GMT", "Expires: Thu Aug 18 02:01:18 2050",
    ])
    func aValidExpiresInAnyOfTheThreeFormsIsFresh(field: String) async throws {
        let api = try await faultManager()
        let path = probe([field])
        _ = try await get(api, path)
        #expect(try await get(api, path).source == .cache)
    }

    @Test(arguments: [
        ("7200", false), ("7200.0", true), ("abc", true), ("-7200", true), ("7200, 0", false), ("0, 7200", true),
        ("2147483648", false),
    ])
    func theAgeAResponseArrivesWithIsReadStrictly(age: String, reused: Bool) async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: max-age=3600", "Age: \(age)"])
        _ = try await get(api, path)
        #expect(try await get(api, path).source == (reused ? .cache : .network), "Age: \(age)")
    }

    @Test func aResponseFromTheCacheSaysHowOldItIs() async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: max-age=3600", "Age: 30"])
        let first = try await get(api, path)
        #expect(first.response.headerFields[.age] == "30")
        try await Task.sleep(for: .milliseconds(2100))
        let second = try await get(api, path)
        #expect(second.source == .cache)
        let age = try #require(second.response.headerFields[.age].flatMap { Int($0) })
        #expect(age >= 32)
    }

    @Test func hopByHopFieldsAndThoseConnectionNamesAreNotStored() async throws {
        let api = try await faultManager()
        let path = probe([
            "Cache-Control: max-age=3600", "Connection: a, B", "a: 1", "b: 2", "c: 3", "Keep-Alive: timeout=5",
            "Proxy-Authenticate: Basic",
        ])
        let first = try await get(api, path)
        #expect(first.response.headerFields[HTTPField.Name("a")!] == "1")
        let second = try await get(api, path)
        #expect(second.source == .cache)
        let fields = second.response.headerFields
        #expect(fields[HTTPField.Name("c")!] == "3")
        for name in ["a", "b", "Connection", "Keep-Alive", "Proxy-Authenticate"] {
            #expect(fields[HTTPField.Name(name)!] == nil, "\(name) was stored")
        }
    }

    @Test func fieldsThatNoCacheOrPrivateNameAreLeftOutAndTheRestReused() async throws {
        let api = try await faultManager()
        let path = probe([
            "Cache-Control: max-age=3600, no-cache=\"a, b\", private=\"c\"", "a: 1", "b: 2", "c: 3", "d: 4",
        ])
        _ = try await get(api, path)
        let second = try await get(api, path)
        #expect(second.source == .cache)
        #expect(body(second) == "response 1")
        let fields = second.response.headerFields
        #expect(fields[HTTPField.Name("d")!] == "4")
        for name in ["a", "b", "c"] { #expect(fields[HTTPField.Name(name)!] == nil, "\(name) was stored") }
    }

    @Test func anyFinalStatusWithExplicitFreshnessIsStoredOthersNeedAHeuristicStatus() async throws {
        let api = try await faultManager()
        let fresh = probe(["Cache-Control: max-age=3600"], "status=503")
        _ = try await get(api, fresh)
        let again = try await get(api, fresh)
        #expect(again.source == .cache)
        #expect(again.status.code == 503)
        // A validator alone stores a 200 (revalidated next time), not a 503.
        let validatorOnly = probe([], "status=503&etag=v1")
        _ = try await get(api, validatorOnly)
        let second = try await get(api, validatorOnly)
        #expect(second.source == .network)
        #expect(body(second) == "response 2")
    }

    @Test func mustUnderstandStoresAKnownStatusDespiteNoStore() async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: must-understand, no-store, max-age=3600"])
        _ = try await get(api, path)
        #expect(try await get(api, path).source == .cache)
        let plain = probe(["Cache-Control: no-store, max-age=3600"])
        _ = try await get(api, plain)
        #expect(try await get(api, plain).source == .network)
    }

    @Test func staleWhileRevalidateServesTheStoredResponseAndRevalidatesBehind() async throws {
        let api = try await faultManager()
        let name = "probe-\(UUID().uuidString.prefix(8))"
        let path = probe(named: name, ["Cache-Control: max-age=1, stale-while-revalidate=3600"], "etag=v1")
        _ = try await get(api, path)
        try await Task.sleep(for: .milliseconds(1600))
        let stale = try await get(api, path)
        #expect(stale.source == .cache)
        #expect(body(stale) == "response 1")
        // The background revalidation reaches the server with the stored ETag.
        let stats = try await faultManager()
        var record: JSON = [:]
        for _ in 0..<100 {
            record = try await stats.GET("stats/\(name)")
            if record["requests"] == 2 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(record["requests"] == 2)
        #expect(record["ranges"][1] == "\"v1\"")
    }

    /// A crowd of requests for one stale entry sends one revalidation, not one each (RFC 5861
    /// asks for one; two hundred would hold the host's connections from the callers).
    @Test func staleWhileRevalidateSendsOneRevalidationForACrowd() async throws {
        let api = try await faultManager()
        let name = "probe-\(UUID().uuidString.prefix(8))"
        let path = probe(
            named: name, ["Cache-Control: max-age=1, stale-while-revalidate=3600"], "etag=v1&delay304=300")
        _ = try await get(api, path)
        try await Task.sleep(for: .milliseconds(1600))
        let bodies = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { self.body(try await self.get(api, path)) } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(bodies == Array(repeating: "response 1", count: 200))
        let stats = try await faultManager()
        var record: JSON = [:]
        for _ in 0..<100 {
            record = try await stats.GET("stats/\(name)")
            if record["requests"] == 2 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        // Long enough for the crowd's revalidations to have arrived, had they been sent.
        try await Task.sleep(for: .milliseconds(800))
        record = try await stats.GET("stats/\(name)")
        #expect(record["requests"] == 2)
    }

    @Test func staleIfErrorAnswersAFailedLoadWithTheStoredResponse() async throws {
        let api = try await faultManager()
        // A window of an hour: the age counts the time the first response took to be taken in
        // (RFC 9111's response delay), which under a sanitizer with the whole suite running
        // has exceeded a minute.
        let path = probe(["Cache-Control: max-age=1, stale-if-error=3600"], "close=2")
        _ = try await get(api, path)
        try await Task.sleep(for: .milliseconds(1600))
        let stale = try await get(api, path)
        #expect(stale.source == .cache)
        #expect(body(stale) == "response 1")
        // must-revalidate forbids it: the failure is the caller's.
        let strict = probe(["Cache-Control: max-age=1, stale-if-error=3600, must-revalidate"], "close=2")
        _ = try await get(api, strict)
        try await Task.sleep(for: .milliseconds(1600))
        let error = await capturedError { _ = try await get(api, strict) }
        #expect(isCourierError(error) { if case .connectionLost = $0 { true } else { false } })
    }

    @Test func theRequestsOwnDirectivesMoveTheLine() async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: max-age=3600"])
        _ = try await get(api, path)
        // max-age=0 (what a browser's reload sends): not the stored one.
        let reloaded = try await api.request(.get, path, headers: ["Cache-Control": "max-age=0"], serializer: anyStatus)
        #expect(reloaded.source == .network)
        // min-fresh beyond what is left: not the stored one either.
        let minFresh = try await api.request(
            .get, path, headers: ["Cache-Control": "min-fresh=7200"], serializer: anyStatus)
        #expect(minFresh.source == .network)
        // max-stale takes a stale one.
        let shortLived = probe(["Cache-Control: max-age=1"])
        _ = try await get(api, shortLived)
        try await Task.sleep(for: .milliseconds(1600))
        let stale = try await api.request(
            .get, shortLived, headers: ["Cache-Control": "max-stale=60"], serializer: anyStatus)
        #expect(stale.source == .cache)
    }
}

extension CacheSemanticsTests {
    @Test func aHeadResponseUpdatesTheStoredGetResponse() async throws {
        let api = try await faultManager()
        let fields = ["Cache-Control: max-age=0", "X-Version: 1"]
        let path = probe(
            fields, "etag=v1&hh=" + encoded("Cache-Control: max-age=3600") + "&hh=" + encoded("X-Version: 2"))
        _ = try await get(api, path)
        let head = try await api.request(.head, path, serializer: anyStatus)
        #expect(head.response.headerFields[HTTPField.Name("X-Version")!] == "2")
        let after = try await get(api, path)
        #expect(after.source == .cache)
        #expect(body(after) == "response 1")
        #expect(after.response.headerFields[HTTPField.Name("X-Version")!] == "2")
    }

    @Test func aHeadResponseForAnotherVersionDropsTheStoredOne() async throws {
        let api = try await faultManager()
        let path = probe(
            ["Cache-Control: max-age=3600", "Last-Modified: Mon, 02 Nov 2026 10:00:00 GMT"],
            "hh=" + encoded("Last-Modified: Tue, 03 Nov 2026 10:00:00 GMT"))
        _ = try await get(api, path)
        #expect(try await get(api, path).source == .cache)
        _ = try await api.request(.head, path, serializer: anyStatus)
        #expect(try await get(api, path).source == .network)
    }
}
