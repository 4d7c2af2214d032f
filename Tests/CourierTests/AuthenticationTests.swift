import Courier
import Foundation
import HTTPTypes
import Testing

/// HTTP authentication against httpbin's `/basic-auth` and `/digest-auth`: stored credentials,
/// the challenge handler and its subclass override, Basic up front, and redirects, with
/// libcurl's Basic and Digest. (Challenges as the pipeline answers them, a handler's nil or
/// one-time answer among them, are tested on the stub: CourierPipelineTests' `ChallengeTests`.)
@Suite struct AuthenticationTests {
    /// The challenges a handler was asked about. `@unchecked Sendable`: guarded by `lock`
    /// (a pthread lock, which ThreadSanitizer sees).
    final class ChallengeLog: @unchecked Sendable {
        private let lock = NSLock()
        private var challenges: [AuthenticationChallenge] = []

        func record(_ challenge: AuthenticationChallenge) {
            lock.withLock { challenges.append(challenge) }
        }

        var all: [AuthenticationChallenge] { lock.withLock { challenges } }
    }

    private func origin(_ url: URL) throws -> ProtectionSpace {
        try #require(ProtectionSpace(url: url))
    }

    @Test(arguments: ["basic-auth/ada/lovelace", "digest-auth/auth/ada/lovelace", "digest-auth/auth-int/ada/lovelace"])
    func aStoredCredentialAnswersTheChallenge(path: String) async throws {
        let api = try await httpbinManager()
        api.credentials.set(Credential(user: "ada", password: "lovelace"), for: try origin(api.baseURL!))
        let reply: JSON = try await api.GET(path)
        #expect(reply["authenticated"] == true)
        #expect(reply["user"] == "ada")
    }

