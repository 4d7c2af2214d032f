import Courier
import Foundation
import Testing

/// The HTTP cache (RFC 9111) against httpbin: `/cache/{n}` answers with `max-age=n`,
/// `/etag/{etag}` and `/cache` with validators and 304s, `/response-headers` with any headers.
/// End to end, and what only a real server or the disk shows (nginx's static files, a stopped
/// server, entries on disk); the cache's rules in detail (no-store, no-cache, Vary, the
/// policies) are tested on the stub: CourierPipelineTests' `HTTPCacheBehaviourTests`.
@Suite struct CacheTests {
    private func manager(
        _ base: URL, directory: URL? = nil, _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) -> HTTPSessionManager {
        var configuration = directory == nil ? HTTPSessionConfiguration.ephemeral : .default
        configuration.storageDirectory = directory
        configure(&configuration)
        return HTTPSessionManager(baseURL: base, configuration: configuration)
    }

    @Test func aFreshEntryIsAnsweredWithoutTheServer() async throws {
        let server = try await TestServers.dedicatedHttpbin()
        let api = manager(server.url)
        let first = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(first.source == .network)
        await server.stop()
        let second = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(second.source == .cache)
        #expect(second.value == first.value)
        #expect(second.response.status == .ok)
        // Something not stored does need the (stopped) server.
        let error = await capturedError {
            _ = try await api.request(.get, "cache/61", serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error) { if case .cannotConnect = $0 { true } else { false } })
    }

    @Test func aStaleEntryIsRevalidatedWithItsETag() async throws {
        let api = manager(try await TestServers.httpbin())
        let first = try await api.request(.get, "etag/v1", serializer: DataResponseSerializer())
        #expect(first.source == .network)
        // No freshness information: stored, but stale at once, so the next request asks with
        // If-None-Match and httpbin answers 304, which the cache turns into the stored 200.
        let second = try await api.request(.get, "etag/v1", serializer: DataResponseSerializer())
        #expect(second.source == .revalidatedCache)
        #expect(second.response.status == .ok)
        #expect(second.value == first.value)
        #expect(second.response.headerFields[.eTag] == first.response.headerFields[.eTag])
        #expect(second.response.headerFields[.eTag] != nil)
    }

    @Test func aStaleEntryIsRevalidatedWithItsDate() async throws {
        let api = manager(try await TestServers.httpbin())
        // httpbin's /cache sends Last-Modified and answers If-Modified-Since with 304. Its
        // heuristic lifetime (a tenth of the age of Last-Modified, "now") is 0.
        let first = try await api.request(.get, "cache", serializer: JSONResponseSerializer())
        #expect(first.source == .network)
        let second = try await api.request(.get, "cache", serializer: JSONResponseSerializer())
        #expect(second.source == .revalidatedCache)
        #expect(second.value == first.value)
    }

