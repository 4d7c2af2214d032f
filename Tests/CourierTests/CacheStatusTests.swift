import Courier
import Foundation
import HTTPTypes
import Testing

/// RFC 9211's `Cache-Status` for what Courier's cache did, against the fault server's
/// `/cache-probe/<name>` route (each response's body says which request it answered).
@Suite struct CacheStatusTests {
    private let anyStatus = DataResponseSerializer(acceptableStatusCodes: 100..<600)
    private static let field = HTTPField.Name("Cache-Status")!

    private func probe(_ fields: [String], _ more: String = "") -> String {
        let query = fields.map { "h=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0) }
        return "cache-probe/status-\(UUID().uuidString.prefix(8))?"
            + (query + (more.isEmpty ? [] : [more]))
            .joined(separator: "&")
    }

    @Test func aStoredResponseIsAMissThenAHit() async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: max-age=600"])
        let first = try await api.request(.get, path, serializer: anyStatus)
        #expect(first.cacheStatus?.hit == false)
        #expect(first.cacheStatus?.forward == .uriMiss)
        #expect(first.cacheStatus?.forwardStatus == 200)
        #expect(first.cacheStatus?.stored == true)
        // Its freshness left: up to max-age=600, less the response's age (no clock is asserted).
        let firstTTL = try #require(first.cacheStatus?.ttl)
        #expect((1...600).contains(firstTTL))
        let second = try await api.request(.get, path, serializer: anyStatus)
        #expect(second.cacheStatus?.hit == true)
        #expect(second.cacheStatus?.forward == nil)
        #expect((1...firstTTL).contains(second.cacheStatus?.ttl ?? 0))
        #expect(second.cacheStatus?.description.hasPrefix("Courier; hit; ttl=") == true)
        // By default the fields are the server's.
        #expect(second.headerFields[Self.field] == nil)
    }

    @Test func aRevalidationIsForwardedAsStaleWithA304() async throws {
        let api = try await faultManager()
        let path = probe(["Cache-Control: no-cache"], "etag=v1")
        _ = try await api.request(.get, path, serializer: anyStatus)
        let again = try await api.request(.get, path, serializer: anyStatus)
        #expect(again.source == .revalidatedCache)
        #expect(
            again.cacheStatus
                == CacheStatus(forward: .stale, forwardStatus: 304, ttl: again.cacheStatus?.ttl, stored: true))
        #expect(String(decoding: again.data, as: UTF8.self) == "response 1")
    }

    @Test func aResponseThatIsNotStoredAndAReloadSayWhy() async throws {
        let api = try await faultManager()
        let plain = try await api.request(.get, probe([]), serializer: anyStatus)
        #expect(plain.cacheStatus == CacheStatus(forward: .uriMiss, forwardStatus: 200, stored: false))
        let path = probe(["Cache-Control: max-age=600"])
        _ = try await api.request(.get, path, serializer: anyStatus)
        let reload = try await api.request(
            .get, path, options: .init(cachePolicy: .reloadIgnoringCacheData), serializer: anyStatus)
        #expect(reload.cacheStatus?.forward == .request)
        #expect(reload.cacheStatus?.stored == true)
        // A method the cache does not serve: no status at all.
        let posted = try await api.request(.post, probe([]), serializer: anyStatus)
        #expect(posted.cacheStatus == nil)
        // A response that varies on a field the next request sends differently.
        let varying = probe(["Cache-Control: max-age=600", "Vary: X-Tenant"])
        _ = try await api.request(.get, varying, headers: ["X-Tenant": "a"], serializer: anyStatus)
        let other = try await api.request(.get, varying, headers: ["X-Tenant": "b"], serializer: anyStatus)
        #expect(other.cacheStatus?.forward == .varyMiss)
    }

    /// What the cache reads from a response's fields when it decides to store it: every
    /// `Cache-Control` field line, and `Vary` with `*` alone or in a list.
    @Test func storingIsDecidedFromEveryFieldLine() async throws {
        let api = try await faultManager()
        func stored(_ fields: [String]) async throws -> Bool? {
            try await api.request(.get, probe(fields), serializer: anyStatus).cacheStatus?.stored
        }
        #expect(try await stored(["Cache-Control: public", "Cache-Control: max-age=600"]) == true)
        #expect(try await stored(["Cache-Control: max-age=600", "Cache-Control: no-store"]) == false)
        #expect(try await stored(["Cache-Control: max-age=600", "Vary: *"]) == false)
        #expect(try await stored(["Cache-Control: max-age=600", "Vary: Accept-Language, * "]) == false)
        #expect(try await stored(["Cache-Control: max-age=600", "Vary: Accept-Language", "Vary: *"]) == false)
        #expect(try await stored(["Cache-Control: max-age=600", "Vary: X-Star*, Accept-Language"]) == true)
    }

    @Test func theFieldIsWrittenWhenAskedAfterTheServersOwn() async throws {
        let api = try await faultManager { $0.addsCacheStatusField = true }
        let path = probe(["Cache-Control: max-age=600", "Cache-Status: Edge; fwd=uri-miss; stored"])
        let first = try await api.request(.get, path, serializer: anyStatus)
        let written = try #require(first.headerFields[Self.field])
        #expect(written.hasPrefix("Edge; fwd=uri-miss; stored, Courier; fwd=uri-miss; fwd-status=200; ttl="))
        let entries = CacheStatus.entries(in: written)
        #expect(entries.map(\.cache) == ["Edge", "Courier"])
        let second = try await api.request(.get, path, serializer: anyStatus)
        let hit = try #require(CacheStatus.entries(in: second.headerFields[Self.field] ?? "").last)
        #expect(hit.cache == "Courier")
        #expect(hit.hit)
    }

    @Test func entriesAreReadAsRFC9211WritesThem() {
        let entries = CacheStatus.entries(
            in: #"OriginCache; hit; ttl=1100, "CDN Company Here"; fwd=uri-miss; stored; detail="a, b", Cache; hit=?0"#)
        #expect(entries.count == 3)
        #expect(entries[0] == CacheStatus(cache: "OriginCache", hit: true, ttl: 1100))
        #expect(entries[1] == CacheStatus(cache: "CDN Company Here", forward: .uriMiss, stored: true, detail: "a, b"))
        #expect(entries[2] == CacheStatus(cache: "Cache"))
        #expect(entries[1].description == #""CDN Company Here"; fwd=uri-miss; stored; detail="a, b""#)
    }
}
