import Courier
import Foundation
import HTTPTypes
import Testing

/// The HTTP cache judges the request as it goes out, not as the caller wrote it: libcurl adds
/// the `Authorization` of a credential and the session's cookies below the pipeline, and the
/// cache must still see them (RFC 9111 section 3.5 for authorized requests, section 4.1 for
/// `Vary`). Against the fault server's `/private/<name>` (a private answer per user, with
/// `max-age=600`) and `/vary-cookie/<name>` (`Vary: Cookie`, the cookie in the body).
@Suite struct CacheOutgoingRequestTests {
    private func manager() async throws -> HTTPSessionManager {
        // A default session's cache, in a directory of the test's own.
        var configuration = HTTPSessionConfiguration.default
        configuration.storageDirectory = try DownloadTests.temporaryDirectory()
        return HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: configuration)
    }

    private func body(_ response: DataResponse<String>) -> String {
        response.value.split(separator: " ").first.map(String.init) ?? ""
    }

    private func get(
        _ api: HTTPSessionManager, _ path: String, _ options: RequestOptions = RequestOptions()
    ) async throws -> DataResponse<String> {
        try await api.request(.get, path, options: options, serializer: StringResponseSerializer())
    }

    private func isUnauthorized(_ error: (any Error)?) -> Bool {
        (error as? CourierError)?.response?.status.code == 401
    }

    private static let ada = Credential(user: "ada", password: "pw")
    private static let bob = Credential(user: "bob", password: "pw")

    @Test func aResponseToTheCallsCredentialIsNotServedToAnotherUserNorToNone() async throws {
        let api = try await manager()
        let path = "private/call-\(UUID().uuidString.prefix(8))"
        let first = try await get(api, path, RequestOptions(credential: Self.ada))
        #expect(body(first) == "PRIVATE-for-ada")
        #expect(first.source == .network)
        let other = try await get(api, path, RequestOptions(credential: Self.bob))
        #expect(body(other) == "PRIVATE-for-bob")
        #expect(other.source == .network)
        let none = await capturedError { _ = try await self.get(api, path) }
        #expect(isUnauthorized(none))
    }

    @Test func aResponseToAStoredCredentialIsNotServedAfterSignOut() async throws {
        let api = try await manager()
        let base = try await TestServers.fault()
        let path = "private/store-\(UUID().uuidString.prefix(8))"
        api.credentials.set(Self.ada, for: try #require(ProtectionSpace(url: base)))
        #expect(body(try await get(api, path)) == "PRIVATE-for-ada")
        api.credentials.removeAll()
        let signedOut = await capturedError { _ = try await self.get(api, path) }
        #expect(isUnauthorized(signedOut))
    }

    @Test func aResponseToAChallengeAnsweredLaterIsNotServedToNone() async throws {
        let api = try await manager()
        let path = "private/challenge-\(UUID().uuidString.prefix(8))"
        api.challengeHandler = { _ in Credential(user: "ada", password: "pw", persistence: .none) }
        #expect(body(try await get(api, path)) == "PRIVATE-for-ada")
        api.challengeHandler = nil
        let none = await capturedError { _ = try await self.get(api, path) }
        #expect(isUnauthorized(none))
    }

    @Test func aResponseToTheURLsUserInfoIsNotServedWithoutIt() async throws {
        let api = try await manager()
        let base = try await TestServers.fault()
        let path = "private/userinfo-\(UUID().uuidString.prefix(8))"
        let withUser = "http://ada:pw@\(base.host!):\(base.port!)/\(path)"
        #expect(body(try await get(api, withUser)) == "PRIVATE-for-ada")
        let none = await capturedError { _ = try await self.get(api, path) }
        #expect(isUnauthorized(none))
    }

    /// `public` says a shared cache may keep it for everyone (RFC 9111 section 3.5): stored,
    /// and what a second request gets without asking the server.
    @Test func aPublicResponseToACredentialIsStored() async throws {
        let api = try await manager()
        let path = "private/public-\(UUID().uuidString.prefix(8))?cache-control=public,max-age=600"
        let first = try await get(api, path, RequestOptions(credential: Self.ada))
        let second = try await get(api, path, RequestOptions(credential: Self.ada))
        #expect(second.source == .cache)
        #expect(second.value == first.value)
    }

    @Test func varyCookieComparesTheSessionsOwnCookies() async throws {
        let api = try await manager()
        let base = try await TestServers.fault()
        let host = try #require(base.host)
        let path = "vary-cookie/\(UUID().uuidString.prefix(8))"
        await api.cookies.set(Cookie(name: "sid", value: "alice", domain: host))
        let alice = try await get(api, path)
        #expect(body(alice) == "cookie=sid=alice")
        let again = try await get(api, path)
        #expect(again.source == .cache)
        #expect(again.value == alice.value)
        await api.cookies.set(Cookie(name: "sid", value: "bob", domain: host))
        let bob = try await get(api, path)
        #expect(bob.source == .network)
        #expect(body(bob) == "cookie=sid=bob")
        await api.cookies.removeAll()
        let none = try await get(api, path)
        #expect(none.source == .network)
        #expect(body(none) == "cookie=")
    }

    /// A request that handles no cookies sends none, and the cache compares it so.
    @Test func varyCookieSeesThatARequestWithoutCookiesSendsNone() async throws {
        let api = try await manager()
        let host = try #require(try await TestServers.fault().host)
        let path = "vary-cookie/\(UUID().uuidString.prefix(8))"
        await api.cookies.set(Cookie(name: "sid", value: "alice", domain: host))
        #expect(body(try await get(api, path)) == "cookie=sid=alice")
        let without = try await get(api, path, RequestOptions(handlesCookies: false))
        #expect(without.source == .network)
        #expect(body(without) == "cookie=")
    }
}
