import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// Request coalescing against the fault server's `/cache-probe/<name>?hold=<name>`, which counts
/// the requests that reach it and answers only once the test releases it: identical calls in
/// flight share one request.
@Suite struct CoalescingTests {
    private let anyStatus = DataResponseSerializer(acceptableStatusCodes: 100..<600)

    private func probe(_ name: String, _ more: String = "") -> String {
        "cache-probe/\(name)?hold=\(name)\(more)"
    }

    private func release(_ name: String) async throws {
        _ = try await faultManager().request(.get, "release/\(name)", serializer: anyStatus)
    }

    /// Waits until `count` calls wait in the session's shared transfers (30 s at most: the
    /// parallel suite once kept a hundred child tasks from all starting within 10).
    private func waitForMembers(_ api: HTTPSessionManager, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while api.pipeline.coalescing.waiting.members < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(api.pipeline.coalescing.waiting.members == count)
    }

    /// Waits until the server has counted `count` requests for `name` (10 s at most).
    private func waitForRequests(_ name: String, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try await RetryTests.stats(name)["requests"].intValue ?? 0 < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test func aHundredIdenticalCallsSendOneRequestAndAllGetItsResponse() async throws {
        let api = try await faultManager { $0.coalescesRequests = true }
        let name = "coalesce-\(UUID().uuidString.prefix(8))"
        let responses = try await withThrowingTaskGroup(of: DataResponse<Data>.self) { group in
            for _ in 0..<100 { group.addTask { try await api.request(.get, probe(name), serializer: anyStatus) } }
            try await waitForMembers(api, 100)
            try await release(name)
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(responses.count == 100)
        #expect(responses.allSatisfy { String(decoding: $0.data, as: UTF8.self) == "response 1" })
        #expect(try await RetryTests.stats(name)["requests"] == 1)
        // One call sent it; the 99 others name it.
        let senders = Set(responses.compactMap(\.metrics.coalescedFrom))
        #expect(senders.count == 1)
        #expect(responses.filter { $0.metrics.coalescedFrom == nil }.count == 1)
        #expect(api.pipeline.coalescing.waiting.groups == 0)
    }

    @Test func withoutACacheTheCallsShareTheRequestToo() async throws {
        let api = try await faultManager {
            $0.coalescesRequests = true
            $0.cacheCapacity = 0
        }
        #expect(api.cache == nil)
        let name = "coalesce-nocache-\(UUID().uuidString.prefix(8))"
        let responses = try await withThrowingTaskGroup(of: DataResponse<Data>.self) { group in
            for _ in 0..<10 { group.addTask { try await api.request(.get, probe(name), serializer: anyStatus) } }
            try await waitForMembers(api, 10)
            try await release(name)
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(responses.allSatisfy { String(decoding: $0.data, as: UTF8.self) == "response 1" })
        #expect(try await RetryTests.stats(name)["requests"] == 1)
    }

    @Test func callsThatDifferInAuthorizationOrCookieAreNeverCoalesced() async throws {
        let api = try await faultManager { $0.coalescesRequests = true }
        let name = "coalesce-auth-\(UUID().uuidString.prefix(8))"
        let responses = try await withThrowingTaskGroup(of: DataResponse<Data>.self) { group in
            for headers in [
                ["Authorization": "Bearer alice"], ["Authorization": "Bearer bob"], ["Cookie": "session=1"],
                ["Cookie": "session=2"], [:],
            ] {
                group.addTask { try await api.request(.get, probe(name), headers: headers, serializer: anyStatus) }
            }
            try await waitForMembers(api, 5)
            #expect(api.pipeline.coalescing.waiting.groups == 5)
            try await release(name)
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(responses.allSatisfy { $0.metrics.coalescedFrom == nil })
        #expect(try await RetryTests.stats(name)["requests"] == 5)
    }

    @Test func aCancelledCallLeavesTheOthersAndTheLastOneToLeaveCancelsTheTransfer() async throws {
        let api = try await faultManager { $0.coalescesRequests = true }
        let name = "coalesce-cancel-\(UUID().uuidString.prefix(8))"
        let first = Task { try await api.request(.get, probe(name), serializer: anyStatus) }
        try await waitForMembers(api, 1)
        let second = Task { try await api.request(.get, probe(name), serializer: anyStatus) }
        let third = Task { try await api.request(.get, probe(name), serializer: anyStatus) }
        try await waitForMembers(api, 3)
        // The first call, which sent the request, is cancelled: the others still get it.
        first.cancel()
        await #expect(throws: (any Error).self) { try await first.value }
        #expect(api.pipeline.coalescing.waiting.members == 2)
        try await release(name)
        #expect(String(decoding: try await second.value.data, as: UTF8.self) == "response 1")
        #expect(String(decoding: try await third.value.data, as: UTF8.self) == "response 1")

        // Every call cancelled: the transfer goes, and a new call sends a new request.
        let other = "coalesce-gone-\(UUID().uuidString.prefix(8))"
        let calls = (0..<3).map { _ in Task { try await api.request(.get, probe(other), serializer: anyStatus) } }
        try await waitForMembers(api, 3)
        // The shared request has reached the server (which counts it as response 1).
        try await waitForRequests(other, 1)
        for call in calls { call.cancel() }
        for call in calls { await #expect(throws: (any Error).self) { try await call.value } }
        #expect(api.pipeline.coalescing.waiting.groups == 0)
        let again = Task { try await api.request(.get, probe(other), serializer: anyStatus) }
        try await waitForMembers(api, 1)
        try await release(other)
        #expect(String(decoding: try await again.value.data, as: UTF8.self) == "response 2")
    }

    @Test func withTheCacheAndPerCallTheChoiceHolds() async throws {
        // Off by default: two calls, two requests.
        let plain = try await faultManager()
        let name = "coalesce-off-\(UUID().uuidString.prefix(8))"
        async let a = plain.request(.get, probe(name), serializer: anyStatus)
        async let b = plain.request(.get, probe(name), serializer: anyStatus)
        try await Task.sleep(for: .milliseconds(200))
        try await release(name)
        _ = try await (a, b)
        #expect(try await RetryTests.stats(name)["requests"] == 2)

        // Per call, with a response the cache stores: one request, and the next call is a hit.
        let cached = "coalesce-cache-\(UUID().uuidString.prefix(8))"
        let path = probe(
            cached, "&h=" + "Cache-Control: max-age=600".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        let options = RequestOptions(coalescing: true)
        async let c = plain.request(.get, path, options: options, serializer: anyStatus)
        async let d = plain.request(.get, path, options: options, serializer: anyStatus)
        try await waitForMembers(plain, 2)
        try await release(cached)
        let (first, second) = try await (c, d)
        #expect(first.data == second.data)
        let hit = try await plain.request(.get, path, serializer: anyStatus)
        #expect(hit.source == .cache)
        #expect(try await RetryTests.stats(cached)["requests"] == 1)
    }
}