    @Test(arguments: ["basic-auth/ada/lovelace", "digest-auth/auth/ada/lovelace"])
    func theChallengeHandlerIsAskedOnceAndItsCredentialKeptForTheSession(path: String) async throws {
        let api = try await httpbinManager()
        let log = ChallengeLog()
        api.challengeHandler = { challenge in
            log.record(challenge)
            return Credential(user: "ada", password: "lovelace")
        }
        let first: JSON = try await api.GET(path)
        #expect(first["authenticated"] == true)
        let second: JSON = try await api.GET(path)
        #expect(second["authenticated"] == true)
        #expect(log.all.count == 1)
        let challenge = try #require(log.all.first)
        #expect(challenge.protectionSpace.host == api.baseURL?.host)
        #expect(challenge.response.status == .unauthorized)
        #expect(
            challenge.schemes.contains {
                $0.caseInsensitiveCompare(path.hasPrefix("basic") ? "Basic" : "Digest") == .orderedSame
            })
        #expect(api.credentials.spaces.count == 1)
    }

    @Test func aWrongStoredPasswordGetsThe401() async throws {
        let api = try await httpbinManager()
        api.credentials.set(Credential(user: "ada", password: "wrong"), for: try origin(api.baseURL!))
        let response = try await api.request(
            .get, "digest-auth/auth/ada/lovelace", serializer: DataResponseSerializer(acceptableStatusCodes: [401]))
        #expect(response.status == .unauthorized)
    }

    /// A shared API client that answers challenges itself.
    final class LoginAPI: HTTPSessionManager {
        var asked = 0

        override func credential(for challenge: AuthenticationChallenge) async -> Credential? {
            asked += 1
            return Credential(user: "ada", password: "lovelace")
        }
    }

    @Test func aSubclassCanAnswerChallenges() async throws {
        let api = LoginAPI(baseURL: try await TestServers.httpbin(), configuration: .ephemeral)
        let reply: JSON = try await api.GET("digest-auth/auth/ada/lovelace")
        #expect(reply["authenticated"] == true)
        #expect(await api.asked == 1)
    }

    @Test func basicIsSentUpFrontOnlyWhenAsked() async throws {
        let api = try await httpbinManager()
        let plain = Credential(user: "ada", password: "lovelace")
        let lazy = try await api.request(
            .get, "headers", options: .init(credential: plain), serializer: JSONResponseSerializer())
        #expect(lazy.value["headers"]["Authorization"] == nil)  // /headers never asks
        var eager = plain
        eager.sendsPreemptively = true
        let upFront = try await api.request(
            .get, "headers", options: .init(credential: eager), serializer: JSONResponseSerializer())
        #expect(
            upFront.value["headers"]["Authorization"]
                == .string("Basic " + Data("ada:lovelace".utf8).base64EncodedString()))
    }

    @Test func aCredentialFollowsRedirectsWithinItsOriginOnly() async throws {
        let httpbin = try await TestServers.httpbin()
        let api = try await httpbinManager()
        var credential = Credential(user: "ada", password: "lovelace")
        credential.sendsPreemptively = true
        let options = RequestOptions(credential: credential)
        let same = try await api.request(
            .get, "redirect-to", parameters: ["url": "/headers"], options: options, serializer: JSONResponseSerializer()
        )
        #expect(same.value["headers"]["Authorization"] != nil)
        // 127.0.0.1 and localhost are two origins for the same httpbin.
        let other = try await api.request(
            .get, "redirect-to", parameters: ["url": .string("http://localhost:\(httpbin.port!)/headers")],
            options: options,
            serializer: JSONResponseSerializer())
        #expect(other.value["headers"]["Host"] == .string("localhost:\(httpbin.port!)"))
        #expect(other.value["headers"]["Authorization"] == nil)
    }

    // The fault server doubles as an authenticating proxy (`courier:proxy-secret`) that answers
    // absolute-form requests itself instead of forwarding them.

    private func proxiedManager() async throws -> (HTTPSessionManager, proxy: URL, target: URL) {
        let proxy = try await TestServers.fault()
        let target = try await TestServers.httpbin()
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.proxy = proxy
        return (HTTPSessionManager(baseURL: target, configuration: configuration), proxy, target)
    }

    @Test func aProxyChallengeGoesToTheHandlerAndItsAnswerToTheProxyOnly() async throws {
        let (api, proxy, target) = try await proxiedManager()
        let log = ChallengeLog()
        api.challengeHandler = { challenge in
            log.record(challenge)
            return Credential(user: "courier", password: "proxy-secret")
        }
        for _ in 0..<2 {
            let reply: JSON = try await api.GET("get")
            #expect(reply["proxied"] == .string(target.absoluteString + "get"))
            #expect(reply["authorization"] == .null)  // the proxy's credential is not the server's
        }
        #expect(log.all.count == 1)
        let space = try #require(log.all.first?.protectionSpace)
        #expect(space.isProxy)
        #expect(space.port == proxy.port)
        #expect(space.realm == "fault-proxy")
        #expect(log.all.first?.response.status.code == 407)
    }

    @Test func aCallsOwnProxyTakesItAndItsChallengeIsAnswered() async throws {
        let proxy = try await TestServers.fault()
        let target = try await TestServers.httpbin()
        let api = HTTPSessionManager(baseURL: target, configuration: .ephemeral)
        let log = ChallengeLog()
        api.challengeHandler = { challenge in
            log.record(challenge)
            return Credential(user: "courier", password: "proxy-secret")
        }
        var options = RequestOptions()
        options.proxy = proxy
        let reply: JSON = try await api.GET("get", options: options)
        #expect(reply["proxied"] == .string(target.absoluteString + "get"))
        // The challenge named the call's proxy, and its answer was kept for it.
        let space = try #require(log.all.first?.protectionSpace)
        #expect(space.isProxy)
        #expect(space.port == proxy.port)
        let again: JSON = try await api.GET("get", options: options)
        #expect(again["proxyAuthorization"] != .null)
        #expect(log.all.count == 1)
        // The session's other calls go direct: httpbin's own echo.
        let direct: JSON = try await api.GET("get")
        #expect(direct["proxied"] == nil)
        #expect(direct["url"] == .string(target.absoluteString + "get"))
    }

    @Test func aStoredProxyCredentialIsUsedWithoutAChallengeHandler() async throws {
        let (api, proxy, _) = try await proxiedManager()
        let unauthorized = try await api.request(
            .get, "get", serializer: DataResponseSerializer(acceptableStatusCodes: [407]))
        #expect(unauthorized.status.code == 407)
        var space = try #require(ProtectionSpace(url: proxy))
        space.isProxy = true
        api.credentials.set(Credential(user: "courier", password: "proxy-secret"), for: space)
        let reply: JSON = try await api.GET("get")
        #expect(reply["proxyAuthorization"] != .null)
    }
}

extension AuthenticationTests {
    /// `http://user:password@host/` used to lose its user info: the request went out without
    /// credentials.
    @Test func credentialsInTheURLAreSentToThatOriginOnly() async throws {
        let httpbin = try await TestServers.httpbin()
        let port = try #require(httpbin.port)
        let api = try await httpbinManager()
        let basic: JSON = try await api.GET("http://ada:l%40velace@127.0.0.1:\(port)/basic-auth/ada/l@velace")
        #expect(basic["authenticated"] == true)
        #expect(basic["user"] == "ada")

        // In the base URL too.
        let based = HTTPSessionManager(
            baseURL: URL(string: "http://ada:lovelace@127.0.0.1:\(port)/"), configuration: .ephemeral)
        let fromBase: JSON = try await based.GET("basic-auth/ada/lovelace")
        #expect(fromBase["authenticated"] == true)

        // A redirect to another origin (localhost is another origin for the same httpbin) does
        // not take the credential along; one within the origin does.
        let same: JSON = try await based.GET("redirect-to", parameters: ["url": "/headers"])
        #expect(same["headers"]["Authorization"] == .string("Basic " + Data("ada:lovelace".utf8).base64EncodedString()))
        let other: JSON = try await based.GET(
            "redirect-to", parameters: ["url": .string("http://localhost:\(port)/headers")])
        #expect(other["headers"]["Host"] == .string("localhost:\(port)"))
        #expect(other["headers"]["Authorization"] == nil)
    }
}