    /// nginx serves static files with `Last-Modified` and `ETag` and no `Cache-Control`: the
    /// most common cacheable response there is. A file last modified 100 days ago is fresh for
    /// 10 days (RFC 9111 section 4.2.2); a request that insists on validation gets a 304, and
    /// the refreshed entry is what the next manager on the same directory reads.
    @Test func aStaticFileIsFreshForATenthOfItsAgeAndRevalidatedOnRequest() async throws {
        let nginx = try await TestServers.nginx()
        let name = "static-\(UUID().uuidString).json"
        let file = nginx.root.appendingPathComponent(name)
        let body = Data(#"{"static": true}"#.utf8)
        try body.write(to: file)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -100 * 86_400)], ofItemAtPath: file.path)
        let directory = try DownloadTests.temporaryDirectory()
        let api = manager(nginx.http, directory: directory)

        let first = try await api.request(.get, name, serializer: DataResponseSerializer())
        #expect(first.source == .network)
        // Many requests at once, all answered from the stored entry.
        let sources = try await withThrowingTaskGroup(of: (ResponseSource, Data).self) { group in
            for _ in 0..<200 {
                group.addTask {
                    let response = try await api.request(.get, name, serializer: DataResponseSerializer())
                    return (response.source, response.value)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(sources.count == 200)
        #expect(sources.allSatisfy { $0.0 == .cache && $0.1 == body })

        try await Task.sleep(for: .milliseconds(1_100))  // so the 304's Date differs
        let revalidated = try await api.request(
            .get, name, headers: ["Cache-Control": "no-cache"], serializer: DataResponseSerializer())
        #expect(revalidated.source == .revalidatedCache)
        #expect(revalidated.value == body)
        #expect(revalidated.response.headerFields[.date] != first.response.headerFields[.date])
        // The request's no-cache asked for one validation; the entry stays fresh.
        #expect(try await api.request(.get, name, serializer: DataResponseSerializer()).source == .cache)
        let later = manager(nginx.http, directory: directory)
        let fromDisk = try await later.request(.get, name, serializer: DataResponseSerializer())
        #expect(fromDisk.source == .cache)
        #expect(fromDisk.value == body)
        #expect(fromDisk.response.headerFields[.date] == revalidated.response.headerFields[.date])
    }

    @Test func aNotModifiedThatSaysNoStoreRemovesTheEntry() async throws {
        let api = manager(try await TestServers.fault())
        let path = "revalidate?etag=\(UUID().uuidString)&cache-control=no-store"
        let first = try await api.request(.get, path, serializer: JSONResponseSerializer())
        #expect(first.source == .network)
        #expect(first.value["conditional"] == false)
        #expect(api.cache?.count == 1)
        // Stale at once (a validator, no freshness): revalidated; the 304 says no-store.
        let second = try await api.request(.get, path, serializer: JSONResponseSerializer())
        #expect(second.source == .revalidatedCache)
        #expect(second.value == first.value)
        #expect(api.cache?.count == 0)
        let third = try await api.request(.get, path, serializer: JSONResponseSerializer())
        #expect(third.source == .network)
        #expect(third.value["conditional"] == false)
    }

    @Test func theFallbackPolicyAnswersFromTheCacheWhenTheServerIsGone() async throws {
        let server = try await TestServers.dedicatedHttpbin()
        let api = manager(server.url) { $0.cachePolicy = .returnCacheDataOnError }
        let first = try await api.request(.get, "etag/gone", serializer: DataResponseSerializer())
        await server.stop()
        let fallback = try await api.request(.get, "etag/gone", serializer: DataResponseSerializer())
        #expect(fallback.source == .cache)
        #expect(fallback.value == first.value)
        // The protocol's own rules do not allow a stale answer: the load's error comes through.
        let error = await capturedError {
            _ = try await api.request(
                .get, "etag/gone", options: .init(cachePolicy: .useProtocolCachePolicy),
                serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error) { if case .cannotConnect = $0 { true } else { false } })
    }

    @Test func aDefaultSessionKeepsItsCacheOnDisk() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let server = try await TestServers.dedicatedHttpbin()
        let first = try await manager(server.url, directory: directory).request(
            .get, "cache/60", serializer: DataResponseSerializer())
        await server.stop()
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("cache").path)
        #expect(files.contains("index.journal"))  // the index: one line per store so far
        #expect(files.filter { $0.hasSuffix(".response") }.count == 1)
        for file in files {  // responses can carry private data: the user's alone
            let path = directory.appendingPathComponent("cache").appendingPathComponent(file).path
            #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        }
        // A new manager (as after a restart) reads the entry from disk.
        let later = manager(server.url, directory: directory)
        let second = try await later.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(second.source == .cache)
        #expect(second.value == first.value)
    }

    @Test func aCorruptEntryIsAMiss() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let api = manager(try await TestServers.httpbin(), directory: directory)
        _ = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        let cacheDirectory = directory.appendingPathComponent("cache")
        let file = try #require(
            try FileManager.default.contentsOfDirectory(atPath: cacheDirectory.path).first { $0.hasSuffix(".response") }
        )
        try Data("not a response".utf8).write(to: cacheDirectory.appendingPathComponent(file))
        let later = manager(try await TestServers.httpbin(), directory: directory)
        let response = try await later.request(.get, "cache/60", serializer: JSONResponseSerializer())
        #expect(response.source == .network)
        #expect(response.value["url"] != nil)
        // ... and the good answer replaced it.
        let again = try await later.request(.get, "cache/60", serializer: JSONResponseSerializer())
        #expect(again.source == .cache)
    }

    /// Cache files are not synced to disk, so a power loss can leave one cut short: it must
    /// read as a miss, never as a shorter body.
    @Test func aTruncatedEntryIsAMiss() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let api = manager(try await TestServers.httpbin(), directory: directory)
        let first = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        let cacheDirectory = directory.appendingPathComponent("cache")
        let file = try #require(
            try FileManager.default.contentsOfDirectory(atPath: cacheDirectory.path).first { $0.hasSuffix(".response") }
        )
        let path = cacheDirectory.appendingPathComponent(file).path
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(truncate(path, off_t(size - 10)) == 0)
        let later = manager(try await TestServers.httpbin(), directory: directory)
        let response = try await later.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(response.source == .network)
        #expect(response.value.count == first.value.count)
    }

    @Test func theLeastRecentlyUsedEntryGoesFirst() async throws {
        // /cache/n is fresh for n seconds: 600, however slowly a loaded machine runs the test.
        // Each answer takes the same size (about 1 KB with its headers): room for four and a half.
        let probe = manager(try await TestServers.httpbin())
        _ = try await probe.request(.get, "cache/600", serializer: DataResponseSerializer())
        let entry = try #require(probe.cache?.totalSize)
        let capacity = entry * 4 + entry / 2
        let api = manager(try await TestServers.httpbin()) { $0.cacheCapacity = capacity }
        func fetch(_ path: String) async throws -> ResponseSource {
            try await api.request(.get, path, serializer: DataResponseSerializer()).source
        }
        _ = try await fetch("cache/601")
        _ = try await fetch("cache/602")
        _ = try await fetch("cache/603")
        #expect(try await fetch("cache/601") == .cache)  // 601 is now the most recently used
        _ = try await fetch("cache/604")
        _ = try await fetch("cache/605")
        #expect((api.cache?.totalSize ?? .max) <= capacity)
        #expect(try await fetch("cache/601") == .cache)
        #expect(try await fetch("cache/602") == .network)
    }
}
